"""``ReportOptions``: what a report fits and how, built once by the command that asks for the
report (``report``, the sweep's closing analysis) and handed on whole to ``build_report``,
``write_report`` and the report's computation. The fits' own options are a ``FitOptions``;
every default is written once, here or beside the code that owns it."""
from __future__ import annotations

from dataclasses import dataclass, field

from depthdelusion.option_fields import COUNT, POSITIVE, FromArguments, declared_in, option

from ..fitting.options import CountOptions, FitOptions
from ..fitting.workers import PARALLEL_FROM_BOOTSTRAPS
from ..science.persistence import DEFAULT_STEP

DEFAULT_LAWS = ("depth_delusion", "depth_delusion_relative", "depth_delusion_power",
                "shape_quadratic", "depth_softplus", "kaplan")

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
    ``workers``: processes for the report's independent fits (``fitting.workers``): 1 by default
    here (a script needs no ``__main__`` guard); `report`'s default, None, is the CPUs this process
    may use where that pays (``results.worker_count``); the report is the same for any number.
    ``step`` and ``groups`` are also `report`'s options, declared here; ``params`` is
    ``CountOptions``' declaration, as `report` reads it."""

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
    params: str = declared_in(CountOptions, "params")
    design: bool = True
    lr_replicates: int | None = None
    workers: int | None = option(
        1, "processes for the report's independent fits; the report is the same for any number", type=POSITIVE,
        commands={"report": dict(default=None, help=(
            "processes for the report's independent fits (default: the CPUs this process may use, or 1 "
            f"below {PARALLEL_FROM_BOOTSTRAPS} bootstraps or with a law a fresh process lacks); the report "
            "is the same for any number"))})
