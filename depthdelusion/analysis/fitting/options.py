"""The options of a fit and of the rows it reads, each a frozen object that a command builds once
from its command line and hands on whole (to the fits, the report, isoflop, the outlier check).
Every default is written once, here or beside the code that owns it; the public ``fit`` and ``isoflop`` keep their keyword arguments and take their
defaults from the same constants, and a report takes a ``FitOptions`` inside its
``report.options.ReportOptions``. Each field declares its command-line option beside it (flag,
help, type, metavar: :mod:`depthdelusion.option_fields`); the command line builds the parser of
every command that takes the object from that declaration, defaults in the help included.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from depthdelusion.analysis.fitting.shape_laws import LAWS as SHAPE_POOL_LAWS
from depthdelusion.option_fields import (
    COUNT,
    POSITIVE,
    POSITIVE_FLOAT,
    SEED_HELP,
    FromArguments,
    bounded,
    declared_in,
    option,
)

#: |robust z| above which a row is an outlier (the default of --outlier-threshold;
#: the row diagnostics, :mod:`.diagnostics`, flag by it).
OUTLIER_Z = 4.0

BOOTSTRAP = 1000  # case-bootstrap refits per fit: fit(), the report and `fit`
#: The random seed of every draw a fit or a test makes (resamples, Sobol starts, subsamples,
#: parametric-bootstrap replicates) when the caller gives none: ``FitOptions.seed`` and every
#: function with a ``seed=`` keyword take it from here, the studies' default seeds too (the
#: expansion study's inserted blocks and probes, the persistence probe's runs).
SEED = 0
SWEEP_BOOTSTRAP = 200  # the report that closes a sweep: a first look, in minutes
#: The objective's names on the command line -> the fitting engine's (``fitting.fit(method=)``).
LOSSES = {"ls": "lm", "huber": "huber", "asymmetric": "asymmetric"}
#: The objectives of `report` and `isoflop`, which fit the mean (asymmetric: `fit` alone).
SYMMETRIC_LOSSES = ("ls", "huber")
#: The profile-likelihood stage: skipped, interval ends by root-finding, or the grid walk.
PROFILE_MODES = ("none", "fast", "full")
#: The global searches (None: variable projection where the law allows it, see ``fitting.fit``).
SEARCHES = (None, "varpro", "multistart")
#: Leave-one-out: refit every held-out fit, or the hat-matrix deletion formula.
LEAVE_ONE_OUT = ("refit", "hat")


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


#: An example of each column-mapping flag, for its error messages.
COLUMN_EXAMPLES = {"--columns": "loss=val_loss,params=N", "--column": "loss=final_loss"}


def column_mapping(columns: str | None = None, column=None) -> dict | None:
    """``--columns a=b,c=d`` and repeated ``--column a=b`` (``RowOptions``' two spellings of the
    column mapping, in every command that reads a table) merged into one {NAME: COLUMN}; None
    when neither is given. A malformed item or a NAME mapped twice is a one-line error naming the
    flag and the form NAME=COLUMN."""
    mapping = {}
    given = ([("--columns", columns)] if columns else []) + [("--column", item) for item in column or ()]
    for flag, text in given:
        for item in text.split(","):
            key, sep, col = (s.strip() for s in item.partition("="))
            if not sep or not key or not col:
                raise ValueError(f"{flag} {text!r}: {item!r} is not NAME=COLUMN (e.g. {flag} "
                                 f"{COLUMN_EXAMPLES[flag]})")
            if key in mapping:
                raise ValueError(f"{flag} {text!r}: {key!r} is already mapped to {mapping[key]!r}; "
                                 "map each NAME once")
            mapping[key] = col
    return mapping or None


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


def loss_of_method(method: str) -> str:
    """The ``loss`` name (``FitOptions.loss``, ``--loss``) of the engine's ``method``."""
    return next(loss for loss, engine in LOSSES.items() if engine == method)


