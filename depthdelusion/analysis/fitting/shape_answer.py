"""How deep and how wide for C FLOPs (issue 58): the pooled shape fit's answer per budget, with
cluster-bootstrap intervals, the band, the parameter-count form, the rivals' held-out errors,
where C lies against the data, and which suites constrain the answer. Numbers only: the text,
JSON and figure are :mod:`..report.shape_answer_text`."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from scipy.optimize import brentq

from ..table.published import load_table
from ..table.runs import Runs
from ..table.shape_suites import Suite, suite_from_runs
from .clusters import cluster_labels
from .options import EPSILON_OF_PARAMS, FITTED, SEED, ShapeOptions
from .shape_checks import (
    MIN_SUITES_RESAMPLED,
    check_laws,
    cluster_resample_weights,
    own_terms_refit,
    pick_law,
)
from .shape_optimum import FIELDS, ShapePoint, SuiteCounts, shape_point, suite_counts
from .shape_pool import LAWS, Pooled, PooledFit, fit_shape_law, one_suite

EPS_GRID = np.linspace(0.0, 1.0, 41)  # the profile of ε, step 0.025
LR_95 = 3.841  # χ²₁ 95% quantile: the profile interval's cut on n·ln(RSS/RSS_min)


@dataclass(frozen=True)
class BudgetAnswer:
    """The answer at one budget: the point estimate, 95% cluster-bootstrap percentile intervals
    per :data:`.shape_optimum.FIELDS` name, where C lies against the reference suite's runs
    (whose N and T terms split C: decades beyond its largest (+) or below its smallest (−)
    run's compute; 0 inside) and against every suite's, the optimum under total (ε = 1) and
    non-embedding (ε = 0) N, each suite's leave-one-suite-out D* (point; laws that share a shape
    term), each suite's own D* (laws that share none), and what of the optimum lies past the
    reference suite's runs (``(name, value, its largest)``: depth, N_total)."""

    point: ShapePoint
    intervals: dict
    decades_outside: float
    decades_outside_pooled: float
    under_total: ShapePoint
    under_nonemb: ShapePoint
    without_suite: dict
    own_suite_depth: dict
    beyond_runs: tuple


@dataclass(frozen=True)
class Resampling:
    """What the cluster bootstrap drew: per suite the unit drawn whole within it (``shape``,
    ``run``, ``row`` or a column's name), and whether the suites themselves were drawn (only
    with at least :data:`.shape_checks.MIN_SUITES_RESAMPLED` of them; the reference always in)."""

    units: dict
    suites_resampled: bool
    n_suites: int
    min_suites: int = MIN_SUITES_RESAMPLED


@dataclass(frozen=True)
class ShapeAnswer:
    law: str
    law_reason: str
    fit: PooledFit
    reference: str
    counts: SuiteCounts
    eps_profile: tuple
    eps_bootstrap: tuple
    shape_intervals: dict
    checks: list
    budgets: list
    #: (smallest, largest) run compute of the reference suite, and of every suite
    reference_range: tuple
    compute_range: tuple
    tolerance: float
    n_resamples: int
    n_degenerate: int
    suites: list
    resampling: Resampling
    notes: list = field(default_factory=list)
    #: what undermines the answer itself (said in the third line)
    warnings: list = field(default_factory=list)
    #: the parameter-count convention (a key of :data:`.options.EPSILON_OF_PARAMS`): ε fitted, or
    #: held at 1 (total N) or 0 (Kaplan's non-embedding N) in every refit
    params: str = FITTED

    @property
    def eps_held(self) -> float | None:
        """ε as the convention holds it in every refit (None: fitted)."""
        return EPSILON_OF_PARAMS[self.params]


