"""The fit that judges outliers: one the outliers cannot pull.

A least-squares (or asymmetric) fit bends toward wild rows, so its residuals blame clean rows
too. Outliers are judged instead from a Huber M-estimate of the same law on the same residual
scale (loss, nats): threshold δ = 1.345·σ̂, σ̂ = 1.4826·MAD of its residuals (Huber's choice,
95% efficient under Gaussian noise, each wild row's pull bounded by δ), the fit and σ̂
alternated to a fixed point. A Huber fit (``--loss huber``) is its own robust reference.
"""
from __future__ import annotations

import math

import numpy as np

from .problem import Problem

#: δ / σ̂ of the Huber reference: 95% asymptotic efficiency when the noise is Gaussian.
HUBER_K = 1.345
#: MAD → σ for Gaussian noise.
MAD_TO_SIGMA = 1.4826
#: Rounds of (solve with δ, re-estimate σ̂) at most; 2–4 reach the fixed point in practice.
ROUNDS = 8
#: σ̂ stable to this relative change ends the rounds.
SCALE_TOL = 1e-3
#: Cold starts besides the fit's optimum in the first round (a second chance, should the
#: outliers have held the fit in another basin), on tables up to COLD_START_ROWS rows: beyond,
#: the warm start alone (on 300,000 rows the cold start costs 0.6 s of CPU, the warm one 0.4 s).
COLD_STARTS = 1
COLD_START_ROWS = 20_000


def mad_scale(e) -> float:
    """1.4826·MAD about the median of the finite values of ``e`` (nan when there are none)."""
    ok = np.asarray(e, float)
    ok = ok[np.isfinite(ok)]
    if not len(ok):
        return math.nan
    return MAD_TO_SIGMA * float(np.median(np.abs(ok - np.median(ok))))


def robust_residuals(problem: Problem, theta, cold_starts=None) -> tuple[np.ndarray, str]:
    """(observed − fitted on the working scale at the robust reference, what that reference
    is). Falls back to the fit's own residuals, and says so, where no Huber threshold can be
    scaled (residuals without spread) or the robust solve fails."""
    theta = np.asarray(theta, float)
    own = -problem.residuals(theta[None])[0]
    if problem.huber:
        return own, "the Huber fit itself"
    twin = problem
    if problem.overestimate_weight is not None:  # the reference is central, not an expectile
        twin = Problem(problem.law, problem.fixed, problem.x, problem.y, "lm",
                       problem.offset_groups, problem.gidx)
        twin.broadcasts = problem.broadcasts
    sigma = mad_scale(own)
    if not (np.isfinite(sigma) and sigma > 0):
        return own, "the fit itself (its residuals have no spread to scale a Huber threshold)"
    starts = [theta[None]]
    if cold_starts is not None and len(cold_starts) and len(problem.y) <= COLD_START_ROWS:
        starts.append(np.asarray(cold_starts, float)[:COLD_STARTS])
    starts = np.vstack(starts)
    best = None
    for _ in range(ROUNDS):
        res = twin.solve(starts, huber_threshold=HUBER_K * sigma)
        obj = np.where(np.isfinite(res.objective), res.objective, np.inf)
        if not np.isfinite(obj.min()):
            break
        best = res.theta[int(np.argmin(obj))]
        e = -twin.residuals(best[None])[0]
        new = mad_scale(e)
        if not (np.isfinite(new) and new > 0):
            break
        done = abs(new / sigma - 1) < SCALE_TOL
        sigma, starts = new, best[None]
        if done:
            break
    if best is None:
        return own, "the fit itself (the robust refit failed)"
    e = -twin.residuals(best[None])[0]
    return e, f"a Huber refit (δ = {HUBER_K}·σ̂ = {HUBER_K * sigma:.3g}) that outlying rows cannot pull"
