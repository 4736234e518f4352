"""Fit a registered law to runs: bounded least squares or Huber, multi-start, with intervals.

``fit(runs, law)`` minimises the squared loss residuals (nats) — or, with ``method="huber"``,
a Huber loss (threshold 1e-3) of log-loss residuals, the Chinchilla / Epoch AI practice — by a
bounded Levenberg–Marquardt (:mod:`.solver`) from a set of starting points, scale parameters
in log space, every parameter inside its physical bounds (exponents ≥ 0, κ ≥ 0, E ≥ 0,
scales > 0). Every parameter gets three 95% intervals, each named by its method: Jacobian
(log space for scales), profile likelihood (:mod:`.profile`) and a seeded case bootstrap
whose refits start from the optimum and from the best points of the multi-start (so that a
resample whose optimum moved to another basin can reach it). Leave-one-out refits start
from the same cold points. Runs are weighted equally. ``group_offsets=True`` fits one
offset E per group with the law's other parameters shared.

Cost is linear in the number of rows n: no n × n matrix is formed. On large tables the stages
whose cost is (number of refits) × n switch to stated approximations (thresholds below): the
multi-start runs on a seeded subsample and its best optima are polished on every row; the
bootstrap takes one Gauss–Newton step per resample from the optimum; leave-one-out errors come
from the hat-matrix diagonal of the Jacobian's thin QR; profile intervals are computed on
request (``FitResult.conf_int(method="profile")``) rather than by default.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import special

from ..progress import SILENT
from .columns import check_law_columns
from .fit_options import BOOTSTRAP
from .diagnostics import OUTLIER_Z, leverage, pooled_group_flag, pooled_groups, row_diagnostics
from .fit_result import STRONG_CORR, FitResult, StartsSummary
from .interval_text import interval_text
from .laws import LawInputs, get_law
from .problem import OFFSET, Problem
from .profile import Statistic, profile_intervals
from .replicates import replicate_cells
from .runs import Runs, load_runs
from .solver import CAPPED, FAILED, MAX_ITER, irls_weights
from . import varpro

# least squares on loss / Huber on log-loss / asymmetric squares on loss; all by bounded LM
METHODS = ("lm", "huber", "asymmetric")
#: the global searches (None: variable projection where the law allows it, see ``fit``)
SEARCHES = (None, "varpro", "multistart")
TIE = 1e-6  # relative objective difference below which two optima are equally good
# Starts per bootstrap refit, besides the full fit's optimum: the start of each distinct local
# optimum the multi-start found, then the next best starts. Measured on the paper data with the
# 7-parameter depth_delusion_power law (40 resamples, tests/analysis/test_fit_intervals.py):
# refits reach the optimum a 64-start fit of the resample finds in 30 of 40 from the 16 best
# cold starts alone, 34 of 40 with the optimum added (30 of 40 against 512-start fits: the rest
# are other local optima of a 7-parameter law on 30 runs).
REFIT_STARTS = 16
# Where the multi-start found one optimum, or only others with more than COMPETING times its
# objective (starts stranded far off, not a basin a resample could prefer), a resample's
# optimum lies near the full fit's: these many cold starts besides it.
ONE_BASIN_REFIT_STARTS = 3
COMPETING = 2.0
# Cold starts per leave-one-out refit: with n − 1 of n runs the basins are nearly the full
# data's, and on the paper data 8 starts reached every held-out fit's own optimum (over all 64
# grid starts) for the three depth laws, 4 starts 27–30 of 30.
LOO_STARTS = 8
PROFILE_STARTS = 4  # cold starts per profile point, besides the optimum and the neighbours
_PROFILE_RESTARTS = 2  # refits from a lower objective a profile found, at most
# Above these row counts the stages scale as stated in the module docstring. Measured on
# 2 cores (benchmarks/RESULTS.md): a cold-started refit costs ≈ 0.8 ms of CPU per 1000 rows and
# start, so 1000 bootstraps × 16 starts are seconds at 200 rows but hours at 100,000.
SEARCH_ROWS = 4096  # the multi-start runs on a seeded subsample of this many rows
POLISH_STARTS = 4  # the best distinct subsample optima refitted on every row
LOO_REFIT_ROWS = 200  # exact leave-one-out refits up to this many rows, hat-matrix beyond
BOOT_REFIT_ROWS = 2000  # cold bootstrap refits up to this many rows, one-step beyond
PROFILE_ROWS = 2000  # profile intervals by default up to this many rows
_CHUNK_ELEMENTS = 2_000_000  # numbers per block of resampling weights (≈ 16 MB)
ONE_STEP_BLOCK = 16  # one-step bootstrap resamples per block at least (3M rows: 384 MB of weights)
_COND_FLAG = 1e8
_BOUND_TOL = 1e-6  # relative to the init range: closer than this to a bound is "at" it


def start_grid(problem: Problem, grid_points: int, max_starts: int, seed: int) -> np.ndarray:
    """Starting θ vectors over each parameter's init range (log space for scales): the full
    grid of ``grid_points`` per parameter when it has at most ``max_starts`` points, else the
    centre of the ranges and ``max_starts − 1`` points of a scrambled Sobol design (seeded),
    so that the number of starts never grows with the number of parameters (e.g. one offset
    per group)."""
    if grid_points < 1 or max_starts < 1:
        raise ValueError(f"grid_points and max_starts must be at least 1, got {grid_points} and {max_starts}")
    lo, hi = _init_box(problem)
    k = len(lo)
    if k * math.log(grid_points) <= math.log(max_starts) + 1e-9:
        axes = []
        for p in problem.free:  # as the grid always was, to the last bit
            a, b = p.init
            axes.append(np.log(np.geomspace(a, b, grid_points)) if p.log else np.linspace(a, b, grid_points))
        return np.array(list(itertools.product(*axes)), float).reshape(-1, k)
    centre = (lo + hi) / 2
    if max_starts == 1:
        return centre[None]
    from scipy.stats import qmc  # here: importing scipy.stats costs a second of CPU

    sobol = qmc.Sobol(d=k, scramble=True, seed=seed)
    m = max(int(math.ceil(math.log2(max_starts - 1))), 0)
    unit = sobol.random_base2(m)[:max_starts - 1]  # a balanced 2^m design, its first points
    return np.vstack([centre, lo + unit * (hi - lo)])


def _init_box(problem: Problem):
    lo, hi = [], []
    for p in problem.free:
        a, b = p.init
        lo.append(math.log(a) if p.log else a)
        hi.append(math.log(b) if p.log else b)
    return np.array(lo, float), np.array(hi, float)


def fit(runs, law, method: str = "lm", *, bootstrap: int = BOOTSTRAP, seed: int = 0,
        fixed: dict | None = None, grid_points: int | None = None, max_starts: int | None = None,
        leave_one_out: bool | str | None = None, profile: bool | None = None,
        group_offsets: bool = False, groups=None, refit_starts: int = REFIT_STARTS,
        bootstrap_refit: bool | None = None, overestimate_weight: float | None = None,
        diagnostics: bool | None = None, outlier_threshold: float = OUTLIER_Z,
        search: str | None = None, clusters=None, progress=SILENT) -> FitResult:
    """Fit ``law`` (a registered name or Law) to ``runs`` (anything :func:`load_runs` takes).

    ``method``: ``"lm"`` (least squares on loss residuals) or ``"huber"`` (Huber on log-loss
    residuals) or ``"asymmetric"`` (squared loss residuals, an overestimate weighted
    ``overestimate_weight``, default ``problem.OVERESTIMATE_WEIGHT``: the 1/(1+w) expectile, a
    lower envelope rather than the mean), all minimised by bounded Levenberg–Marquardt.

    ``search``: how the global optimum is found. ``"varpro"`` (:mod:`.varpro`): the parameters
    the law is linear in (Chinchilla's E, A, B) are solved by NNLS for each point of a grid over
    the others, and the grid's best local minima are polished on every row — exact for least
    squares, the start generator for Huber. ``"multistart"``: scale parameters in log space
    from a grid of ``grid_points`` per parameter (at most ``max_starts`` starts), every start
    solved (defaults 3 and 64). ``None``: the multi-start when ``grid_points`` or ``max_starts``
    is given, else variable projection where the law has linear parameters and at most
    ``varpro.AUTO_NONLINEAR`` nonlinear ones (and no group offsets), the multi-start otherwise.
    Either way the best optimum is kept and every other local optimum reported.

    ``bootstrap`` case-resampling refits (seeded by ``seed``) each start from the optimum and
    the ``refit_starts`` best starts (the best start of each distinct local optimum first;
    ``ONE_BASIN_REFIT_STARTS`` of them where the search found one optimum within ``COMPETING``
    times the best objective); a refit still at the iteration cap after a restart is left out and counted. Leave-one-out refits start from the first
    ``LOO_STARTS`` cold starts. ``profile`` computes profile-likelihood intervals for every free
    parameter. ``fixed`` pins parameters to given values. ``group_offsets=True`` fits one offset
    E per group (``groups``: labels per run, default ``runs.group``); the bootstrap then
    resamples within groups; ``clusters`` (a label per row, one per training run) resamples whole
    runs (a cluster bootstrap). Token parameters of a law are dropped (absorbed into E) unless
    every run has a token count and they vary.

    Sizes (``None`` = by the number of rows n): ``leave_one_out`` ``"refit"`` (True) refits
    every held-out fit, ``"hat"`` uses the hat-matrix deletion formula, False skips it; by
    default refits when n ≤ ``LOO_REFIT_ROWS`` and ``bootstrap`` > 0, the hat matrix otherwise
    (``bootstrap=0`` thus makes no refit beyond the search). ``profile`` defaults to
    n ≤ ``PROFILE_ROWS`` (``FitResult.conf_int(method="profile")`` computes it later).
    ``bootstrap_refit`` defaults to n ≤ ``BOOT_REFIT_ROWS``; beyond, one Gauss–Newton step per
    resample from the optimum.

    ``diagnostics`` (:mod:`.diagnostics`): each row's residual, robust z, leverage and Cook's
    distance, the rows with |robust z| > ``outlier_threshold`` and the fit refitted without
    them (``result.diagnostics``); by default computed unless the fit is bare (bootstrap=0,
    profile=False, leave_one_out=False). Text columns the fit pooled are always flagged.

    ``progress``: a ``depthdelusion.progress.Stages`` told as each stage starts (default silent).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    if search not in SEARCHES:
        raise ValueError(f"unknown search {search!r}; known: {', '.join(s for s in SEARCHES if s)} "
                         "(or None: by the law)")
    law, runs = get_law(law), load_runs(runs)
    check_law_columns(law, runs)
    setup = _Setup(runs, law, fixed, method, group_offsets, groups, overestimate_weight)
    problem, notes = setup.problem, setup.notes
    n = len(problem.y)
    leave_one_out, profile, bootstrap_refit = _stage_sizes(n, bootstrap, leave_one_out, profile,
                                                           bootstrap_refit, notes)
    diagnostics = diagnostics if diagnostics is not None else bool(bootstrap or profile or leave_one_out)
    stage = _stages(progress, law, n, bootstrap, profile, leave_one_out, diagnostics)
    stage("search")
    found = _search(problem, search, grid_points, max_starts, seed, refit_starts, notes)
    stage("profile intervals" if profile else "")
    theta, jac, statistic, profiles = _optimum(problem, found, profile, notes)
    stage(f"bootstrap ({bootstrap} resamples)" if bootstrap else "")
    boot = _bootstrap_stage(problem, found, theta, jac, bootstrap, bootstrap_refit, seed,
                            setup.gidx if setup.offset_groups is not None else None, notes, clusters)
    stage(f"leave-one-out ({leave_one_out})" if leave_one_out else "")
    loo = _loo_stage(problem, found, theta, jac, leave_one_out, notes)
    result = _fit_result(problem, setup, runs, theta, jac, found, boot, loo, seed)
    _set_profiles(result, problem, theta, statistic, found, jac, profiles, profile)
    _add_flags_and_notes(result, problem, jac, runs, setup, law, method)
    stage("row diagnostics" if diagnostics else "")
    _add_row_diagnostics(result, runs, problem, theta, jac.J, found.cold_starts, setup.offset_groups,
                         groups is None, diagnostics, outlier_threshold)
    return result


def _stages(progress, law, n, bootstrap, profile, leave_one_out, diagnostics):
    """``stage(text)``: tells ``progress`` that the stage ``text`` starts ("" : a stage this
    fit skips), having first announced how many there are."""
    progress.expect(1 + sum(map(bool, (profile, bootstrap, leave_one_out, diagnostics))))
    return lambda text: progress.stage(f"{law.name}, {n:,} rows: {text}") if text else None


def _add_flags_and_notes(result, problem, jac, runs, setup, law, method) -> None:
    result.flags = (jac.flags + _identifiability_flags(result, problem)
                    + _pooling_flags(runs, setup.labels, law, setup.token_term, setup.offset_groups))
    result.notes += _method_notes(problem, law, method)


def _set_profiles(result, problem, theta, statistic, found, jac, profiles, profile) -> None:
    """The profile intervals, or the function that computes them when first asked."""
    result.ci_profile = {nm: p.interval for nm, p in profiles.items()} if profile else None
    result.profiles = profiles
    result.profile_statistic = f"{statistic.describe}, {statistic.cut}" if profile else ""
    if not profile:
        result.profile_fn = _later_profiles(problem, theta, statistic, found, jac.se_theta)


class _Setup:
    """The fit's problem from the runs: fixed and dropped parameters, group offsets, notes."""

    def __init__(self, runs, law, fixed, method, group_offsets, groups, overestimate_weight):
        fixed = dict(fixed or {})
        self.notes = notes = list(runs.notes)
        if not any(n.startswith("replicates reduced") for n in notes):
            replicates = replicate_cells(runs)
            if replicates.cells:
                notes.append(replicates.describe(runs))
        for name in fixed:
            law.param(name)  # raises for unknown names
        if law.needs_tokens and not runs.tokens_vary:
            raise ValueError(f"law {law.name!r} needs per-run token counts that vary; these runs have "
                             f"{_describe_tokens(runs)}. Use a law without a data term (e.g. 'kaplan')")
        self.token_term = law.needs_tokens
        if law.token_params:
            if runs.tokens_vary:
                self.token_term = True
                notes.append("token term B·T^−β included: token counts vary across runs")
            else:
                for k, v in law.token_params.items():
                    fixed.setdefault(k, v)
                notes.append(f"token term dropped (absorbed into E): tokens {_describe_tokens(runs)}")
        self.fixed = fixed
        self.labels = np.asarray(runs.group if groups is None else groups, dtype=object)
        self._offsets(law, runs, group_offsets)
        if overestimate_weight is not None and method != "asymmetric":
            raise ValueError(f"an overestimate weight applies to the asymmetric loss, not {method!r}")
        self.problem = Problem(law, fixed, LawInputs.from_runs(runs), runs.loss, method,
                               self.offset_groups, self.gidx, overestimate_weight)
        self.problem.run_names = list(runs.name)
        if self.problem.overestimate_weight is not None:
            w = self.problem.overestimate_weight
            notes.append(f"asymmetric loss: an overestimate (prediction above the loss) weighs {w:g}× an "
                         f"underestimate, so the fit is the {1 / (1 + w):.3g} expectile of the loss — "
                         "near the lower envelope of the runs, not their mean (for small runs that "
                         "were under-tuned); RMSE, R² and AIC are of this fit's residuals")
        n, k = len(runs), self.problem.k
        if n <= k + 1:
            raise ValueError(f"law {law.name!r} has {k} free parameters; fitting it needs more than "
                             f"{k + 1} runs, got {n}")

    def _offsets(self, law, runs, group_offsets):
        labels, fixed = self.labels, self.fixed
        if len(labels) != len(runs):
            raise ValueError(f"groups has {len(labels)} labels for {len(runs)} runs")
        self.offset_groups, self.gidx = None, None
        if not group_offsets:
            return
        if OFFSET not in law.param_names or OFFSET in fixed:
            raise ValueError(f"group offsets need a free additive offset {OFFSET!r}; law {law.name!r} "
                             f"has parameters {law.param_names}" + (" (E is fixed)" if OFFSET in fixed else ""))
        self.offset_groups = sorted(set(labels), key=str)
        self.gidx = np.array([self.offset_groups.index(g) for g in labels])
        self.notes.append(f"one offset E per group ({', '.join(f'{g}: {int((labels == g).sum())} runs' for g in self.offset_groups)}); "
                          "the other parameters are shared")


def _stage_sizes(n, bootstrap, leave_one_out, profile, bootstrap_refit, notes):
    """The sizes of the interval stages, defaulted by the number of rows n."""
    if leave_one_out is None:
        leave_one_out = "refit" if n <= LOO_REFIT_ROWS and bootstrap else "hat"
    elif leave_one_out is True:
        leave_one_out = "refit"
    if leave_one_out not in (False, "refit", "hat"):
        raise ValueError(f"leave_one_out must be True, False, 'refit', 'hat' or None, got {leave_one_out!r}")
    if profile is None:
        profile = n <= PROFILE_ROWS
        if not profile:
            notes.append(f"profile intervals not computed by default above {PROFILE_ROWS} rows "
                         "(each profile point refits every row); conf_int(method='profile') "
                         "computes them")
    if bootstrap_refit is None:
        bootstrap_refit = n <= BOOT_REFIT_ROWS
    return leave_one_out, profile, bootstrap_refit


def _search(problem, search, grid_points, max_starts, seed, refit_starts, notes) -> "_Search":
    """The global search the fit asked for (or its default for the law)."""
    if search is None and (grid_points is not None or max_starts is not None):
        search = "multistart"  # the options are the multi-start's
    grid_points, max_starts = grid_points or 3, max_starts or 64
    sp = varpro.split(problem) if search != "multistart" else None
    if search == "varpro" and sp is None:
        raise ValueError(f"search 'varpro' needs a law linear in some of its parameters (bounded "
                         f"[0, ∞) or free) and no group offsets; law {problem.law.name!r} with "
                         f"free parameters {problem.names} has none: use search='multistart'")
    n = len(problem.y)
    auto = search is None
    if sp is not None and (not auto or len(sp.nonlinear) <= varpro.AUTO_NONLINEAR):
        found = _varpro_search(problem, sp, seed, refit_starts, auto)
    else:
        found = None
    if found is not None:
        if n > varpro.SEARCH_ROWS:
            notes.append(f"variable-projection grid on a seeded subsample of {varpro.SEARCH_ROWS} "
                         f"of the {n} rows; its best minima polished on every row")
        return found
    found = _multistart(problem, grid_points, max_starts, seed, refit_starts)
    if n > SEARCH_ROWS:
        notes.append(f"multi-start on a seeded subsample of {SEARCH_ROWS} of the {n} rows (the "
                     f"start counts and local optima describe it); the best start of each of the "
                     f"{POLISH_STARTS} best distinct optima refitted on every row")
    return found


def _optimum(problem, search, profile, notes):
    """θ at the optimum with its Jacobian uncertainty, and the profiles when asked; a profile
    that finds a lower objective restarts the fit from it (at most ``_PROFILE_RESTARTS``)."""
    theta, objective = search.theta, search.objective
    jac = _jacobian_uncertainty(problem, theta)
    statistic, profiles = Statistic(problem, objective), {}
    for restart in range(_PROFILE_RESTARTS + 1) if profile else ():
        profiles = profile_intervals(problem, theta, statistic, search.cold(PROFILE_STARTS),
                                     jac.se_theta, staged=search.warm)
        theta_better = (_better_optimum(problem, profiles, objective, search)
                        if restart < _PROFILE_RESTARTS else None)
        if theta_better is None:
            break
        notes.append(f"the profile likelihood found a lower objective than the {search.summary.n_starts} "
                     f"starts ({objective:.6g} → {search.objective:.6g}); the fit was restarted from it")
        theta, objective = theta_better, search.objective
        jac = _jacobian_uncertainty(problem, theta)
        statistic = Statistic(problem, objective)
    return theta, jac, statistic, profiles


class _Boot:
    def __init__(self, samples=None, n_failed=0, n_capped=0, scheme=""):
        self.samples, self.n_failed, self.n_capped, self.scheme = samples, n_failed, n_capped, scheme
        self.ci = None


def _bootstrap_stage(problem, search, theta, jac, bootstrap, refit, seed, strata, notes,
                     clusters=None) -> _Boot:
    """The case (or cluster) bootstrap: refitted (from the optimum and the best starts) or one-step."""
    if not bootstrap:
        return _Boot()
    how = " within groups" if strata is not None else ""
    kind = "case"
    if clusters is not None:
        n_clusters = len(np.unique(np.asarray(clusters).astype(str)))
        kind = f"cluster (whole runs: {n_clusters} clusters, each drawn with all its rows)"
    if refit:
        starts = search.refit_starts(theta)
        first = _OneStep(problem, theta, jac.J, jac.r) if search.warm else None
        boot = _Boot(*_bootstrap(problem, starts, theta, bootstrap, seed, strata, first, clusters))
        boot.scheme = (f"{bootstrap} {kind} resamples{how}, each refitted from "
                       + ("its own Gauss–Newton step off the full fit's optimum" if search.warm else
                          f"the full fit's optimum and the {len(starts) - 1} best starts")
                       + (f" (the search found no other optimum within {COMPETING:g}× the best "
                          "objective)" if search.n_basins == 1 else ""))
    else:
        boot = _Boot(_bootstrap_one_step(problem, theta, jac.J, jac.r, bootstrap, seed, strata, clusters))
        boot.scheme = (f"{bootstrap} {kind} resamples{how}, each one Gauss–Newton step from "
                       f"the optimum with the Jacobian held fixed (linearised; n = {len(problem.y)} "
                       f"> {BOOT_REFIT_ROWS})")
    if boot.n_capped:
        kept = bootstrap - boot.n_failed - boot.n_capped
        notes.append(f"{boot.n_capped} of {bootstrap} bootstrap refits stopped at the iteration cap "
                     "even when restarted from the optimum: left out of the bootstrap intervals, "
                     f"which rest on the other {kept}"
                     + (" (more than 5% left out: the bootstrap intervals are unreliable)"
                        if boot.n_capped + boot.n_failed > 0.05 * bootstrap else ""))
    if len(boot.samples):
        boot.ci = {nm: (float(np.percentile(boot.samples[:, i], 2.5)),
                        float(np.percentile(boot.samples[:, i], 97.5)))
                   for i, nm in enumerate(problem.names)}
    return boot


def _loo_stage(problem, search, theta, jac, leave_one_out, notes):
    if leave_one_out == "refit":
        return _leave_one_out(problem, search.refit_starts(theta)[:1] if search.warm
                              else search.cold_starts[:LOO_STARTS])
    if leave_one_out == "hat":
        notes.append("leave-one-out errors from the hat-matrix diagonal of the Jacobian "
                     "((observed − predicted)/(1 − hᵢᵢ), no refits)")
        return _leave_one_out_hat(problem, jac.J, jac.r, problem.predict(theta))
    return None


def _fit_result(problem, setup, runs, theta, jac, search, boot, loo, seed) -> FitResult:
    """The FitResult of the optimum θ with its statistics and intervals (profiles set later)."""
    y, n, k = problem.y, len(problem.y), problem.k
    values = problem.values(theta)
    pred = problem.predict(theta)
    resid = y - pred
    rss = float(resid @ resid)
    tss = float(((y - y.mean()) ** 2).sum())
    big_k = k + 1
    loglik_term = n * math.log(max(rss, 1e-300) / n)
    aic = loglik_term + 2 * big_k
    aicc = aic + 2 * big_k * (big_k + 1) / (n - big_k - 1) if n - big_k - 1 > 0 else math.inf
    result = FitResult(
        law=problem.law, method=problem.method, params={nm: values[nm] for nm in problem.names},
        fixed=setup.fixed, stderr=jac.stderr, ci_jacobian=jac.ci, ci_bootstrap=boot.ci,
        bootstrap_params=boot.samples, n_bootstrap_failed=boot.n_failed,
        n_bootstrap_not_converged=boot.n_capped, correlation=jac.corr,
        condition_number=jac.cond, n=n, k=k, rss=rss, r2=1 - rss / tss if tss > 0 else math.nan,
        rmse=math.sqrt(rss / n), aic=aic, aicc=aicc, bic=loglik_term + big_k * math.log(n),
        loo_rmse=_rms(loo) if loo is not None else math.nan,
        loo_residuals=loo if loo is not None else np.full(n, np.nan), observed=y.copy(),
        predicted=pred, residuals=resid, starts=search.summary,
        run_names=list(runs.name), notes=setup.notes, source=runs.source, seed=seed,
        jacobian_log=[p.name for p in problem.free if p.log],
        bounds={p.name: tuple(p.bounds) for p in problem.free},
        ridge_solutions=search.ridge_solutions, tie_tolerance=TIE, offset_groups=setup.offset_groups,
        bootstrap_scheme=boot.scheme, search=search.describe)
    result.at_bound = _at_bound(problem, theta)
    result.theta, result.se_theta = np.array(theta, float), np.array(jac.se_theta, float)
    return result


def _later_profiles(problem, theta, statistic, search, se_theta):
    cold = search.cold(PROFILE_STARTS)

    def later_profiles():
        found = profile_intervals(problem, theta, statistic, cold, se_theta, staged=search.warm)
        return found, f"{statistic.describe}, {statistic.cut}"
    return later_profiles


def _method_notes(problem, law, method) -> list[str]:
    notes = []
    if problem.broadcasts is False:
        notes.append(f"law {law.name!r} does not broadcast over arrays of parameters, so "
                     "every start and refit was evaluated one parameter vector at a time "
                     "(slow); write it with numpy operations to batch them")
    if method == "asymmetric":
        notes.append("Jacobian intervals of an asymmetric fit treat it as least squares: "
                     "approximate; prefer the profile or bootstrap ones")
    if method == "huber":  # (row diagnostics add flags, not notes: the notes' order is kept)
        notes.append("Jacobian intervals of a Huber fit treat it as least squares on "
                     "log-loss residuals: approximate; prefer the profile or bootstrap ones")
    return notes


def _add_row_diagnostics(result, runs, problem, theta, J, cold_starts, offset_groups,
                         offsets_by_group_column, wanted, threshold):
    """Pooled-group flags always (cheap); per-row diagnostics and the refit without outliers
    when ``wanted``; the table's column readings and row selection for the summary."""
    pooled = pooled_groups(runs, result.residuals,
                           offset_column="group" if offset_groups is not None and offsets_by_group_column else None)
    result.pooled_groups = pooled
    result.flags += [pooled_group_flag(p) for p in pooled]
    result.column_readings = dict(runs.read_as)
    result.selection = dict(runs.selection)
    if wanted:
        result.diagnostics = row_diagnostics(problem, theta, J, names=result.run_names,
                                             stderr=result.stderr, cold_starts=cold_starts,
                                             threshold=threshold, status=result.status)


def _rms(errors) -> float:
    errors = errors[np.isfinite(errors)]
    return float(np.sqrt(np.mean(errors ** 2))) if len(errors) else math.nan


def _describe_tokens(runs: Runs) -> str:
    t = runs.tokens
    known = np.isfinite(t)
    if not known.any():
        return "unknown for every run"
    if not known.all():
        rest = f" (the others constant at {t[known][0]:.3g})" if np.ptp(t[known]) == 0 else ""
        return f"unknown for {int((~known).sum())} of {len(t)} runs{rest}"
    return f"constant at {t[0]:.3g}"


# --- multi-start search ------------------------------------------------------------------------

class _Search:
    """The search's outcome: chosen θ, its objective, the summary, tied solutions, the cold
    starts for refits, and how it searched (``describe``)."""

    def __init__(self, theta, objective, summary, ridge_solutions, cold_starts, n_basins, describe=""):
        self.theta, self.objective, self.summary = theta, objective, summary
        self.ridge_solutions, self.cold_starts = ridge_solutions, cold_starts
        self.n_basins, self.describe = n_basins, describe

    @property
    def warm(self) -> bool:
        """Refits start from the optimum alone: variable projection's global grid found one
        basin (no other minimum within ``COMPETING`` times the best), so a resample's or a
        profile point's optimum lies in it."""
        return self.describe.startswith("variable projection") and self.n_basins == 1

    def refit_starts(self, theta) -> np.ndarray:
        """Starts of a bootstrap refit: the optimum ``theta``, then the cold starts (fewer where
        the search found a single basin, none where it is :attr:`warm`)."""
        cold = self.cold_starts[:ONE_BASIN_REFIT_STARTS] if self.n_basins == 1 else self.cold_starts
        return np.vstack([np.asarray(theta, float)[None], cold[:0] if self.warm else cold])

    def cold(self, count: int) -> np.ndarray:
        """The first ``count`` cold starts of a profile point's refit (none when :attr:`warm`)."""
        return self.cold_starts[:0 if self.warm else count]


def _multistart(problem: Problem, grid_points, max_starts, seed, refit_starts) -> _Search:
    """Solve from every start; keep the best objective. Starts whose objectives tie with the
    best (relative ``TIE``) are equally good: the first of them in start order is kept, not the
    one with the smallest last bits, which depend on the machine's floating point; all of
    them are kept as the ridge solutions when their parameters differ.

    Above ``SEARCH_ROWS`` rows the starts are solved on a seeded subsample of the rows, and the
    best start of each of the ``POLISH_STARTS`` best distinct optima is refitted on every row."""
    grid = start_grid(problem, grid_points, max_starts, seed)
    sub = _search_subset(problem, seed)
    res = (sub or problem).solve(grid)
    ok = _converged(res)
    if not ok.any():
        raise ValueError(_no_start_message(sub or problem, grid))
    order, optima, first_of_basin = _basins(res.objective, ok)
    at_best, n_success = _n_at_best(res.objective, ok), int(ok.sum())
    # cold starts: the start of each distinct local optimum (best first), then the rest
    picks = list(dict.fromkeys(first_of_basin + list(order)))[:max(refit_starts, 1)]
    if sub is not None:  # polish the best distinct optima on every row
        polish = first_of_basin[:POLISH_STARTS]
        res = problem.solve(res.theta[polish])
        ok = _converged(res)
        if not ok.any():
            raise ValueError(_no_start_message(problem, grid[polish]))
    size = "full grid" if len(grid) == grid_points ** problem.k else "Sobol design"
    return _chosen(problem, res, ok, optima, sub is None, StartsSummary(len(grid), n_success, at_best, optima),
                   grid[picks], f"multi-start: {len(grid)} starts ({size}), each solved by bounded LM")


def _converged(res) -> np.ndarray:
    return (res.status != FAILED) & np.isfinite(res.objective)


def _basins(obj, ok):
    """(starts in order of objective, distinct optima best first, the first start of each)."""
    order = np.argsort(np.where(ok, obj, np.inf), kind="stable")
    order = order[ok[order]]
    optima, basin = [], np.full(len(obj), -1)
    for i in order:
        if not optima or obj[i] - optima[-1] > max(1e-4 * optima[-1], 1e-12):
            optima.append(float(obj[i]))
        basin[i] = len(optima) - 1
    first_of_basin = [order[np.flatnonzero(basin[order] == b)[0]] for b in range(len(optima))]
    return order, optima, first_of_basin


def _n_at_best(obj, ok) -> int:
    best = float(np.min(obj[ok]))
    return int(np.sum(ok & (obj - best <= max(1e-4 * best, 1e-12))))


def _chosen(problem, res, ok, optima, replace_best, summary, cold_starts, describe) -> _Search:
    """The first start (in start order) tied with the best objective, the tied solutions when
    they differ (a ridge), and the number of optima within ``COMPETING`` times the best."""
    obj = res.objective
    tied = _tied(obj, ok)
    chosen = tied[0]
    if replace_best:
        optima[0] = float(obj[chosen])
    ridge = _ridge_params(problem, res.theta[tied])
    solutions = []
    if ridge:
        seen = []
        for i in tied:
            t = res.theta[i]
            if not any(np.allclose(t, s, rtol=1e-6, atol=1e-9) for s in seen):
                seen.append(t)
                solutions.append(problem.values(t))
    summary.ridge_params = ridge
    competing = sum(o <= COMPETING * max(optima[0], 1e-300) for o in optima)
    return _Search(res.theta[chosen], float(obj[chosen]), summary, solutions, cold_starts,
                   competing, describe)


def _tied(obj, ok) -> np.ndarray:
    """The converged starts whose objectives tie with the best (relative ``TIE``), in start order."""
    best_cost = float(np.min(obj[ok]))
    return np.flatnonzero(ok & (obj <= best_cost * (1 + TIE) + 1e-300))


def refit_rss(runs, law, losses_BxN, method: str = "lm", *, group_offsets: bool = False,
              max_starts: int = 64, seed: int = 0) -> np.ndarray:
    """The RSS of ``law`` refitted to each row of ``losses_BxN`` in place of the runs' losses
    (the replicates of a parametric bootstrap): for each row, what ``fit(runs with those
    losses, law, method, bootstrap=0, leave_one_out=False, profile=False, group_offsets=...,
    max_starts=..., seed=...).rss`` gives — the same multi-start and polish, the first start
    tied with the best kept — with many replicates' starts solved in one batched call (the
    problems are independent, so batching does not change them). NaN where no start converged
    (where that fit raises)."""
    law, runs = get_law(law), load_runs(runs)
    problem = _Setup(runs, law, None, method, group_offsets, None, None).problem
    losses_BxN = np.asarray(losses_BxN, float).reshape(-1, len(problem.y))
    grid = start_grid(problem, 3, max_starts, seed)
    rows = _search_rows(problem, seed, SEARCH_ROWS)
    sub = problem if rows is None else problem.subset(rows)
    # replicates per batch: their starts' losses stay near _CHUNK_ELEMENTS numbers
    per_batch = max(1, _CHUNK_ELEMENTS // (len(grid) * len(sub.y)))
    return np.concatenate([np.full(0, np.nan)] + [
        _refit_batch(problem, sub, rows, grid, losses_BxN[a:a + per_batch])
        for a in range(0, len(losses_BxN), per_batch)])


def _refit_batch(problem: Problem, sub: Problem, rows, grid, losses_BxN) -> np.ndarray:
    """:func:`refit_rss` for the replicates ``losses_BxN``: every start of each on ``sub`` (the
    problem or its search subsample, ``rows``), then, on a subsample, each replicate's best
    distinct optima polished on every row."""
    B, S = len(losses_BxN), len(grid)
    sub_losses = losses_BxN if rows is None else losses_BxN[:, rows]
    res = sub.solve(np.tile(grid, (B, 1)), losses_MxN=np.repeat(sub_losses, S, axis=0))
    obj, ok, theta = res.objective.reshape(B, S), _converged(res).reshape(B, S), res.theta.reshape(B, S, -1)
    if rows is not None:
        polish = [_basins(obj[b], ok[b])[2][:POLISH_STARTS] if ok[b].any() else [] for b in range(B)]
        owner = np.repeat(np.arange(B), [len(p) for p in polish]).astype(int)
        obj, ok, theta = [np.empty(0)] * B, [np.zeros(0, bool)] * B, [None] * B
        if len(owner):
            starts = np.array([res.theta[b * S + i] for b, p in enumerate(polish) for i in p])
            res = problem.solve(starts, losses_MxN=losses_BxN[owner])
            cuts = np.cumsum([len(p) for p in polish])[:-1]
            obj, ok, theta = (np.split(a, cuts) for a in (res.objective, _converged(res), res.theta))
    rss = np.full(B, np.nan)
    for b in range(B):
        if ok[b].any():
            resid = losses_BxN[b] - problem.predict(theta[b][_tied(obj[b], ok[b])[0]])
            rss[b] = float(resid @ resid)
    return rss


def _varpro_search(problem: Problem, sp, seed, refit_starts, auto) -> _Search | None:
    """Variable projection (:mod:`.varpro`): the reduced objective on a grid over the nonlinear
    parameters (on a seeded subsample above ``varpro.SEARCH_ROWS`` rows), its best local minima
    polished on every row. The polished starts are the summary's starts; the refits' cold
    starts are they and then the grid's next best points. None when ``auto`` and the linear
    parameters' design is rank-deficient at the grid's best point (a ridge, which the
    multi-start's many starts show and a few polished minima do not), or that point is on the
    grid's edge (the optimum may lie beyond the start ranges, where the grid says nothing:
    on tables with exponents outside them the polish ended in another basin)."""
    sub = _search_subset(problem, seed, varpro.SEARCH_ROWS)
    grid = varpro.grid_search(sub or problem, sp)
    if auto and (grid.rank_deficient or grid.at_edge):
        return None
    picks = varpro.polish_candidates(grid)
    if not len(picks):
        raise ValueError(_no_start_message(problem, grid.theta[:1]))
    res = varpro.polish(problem, grid.theta[picks])
    ok = _converged(res)
    if not ok.any():
        raise ValueError(_no_start_message(problem, grid.theta[picks]))
    order, optima, first_of_basin = _basins(res.objective, ok)
    summary = StartsSummary(len(picks), int(ok.sum()), _n_at_best(res.objective, ok), optima)
    ranked = np.argsort(np.where(np.isfinite(grid.objective), grid.objective, np.inf), kind="stable")
    cold = list(dict.fromkeys([picks[i] for i in first_of_basin] + list(picks) + list(ranked)))
    describe = (f"{grid.describe}; the {len(picks)} best local minim{'um' if len(picks) == 1 else 'a'} "
                "of the grid polished on every row with every parameter free (trust-region "
                "least squares, then bounded LM)")
    return _chosen(problem, res, ok, optima, True, summary,
                   grid.theta[cold[:max(refit_starts, 1)]], describe)


def _search_subset(problem: Problem, seed: int, rows: int = SEARCH_ROWS) -> Problem | None:
    """The problem on a seeded subsample of ``rows`` rows (every group kept), or None
    when the table is no larger."""
    idx = _search_rows(problem, seed, rows)
    return None if idx is None else problem.subset(idx)


def _search_rows(problem: Problem, seed: int, rows: int) -> np.ndarray | None:
    """The seeded subsample's row indices (sorted), or None when the table is no larger."""
    n = len(problem.y)
    if n <= rows:
        return None
    rng = np.random.default_rng([seed, n])
    idx = set(rng.choice(n, rows, replace=False).tolist())
    if problem.gidx is not None:  # one row of each group at least, or its offset is unfitted
        firsts = np.unique(problem.gidx, return_index=True)[1]
        idx.update(firsts.tolist())
    return np.array(sorted(idx))


def _better_optimum(problem: Problem, profiles: dict, objective: float, search: _Search):
    """θ of a lower objective than ``objective`` that a profile found (polished with every
    parameter free), or None. Updates ``search`` to describe the new optimum: no start reached
    it, and the tied solutions of the old one no longer apply."""
    found = [p for p in profiles.values() if p.better_theta is not None]
    if not found:
        return None
    start = min(found, key=lambda p: p.better_fit).better_theta
    res = problem.solve(start[None])
    if res.status[0] == FAILED or not res.objective[0] < objective * (1 - TIE):
        return None
    search.objective = float(res.objective[0])
    search.summary.local_optima.insert(0, search.objective)
    search.summary.n_at_best, search.summary.ridge_params = 0, []
    search.ridge_solutions = []
    return res.theta[0]


def _no_start_message(problem: Problem, grid) -> str:
    law = problem.law.name
    pred = problem.predict_many(grid)
    bad_runs = np.flatnonzero(~np.all(np.isfinite(pred), axis=0)) if len(grid) else np.array([], int)
    x = problem.x
    causes = []
    if np.any(x.W <= 1) and any(p.name in ("kappa", "c") for p in problem.law.params):
        causes.append("width ≤ 1 (a placeholder?) makes ln W ≤ 0, so the critical depth is 0 or "
                      "negative; fit a shape-agnostic law (kaplan, chinchilla) or give the real widths")
    if problem.method == "huber" and np.any(problem.y <= 0):
        causes.append("Huber fits log-loss and some losses are ≤ 0")
    if np.any(x.N <= 0):
        causes.append("some parameter counts are ≤ 0")
    run_names = problem.run_names or [f"run {i}" for i in range(len(x.D))]
    names = ", ".join(f"{run_names[i]} (D={x.D[i]:g}, W={x.W[i]:g}, N={x.N[i]:.3g}, T={x.T[i]:.3g})"
                      for i in bad_runs[:5]) + (f" and {len(bad_runs) - 5} more" if len(bad_runs) > 5 else "")
    where = (f"; predictions are not finite at every start for {names}" if len(bad_runs) else
             "; the objective is not finite at every start")
    return (f"law {law!r}: no start converged ({len(grid)} tried){where}. Likely cause: "
            + ("; ".join(causes) if causes else "the data (check those rows) or the law's init ranges"))


def _ridge_params(problem: Problem, thetas: np.ndarray) -> list[str]:
    """Free parameters that take clearly different values (> 1% of their init range, or of
    the value) at starts tied at the best objective: the data do not determine them."""
    if len(thetas) < 2:
        return []
    names = []
    for j, p in enumerate(problem.free):
        spread = np.ptp(thetas[:, j])  # log-space spread for scale parameters
        scale = 1.0 if p.log else max(abs(p.init[1] - p.init[0]), np.abs(thetas[:, j]).max(), 1e-12)
        if spread > 0.01 * scale:
            names.append(p.name)
    return names


# --- uncertainty ----------------------------------------------------------------------------------

class _Jacobian:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _jacobian_uncertainty(problem: Problem, theta) -> _Jacobian:
    """Covariance from the Jacobian in θ (log space for scale parameters), with columns scaled
    to unit norm before the pseudo-inverse so that parameters of very different magnitudes do
    not swamp each other (13.6); directions the data do not constrain get infinite variance."""
    names = problem.names
    n, k = len(problem.y), len(names)
    h = 1e-5 * np.maximum(1.0, np.abs(theta))
    pts = np.vstack([theta + np.diag(h), theta - np.diag(h)])
    P = problem.predict_many(pts)
    with np.errstate(all="ignore"):
        if problem.huber:
            P = np.log(P)
        J = ((P[:k] - P[k:]) / (2 * h[:, None])).T  # (n, k)
    r = problem.residuals(theta[None])[0]
    flags = []
    if not np.all(np.isfinite(J)):
        flags.append("the Jacobian is not finite at the optimum for some runs: Jacobian intervals unreliable")
        J = np.where(np.isfinite(J), J, 0.0)
    s2 = float(r @ r) / (n - k)
    col_max = np.abs(J).max(axis=0)
    safe_max = np.where(col_max > 0, col_max, 1.0)
    col = col_max * np.linalg.norm(J / safe_max, axis=0)
    dead = col < 1e-9 * max(col.max(), 1e-300)
    for nm in np.array(names)[dead]:
        flags.append(f"{nm}: no run's prediction depends on it at the optimum (e.g. the depth "
                     "penalty is inactive for every run): not identifiable")
    Js = J / np.where(col > 0, col, 1.0)
    try:
        _, S, Vt = np.linalg.svd(Js, full_matrices=False)
        cond = float(S[0] / S[-1]) if S[-1] > 0 else math.inf
    except np.linalg.LinAlgError:
        S, Vt, cond = np.zeros(k), np.eye(k), math.inf
    null = S <= 1e-10 * max(S[0], 1e-300)
    inv = np.where(null, 0.0, 1.0 / np.where(null, 1.0, S) ** 2)
    cov_s = s2 * (Vt.T * inv) @ Vt
    se_s = np.sqrt(np.clip(np.diag(cov_s), 0, None))
    unbounded = dead | (np.abs(Vt[null]).max(axis=0) > 1e-6 if null.any() else np.zeros(k, bool))
    with np.errstate(all="ignore"):
        corr = np.clip(cov_s / np.outer(se_s, se_s), -1.0, 1.0)
    corr[~np.isfinite(corr)] = np.nan
    corr[unbounded, :] = np.nan
    corr[:, unbounded] = np.nan
    np.fill_diagonal(corr, 1.0)
    se_theta = np.where(unbounded, np.inf, se_s / np.where(col > 0, col, 1.0))
    tq = float(special.stdtrit(max(n - k, 1), 0.975))  # Student t quantile
    values = problem.values(theta)
    stderr, ci = {}, {}
    for j, p in enumerate(problem.free):
        v, s = values[p.name], se_theta[j]
        if p.log:
            # v·s in log space: a drifted scale (e^700) times its s.e. overflows a float
            log_se = theta[j] + math.log(s) if np.isfinite(s) and s > 0 else (-math.inf if s == 0 else math.inf)
            stderr[p.name] = math.exp(log_se) if log_se < 709 else math.inf
            ci[p.name] = ((float(math.exp(theta[j] - tq * s)), float(math.exp(min(theta[j] + tq * s, 700))))
                          if np.isfinite(s) else (0.0, math.inf))
        else:  # intersected with the parameter's bounds: values outside are not models
            stderr[p.name] = float(s)
            b0, b1 = p.bounds
            ci[p.name] = ((max(v - tq * s, b0), min(v + tq * s, b1)) if np.isfinite(s)
                          else (b0, b1))
    return _Jacobian(stderr=stderr, ci=ci, corr=corr, cond=cond, flags=flags, se_theta=se_theta,
                     J=J, r=r)


def _bootstrap_weights(n: int, n_boot: int, seed: int, strata=None, clusters=None) -> np.ndarray:
    """(n_boot, n) resampling counts: a case bootstrap, within strata when given; with
    ``clusters`` (a label per row) a cluster bootstrap: whole clusters drawn with replacement,
    each row weighted by how often its cluster was drawn."""
    blocks = list(_bootstrap_weight_blocks(n, n_boot, seed, strata, n_boot, clusters))
    return np.concatenate(blocks) if blocks else np.zeros((0, n))


def cluster_index(clusters, n: int, strata=None) -> tuple[np.ndarray, np.ndarray | None]:
    """(cluster number per row, stratum per cluster or None) for ``clusters``, labels per row;
    a cluster that spans two strata is an error (a run belongs to one source)."""
    labels = np.asarray(clusters)
    if labels.shape != (n,):
        raise ValueError(f"clusters: expected one label per run ({n}), got {labels.size}")
    names, idx = np.unique(labels.astype(str), return_inverse=True)
    if strata is None:
        return idx, None
    per_cluster = np.zeros(len(names), dtype=np.asarray(strata).dtype)
    per_cluster[idx] = strata
    if np.any(per_cluster[idx] != strata):
        raise ValueError("clusters: a cluster (run) spans two groups; each run must lie in one group")
    return idx, per_cluster


def _bootstrap_weight_blocks(n: int, n_boot: int, seed: int, strata=None, block: int = 1, clusters=None):
    """The rows of :func:`_bootstrap_weights` (the same draws), ``block`` at a time, so that
    memory stays at block × n whatever the number of resamples."""
    if clusters is not None:
        yield from _cluster_weight_blocks(n, n_boot, seed, strata, block, clusters)
        return
    rng = np.random.default_rng(seed)
    groups = None if strata is None else [np.flatnonzero(strata == g) for g in np.unique(strata)]
    # below 2³² rows numpy draws int64 and uint32 indices from the same 32-bit stream, so both give
    # the same indices; uint32 is half the memory traffic (millions of rows: most of the time)
    small = np.uint32 if n <= np.iinfo(np.uint32).max else np.int64
    for a in range(0, n_boot, block):
        W = np.zeros((min(block, n_boot - a), n))
        for b in range(len(W)):
            if groups is None:
                W[b] = np.bincount(rng.integers(0, n, n, dtype=small), minlength=n)
            else:
                for members in groups:
                    W[b] += np.bincount(rng.choice(members, len(members)), minlength=n)
        yield W


def _cluster_weight_blocks(n: int, n_boot: int, seed: int, strata, block: int, clusters):
    """Cluster-bootstrap counts: per resample, as many clusters as there are (per stratum, as
    many as the stratum has) drawn with replacement; a row's weight is its cluster's count."""
    idx, cluster_strata = cluster_index(clusters, n, strata)
    k = int(idx.max()) + 1 if n else 0
    rng = np.random.default_rng(seed)
    groups = ([np.arange(k)] if cluster_strata is None else
              [np.flatnonzero(cluster_strata == g) for g in np.unique(cluster_strata)])
    for a in range(0, n_boot, block):
        W = np.zeros((min(block, n_boot - a), n))
        for b in range(len(W)):
            counts = np.zeros(k)
            for members in groups:
                counts += np.bincount(rng.choice(members, len(members)), minlength=k)
            W[b] = counts[idx]
        yield W


def _best_of_starts(res, n_problems: int, n_starts: int):
    """Per problem, the first start (in start order) whose finite objective ties with the lowest
    (relative ``TIE``): (index into res, failed mask). Not the plain argmin: among tied optima
    the last bits pick one, and they depend on the CPU (as in the multi-start)."""
    obj = np.where((res.status != FAILED) & np.isfinite(res.objective), res.objective, np.inf)
    obj = obj.reshape(n_problems, n_starts)
    best = obj.min(axis=1, keepdims=True)
    pick = np.argmax(obj <= best * (1 + TIE) + 1e-300, axis=1)
    failed = ~np.isfinite(obj[np.arange(n_problems), pick])
    return np.arange(n_problems) * n_starts + pick, failed


def _rows_per_block(n: int, copies: int) -> int:
    return max(1, _CHUNK_ELEMENTS // max(n * copies, 1))


def _bootstrap(problem: Problem, starts, theta, n_boot: int, seed: int, strata=None,
               first_step=None, clusters=None):
    """Case-bootstrap refits, each from every one of ``starts`` (best kept), or, with
    ``first_step`` (a :class:`_OneStep`), each from its own resample's Gauss–Newton step off the
    optimum (a start nearer its optimum than the optimum is: fewer iterations, the same
    solution). A refit whose best start stopped at the iteration cap is continued from where it
    stopped and restarted from the full fit's optimum ``theta`` (a longer budget); one that
    still does not converge is left out and counted. Returns (θ samples, failed, not converged)."""
    n, s = len(problem.y), 1 if first_step is not None else len(starts)
    samples, n_failed, n_capped = [], 0, 0
    for W in _bootstrap_weight_blocks(n, n_boot, seed, strata, _rows_per_block(n, s), clusters):
        first = first_step(W) if first_step is not None else np.tile(starts, (len(W), 1))
        res = problem.solve(first, np.repeat(W, s, axis=0))
        rows, failed = _best_of_starts(res, len(W), s)
        thetas, status = res.theta[rows], res.status[rows]
        capped = np.flatnonzero(~failed & (status == CAPPED))
        if len(capped):
            again = np.stack([res.theta[rows[capped]], np.broadcast_to(theta, (len(capped), len(theta)))], 1)
            res2 = problem.solve(again.reshape(-1, len(theta)), np.repeat(W[capped], 2, axis=0),
                                 max_iter=3 * MAX_ITER)
            rows2, failed2 = _best_of_starts(res2, len(capped), 2)
            thetas[capped] = res2.theta[rows2]
            status[capped] = np.where(failed2, CAPPED, res2.status[rows2])
        keep = ~failed & (status != CAPPED)
        n_failed += int(failed.sum())
        n_capped += int(np.sum(~failed & (status == CAPPED)))
        samples.append(problem.natural(thetas[keep]))
    return np.concatenate(samples).reshape(-1, problem.k), n_failed, n_capped


class _OneStep:
    """θ of resample weights W (rows): one Gauss–Newton (IRLS for Huber) step from the optimum
    θ̂ with the Jacobian J held fixed, clipped to the bounds. Cost O(n·k²) per resample, no law
    evaluation."""

    def __init__(self, problem: Problem, theta, J, r):
        k = J.shape[1]
        col = np.linalg.norm(J, axis=0)
        self.col = np.where(col > 0, col, 1.0)
        Js = J / self.col
        omega = irls_weights(r, problem.huber, problem.overestimate_weight)
        # Jᵀ diag(w·ω) J is symmetric: its k(k+1)/2 distinct entries only, each row's products
        # made in place (millions of rows: n × k² temporaries were gigabytes)
        self.upper = np.triu_indices(k)
        self.JJ = np.empty((len(Js), len(self.upper[0])))
        for c, (i, j) in enumerate(zip(*self.upper)):
            np.multiply(Js[:, i], Js[:, j], out=self.JJ[:, c])
            self.JJ[:, c] *= omega
        self.Jr = Js * (omega * r)[:, None]
        self.problem, self.theta, self.k = problem, np.asarray(theta, float), k

    def __call__(self, W) -> np.ndarray:
        H = np.empty((len(W), self.k, self.k))
        H[:, self.upper[0], self.upper[1]] = H[:, self.upper[1], self.upper[0]] = W @ self.JJ
        g = W @ self.Jr
        step = -np.einsum("bkl,bl->bk", np.linalg.pinv(H, hermitian=True), g) / self.col
        return np.clip(self.theta + step, self.problem.lo, self.problem.hi)


def _bootstrap_one_step(problem: Problem, theta, J, r, n_boot: int, seed: int, strata=None, clusters=None):
    """The case bootstrap linearised at the optimum (:class:`_OneStep` per resample); it
    approximates the refitted bootstrap where the fit is close to linear over the bootstrap
    spread, i.e. on large tables."""
    n, k = J.shape
    step = _OneStep(problem, theta, J, r)
    # at least ONE_STEP_BLOCK resamples per block: (block × n) @ (n × k²) then reads the n × k²
    # matrix once per block, not once per resample (millions of rows: memory-bound otherwise)
    block = max(_rows_per_block(n, 1), ONE_STEP_BLOCK)
    samples = [problem.natural(step(W))
               for W in _bootstrap_weight_blocks(n, n_boot, seed, strata, block, clusters)]
    return np.concatenate(samples).reshape(-1, k)


def _leave_one_out(problem: Problem, cold_starts) -> np.ndarray:
    """Errors (observed − predicted) of each run by the fit to the others, refitted cold
    (held-out runs a block at a time: memory block × n)."""
    n, s = len(problem.y), len(cold_starts)
    errors = np.full(n, np.nan)
    block = _rows_per_block(n, s)
    for a in range(0, n, block):
        held = np.arange(a, min(a + block, n))
        W = np.ones((len(held), n))
        W[np.arange(len(held)), held] = 0.0
        res = problem.solve(np.tile(cold_starts, (len(held), 1)), np.repeat(W, s, axis=0))
        rows, failed = _best_of_starts(res, len(held), s)
        pred = problem.predict_many(res.theta[rows])  # row j: the fit without run held[j]
        e = problem.y[held] - pred[np.arange(len(held)), held]
        e[failed] = np.nan
        errors[held] = e
    return _unfitted_offsets_nan(problem, errors)


def _leave_one_out_hat(problem: Problem, J, r, pred) -> np.ndarray:
    """Leave-one-out errors from the hat-matrix diagonal h of the (IRLS-weighted) Jacobian:
    (observed − predicted)/(1 − hᵢᵢ), the one-step deletion formula (exact for a linear model).
    h comes from a pivoted thin QR, the rank cut where the data do not constrain a direction."""
    h, _ = leverage(J, irls_weights(r, problem.huber, problem.overestimate_weight))
    with np.errstate(divide="ignore", invalid="ignore"):
        errors = np.where(1 - h > 1e-8, (problem.y - pred) / (1 - h), np.nan)
    return _unfitted_offsets_nan(problem, errors)


def _unfitted_offsets_nan(problem: Problem, errors):
    if problem.offset_groups is not None:  # a group's only run: its offset was not fitted
        sizes = np.bincount(problem.gidx, minlength=len(problem.offset_groups))
        errors[sizes[problem.gidx] == 1] = np.nan
    return errors


# --- flags ----------------------------------------------------------------------------------------

def _at_bound(problem: Problem, theta) -> list[str]:
    out = []
    for j, p in enumerate(problem.free):
        width = (math.log(p.init[1]) - math.log(p.init[0])) if p.log else (p.init[1] - p.init[0])
        tol = _BOUND_TOL * (width or 1.0)
        if (np.isfinite(problem.lo[j]) and theta[j] <= problem.lo[j] + tol) or \
                (np.isfinite(problem.hi[j]) and theta[j] >= problem.hi[j] - tol):
            out.append(p.name)
    return out


def _identifiability_flags(result: FitResult, problem: Problem) -> list[str]:
    flags = []
    names = problem.names
    for i, j in itertools.combinations(range(len(names)), 2):
        c = result.correlation[i, j]
        if np.isfinite(c) and abs(c) >= STRONG_CORR:
            flags.append(f"{names[i]} and {names[j]} are correlated (r = {c:+.3f}): the Jacobian "
                         "sees mostly a combination of them")
    for p in problem.free:
        nm, v = p.name, result.params[p.name]
        if nm in result.at_bound:
            b0, b1 = p.bounds
            flags.append(f"{nm} = {_g(v)} is at its bound (allowed: [{_g(b0)}, {_g(b1)}]): the fit "
                         "wants it beyond the physical range; its Jacobian interval is not valid")
        elif p.log and v < 1e-6 * p.init[0]:
            flags.append(f"{nm} = {_g(v)} has collapsed towards 0 (the term it scales vanishes)")
        lo, hi = result.ci_jacobian[nm]
        prof = result.ci_profile.get(nm) if result.ci_profile else None
        if prof is not None and prof[0] <= 0 <= prof[1]:
            flags.append(f"{nm}: profile 95% interval {interval_text(prof)} includes 0")
        elif np.isfinite(lo) and np.isfinite(hi) and lo < 0 < hi:
            flags.append(f"{nm}: Jacobian 95% interval [{_g(lo)}, {_g(hi)}] spans zero")
        elif result.ci_bootstrap and result.ci_bootstrap[nm][0] < 0 < result.ci_bootstrap[nm][1]:
            flags.append(f"{nm}: bootstrap 95% interval spans zero")
        elif not np.isfinite(result.stderr[nm]):
            flags.append(f"{nm}: standard error is not finite")
    better = {nm: pr.better_fit for nm, pr in result.profiles.items() if pr.better_fit is not None}
    if better:
        flags.append("the profile of " + ", ".join(better) + " found a lower objective than the "
                     "multi-start optimum (likelihood-ratio statistic "
                     + ", ".join(f"{v:.3g}" for v in better.values())
                     + "): the reported optimum is a local one; add starts (grid_points, max_starts)")
    if result.condition_number > _COND_FLAG:
        flags.append(f"ill-conditioned: condition number {result.condition_number:.3g} "
                     "of the column-normalised Jacobian")
    dropped = result.n_bootstrap_failed + result.n_bootstrap_not_converged
    if dropped > 0.05 * max(result.n_bootstrap + dropped, 1):
        flags.append(f"{dropped} of {result.n_bootstrap + dropped} bootstrap refits failed or did "
                     "not converge (left out of the intervals): the bootstrap intervals are unreliable")
    if result.starts.ridge_params:
        flags.append(f"{', '.join(result.starts.ridge_params)}: starts that reach the best objective "
                     f"(within {TIE:g} relative) end at different values (a ridge of equally good "
                     "fits): not identified; predictions outside the data are the range over "
                     f"the {max(len(result.ridge_solutions), 2)} tied solutions (predict_range)")
    if result.starts.n_at_best < 0.5 * result.starts.n_starts:
        flags.append(f"only {result.starts.n_at_best} of {result.starts.n_starts} starts reached the "
                     "best optimum: the objective has several local optima")
    return flags


def _pooling_flags(runs: Runs, labels, law, token_term: bool, offset_groups) -> list[str]:
    """A pooled fit over groups trained on different token budgets, by a law without a token
    term and without group offsets, credits the budget gap to the other terms."""
    groups = sorted(set(labels), key=str)
    if len(groups) < 2 or token_term or offset_groups is not None:
        return []
    budgets = {}
    for g in groups:
        t = runs.tokens[labels == g]
        t = t[np.isfinite(t)]
        budgets[g] = None if not len(t) else float(np.median(t))
    known = [b for b in budgets.values() if b is not None]
    if not known:
        return []  # nothing says the budgets differ
    differ = len(known) < len(budgets) or max(known) > 1.01 * min(known)
    if not differ:
        return []
    desc = "; ".join(f"{g}: {'unknown' if b is None else f'{b:.3g}'}" for g, b in budgets.items())
    return [f"pooled over groups whose token budgets differ or are unknown ({desc} tokens) by a "
            f"law without a token term ({law.name}) and without group offsets: a loss gap "
            "between the groups is credited to the other terms; fit with group_offsets=True, "
            "per group, or with a token term"]


def _g(v) -> str:
    if v is None or not np.isfinite(v):
        return "nan" if v is None or np.isnan(v) else ("inf" if v > 0 else "-inf")
    return f"{v:.4g}"
