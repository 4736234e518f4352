"""Where a fit's search starts and how its optima are told apart: the grid of starting points,
the seeded row subsample a large table is searched on, the converged starts grouped into
distinct optima (basins) and the ties at the best. Shared by the search (:mod:`.search`) and
the refits of the resampling stages (:mod:`.resampling`, :mod:`.refits`)."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from .breaks import held_at_breaks, kink_breaks
from .problem import TIE, Problem
from .solver import FAILED

# Optima with more than COMPETING times the best objective are starts stranded far off, not a
# basin a resample could prefer.
COMPETING = 2.0
# Above these row counts the stages scale as stated in fitting/engine.py's docstring. Measured
# on 2 cores (benchmarks/RESULTS.md): a cold-started refit costs ≈ 0.8 ms of CPU per 1000 rows
# and start, so 1000 bootstraps × 16 starts are seconds at 200 rows but hours at 100,000.
SEARCH_ROWS = 4096  # the multi-start runs on a seeded subsample of this many rows
POLISH_STARTS = 4  # the best distinct subsample optima refitted on every row


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


@dataclass(frozen=True)
class StartsSummary:
    """What the multi-start search found: how many starts reached the best optimum, and the
    objective values of the distinct local optima (the max(0, ·) kink makes several likely)."""

    n_starts: int
    n_success: int
    n_at_best: int
    local_optima: list  # distinct final objective values, best first
    ridge_params: list = field(default_factory=list)  # differ between starts tied with the chosen optimum (RIDGE_TIE)
    #: how the optimum was found when no start reached it: a profile's lower objective, the
    #: fit restarted from there (:func:`.uncertainty.better_optimum`); "" when a start did
    found_by_profile: str = ""


def converged_starts(res) -> np.ndarray:
    return (res.status != FAILED) & np.isfinite(res.objective)


def basins_of(obj, ok):
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


def tied_optima(obj, ok) -> np.ndarray:
    """The converged starts whose objectives tie with the best (relative ``TIE``), in start order."""
    best_cost = float(np.min(obj[ok]))
    return np.flatnonzero(ok & (obj <= best_cost * (1 + TIE) + 1e-300))


def search_rows(problem: Problem, seed: int, rows: int) -> np.ndarray | None:
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


# Points each kink break is tried from (``best_break``): the optimum and the first cold starts.
BREAK_ORIGINS = 4


def best_break(problem: Problem, theta, objective: float, cold_starts, seed: int):
    """The fit with the kink held at each row's break in turn (the other parameters refitted from
    ``theta`` and the first cold starts), then freed from the best of them: (θ, objective, which
    breaks were tried) when that beats ``objective`` beyond ``TIE``, else None (also for a law
    without breaks). At most ``MAX_BREAKS`` breaks (:func:`.breaks.break_values`); above
    ``SEARCH_ROWS`` rows the held fits run on the multi-start's seeded subsample and the best is
    re-solved on every row. The search (:func:`.search.scan_breaks`) calls it; the replicate
    refits of the likelihood-ratio tests (:mod:`.refits`) call :func:`best_breaks` for many."""
    kink = kink_breaks(problem)
    if kink is None:
        return None
    _, values, total = kink
    rows = search_rows(problem, seed, SEARCH_ROWS)
    (found,) = best_breaks(problem, [theta], [objective], [cold_starts], rows)
    if found is None:
        return None
    tried = (f"each of the {total} rows' breaks" if len(values) == total else
             f"{len(values)} of the {total} rows' breaks (evenly spaced in rank)")
    where = "" if rows is None else f", on the search's subsample of {SEARCH_ROWS} rows,"
    return found[0], found[1], tried + where


def best_breaks(problem: Problem, thetas, objectives, colds, rows=None, losses_BxN=None) -> list:
    """:func:`best_break` for B fits at once, each held fit in one batched solve and each freed
    fit in another (the problems are independent, so batching does not change them): fit b has
    the optimum ``thetas[b]`` of objective ``objectives[b]``, the cold starts ``colds[b]`` and,
    when given, its own losses ``losses_BxN[b]`` (a replicate's) in place of the problem's. Per
    fit (θ, objective) where the scan beats its optimum beyond ``TIE``, else None. ``rows``: the
    search's subsample the held fits run on (its best then held on every row)."""
    out = [None] * len(thetas)
    kink = kink_breaks(problem)
    if kink is None or not len(thetas):
        return out
    j, values, _ = kink
    # from the optimum and the starts of the search's other basins (its other parameters
    # may sit in a worse basin when the kink does)
    origins = [np.vstack([np.asarray(t, float)[None], np.asarray(c, float).reshape(-1, len(t))[:BREAK_ORIGINS - 1]])
               for t, c in zip(thetas, colds)]
    owner = np.repeat(np.arange(len(thetas)), [len(o) for o in origins])
    own = (lambda fits: None) if losses_BxN is None else (lambda fits: np.asarray(losses_BxN, float)[fits])
    sub, losses = problem, own(owner)
    if rows is not None:
        sub, losses = problem.subset(rows), None if losses is None else losses[:, rows]
    held, frozen = held_at_breaks(sub, np.vstack(origins), j, values, losses=losses)
    fit_of, ok = np.repeat(owner, len(values)), converged_starts(held)
    picks = [(b, np.flatnonzero(fit_of == b)) for b in range(len(thetas))]
    picks = [(b, at[tied_optima(held.objective[at], ok[at])[0]]) for b, at in picks if ok[at].any()]
    if not picks:
        return out
    kept, at = np.array([b for b, _ in picks]), np.array([i for _, i in picks])
    theta_h, obj_h = held.theta[at], held.objective[at]
    if rows is not None:  # the subsample's best break, held on every row
        held = problem.solve(theta_h, frozen_MxK=frozen[at], losses_MxN=own(kept))
        good = converged_starts(held)
        kept, theta_h, obj_h = kept[good], held.theta[good], held.objective[good]
    freed = problem.solve(theta_h, losses_MxN=own(kept))
    better = converged_starts(freed) & (freed.objective < obj_h)
    theta_h[better], obj_h[better] = freed.theta[better], freed.objective[better]
    for b, theta_b, objective_b in zip(kept, theta_h, obj_h):
        if objective_b < objectives[b] * (1 - TIE):
            out[b] = (theta_b, float(objective_b))
    return out
