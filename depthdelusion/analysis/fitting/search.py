"""The global search of a fit: the multi-start grid and variable projection, their optima
and the starts a refit reuses (``Search``)."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from . import varpro
from .problem import RIDGE_TIE, Problem
from .starts import (
    COMPETING,
    POLISH_STARTS,
    SEARCH_ROWS,
    StartsSummary,
    basins_of,
    best_break,
    converged_starts,
    search_rows,
    start_grid,
    tied_optima,
)

# Starts per bootstrap refit, besides the full fit's optimum: the start of each distinct local
# optimum the multi-start found, then the next best starts. Measured on the paper data with the
# 7-parameter depth_delusion_power law (40 resamples, tests/analysis/fitting/test_fit_intervals.py):
# refits reach the optimum a 64-start fit of the resample finds in 30 of 40 from the 16 best
# cold starts alone, 34 of 40 with the optimum added (30 of 40 against 512-start fits: the rest
# are other local optima of a 7-parameter law on 30 runs).
REFIT_STARTS = 16
# Where the multi-start found one optimum, or only others with more than COMPETING times its
# objective (:mod:`.starts`), a resample's optimum lies near the full fit's: these many cold
# starts besides it.
ONE_BASIN_REFIT_STARTS = 3


def run_search(problem, options) -> "_Search":
    """The global search ``options`` ask for (``search``, ``starts``, ``grid_points``, ``seed``,
    ``refit_starts``; or the default for the law), with its notes."""
    search, grid_points, max_starts, seed = options.search, options.grid_points, options.starts, options.seed
    refit_starts = REFIT_STARTS if options.refit_starts is None else options.refit_starts
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
    found = fallback = None  # fallback: why the default variable projection gave way to the multi-start
    if sp is not None and (not auto or len(sp.nonlinear) <= varpro.AUTO_NONLINEAR):
        found, fallback = _varpro_search(problem, sp, seed, refit_starts, auto=auto)
    if found is not None:
        found = scan_breaks(problem, found, seed)
        if n > varpro.SEARCH_ROWS:
            found = replace(found, notes=(
                f"variable-projection grid on a seeded subsample of {varpro.SEARCH_ROWS} of the {n} "
                "rows; its best minima polished on every row",))
        return found
    found = scan_breaks(problem, _multistart(problem, grid_points, max_starts, seed, refit_starts), seed)
    if fallback:
        # said where the search is named (the summary's header, the JSON's "search"): the
        # default changed with the data, which a reader comparing two fits must see
        found = replace(found, describe=found.describe + (
            f" — not variable projection, this law's default search: {fallback}; --search varpro forces it"))
    if n > SEARCH_ROWS:
        found = replace(found, notes=(
            f"multi-start on a seeded subsample of {SEARCH_ROWS} of the {n} rows (the start counts "
            f"and local optima describe it); the best start of each of the {POLISH_STARTS} best "
            "distinct optima refitted on every row",))
    return found


def scan_breaks(problem: Problem, found: "_Search", seed: int) -> "_Search":
    """For a law whose kink location bends the objective at every row's break (``Roles.breaks``,
    a break in model size at each row's N, the paper's κ at each row's D/ln W), the search's
    optimum replaced by :func:`.starts.best_break`'s where that beats it beyond ``TIE``: a local solver
    stops at whichever bend is nearest its start, and which one that is can turn on the machine's
    last bits (the paper's 30 runs: ΔAICc +6.6 on one CPU, +5.8 on another)."""
    better = best_break(problem, found.theta, found.objective, found.cold_starts, seed)
    if better is None:
        return found
    theta, objective, tried = better
    p = problem.free[problem.names.index(problem.law.roles.kink)]
    return replace(found, theta=theta, objective=objective,
                   summary=replace(found.summary, local_optima=[objective, *found.summary.local_optima]),
                   describe=found.describe + f"; then {p.name} held at {tried} and freed from the "
                   "best (it beat the search)")


# --- multi-start search ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Search:
    """The search's outcome: chosen θ, its objective, the summary, tied solutions, the cold
    starts for refits, the number of optima within ``COMPETING`` times the best, how it
    searched (``describe``) and the fit's notes the search adds (``notes``)."""

    theta: np.ndarray
    objective: float
    summary: StartsSummary
    ridge_solutions: list
    cold_starts: np.ndarray
    n_basins: int
    describe: str = ""
    notes: tuple = ()

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
    one with the smallest last bits, which depend on the machine's floating point; those within
    ``RIDGE_TIE`` of it are kept as the ridge solutions when their parameters differ.

    Above ``SEARCH_ROWS`` rows the starts are solved on a seeded subsample of the rows, and the
    best start of each of the ``POLISH_STARTS`` best distinct optima is refitted on every row."""
    grid = start_grid(problem, grid_points, max_starts, seed)
    sub = _search_subset(problem, seed)
    res = (sub or problem).solve(grid)
    ok = converged_starts(res)
    if not ok.any():
        raise ValueError(_no_start_message(sub or problem, grid))
    order, optima, first_of_basin = basins_of(res.objective, ok)
    at_best, n_success = _n_at_best(res.objective, ok), int(ok.sum())
    # cold starts: the start of each distinct local optimum (best first), then the rest
    picks = list(dict.fromkeys(first_of_basin + list(order)))[:max(refit_starts, 1)]
    if sub is not None:  # polish the best distinct optima on every row
        polish = first_of_basin[:POLISH_STARTS]
        res = problem.solve(res.theta[polish])
        ok = converged_starts(res)
        if not ok.any():
            raise ValueError(_no_start_message(problem, grid[polish]))
    size = "full grid" if len(grid) == grid_points ** problem.k else "Sobol design"
    solved = _Solved(res, ok, StartsSummary(len(grid), n_success, at_best, optima),
                     cold_starts=grid[picks],
                     describe=f"multi-start: {len(grid)} starts ({size}), each solved by bounded LM")
    return _chosen(problem, solved, replace_best=sub is None)


def _n_at_best(obj, ok) -> int:
    best = float(np.min(obj[ok]))
    return int(np.sum(ok & (obj - best <= max(1e-4 * best, 1e-12))))


@dataclass(frozen=True)
class _Solved:
    """The starts a search solved, before one is chosen: the solver's results (``res``), which of
    them converged (``ok``), their summary (its ``local_optima`` the distinct optima, best
    first), the cold starts a refit reuses and how the search searched (``describe``)."""

    res: object
    ok: np.ndarray
    summary: StartsSummary
    cold_starts: np.ndarray
    describe: str


def _chosen(problem, solved: _Solved, *, replace_best: bool) -> _Search:
    """The first start (in start order) tied with the best objective, the tied solutions when
    they differ (a ridge: among the starts within ``RIDGE_TIE`` of the chosen one, either side), and
    the number of optima within ``COMPETING`` times the best (``replace_best``: the best optimum
    is the chosen start's objective, the starts having been solved on every row)."""
    res, summary, optima = solved.res, solved.summary, solved.summary.local_optima
    obj = res.objective
    tied = tied_optima(obj, solved.ok)
    chosen = tied[0]
    if replace_best:
        optima = [float(obj[chosen]), *optima[1:]]
    # the ridge from the starts within the margin RIDGE_TIE of the chosen one, either side (the
    # chosen start is the first tied one in start order, not necessarily the lowest)
    close = tied[np.abs(obj[tied] - obj[chosen]) <= RIDGE_TIE * abs(float(obj[chosen])) + 1e-300]
    ridge = _ridge_params(problem, res.theta[close])
    solutions = []
    if ridge:
        seen = []
        for i in close:
            t = res.theta[i]
            if not any(np.allclose(t, s, rtol=1e-6, atol=1e-9) for s in seen):
                seen.append(t)
                solutions.append(problem.values(t))
    competing = sum(o <= COMPETING * max(optima[0], 1e-300) for o in optima)
    return _Search(res.theta[chosen], float(obj[chosen]),
                   replace(summary, local_optima=optima, ridge_params=ridge), solutions,
                   solved.cold_starts, competing, solved.describe)


def _varpro_search(problem: Problem, sp, seed, refit_starts, *, auto: bool) -> tuple:
    """(search, None): variable projection (:mod:`.varpro`): the reduced objective on a grid over
    the nonlinear parameters (on a seeded subsample above ``varpro.SEARCH_ROWS`` rows), its best
    local minima polished on every row. The polished starts are the summary's starts; the
    refits' cold starts are they and then the grid's next best points. (None, why in words)
    when ``auto`` and the linear parameters' design is rank-deficient at the grid's best point
    (a ridge, which the multi-start's many starts show and a few polished minima do not), or
    that point is on the grid's edge (the optimum may lie beyond the start ranges, where the
    grid says nothing: on tables with exponents outside them the polish ended in another
    basin)."""
    sub = _search_subset(problem, seed, varpro.SEARCH_ROWS)
    grid = varpro.grid_search(sub or problem, sp)
    if auto and (grid.rank_deficient or grid.at_edge):
        return None, _fallback_reason(problem, sp, grid)
    picks = varpro.polish_candidates(grid)
    if not len(picks):
        raise ValueError(_no_start_message(problem, grid.theta[:1]))
    res = varpro.polish(problem, grid.theta[picks])
    ok = converged_starts(res)
    if not ok.any():
        raise ValueError(_no_start_message(problem, grid.theta[picks]))
    order, optima, first_of_basin = basins_of(res.objective, ok)
    summary = StartsSummary(len(picks), int(ok.sum()), _n_at_best(res.objective, ok), optima)
    ranked = np.argsort(np.where(np.isfinite(grid.objective), grid.objective, np.inf), kind="stable")
    cold = list(dict.fromkeys([picks[i] for i in first_of_basin] + list(picks) + list(ranked)))
    describe = (f"{grid.describe}; the {len(picks)} best local minim{'um' if len(picks) == 1 else 'a'} "
                "of the grid polished on every row with every parameter free (trust-region "
                "least squares, then bounded LM)")
    solved = _Solved(res, ok, summary, cold_starts=grid.theta[cold[:max(refit_starts, 1)]],
                     describe=describe)
    return _chosen(problem, solved, replace_best=True), None


def _fallback_reason(problem: Problem, sp, grid) -> str:
    """Why :func:`_varpro_search` declined its ``grid`` (in words)."""
    names = ", ".join(problem.names[j] for j in sp.nonlinear)
    if grid.rank_deficient:
        return ("the linear parameters' design is rank-deficient at the grid's best point (a ridge "
                "of equally good fits, which many starts show and a few polished minima do not)")
    return (f"the grid's best point lies on the edge of its grid over {names} (the optimum may "
            "lie beyond the start ranges, where the grid says nothing)")


def _search_subset(problem: Problem, seed: int, rows: int = SEARCH_ROWS) -> Problem | None:
    """The problem on a seeded subsample of ``rows`` rows (every group kept), or None
    when the table is no larger."""
    idx = search_rows(problem, seed, rows)
    return None if idx is None else problem.subset(idx)


def _no_start_message(problem: Problem, grid) -> str:
    law = problem.law.name
    pred = problem.predict_many(grid)
    bad_runs = np.flatnonzero(~np.all(np.isfinite(pred), axis=0)) if len(grid) else np.array([], int)
    x = problem.x
    causes = []
    if np.any(x.W <= 1) and problem.law.has_critical_depth:
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
    the value) at starts tied with the chosen optimum (``thetas``, within ``RIDGE_TIE`` of it): the
    data do not determine them."""
    if len(thetas) < 2:
        return []
    names = []
    for j, p in enumerate(problem.free):
        spread = np.ptp(thetas[:, j])  # log-space spread for scale parameters
        scale = 1.0 if p.log else max(abs(p.init[1] - p.init[0]), np.abs(thetas[:, j]).max(), 1e-12)
        if spread > 0.01 * scale:
            names.append(p.name)
    return names
