"""Learning-rate grids of the studies that tune an lr per shape (depth confound, depth vs size):
the rule that extends a grid by 2x beyond an edge best until the best is interior, the quadratic
fit in ln lr around the best point, and the grid lr a study reports (the one nearest the fitted
optimum). Pure functions of (lr, loss) pairs; the studies own their run names.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np
from scipy import stats


def extend_lr_grid(initial: list[float], bounds: tuple[float, float],
                   loss_of: Callable[[float], float | None]) -> tuple[list[float], bool]:
    """The lrs of one shape's grid: `initial`, extended by a factor 2 beyond whichever edge holds
    the best loss, until the best is interior or `bounds` are reached. `loss_of(lr)` is the
    finished run's loss (inf: diverged) or None. Returns (lrs, settled): settled once every lr
    of the grid has a result and no extension is due."""
    lrs = sorted(initial)
    low, high = bounds
    while True:
        got = [loss_of(lr) for lr in lrs]
        if any(y is None for y in got):
            return lrs, False
        best = min(range(len(lrs)), key=lambda i: got[i])
        if best == 0 and lrs[0] / 2 >= low * (1 - 1e-9):
            lrs.insert(0, lrs[0] / 2)
        elif best == len(lrs) - 1 and lrs[-1] * 2 <= high * (1 + 1e-9):
            lrs.append(lrs[-1] * 2)
        else:
            return lrs, True


def grid_optimum(curve: list[tuple[float, float]]) -> float:
    """The grid lr a tuned shape reports: the grid point nearest (in ln lr) to the quadratic
    fit's optimum, or the grid's best where the fit has no minimum."""
    fit = fit_lr_curve(curve)
    target = fit.log_lr if fit.identified else math.log(min(curve, key=lambda c: c[1])[0])
    return min((lr for lr, _ in curve), key=lambda lr: abs(math.log(lr) - target))


ASYMMETRY = 4.0  # a neighbour rising this many times more than the other: the parabola is flagged


class LrFit(NamedTuple):
    """Quadratic fit of the loss in x = ln lr over the points around the grid's best."""

    identified: bool  # a minimum exists (positive curvature) and lies within the fitted points
    log_lr: float  # ln lr at the vertex (the grid's best where not identified)
    log_lr_ci: tuple[float, float]
    loss: float  # the fitted loss at the vertex (the grid's best where not identified)
    loss_ci: tuple[float, float]
    points: int
    note: str


def fit_lr_curve(curve: list[tuple[float, float]], sigma: float | None = None, dof: int | None = None) -> LrFit:
    """Fit loss = c + b x + a x^2 (x = ln lr) through the grid's best point and its neighbour on
    each side (finite losses only): a wider window lets the steep side of an asymmetric curve
    (divergence just above the optimum) drag the vertex away from the best lr. 95% intervals on
    the vertex x* = -b/2a (Fieller's) and the loss there (delta method), with t quantiles and the
    noise sigma from seed replicates (`sigma`, `dof`); without replicates there is no interval."""
    pts = sorted((math.log(lr), y) for lr, y in curve if math.isfinite(y))
    if not pts:
        return LrFit(False, math.nan, (math.nan, math.nan), math.nan, (math.nan, math.nan), 0, "no finite loss")
    best = min(range(len(pts)), key=lambda i: pts[i][1])
    window = pts[max(0, best - 1): best + 2]
    x_best, y_best = pts[best]
    if len(window) < 3 or best in (0, len(pts) - 1):
        note = "best lr at the grid's edge: a bound" if best in (0, len(pts) - 1) else "fewer than 3 points"
        return LrFit(False, x_best, (math.nan, math.nan), y_best, (math.nan, math.nan), len(window), note)
    x = np.array([p[0] for p in window])
    y = np.array([p[1] for p in window])
    xc = x - x_best  # centred for conditioning
    X = np.stack([np.ones_like(xc), xc, xc ** 2], axis=1)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    c, b, a = coef
    if not a > 0:
        return LrFit(False, x_best, (math.nan, math.nan), y_best, (math.nan, math.nan), len(window),
                     "no positive curvature")
    v = -b / (2 * a)
    if not (xc.min() <= v <= xc.max()):
        return LrFit(False, x_best, (math.nan, math.nan), y_best, (math.nan, math.nan), len(window),
                     "vertex outside the fitted points")
    if sigma is None:
        sigma, dof = math.nan, None
    cov = sigma ** 2 * np.linalg.inv(X.T @ X)
    t = float(stats.t.ppf(0.975, dof)) if dof and dof > 0 else math.nan
    v_ci = _fieller_vertex(a, b, cov, t)
    # the loss at the vertex f = c - b^2/4a: delta method, gradient w.r.t. (c, b, a)
    gf = np.array([1.0, -b / (2 * a), b * b / (4 * a * a)])
    sf = math.sqrt(gf @ cov @ gf)
    f = c - b * b / (4 * a)
    rise = sorted([y[0] - y_best, y[2] - y_best])
    note = ""
    if rise[0] > 0 and rise[1] > ASYMMETRY * rise[0]:
        # one neighbour near divergence: a parabola cannot follow both sides, its vertex and the
        # loss there are pulled by the steep one (the loss at the vertex can fall below every
        # observed loss); what the grid shows for sure is the bracket between the neighbours
        note = (f"asymmetric: one side rises {rise[1] / rise[0]:.0f}× more (near divergence), so "
                f"the parabola is a poor model here; lr* lies between {math.exp(x[0]):.3g} and "
                f"{math.exp(x[2]):.3g}, and a finer grid would locate it")
    return LrFit(True, x_best + v, (x_best + v_ci[0], x_best + v_ci[1]), f, (f - t * sf, f + t * sf),
                 len(window), note)


def _fieller_vertex(a: float, b: float, cov, t: float) -> tuple[float, float]:
    """Fieller's interval for the vertex v = -b/2a: the v with (b + 2av)^2 <= t^2 Var(b + 2av),
    exact for normal noise of known variance (the delta method under-covers a ratio). Unbounded
    (-inf, inf) when the curvature is not distinguishable from 0."""
    if not math.isfinite(t) or not all(math.isfinite(x) for x in cov.ravel()):
        return (math.nan, math.nan)
    vbb, vab, vaa = cov[1, 1], cov[1, 2], cov[2, 2]
    qa = 4 * (a * a - t * t * vaa)
    qb = 4 * (a * b - t * t * vab)
    qc = b * b - t * t * vbb
    disc = qb * qb - 4 * qa * qc
    if qa <= 0 or disc < 0:
        return (-math.inf, math.inf)
    root = math.sqrt(disc)
    return ((-qb - root) / (2 * qa), (-qb + root) / (2 * qa))