def as_suites(tables, cluster: str | None = None) -> list[Suite]:
    """Suites from a table, a list of them, or {name: table}; a table is :class:`Runs`, a
    published table's name, or a :class:`Suite`. ``cluster``: the unit resampled whole, a column
    of every table (``row``: each row alone; None: the shape, depth × width, which holds a run's
    checkpoints and a shape's seeds together); a table without it is a one-line error listing
    its columns."""
    if isinstance(tables, (Runs, Suite, str)):
        tables = [tables]
    items = tables.items() if isinstance(tables, dict) else ((None, t) for t in tables)
    suites = []
    for i, (name, table) in enumerate(items):
        if isinstance(table, Suite):
            if cluster is not None:
                raise ValueError(f"cluster: suite {table.name!r} is given as a Suite, whose clusters are "
                                 "fixed; give its table to resample by --cluster")
            suites.append(table)
            continue
        if isinstance(table, str):
            name, table = name or table, load_table(table)
        labels, unit = _clusters(table, cluster)
        suites.append(suite_from_runs(table, name or f"suite{i + 1}", labels, unit))
    names = [s.name for s in suites]
    if len(set(names)) < len(names):
        raise ValueError(f"tables: two suites have the same name ({', '.join(names)}); give a dict of names")
    if not suites:
        raise ValueError("tables: no table given")
    return suites


def _clusters(table: Runs, cluster: str | None) -> tuple:
    """(cluster labels per row or None for the shape, the unit's name) of ``table``."""
    if cluster is None:
        return None, "shape"
    labels, unit = cluster_labels(table, cluster)
    return (np.arange(len(table)) if labels is None else labels), unit


def shape_answer(tables, compute, *, law: str = ShapeOptions.law, tolerance: float = ShapeOptions.tolerance,
                 resamples: int = ShapeOptions.resamples, seed: int = SEED, reference: str | None = None,
                 compare: bool = True, cluster: str | None = None, params: str = FITTED) -> ShapeAnswer:
    """The compute-optimal shape at each budget in ``compute`` (FLOPs) from the suites in
    ``tables`` (see :func:`as_suites`) pooled by ``law`` (a key of :data:`.shape_pool.LAWS`, or
    ``auto``: picked by held-out error), with the band of shapes within ``tolerance`` (relative)
    of the best loss. Losses are on the scale of suite ``reference`` (default the first).
    ``resamples``: cluster-bootstrap refits (whole clusters drawn within each suite, and the
    suites other than the reference drawn too where there are at least
    :data:`.shape_checks.MIN_SUITES_RESAMPLED`). ``cluster``: the unit drawn whole (see
    :func:`as_suites`; also the unit of the leave-runs-out folds). ``compare``: the rivals'
    held-out checks (needed by ``auto``; without them the answer has no table). ``params``: the
    parameter-count convention, a key of :data:`.options.EPSILON_OF_PARAMS` (``fitted``: ε in
    N = N_nonemb + ε·N_emb fitted; ``total``, ``nonembedding``: ε held at 1, 0 in the pooled fit,
    the bootstrap and every held-out refit, and not profiled)."""
    budgets = np.atleast_1d(np.asarray(compute, float))
    if budgets.size == 0 or np.any(~np.isfinite(budgets) | (budgets <= 0)):
        raise ValueError(f"compute: expected positive FLOP budgets, got {list(budgets)}")
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance: expected a relative tolerance in (0, 1), got {tolerance}")
    suites = as_suites(tables, cluster)
    eps = _held_eps(params, suites)
    data = Pooled.of(suites)
    ref = suites[0].name if reference is None else reference
    if ref not in data.names:
        raise ValueError(f"reference: no suite {ref!r}; suites: {', '.join(data.names)}")
    if law == "auto" and not compare:
        raise ValueError("law: auto picks by the held-out checks; give a law to skip them (compare=False)")
    checks = check_laws(data, eps=eps) if compare else []
    if law == "auto":
        law, why = pick_law(checks)
    elif law in LAWS:
        why = "given (--law)"
    else:
        raise ValueError(f"law: expected auto or one of {', '.join(LAWS)}, got {law!r}")
    full = fit_shape_law(data, law, eps=eps)
    s = data.names.index(ref)
    counts = suite_counts(suites[s])
    resampling = Resampling({x.name: x.cluster_name for x in suites}, len(suites) >= MIN_SUITES_RESAMPLED,
                            len(suites))
    boot, fitted, degenerate = _bootstrap(data, law, full, s, counts, budgets, tolerance, resamples, seed,
                                          resampling.suites_resampled, eps)
    lo, hi = data.compute.min(), data.compute.max()
    own = data.compute[data.suite == s]
    ref_lo, ref_hi = own.min(), own.max()
    # the answer under each held ε: the answer itself where the convention holds that ε
    total, nonemb = ((full if e == eps else fit_shape_law(data, law, eps=e, start=full) for e in (1.0, 0.0))
                     if full.uses_eps else (full, full))
    without = _without_each_suite(data, law, s, eps)
    per_budget = []
    for k, C in enumerate(budgets):
        ci = {f: _percentiles(boot[:, k, i]) for i, f in enumerate(FIELDS)}
        point = shape_point(full, s, counts, C, tolerance)
        per_budget.append(BudgetAnswer(
            point, ci, _decades_outside(C, ref_lo, ref_hi), _decades_outside(C, lo, hi),
            shape_point(total, s, counts, C, tolerance), shape_point(nonemb, s, counts, C, tolerance),
            {name: shape_point(f, 0, counts, C, tolerance).depth for name, f in without.items()},
            _own_suite_depths(full, suites, C, tolerance) if law == "separate" else {},
            _beyond_runs(point, suites[s]) if full.has_shape else ()))
    notes = [x.count_note for x in suites] + [counts.formula]
    warnings = _warnings(suites, law, ref, eps is None and full.uses_eps)
    profile = _eps_profile(data, law, full, s) if eps is None else (np.nan, np.nan)  # a held ε has none
    eps_boot = fitted.pop("eps") if eps is None else (np.nan, np.nan)
    return ShapeAnswer(law, why, full, ref, counts, profile, eps_boot, fitted, checks,
                       per_budget, (float(ref_lo), float(ref_hi)), (float(lo), float(hi)), tolerance, len(boot), degenerate, suites, resampling,
                       notes, warnings, params)


