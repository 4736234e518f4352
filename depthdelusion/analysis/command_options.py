"""The options of `fit`, `isoflop` and `persistence` that no wing's options object holds: which
law `fit` fits and how it checks it, how `isoflop` groups budgets and simulates its bias, which
gradient norms `persistence` reads. Each is declared once beside its field
(:mod:`depthdelusion.option_fields`); the command line builds the parsers from these declarations
and hands each command its object whole. Pure data, importing no more than ``ReportOptions``
does, so defining these commands' arguments imports no module that runs them."""
from __future__ import annotations

from dataclasses import dataclass

from depthdelusion.option_fields import POSITIVE, FromArguments, bounded, declared_in, option

from .fitting.options import CountOptions
from .report.options import ReportOptions


@dataclass(frozen=True)
class FitCommandOptions(FromArguments):
    """What `fit` fits beside how (``FitOptions``) and which rows (``RowOptions``): the ``law``
    (None: picked from the table's columns), the ``validate`` check, the N convention ``params``
    (``CountOptions``' declaration, as `fit` reads it: None leaves N as the table gives it)."""

    law: str | None = option(None, "registered law name (`depthdelusion laws`); default: picked from the "
                             "columns present")
    validate: str | None = option(
        None, "rollout: fit on the k smallest compute levels and predict the next, for each k; prints the "
        "error per step (with --json: in the JSON, key rollout) and writes rollout.csv under --out",
        choices=("rollout",))
    params: str | None = declared_in(CountOptions, "params", command="fit")


@dataclass(frozen=True)
class IsoflopOptions(FromArguments):
    """How `isoflop` forms its budgets and checks Approach 2 (``fitting.isoflop.isoflop``'s
    keywords); None: the library's ``TOLERANCE`` and ``BIAS_REPLICATES``, printed with the answer."""

    tolerance: float | None = option(None, "relative tolerance on C within which runs form one budget "
                                     "(default: the library's, printed in the summary and the JSON)",
                                     type=bounded(float, 0.0))
    include_flagged: bool = option(False, "also fit the exponents on budgets whose vertex lies outside their "
                                   "sampled N range (budgets without a minimum are never used)")
    no_bias: bool = option(False, "skip the simulated bias of Approach 2 on this grid")
    replicates: int | None = option(None, "simulated replicates of the grid for the bias (default: the "
                                    "library's, printed with the bias)", type=POSITIVE)


@dataclass(frozen=True)
class PersistenceLengthOptions(FromArguments):
    """Which gradient norms `persistence` reads: at training ``step`` (``ReportOptions``'
    declaration, as `persistence` reads it), of the weights or the activations (``kind``)."""

    step: int = declared_in(ReportOptions, "step", command="persistence")
    kind: str = option("weight", "which per-layer gradient norms: weight or activation",
                       choices=("weight", "activation"))
