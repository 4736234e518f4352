"""The options of a fit and of the rows it reads, each a frozen object that a command builds once
from its command line and hands on whole (to the fits, the report, isoflop, the outlier check).
Every default is written once, here or beside the code that owns it; the public ``fit`` and ``isoflop`` keep their keyword arguments and take their
defaults from the same constants, and a report takes a ``FitOptions`` inside its
``report.options.ReportOptions``. The command line reads the defaults for its help text.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

#: |robust z| above which a row is an outlier (the default of --outlier-threshold;
#: the row diagnostics, :mod:`.diagnostics`, flag by it).
OUTLIER_Z = 4.0

BOOTSTRAP = 1000  # case-bootstrap refits per fit: fit(), the report and `fit`
SWEEP_BOOTSTRAP = 200  # the report that closes a sweep: a first look, in minutes
#: The objective's names on the command line -> the fitting engine's (``fitting.fit(method=)``).
LOSSES = {"ls": "lm", "huber": "huber", "asymmetric": "asymmetric"}


def engine_method(loss: str | None, method: str = "lm") -> str:
    """The fitting engine's name of the objective from ``loss=`` (the command line's names:
    ls, huber, asymmetric) or the older ``method=`` (lm, huber, asymmetric), which ``loss``
    replaces; ValueError for an unknown name or two that disagree."""
    engine = tuple(dict.fromkeys(LOSSES.values()))
    if loss is None:
        if method not in engine:
            raise ValueError(f"unknown method {method!r}; known: {', '.join(engine)} (or loss=: {', '.join(LOSSES)})")
        return method
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; known: {', '.join(LOSSES)}")
    if method not in ("lm", LOSSES[loss]):  # "lm": the default, i.e. not given
        raise ValueError(f"loss={loss!r} and method={method!r} disagree: give loss= alone")
    return LOSSES[loss]


class _FromArguments:
    @classmethod
    def from_arguments(cls, args: dict):
        """Take this object's fields out of a command's parsed arguments (``args`` loses them);
        a field the command line left out keeps its default."""
        names = {f.name for f in fields(cls)}
        return cls(**{name: args.pop(name) for name in list(args) if name in names})


@dataclass(frozen=True)
class FitOptions(_FromArguments):
    """How to fit: the objective (``loss``, with ``overestimate_weight`` for ``asymmetric``),
    the resampling (``bootstrap`` refits, ``seed``), the search (``search``, ``starts``,
    ``grid_points``) and the robust-z threshold for outlying rows."""

    loss: str = "ls"
    bootstrap: int = BOOTSTRAP
    seed: int = 0
    search: str | None = None
    starts: int | None = None
    grid_points: int | None = None
    overestimate_weight: float | None = None
    outlier_threshold: float = OUTLIER_Z

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise ValueError(f"--loss {self.loss!r}: valid: {', '.join(LOSSES)}")
        if self.overestimate_weight is not None and self.loss != "asymmetric":
            raise ValueError("--overestimate-weight applies to --loss asymmetric only")

    @property
    def method(self) -> str:
        """The fitting engine's name of the objective."""
        return LOSSES[self.loss]

    def fit_kwargs(self) -> dict:
        """The keyword arguments of ``fitting.fit`` that these options set (``method`` apart)."""
        kwargs = dict(bootstrap=self.bootstrap, seed=self.seed, grid_points=self.grid_points,
                      max_starts=self.starts, search=self.search, outlier_threshold=self.outlier_threshold)
        if self.overestimate_weight is not None:
            kwargs["overestimate_weight"] = self.overestimate_weight
        return kwargs


@dataclass(frozen=True)
class RowOptions(_FromArguments):
    """Which rows, read how: ``group`` (keep one group), ``where`` (a filter), ``by`` (each value
    of a column apart), ``drop_outliers``; the column mapping (``columns``, ``column``), replicate
    reduction (``reduce``) and the vocabulary size for parameter counts (``vocab``);
    ``allow_modified``: read a local copy of a published table (``--table NAME=PATH``) whose
    sha256 is not the registered one (said in the output; refused otherwise)."""

    group: str | None = None
    where: str | None = None
    by: str | None = None
    drop_outliers: bool = False
    columns: str | None = None
    column: tuple[str, ...] | list[str] | None = None
    reduce: tuple[str, ...] | list[str] | str | None = None
    vocab: int | None = None
    allow_modified: bool = False
