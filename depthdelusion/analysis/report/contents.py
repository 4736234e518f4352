"""What a report holds: the types of its computed results (:class:`ReportResults` and its
parts) and the words its sections are keyed by. :mod:`.results` computes them; the renderers
(:mod:`.markdown`, :mod:`.tables`, :mod:`.build`) read them and compute nothing."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..fitting.result import FitResult, has_token_term
from ..science.persistence import DEFAULT_WINDOW, window_bounds
from ..table.runs import Runs
from .consistency import ConsistencyAudit

SIZE_CLASS_GAP = 1.5  # runs whose N differ by more than this factor start a new size class
RANGE_TOL = 5e-4      # nats: predictions of tied solutions further apart than this are a range


@dataclass(frozen=True)
class Settings:
    """How the report was asked for: enough to regenerate it."""

    label: str
    bootstrap: int
    seed: int
    method: str
    step: int
    groups: str
    params: str
    lr_replicates: int
    shape_draws: int
    #: what the bootstraps resample together ("row": rows one by one) and the profile stage
    #: asked for (None: by the number of rows), and the flags that set them and --fix
    cluster: str = "row"
    profile: str | None = None
    interval_flags: str = ""
    #: the command-line words that name the input (RUNS, or --table NAME, and the row options);
    #: "" when unknown: then the label, quoted for a shell
    input_words: str = ""
    #: the published table's licence and citation, for a table by name ("" otherwise)
    citation: str = ""

    @property
    def command(self) -> str:
        """The `report` command that regenerates this report (parsed by the CLI in a test)."""
        import shlex

        return (f"depthdelusion report {self.input_words or shlex.quote(self.label)} --out DIR --bootstrap {self.bootstrap} --seed {self.seed}"
                + ("" if self.method == "lm" else f" --loss {self.method}") + f" --groups {self.groups}"
                + (f" --params {self.params}" if self.params != "total" else "") + self.interval_flags)


@dataclass(frozen=True)
class Design:
    """How the groups are combined in the main fits, and the verdict in every other form."""

    mixed: str | None  # the groups' token budgets when they differ (mixed_budgets)
    offsets: bool      # the main fits have one offset E_g per group
    params: str        # the N convention of the main fits
    matrix: dict = field(default_factory=dict)  # design_matrix's result; {} when not tabulated

    @property
    def main_label(self) -> str:
        return (("all runs with group offsets" if self.offsets else "all runs pooled")
                + f", {self.params.replace('_', '-')} N")

    @property
    def pooled_invalid(self) -> bool:
        """The main fits pool different token budgets with no token term (flagged first)."""
        return bool(self.mixed) and not self.offsets


@dataclass(frozen=True)
class Extrapolation:
    """Fits on the smaller runs of each group, predictions for the larger ones. A prediction is
    a (low, high) range over the solutions tied at the best objective."""

    how: str
    test_rows: np.ndarray                        # indices of the predicted runs
    predictions: dict                            # law -> (low, high) arrays over test_rows
    rmse: dict                                   # law -> RMSE (NaN on a ridge); absent if unfitted
    ridges: dict = field(default_factory=dict)   # law -> the parameters not determined
    errors: dict = field(default_factory=dict)   # law -> why it could not be fitted


#: Why the shape section shows no numbers (ShapeResults.withheld); None: the numbers are shown.
NOT_ESTABLISHED = "not_established"  # no calibrated, kink-over-smooth, determined penalty
CANNOT_TELL = "cannot_tell"          # the runs do not vary shape enough
UNFIT = "unfit"                      # D_crit would carry an arbitrary parameter value
NO_VOCAB = "no_vocab"                # the audit is shown; N(D, W) for the shape search is unknown
FITTED_COUNT = "fitted_count"        # the audit is shown; the law's N has a fitted ε the count lacks


@dataclass(frozen=True)
class ShapeResults:
    """D_crit, the audit of published models and the optimal shape of the kink law ``fit``,
    computed only when the penalty is significant by a calibrated test, the kink beats the best
    smooth shape law (``critical``) and the kink's parameters are determined."""

    fit: FitResult
    verdict: object            # the penalty verdict of ``fit``'s law (verdict.PenaltyVerdict)
    critical: object           # the kink-vs-smooth verdict (verdict.CriticalDepthVerdict) or None
    withheld: str | None = None
    blocked: str | None = None         # derived_quantities_blocked(fit)
    unfit: dict = field(default_factory=dict)   # parameter -> status, for UNFIT
    audit: object = None               # shape.ShapeAudit of the published models, or None
    optima: tuple = ()                 # OptimalShape per constraint ("compute" first)

    @property
    def token_term(self) -> bool:
        return has_token_term(self.fit)


