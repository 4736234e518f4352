"""Refits of many loss vectors at once (``refit_rss``): the replicates of a parametric
bootstrap refitted like a fit without intervals, every replicate's starts in one batched solve.
The likelihood-ratio tests (:mod:`.lr_test`) take such a refit as an argument
(:func:`default_refit`)."""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from ..laws import get_law
from ..table.load import load_runs
from .options import SEED, FitOptions, loss_of_method
from .problem import Problem
from .setup import FitSetup
from .starts import (POLISH_STARTS, SEARCH_ROWS, basins_of, best_breaks, converged_starts, search_rows,
                     start_grid, tied_optima)

# numbers per batch of replicates' start losses (≈ 16 MB), as resampling's blocks of weights
BATCH_ELEMENTS = 2_000_000
REFIT_STARTS = 16  # multi-start points per replicate refit (the full fit uses 64)


def refit_rss(runs, law, losses_BxN, method: str = "lm", *, group_offsets: bool = False,
              max_starts: int = 64, seed: int = SEED, grid_points: int = 3,
              options: FitOptions | None = None) -> np.ndarray:
    """The RSS of ``law`` refitted to each row of ``losses_BxN`` in place of the runs' losses
    (the replicates of a parametric bootstrap): for each row, what ``fit(runs with those
    losses, law, method, bootstrap=0, leave_one_out=False, profile=False, group_offsets=...,
    max_starts=..., seed=...).rss`` gives — the same multi-start and polish, the first start
    tied with the best kept — with many replicates' starts solved in one batched call (the
    problems are independent, so batching does not change them). NaN where no start converged
    (where that fit raises). ``options``: the objective and the rest of the fit's setup (its loss,
    weights, fixed parameters, parameter count) when given; else least squares or Huber by
    ``method``. The search is the multi-start (``grid_points`` per axis, ``max_starts``)."""
    law, runs = get_law(law), load_runs(runs)
    options = options or FitOptions(loss=loss_of_method(method))
    problem = FitSetup(runs, law, options, group_offsets=group_offsets).problem
    losses_BxN = np.asarray(losses_BxN, float).reshape(-1, len(problem.y))
    grid = start_grid(problem, grid_points, max_starts, seed)
    rows = search_rows(problem, seed, SEARCH_ROWS)
    sub = problem if rows is None else problem.subset(rows)
    # replicates per batch: their starts' losses stay near BATCH_ELEMENTS numbers
    per_batch = max(1, BATCH_ELEMENTS // (len(grid) * len(sub.y)))
    return np.concatenate([np.full(0, np.nan)] + [
        _refit_batch(problem, sub, rows, grid, losses_BxN[a:a + per_batch])
        for a in range(0, len(losses_BxN), per_batch)])


def _refit_batch(problem: Problem, sub: Problem, rows, grid, losses_BxN) -> np.ndarray:
    """:func:`refit_rss` for the replicates ``losses_BxN``: every start of each on ``sub`` (the
    problem or its search subsample, ``rows``), then, on a subsample, each replicate's best
    distinct optima polished on every row; a kink law's kink then held at each row's break
    (:func:`.starts.best_breaks`, as the fit does)."""
    B, S = len(losses_BxN), len(grid)
    sub_losses = losses_BxN if rows is None else losses_BxN[:, rows]
    res = sub.solve(np.tile(grid, (B, 1)), losses_MxN=np.repeat(sub_losses, S, axis=0))
    obj, ok, theta = res.objective.reshape(B, S), converged_starts(res).reshape(B, S), res.theta.reshape(B, S, -1)
    # each replicate's cold starts as the fit's search keeps them: the start of each distinct
    # optimum (best first), then the rest (for the kink's break scan)
    cold = [grid[_cold_picks(obj[b], ok[b])] for b in range(B)]
    if rows is not None:
        polish = [basins_of(obj[b], ok[b])[2][:POLISH_STARTS] if ok[b].any() else [] for b in range(B)]
        owner = np.repeat(np.arange(B), [len(p) for p in polish]).astype(int)
        obj, ok, theta = [np.empty(0)] * B, [np.zeros(0, bool)] * B, [None] * B
        if len(owner):
            starts = np.array([res.theta[b * S + i] for b, p in enumerate(polish) for i in p])
            res = problem.solve(starts, losses_MxN=losses_BxN[owner])
            cuts = np.cumsum([len(p) for p in polish])[:-1]
            obj, ok, theta = (np.split(a, cuts) for a in (res.objective, converged_starts(res), res.theta))
    fitted = [b for b in range(B) if ok[b].any()]
    bests = [tied_optima(obj[b], ok[b])[0] for b in fitted]
    thetas = [theta[b][i] for b, i in zip(fitted, bests)]
    found = best_breaks(problem, thetas, [float(obj[b][i]) for b, i in zip(fitted, bests)],
                        [cold[b] for b in fitted], rows, losses_BxN[fitted])
    thetas = [t if f is None else f[0] for t, f in zip(thetas, found)]
    rss = np.full(B, np.nan)
    for b, theta_b in zip(fitted, thetas):
        resid = losses_BxN[b] - problem.predict(theta_b)
        rss[b] = float(resid @ resid)
    return rss


def _cold_picks(obj_S, ok_S) -> list:
    """The starts' order the fit's search keeps as cold starts: the first start of each distinct
    optimum (best first), then the rest by objective."""
    if not ok_S.any():
        return []
    order, _, first_of_basin = basins_of(obj_S, ok_S)
    return list(dict.fromkeys(first_of_basin + list(order)))


def default_refit(template) -> Callable:
    """Refits like ``template``'s without intervals: its options (objective, weights, fixed
    parameters, parameter count, its ``starts`` and ``grid_points`` where the user set them, else
    ``REFIT_STARTS`` starts on a 3-point grid), its offsets and seed, by the multi-start:
    ``refit(runs, law, losses_BxN) -> rss_B`` (NaN where a refit failed), every replicate in
    one batched solve."""
    offsets = getattr(template, "offset_groups", None) is not None
    options = getattr(template, "options", None)
    starts = REFIT_STARTS if options is None or options.starts is None else options.starts
    grid_points = 3 if options is None or options.grid_points is None else options.grid_points
    # a partial of a module function, not a closure: the tests' refits may run in worker processes
    return functools.partial(refit_rss, method=template.method, group_offsets=offsets, max_starts=starts,
                             seed=SEED if template.seed is None else template.seed, grid_points=grid_points,
                             options=options)