@dataclass(frozen=True)
class FitOptions(FromArguments):
    """How to fit: the objective (``loss``, with ``overestimate_weight`` for ``asymmetric``),
    the resampling (``bootstrap`` refits, ``seed``), the search (``search``, ``starts``,
    ``grid_points``), the robust-z threshold for outlying rows, what is held fixed and how the
    intervals are made. The public ``fitting.fit`` builds one from its keywords and the fitting
    engine takes it whole; a command builds one from its command line; a report hands the
    user's to every fit it makes (:meth:`without_intervals` for the secondary fits). A leaf: what
depends on a law (its fixed parameters, its λ) is :func:`.setup.options_for_law`'s."""

    loss: str = option("ls", "ls: least squares on loss, the mean; huber: Huber on log-loss, robust to "
                       "outlying runs; asymmetric: squares with overestimates weighted more, for small "
                       "runs that were under-tuned: fits the lower envelope (an expectile), not the mean",
                       choices=tuple(LOSSES), deprecated=("--method", {"lm": "ls", "huber": "huber"}),
                       commands={"report": dict(choices=SYMMETRIC_LOSSES, help="ls: least squares on loss, the "
                                                "mean; huber: Huber on log-loss, robust to outlying runs"),
                                 "isoflop": dict(choices=SYMMETRIC_LOSSES, deprecated=None, help="objective of "
                                                 "the Chinchilla fit the bias simulation starts from")})
    bootstrap: int = option(BOOTSTRAP, "bootstrap refits of each fit (0 to skip)", type=COUNT,
                            commands={"sweep": dict(default=SWEEP_BOOTSTRAP, help="bootstrap refits in the report")})
    seed: int = option(SEED, SEED_HELP, type=COUNT)
    #: the global search, ``varpro`` or ``multistart``; None: multistart when ``starts`` or
    #: ``grid_points`` is given, else by the law (``fitting.fit``)
    search: str | None = option(
        None, "the global search: varpro (variable projection: the parameters the law is linear in, "
        "e.g. E, A, B, solved by NNLS on a grid over the others, its best minima polished on every "
        "row) or multistart (--starts starts, each solved); default: varpro for laws with linear "
        "parameters and at most 2 others, multistart otherwise (said in the summary)",
        choices=("varpro", "multistart"))
    starts: int | None = option(
        None, "multi-start: at most N starting points: the full grid if it has at most N points, "
        "else the centre and a seeded scrambled Sobol design (default 64; giving it selects "
        "--search multistart)", type=POSITIVE, metavar="N")
    grid_points: int | None = option(
        None, "multi-start: grid values per parameter over its init range (default 3; giving it "
        "selects --search multistart)", type=POSITIVE, metavar="K")
    overestimate_weight: float | None = option(
        None, "--loss asymmetric: weight of a prediction above the loss relative to one below (the "
        "fit is the 1/(1+W) expectile; default 4)", type=POSITIVE_FLOAT, metavar="W")
    outlier_threshold: float = option(
        OUTLIER_Z, "|robust z| (residual of a Huber fit / (1.4826·MAD)) above which a row is an "
        "outlier", type=POSITIVE_FLOAT, metavar="Z")
    #: ``NAME=VALUE`` items (``--fix``, repeatable), or {name: value}: parameters held at a value
    fix: tuple[str, ...] | list[str] | dict | None = option(
        None, "hold a law parameter at a value (repeatable), e.g. --fix kappa=2.5; to test the "
        "paper's critical-depth slope, its κ (`depthdelusion laws`); `report` fixes it in every law "
        "that has it", repeatable=True, metavar="NAME=VALUE")
    #: the depth penalty λ free in sign (``--signed-penalty``): a negative λ is deeper-is-better
    signed_penalty: bool = option(
        False, "the kink laws' depth penalty λ free in sign (fitted as it is, not in log space), so "
        "that deeper-is-better past D_crit shows as λ < 0 instead of a fit at the bound λ = 0")
    #: the column whose rows are resampled together (``--cluster``); None: the table's run or
    #: shape column where it has one (:func:`.clusters.cluster_labels`)
    cluster: str | None = option(
        None, "resample the rows of one COLUMN value together in every bootstrap (e.g. a run's "
        "checkpoints); 'row' for the row bootstrap; default: the table's run column where a run has "
        "several rows, else the shape (depth × width) where shapes repeat, else rows (named in the "
        "output)", metavar="COLUMN")
    #: the profile-likelihood stage (``--profile``): ``none``, ``fast``, ``full``; None: by rows;
    #: True / False (the API's spellings): ``full`` / skipped without a note
    profile: str | bool | None = option(
        None, "profile-likelihood intervals: full walks a grid (default up to 2000 rows, none "
        "above), fast finds each end by root-finding from the Wald bracket, none skips them (the "
        "Jacobian and bootstrap intervals remain, named)", choices=PROFILE_MODES)
    # --- the API's sizes of the interval stages (no command-line flag); None: by rows ---------
    #: ``refit``, ``hat``, False (skipped) or True (``refit``)
    leave_one_out: bool | str | None = None
    #: refit each bootstrap resample (True) or one Gauss–Newton step from the optimum (False)
    bootstrap_refit: bool | None = None
    #: cold starts per bootstrap refit besides the optimum; None: ``search.REFIT_STARTS``
    refit_starts: int | None = None
    #: per-row diagnostics; None: unless the fit is bare (no bootstrap, profile, leave-one-out)
    diagnostics: bool | None = None

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; known: {', '.join(LOSSES)}")
        if self.overestimate_weight is not None and self.loss != "asymmetric":
            raise ValueError(f"an overestimate weight applies to the asymmetric loss, not {self.loss!r}"
                             " (--overestimate-weight needs --loss asymmetric)")
        if self.search not in SEARCHES:
            raise ValueError(f"unknown search {self.search!r}; known: {', '.join(s for s in SEARCHES if s)} "
                             "(or None: by the law)")
        if self.profile not in (None, True, False, *PROFILE_MODES):
            raise ValueError(f"profile must be {', '.join(map(repr, PROFILE_MODES))}, True, False or "
                             f"None, got {self.profile!r}")
        if self.leave_one_out not in (None, True, False, *LEAVE_ONE_OUT):
            raise ValueError(f"leave_one_out must be True, False, 'refit', 'hat' or None, got "
                             f"{self.leave_one_out!r}")

    @property
    def method(self) -> str:
        """The fitting engine's name of the objective."""
        return LOSSES[self.loss]

    def without_intervals(self) -> "FitOptions":
        """These options for a fit whose intervals nobody reads (a report's extrapolation,
        design-matrix and baseline fits): no bootstrap, no leave-one-out, no row diagnostics, and
        the profile stage skipped unless it was asked for (a profile can move the optimum); the
        objective, search, starts, seed, fixed parameters and sign of λ as given."""
        return replace(self, bootstrap=0, leave_one_out=False, diagnostics=None,
                       profile=False if self.profile is None else self.profile)

    def interval_flags(self) -> str:
        """The command-line flags of the search and of ``fix``, ``signed_penalty``, ``cluster``
        and ``profile`` as set (" --fix kappa=2.5 --profile fast"; "" at their defaults): for a
        "regenerate with"."""
        profile = {True: "full", False: "none"}.get(self.profile, self.profile)
        return "".join([f" --search {self.search}" if self.search is not None else "",
                        f" --starts {self.starts}" if self.starts is not None else "",
                        f" --grid-points {self.grid_points}" if self.grid_points is not None else "",
                        *(f" --fix {k}={v!r}" for k, v in self.fixed_values().items()),
                        " --signed-penalty" if self.signed_penalty else "",
                        f" --cluster {self.cluster}" if self.cluster is not None else "",
                        f" --profile {profile}" if profile is not None else ""])

    def fixed_values(self) -> dict:
        """{name: value} of the ``--fix`` items (a dict given as it is)."""
        return dict(self.fix) if isinstance(self.fix, dict) else parse_fixed(self.fix)


