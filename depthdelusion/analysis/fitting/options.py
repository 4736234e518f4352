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
#: The profile-likelihood stage: skipped, interval ends by root-finding, or the grid walk.
PROFILE_MODES = ("none", "fast", "full")


def parse_fixed(items) -> dict:
    """``["kappa=2.5", "gamma=0.35"]`` (``--fix``) -> ``{"kappa": 2.5, "gamma": 0.35}``; a
    malformed item or a value that is not a finite number is a one-line error naming the flag
    (whether the law has the parameter is the fit's check: it knows the law)."""
    import math

    fixed = {}
    for item in [items] if isinstance(items, str) else (items or ()):
        name, sep, text = (s.strip() for s in str(item).partition("="))
        if not sep or not name or not text:
            raise ValueError(f"--fix {item}: expected NAME=VALUE (e.g. --fix kappa=2.5)")
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"--fix {item}: {text!r} is not a number (e.g. --fix {name}=2.5)") from None
        if not math.isfinite(value):
            raise ValueError(f"--fix {item}: the value must be a finite number")
        if name in fixed:
            raise ValueError(f"--fix {item}: {name!r} is given twice")
        fixed[name] = value
    return fixed


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
    #: ``NAME=VALUE`` items (``--fix``, repeatable): parameters held at a value
    fix: tuple[str, ...] | list[str] | None = None
    #: the depth penalty λ free in sign (``--signed-penalty``): a negative λ is deeper-is-better
    signed_penalty: bool = False
    #: the column whose rows are resampled together (``--cluster``); None: the table's run or
    #: shape column where it has one (:func:`.clusters.cluster_labels`)
    cluster: str | None = None
    #: the profile-likelihood stage (``--profile``): ``none``, ``fast``, ``full``; None: by rows
    profile: str | None = None

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise ValueError(f"--loss {self.loss!r}: valid: {', '.join(LOSSES)}")
        if self.overestimate_weight is not None and self.loss != "asymmetric":
            raise ValueError("--overestimate-weight applies to --loss asymmetric only")
        if self.profile not in (None, *PROFILE_MODES):
            raise ValueError(f"--profile {self.profile!r}: valid: {', '.join(PROFILE_MODES)}")

    @property
    def method(self) -> str:
        """The fitting engine's name of the objective."""
        return LOSSES[self.loss]

    def fit_kwargs(self) -> dict:
        """The keyword arguments of ``fitting.fit`` that these options set (``method`` apart;
        the clusters depend on the table: :func:`.clusters.cluster_kwargs`)."""
        kwargs = dict(bootstrap=self.bootstrap, seed=self.seed, grid_points=self.grid_points,
                      max_starts=self.starts, search=self.search, outlier_threshold=self.outlier_threshold)
        if self.overestimate_weight is not None:
            kwargs["overestimate_weight"] = self.overestimate_weight
        # added only when asked, so that a caller's own keywords (and old engines) are untouched
        if self.fix:
            kwargs["fixed"] = self.fixed_values()
        if self.signed_penalty:
            kwargs["signed_penalty"] = True
        if self.profile is not None:
            kwargs["profile"] = self.profile
        return kwargs

    def law_kwargs(self, law) -> dict:
        """:meth:`fit_kwargs` for one of several laws fitted alike (a report): only the fixed
        parameters ``law`` has, and the signed penalty only where it has λ."""
        from ..laws import get_law

        law = get_law(law)
        kwargs = self.fit_kwargs()
        if "fixed" in kwargs:
            kwargs["fixed"] = {k: v for k, v in kwargs["fixed"].items() if k in law.param_names}
        if not law.penalty:
            kwargs.pop("signed_penalty", None)
        return kwargs

    def check_fixed(self, laws) -> None:
        """Every ``--fix`` item is NAME=number with NAME a parameter of one of ``laws`` (names or
        Laws), else a one-line error naming the flag and their parameters. Called before the
        fits (the laws are known only then)."""
        from ..laws import get_law

        laws = [get_law(law) for law in laws]
        known = list(dict.fromkeys(p for law in laws for p in law.param_names))
        which = f"law {laws[0].name!r}" if len(laws) == 1 else f"laws {', '.join(w.name for w in laws)}"
        listed = f"; parameters of {which}: {', '.join(known)}"
        try:
            values = self.fixed_values()
        except ValueError as err:
            raise ValueError(f"{err}{listed}") from None
        for item, name in zip([self.fix] if isinstance(self.fix, str) else self.fix or (), values):
            if name not in known:
                raise ValueError(f"--fix {item}: no parameter {name!r}{listed}")

    def interval_flags(self) -> str:
        """The command-line flags of ``fix``, ``signed_penalty``, ``cluster`` and ``profile`` as
        set (" --fix kappa=2.5 --profile fast"; "" at their defaults): for a "regenerate with"."""
        return "".join([*(f" --fix {k}={v!r}" for k, v in self.fixed_values().items()),
                        " --signed-penalty" if self.signed_penalty else "",
                        f" --cluster {self.cluster}" if self.cluster is not None else "",
                        f" --profile {self.profile}" if self.profile is not None else ""])

    def fixed_values(self) -> dict:
        """{name: value} of the ``--fix`` items."""
        return parse_fixed(self.fix)


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