@dataclass(frozen=True)
class Persistence:
    """Per-run persistence fits of each gradient kind ("weight", "activation"), the window they
    were measured in, ℓ(W) per kind (or why not) and the per-shape seed intervals."""

    fits: dict            # kind -> [PersistenceFit]
    step: int             # the window's centre step (moved to the end of training when needed)
    note: str = ""        # why the window moved; "" when it did not
    scaling: dict = field(default_factory=dict)        # kind -> ℓ(W) fit
    scaling_errors: dict = field(default_factory=dict)  # kind -> why ℓ(W) was not fitted
    shapes: dict = field(default_factory=dict)         # kind -> {(D, W): seed interval}

    @property
    def measured(self) -> bool:
        return any(self.fits.values())

    @property
    def window(self) -> tuple[int, int]:
        return window_bounds(self.step, DEFAULT_WINDOW)

    def as_dict(self) -> dict:
        """{kind: fits, kind + "_scaling": ℓ(W) fit} (the shape the figures read)."""
        return {**self.fits, **{k + "_scaling": sc for k, sc in self.scaling.items()}}


@dataclass(frozen=True)
class CalibratedCell:
    """One design cell rechecked (computed by :mod:`.calibrated`). ``kind``: "calibrated" (the
    bound rejected λ = 0: ``penalty`` and ``critical`` are the bootstrap tests) or "described"
    (the rule says uninformative: ``described`` is the kink-vs-smooth bootstrap, not a verdict;
    ``limits`` says why not)."""

    form: str
    convention: str
    kind: str
    n: int
    bound: object               # verdict.PenaltyVerdict: the design table's (Davies' bound)
    kink: object                # FitResult of the primary (kink) law
    smooth: object              # FitResult of the best smooth shape law (lowest AICc)
    penalty: object = None      # verdict.PenaltyVerdict by the bootstrap, or None
    critical: object = None     # verdict.CriticalDepthVerdict, or None
    described: object = None    # lr_test.LRTest of the kink against the smooth law, or None
    limits: str = ""

    @property
    def kink_lr(self) -> float:
        """n·ln(RSS_smooth / RSS_kink): positive when the kink fits better."""
        return self.n * math.log(max(self.smooth.rss, 1e-300) / max(self.kink.rss, 1e-300))


def exceeding(test) -> int:
    """How many bootstrap replicates reached the observed LR (p = (1 + count) / (1 + B))."""
    return int(round(test.p * (1 + test.replicates))) - 1


@dataclass(frozen=True)
class ReportResults:
    """Everything the report states, computed once (see :func:`compute`); the renderers only
    format it. ``tables`` are its tables as formatted rows under named columns, the one source
    of the Markdown, LaTeX and CSV tables (filled by ``report.tables.with_tables``)."""

    settings: Settings
    raw: Runs                # the table as loaded
    runs: Runs               # under the N convention of ``settings.params``
    notes: tuple             # about the data: conventions, dropped terms, rows refitted
    skipped: dict            # law -> the columns it needs that the table lacks
    fits: dict               # law -> FitResult, the main fits
    verdicts: tuple          # penalty verdicts (verdict.PenaltyVerdict) of the main fits
    overall: str             # verdict.overall(verdicts)
    primary: str | None      # the architecture law of the design matrix and the kink test
    critical: object         # verdict.CriticalDepthVerdict of ``primary``, or None
    design: Design
    replicates: object       # replicates.ReplicateCells of ``runs``
    extrapolation: Extrapolation
    audit: ConsistencyAudit | None  # parameter counts against the runs' vocabulary (None: unknown)
    shape: ShapeResults | None  # None: no law with a critical depth was fitted
    persistence: Persistence
    studies: tuple = ()      # Markdown lines of the spectrum and readout sections of run dirs
    tables: tuple = ()       # tables.Table per table of the report, in the document's order
    calibrated: tuple = ()   # calibrated.CalibratedCell: design cells rechecked by bootstrap
    size_rival: object = None  # size_rival.SizeRival of ``primary`` (None: no depth kink fitted)

    @property
    def laws(self) -> list:
        return list(self.fits)

    @property
    def paper_data(self) -> bool:
        return str(self.runs.source).startswith("paper")

    @property
    def has_shapes(self) -> bool:
        return self.runs.has("depth") and self.runs.has("width")

    def table(self, name: str):
        return next(t for t in self.tables if t.name == name)