@dataclass(frozen=True)
class RowOptions(FromArguments):
    """Which rows, read how: ``group`` (keep one group), ``where`` (a filter), ``by`` (each value
    of a column apart), ``drop_outliers``; the column mapping (``columns``, ``column``), replicate
    reduction (``reduce``) and the vocabulary size for parameter counts (``vocab``);
    ``allow_modified``: read a local copy of a published table (``--table NAME=PATH``) whose
    sha256 is not the registered one (said in the output; refused otherwise)."""

    group: str | None = option(None, "keep only the rows whose group column is VALUE", metavar="VALUE")
    where: str | None = option(
        None, "keep only the rows satisfying EXPR: COL OP VALUE joined by 'and', OP one of == != < "
        "<= > >= (e.g. \"params >= 1e8 and dataset == web\"); numbers compare as numbers, true/false "
        "case-insensitively, else as text", metavar="EXPR")
    by: str | None = option(None, "each value of column COL fitted separately, side by side (JSON: "
                            "{\"by\": COL, \"groups\": {VALUE: ...}})", metavar="COL")
    drop_outliers: bool = option(False, "leave out the rows whose |robust z| exceeds "
                                 "--outlier-threshold in a first fit (said in the output)")
    columns: str | None = option(
        None, "read these table columns as the canonical ones, e.g. loss=val_loss,params=N "
        "(`depthdelusion laws --columns` lists names and aliases)", metavar="NAME=COLUMN,...")
    column: tuple[str, ...] | list[str] | None = option(
        None, "read the table's COLUMN as NAME, e.g. --column loss=final_loss (repeatable)",
        repeatable=True, metavar="NAME=COLUMN",
        commands={"shape": dict(help="read RUNS' COLUMN as NAME, e.g. --column width=d_model (repeatable)")})
    reduce: tuple[str, ...] | list[str] | str | None = option(
        None, "one row per replicate cell (rows with equal params, tokens, depth, width): the "
        "lowest loss over COL (e.g. best-of=lr; biases the loss down) or the mean over it (e.g. "
        "mean=seed); repeatable, applied in order (best-of=lr then mean=seed: the best lr of each "
        "seed, then the mean over seeds)", repeatable=True, metavar="best-of=COL|mean=COL")
    vocab: int | None = option(None, "vocabulary size for the parameter-count audit when the table "
                               "has no vocab_size column (never assumed)", type=POSITIVE, metavar="V")
    allow_modified: bool = option(False, "--table (or --pool) NAME=PATH: read a copy whose sha256 is "
                                  "not the registered one (said in the output; refused without this flag)")