def _held_eps(params: str, suites) -> float | None:
    """ε as ``params`` holds it (None: fitted); Kaplan's N refused for a suite whose count has no
    vocabulary matrices in it (it would be total N under another name)."""
    if params not in EPSILON_OF_PARAMS:
        raise ValueError(f"params (--params): expected one of {', '.join(EPSILON_OF_PARAMS)}, got {params!r}")
    uncounted = [x.name for x in suites if not x.counts_embeddings]
    if EPSILON_OF_PARAMS[params] == 0.0 and uncounted:
        raise ValueError(
            f"--params {params}: {', '.join(uncounted)} count{'s' if len(uncounted) == 1 else ''} no "
            "vocabulary matrices (no registration, non-embedding or vocabulary column), so Kaplan's "
            "non-embedding N would be total N under another name; map a vocabulary column "
            "(--column vocab_size=COLUMN) or use --params total")
    return EPSILON_OF_PARAMS[params]


def _warnings(suites, law: str, ref: str, eps_fitted: bool) -> list:
    """What undermines the answer: a suite whose tokens barely vary, and, with ε fitted, a suite
    ε does not act on (no vocabulary matrices counted) or none at all."""
    out = [f"suite {x.name}: tokens vary by {np.ptp(np.log(x.tokens)):.2f} in ln T (< ln 1.5), so its data "
           "term B·T^−β, and with it the split of C into N* and T*, is barely identified"
           for x in suites if np.ptp(np.log(x.tokens)) < np.log(1.5)]
    uncounted = [x.name for x in suites if not x.counts_embeddings] if eps_fitted else []
    out += [f"suite {name}: no vocabulary matrices counted, so ε does not act on it (its N is total N "
            "whatever ε is)" for name in uncounted]
    if uncounted and (len(uncounted) == len(suites) or (law == "separate" and ref in uncounted)):
        out.append("ε is not identified: no suite it acts on counts vocabulary matrices")
    return out


def _decades_outside(C: float, lo: float, hi: float) -> float:
    """Decades of C beyond ``hi`` (+) or below ``lo`` (−); 0 inside."""
    return float(np.log10(C / hi) if C > hi else (np.log10(C / lo) if C < lo else 0.0))


def _own_suite_depths(fit: PooledFit, suites: list, C: float, tolerance: float) -> dict:
    """{suite: its own optimum D* at C, from its own terms} (for a law that shares no shape)."""
    return {x.name: shape_point(fit, i, suite_counts(x), C, tolerance).depth for i, x in enumerate(suites)}


