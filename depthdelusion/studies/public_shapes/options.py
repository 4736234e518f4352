"""The options of `depthdelusion public-shapes`, each declared once beside its field (flag, help,
default: :mod:`depthdelusion.option_fields`), and the study's tables, default N conventions and
parts that they name. Imports neither scipy nor the study, so the command's help is quick."""
from __future__ import annotations

from dataclasses import dataclass

from depthdelusion.analysis.fitting.options import BOOTSTRAP, SEED
from depthdelusion.option_fields import COUNT, SEED_HELP, FromArguments, option

FITTED_TABLES = ("gemstones", "gemstones_cooldown")
DEFAULT_CONVENTIONS = ("total", "nonembedding", "fitted")
#: the study's parts: "laws" is the core (fits, tests, 4.1, 4.3, 4.4: report.md and its CSVs);
#: without it the other parts write report_partial.md and leave the core's files alone
#: "chinchilla_shapes": the same statistics on Chinchilla's own runs; "later": the hot runs read on
#: to 350B tokens (gemstones_100b_plus), fitted to 100B and asked for the later checkpoints;
#: "huber": every verdict that rests on a fit under least squares and Huber on log-loss; "noise":
#: the noise model's tests on the cooldown table (the core runs them on the hot table)
PARTS = ("laws", "optimal", "prediction", "gadre", "figures", "chinchilla_shapes", "later", "huber", "noise")


@dataclass(frozen=True)
class PublicShapesOptions(FromArguments):
    """The resampling, the tables, N conventions, laws and parts of one run of the study (the
    lists comma-separated, checked by `study.spec_from_flags`)."""

    bootstrap: int = option(BOOTSTRAP, "cluster-bootstrap refits per law", type=COUNT)
    replicates: int = option(200, "parametric-bootstrap replicates per test (0: Davies' bound, no kink test)",
                             type=COUNT)
    seed: int = option(SEED, SEED_HELP, type=COUNT)
    tables: str = option(",".join(FITTED_TABLES), "tables fitted, comma-separated")
    conventions: str = option(
        ",".join(DEFAULT_CONVENTIONS), "N conventions, comma-separated: total, nonembedding (Kaplan's: "
        "both vocabulary matrices removed), fitted (N_nonemb + ε·N_emb, ε fitted), no_embeds (the "
        "authors': one matrix removed)")
    laws: str | None = option(None, "laws fitted, comma-separated (default: all of the study's; must "
                              "include chinchilla)")
    no_lr_interaction: bool = option(False, "skip the learning-rate comparison (gemstones vs "
                                     "gemstones_lr_half)")
    parts: str = option(
        ",".join(PARTS), "parts run, comma-separated: laws, optimal, prediction, gadre, figures, "
        "chinchilla_shapes (the same statistics on Chinchilla's runs), later (gemstones_100b_plus: "
        "fitted to 100B tokens, predicted to 350B), huber (every verdict under least squares and Huber "
        "on log-loss), noise (the noise model's tests on the cooldown table); without laws (the core: fits, tests, 4.1, 4.3, "
        "4.4) the others write report_partial.md")
    workers: int = option(1, "processes for the part huber (one per arm and lr convention at most); "
                          "its numbers do not depend on it", type=COUNT)