#: The N conventions of `report --params` (`fit --params` adds :data:`FITTED`), and what each means.
PARAMS_CHOICES = ("total", "nonembedding", "non_embedding", "recomputed")
NONEMBEDDING_HELP = ("nonembedding: Kaplan's, every vocabulary matrix the total counts removed (both "
                     "input embedding and LM head when untied; from the table's registration, `tables "
                     "show NAME`, or its params_non_embedding column)")
PARAMS_HELP = (NONEMBEDDING_HELP + "; non_embedding: the table's own params_non_embedding column as "
               "given (Gemstones: the authors' count, the LM head still in), else D·(12W² + 13W)")
#: The convention N = N_nonemb + ε·N_emb with ε fitted (`fit --params fitted`, `shape`'s default).
FITTED = "fitted"
#: The conventions of the family N = N_nonemb + ε·N_emb, each with the ε it holds (None: fitted):
#: `shape --params`, whose pooled law has ε in it. Total N is ε = 1, Kaplan's non-embedding ε = 0.
EPSILON_OF_PARAMS = {"total": 1.0, "nonembedding": 0.0, FITTED: None}


@dataclass(frozen=True)
class CountOptions(FromArguments):
    """The parameter-count convention N (``--params``), declared once here for `report` (whose
    default it is: ``ReportOptions.params``), `fit` (``command_options.FitCommandOptions``) and
    `shape` (``ShapeOptions``), each of which reads it otherwise (``commands``)."""

    params: str = option(
        "total", "parameter-count convention N (total: a registered table's counts as "
        "published; other tables' rows inconsistent with their shape are refitted "
        "with N recomputed from (D, W)); " + PARAMS_HELP + "; fitted: N = N_nonemb + ε·N_emb with ε "
        "profiled once by the shape-agnostic law (chinchilla where tokens vary, else kaplan; its "
        "profile interval printed), then held for every law", choices=PARAMS_CHOICES + (FITTED,),
        commands={"fit": dict(default=None, choices=PARAMS_CHOICES + (FITTED,), help=(
                      "parameter-count convention N: total as the table gives it (default), "
                      "recomputed from (D, W) (needs the vocabulary: a vocab_size column or "
                      "--vocab); " + PARAMS_HELP + "; fitted: N = N_nonemb + ε·N_emb with ε in "
                      "[0, 1] profiled for the law by least squares (its 95%% profile interval "
                      "printed); said in the notes")),
                  "shape": dict(default=FITTED, choices=tuple(EPSILON_OF_PARAMS), help=(
                      "parameter-count convention N in the law's A·N^−α (C = 6·N_total·T whatever it "
                      "is): N = N_nonemb + ε·N_emb; fitted: ε in [0, 1] fitted in every refit (its profile-"
                      "likelihood and cluster-bootstrap intervals printed); total: ε held at 1; "
                      + NONEMBEDDING_HELP + ", else 2·V·W untied, V·W tied from a vocab_size "
                      "column: ε held at 0 (refused for a suite that counts no vocabulary matrices; "
                      "fitted ε does not act on such a suite, said in the first lines); a held ε is "
                      "held in every refit (pooled fit, bootstrap, held-out checks) and said in the "
                      "first lines"))})