def _beyond_runs(point: ShapePoint, suite: Suite) -> tuple:
    """What of the optimum lies past the reference suite's runs: (name, value, the largest run's)
    for D* and N_total."""
    out = []
    for name, value, runs in (("depth", point.depth, suite.depth), ("params", point.params, suite.params_total)):
        if np.isfinite(value) and value > runs.max():
            out.append((name, float(value), float(runs.max())))
    return tuple(out)


def _percentiles(values) -> tuple:
    v = values[np.isfinite(values)]
    return (float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))) if len(v) > 1 else (np.nan, np.nan)


def _bootstrap(data, law, full, s, counts, budgets, tolerance, resamples, seed, resample_suites=False, eps=None):
    """(answers (resamples, budgets, FIELDS), 95% intervals of ε and the shape term's parameters
    by name, resamples whose optimum sat on the search grid's edge at some budget: counted, kept).
    ``s``: the reference suite (always drawn); ``resample_suites``: the others drawn too; ``eps``:
    ε held in every refit (None: fitted)."""
    out = np.full((resamples, len(budgets), len(FIELDS)), np.nan)
    fitted, degenerate = [], 0
    weights = cluster_resample_weights(data, resamples, seed, kept_suite=s, resample_suites=resample_suites)
    for b, w in enumerate(weights):
        refit = fit_shape_law(data, law, eps=eps, weights=w, start=full)
        r = refit.names.index(data.names[s])  # a suite left out of the draw renumbers the rest
        fitted.append({"eps": float(refit.eps[r]), **refit.shape_parameters(r)})
        points = [shape_point(refit, r, counts, C, tolerance) for C in budgets]
        degenerate += any("optimum" in p.at_limit for p in points)
        out[b] = [p.vector() for p in points]
    names = ["eps", *full.shape_parameters(s)]
    return out, {k: _percentiles(np.array([f[k] for f in fitted])) for k in names}, degenerate


def _eps_profile(data: Pooled, law: str, full: PooledFit, s: int) -> tuple:
    """The 95% profile interval of the reference suite's ε: where n·ln(RSS(ε)/RSS_min) crosses the
    χ²₁ cut, root-found between the points of a step-0.025 scan that straddle it, walking out from
    ε̂ (an end that never crosses is ε's bound, 0 or 1). A law with one ε per suite (``separate``)
    is profiled on the reference suite's own rows; a shared ε on every row. Rows count as
    independent: narrower than the run-level truth when a run's checkpoints share its noise (the
    cluster bootstrap's interval is printed beside it)."""
    if not full.uses_eps:
        return (np.nan, np.nan)
    if law == "separate":
        data, law = data.rows(data.suite == s), "bowl"
        full = fit_shape_law(data, law, start=replace(one_suite(full, data.names[0]), law=law))
    n, eps_hat = len(data.loss), float(full.eps[0])
    rss = {eps_hat: full.rss}

    def rss_at(e: float) -> float:
        if e not in rss:
            rss[e] = fit_shape_law(data, law, eps=e, start=full).rss
        return rss[e]

    grid = [eps_hat, *EPS_GRID]
    for e in grid:
        rss_at(float(e))
    best = min(rss.values())
    excess = lambda e: n * np.log(rss_at(e) / best) - LR_95  # noqa: E731

    def end(outward: list) -> float:
        inner = eps_hat
        for e in outward:
            if excess(e) > 0:
                return float(brentq(excess, inner, e, xtol=1e-4)) if excess(inner) < 0 else inner
            inner = e
        return inner  # never crossed: the interval runs to ε's bound

    below = [float(e) for e in EPS_GRID[::-1] if e < eps_hat]
    above = [float(e) for e in EPS_GRID if e > eps_hat]
    return (end(below), end(above))


def _without_each_suite(data: Pooled, law: str, s: int, eps: float | None = None) -> dict:
    """{suite: the reference suite's law with that suite left out of what the law shares} (the
    reference suite's own terms refitted on it with the shared ones held; its suite index is 0);
    empty for one suite or a law that shares no shape (chinchilla, separate). ``eps``: ε held
    (None: fitted)."""
    if len(data.names) < 2 or law in ("chinchilla", "separate"):
        return {}
    ref_rows = data.rows(data.suite == s)
    out = {}
    for t, name in enumerate(data.names):
        others = fit_shape_law(data.rows(data.suite != t), law, eps=eps)
        out[name] = others if law == "shared" else own_terms_refit(ref_rows, others, law)
    return out
