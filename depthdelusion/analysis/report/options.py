"""``ReportOptions``: what a report fits and how, built once by the command that asks for the
report (``report``, the sweep's closing analysis) and handed on whole to ``build_report``,
``write_report`` and the report's computation. The fits' own options are a ``FitOptions``;
every default is written once, here or beside the code that owns it."""
from __future__ import annotations

from dataclasses import dataclass, field

from depthdelusion.option_fields import COUNT, FromArguments, option

from ..fitting.options import FitOptions
from ..science.persistence import DEFAULT_STEP

DEFAULT_LAWS = ("depth_delusion", "depth_delusion_relative", "depth_delusion_power",
                "shape_quadratic", "depth_softplus", "kaplan")
#: The N conventions of `report --params` (`fit --params` adds "fitted"), and what each means.
PARAMS_CHOICES = ("total", "nonembedding", "non_embedding", "recomputed")
PARAMS_HELP = ("nonembedding: Kaplan's, every vocabulary matrix the total counts removed (both "
               "input embedding and LM head when untied; from the table's registration, `tables "
               "show NAME`, or its params_non_embedding column); non_embedding: the table's own "
               "params_non_embedding column as given (Gemstones: the authors' count, the LM head "
               "still in), else D·(12W² + 13W)")


@dataclass(frozen=True)
class FigureOptions(FromArguments):
    """Whether a command that writes a report draws its figures: ``no_figures`` skips the PNGs,
    so matplotlib is not needed (`report`, and a study's command that takes the flag too)."""

    no_figures: bool = option(False, "skip the PNGs (matplotlib not needed)")


@dataclass(frozen=True)
class ReportOptions(FromArguments):
    """``fit``: the objective, bootstrap refits, seed, search and interval stages of every fit the
    report makes (the secondary fits, whose intervals are not read, without them:
    ``FitOptions.without_intervals``).
    ``laws``: the laws fitted. ``step``: the training step of the gradient profiles.
    ``runs_label``: how the report names its input (default: the path given).
    ``input_words``: the command-line words that give the same input (RUNS or ``--table NAME``
    and the row options), for the report's "Regenerate with" line (default: the label).
    ``citation``: a published table's licence and citation, printed under the data line.
    ``shape_draws``: bootstrap draws of the optimal-shape intervals.
    ``groups``: ``"auto"`` (per-group offsets E_g when the groups' token budgets differ or are
    unknown for some, else pooled), ``"offsets"`` or ``"pooled"`` (flagged when budgets differ).
    ``params``: the N convention (``"total"``, ``"non_embedding"``, ``"recomputed"``).
    ``design``: also tabulate the verdict in every form the design allows (several groups only).
    ``lr_replicates``: parametric-bootstrap replicates of the main fits' likelihood-ratio tests
    (0: Davies' bound for λ = 0, and no kink-vs-smooth test); default ``DEFAULT_REPLICATES``,
    or the bootstrap count when that is smaller (0: a quick look without resampling).
    ``step``, ``groups`` and ``params`` are also `report`'s options, declared here."""

    fit: FitOptions = field(default_factory=FitOptions)
    laws: tuple = DEFAULT_LAWS
    step: int = option(DEFAULT_STEP, "step for persistence lengths", type=COUNT,
                       commands={"persistence": dict(help="training step (nearest logged is used)")})
    runs_label: str | None = None
    input_words: str = ""
    citation: str = ""
    shape_draws: int = 200
    groups: str = option("auto", "offsets: one offset E_g per group (token budgets that differ); pooled: "
                         "one law for all (flagged when budgets differ); auto: offsets when the "
                         "groups' token budgets differ or are unknown for some",
                         choices=("auto", "offsets", "pooled"))
    params: str = option("total", "parameter-count convention N (total: a registered table's counts as "
                         "published; other tables' rows inconsistent with their shape are refitted "
                         "with N recomputed from (D, W)); " + PARAMS_HELP, choices=PARAMS_CHOICES,
                         commands={"fit": dict(default=None, choices=PARAMS_CHOICES + ("fitted",), help=(
                             "parameter-count convention N: total as the table gives it (default), "
                             "recomputed from (D, W) (needs the vocabulary: a vocab_size column or "
                             "--vocab); " + PARAMS_HELP + "; fitted: N = N_nonemb + ε·N_emb with ε in "
                             "[0, 1] profiled for the law by least squares (its 95%% profile interval "
                             "printed); said in the notes"))})
    design: bool = True
    lr_replicates: int | None = None