#: the pooling laws of `shape` (``auto``: picked by held-out error)
SHAPE_LAWS = ("auto", *SHAPE_POOL_LAWS)


@dataclass(frozen=True)
class ShapeOptions(FromArguments):
    """How `shape` answers (``shape_answer``'s keywords): the pooling ``law``, the band's relative
    ``tolerance``, the ``reference`` suite, the cluster bootstrap (``resamples`` refits of
    ``cluster`` units, ``seed``), the parameter-count convention ``params`` (a key of
    :data:`EPSILON_OF_PARAMS`: ε fitted, or held at 1 or 0 in every refit)."""

    law: str = option(
        "auto", "auto: picked by held-out error (leave one suite out, leave runs out, rollout; the table "
        "is printed); bowl: shared bowl and ε, per-suite Chinchilla terms; kink: the paper's "
        "critical-depth penalty instead of the bowl; kink_relative: its relative form; chinchilla: no "
        "shape term; separate: each suite "
        "alone; shared: one law for all suites; inverse_depth: Liu et al. 2026's additive law "
        "E + Aw·W^−aw + Ad·D^−ad + B·T^−β, each suite its own E, B, β, the width and depth terms "
        "shared, no N term (T = C/(6·N_total) at a budget)", choices=SHAPE_LAWS)
    tolerance: float = option(0.01, "the band: shapes whose predicted loss is within this relative "
                              "tolerance of the best", type=bounded(float, 0.0, inclusive=False))
    reference: str | None = option(None, "the suite whose loss scale and N(D, W) the answer uses "
                                   "(default the first given)", metavar="SUITE")
    resamples: int = option(200, "cluster-bootstrap refits (whole clusters drawn within each suite; "
                            "with 5 suites or more the suites other than --reference are drawn too)", type=COUNT)
    cluster: str | None = option(
        None, "resample the rows of one COLUMN value together (a column of every table; 'row' for no "
        "clustering); default: the shape (depth × width), which holds a run's checkpoints and a "
        "shape's seeds together. Also the unit of the leave-runs-out folds; named in the output",
        metavar="COLUMN")
    seed: int = option(SEED, SEED_HELP, type=COUNT)
    params: str = declared_in(CountOptions, "params", command="shape")
