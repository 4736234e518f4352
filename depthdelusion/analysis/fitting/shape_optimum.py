"""The compute-optimal shape and the band of a pooled shape law at a budget C (issue 58).

At C FLOPs a shape (D, W) trains T = C / (6·N_total(D, W)) tokens; the law of one suite (the
scale the answer is given on) predicts its loss. The optimum is found on a log grid of depth ×
width and refined by a local quadratic in (ln D, ln W); the band is every grid shape whose loss
is within a relative tolerance of the best, summarised by its depth, width and D/W ranges.
N(D, W) is the suite's own count, recovered from its rows (:func:`suite_counts`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..table.shape_suites import Suite
from .shape_pool import PooledFit

#: The search grid: depths 1–1024 layers, widths 32–262,144, log-spaced (ln step ≈ 0.025 in
#: depth, 0.032 in width: the band's edges are read to that resolution).
DEPTHS = np.geomspace(1.0, 1024.0, 281)
WIDTHS = np.geomspace(32.0, 262144.0, 281)
#: The numbers of one answer, in the order of :meth:`ShapePoint.vector`.
FIELDS = ("depth", "width", "params", "params_nonemb", "tokens", "loss",
          "band_depth_low", "band_depth_high", "band_width_low", "band_width_high",
          "band_aspect_low", "band_aspect_high")


@dataclass(frozen=True)
class SuiteCounts:
    """N_nonemb(D, W) = D·(per_layer_w2·W² + per_layer_w1·W) + base_w·W and N_emb(W) =
    emb_per_width·W, as recovered from a suite's rows; ``formula`` says so in words."""

    per_layer_w2: float
    per_layer_w1: float
    base_w: float
    emb_per_width: float
    formula: str

    def nonemb(self, D, W):
        return D * (self.per_layer_w2 * W ** 2 + self.per_layer_w1 * W) + self.base_w * W

    def emb(self, W):
        return self.emb_per_width * np.asarray(W, float)

    def total(self, D, W):
        return self.nonemb(D, W) + self.emb(W)


def suite_counts(suite: Suite) -> SuiteCounts:
    """The suite's N(D, W), least squares over its distinct shapes (needs 3 with depth and width
    both varying; otherwise 12·D·W², said in the formula)."""
    shapes = {(d, w): (ne, e) for d, w, ne, e in zip(suite.depth, suite.width, suite.params_nonemb,
                                                      suite.params_emb)}
    D, W = (np.array([k[i] for k in shapes]) for i in (0, 1))
    nonemb = np.array([v[0] for v in shapes.values()])
    emb_per_width = float(np.median(suite.params_emb / suite.width))
    if len(shapes) >= 3 and np.ptp(D) > 0 and np.ptp(W) > 0:
        X = np.stack([D * W ** 2, D * W, W], axis=1)
        p2, p1, p0 = np.linalg.lstsq(X / nonemb[:, None], np.ones(len(D)), rcond=None)[0]
        worst = float(np.max(np.abs(X @ [p2, p1, p0] / nonemb - 1)))
        return SuiteCounts(p2, p1, p0, emb_per_width,
                           f"{suite.name}: N_nonemb = D·({p2:.4g}·W² {_signed(p1)}·W) {_signed(p0)}·W, "
                           f"N_emb = {emb_per_width:.5g}·W (least squares over its {len(shapes)} "
                           f"shapes, worst relative miss {worst:.1e})")
    return SuiteCounts(12.0, 0.0, 0.0, emb_per_width, f"{suite.name}: N_nonemb = 12·D·W² (too few "
                       f"shapes to recover its own count), N_emb = {emb_per_width:.5g}·W")


@dataclass(frozen=True)
class ShapePoint:
    """The answer at one budget: the optimum (depth, width, params = N_total, params_nonemb,
    tokens, loss in nats on the reference suite's scale) and the band's (low, high) edges in
    depth, width and aspect D/W; ``at_limit`` names what sits on the search grid's edge."""

    compute: float
    depth: float
    width: float
    params: float
    params_nonemb: float
    tokens: float
    loss: float
    band_depth: tuple
    band_width: tuple
    band_aspect: tuple
    at_limit: tuple

    def vector(self) -> np.ndarray:
        return np.array([self.depth, self.width, self.params, self.params_nonemb, self.tokens,
                         self.loss, *self.band_depth, *self.band_width, *self.band_aspect])


def loss_surface(fit: PooledFit, s: int, counts: SuiteCounts, compute: float,
                 depths=DEPTHS, widths=WIDTHS) -> np.ndarray:
    """Predicted loss (len(depths), len(widths)) of suite ``s`` at ``compute`` FLOPs."""
    D, W = depths[:, None], widths[None, :]
    tokens = compute / (6.0 * counts.total(D, W))
    loss = fit.suite_loss(s, D, W, counts.nonemb(D, W), counts.emb(W), tokens)
    return np.where(np.isfinite(loss) & (counts.nonemb(D, W) > 0), loss, np.inf)


def shape_point(fit: PooledFit, s: int, counts: SuiteCounts, compute: float,
                tolerance: float) -> ShapePoint:
    """The optimum and band of suite ``s``'s law at ``compute`` FLOPs (see the module)."""
    surface = loss_surface(fit, s, counts, compute)
    i, j = np.unravel_index(np.argmin(surface), surface.shape)
    best = float(surface[i, j])
    ln_d, ln_w = _refine(surface, i, j)
    D, W = float(np.exp(ln_d)), float(np.exp(ln_w))
    loss = float(loss_surface(fit, s, counts, compute, np.array([D]), np.array([W]))[0, 0])
    if not np.isfinite(loss) or loss > best:  # the quadratic left the bowl: keep the grid point
        D, W, loss = float(DEPTHS[i]), float(WIDTHS[j]), best
    band = surface <= loss * (1.0 + tolerance) if loss > 0 else surface <= loss * (1.0 - tolerance)
    rows, cols = np.nonzero(band)
    aspect = DEPTHS[rows] / WIDTHS[cols]
    last_d, last_w = len(DEPTHS) - 1, len(WIDTHS) - 1
    at_limit = tuple(name for name, hit in (
        ("optimum", i in (0, last_d) or j in (0, last_w)),
        ("band depth", rows.min() == 0 or rows.max() == last_d),
        ("band width", cols.min() == 0 or cols.max() == last_w)) if hit)
    total = float(counts.total(D, W))
    return ShapePoint(compute, D, W, total, float(counts.nonemb(D, W)), compute / (6 * total), loss,
                      (float(DEPTHS[rows.min()]), float(DEPTHS[rows.max()])),
                      (float(WIDTHS[cols.min()]), float(WIDTHS[cols.max()])),
                      (float(aspect.min()), float(aspect.max())), at_limit)


def _refine(surface, i: int, j: int) -> tuple[float, float]:
    """(ln D, ln W) of the vertex of a quadratic through the 3 × 3 grid points around (i, j)
    (the grid point itself at an edge or where the quadratic has no minimum)."""
    ln_d, ln_w = np.log(DEPTHS), np.log(WIDTHS)
    if not (0 < i < len(DEPTHS) - 1 and 0 < j < len(WIDTHS) - 1):
        return float(ln_d[i]), float(ln_w[j])
    patch = surface[i - 1:i + 2, j - 1:j + 2]
    if not np.all(np.isfinite(patch)):
        return float(ln_d[i]), float(ln_w[j])
    x, y = np.meshgrid(ln_d[i - 1:i + 2] - ln_d[i], ln_w[j - 1:j + 2] - ln_w[j], indexing="ij")
    X = np.stack([np.ones(9), x.ravel(), y.ravel(), x.ravel() ** 2, x.ravel() * y.ravel(), y.ravel() ** 2], 1)
    c = np.linalg.lstsq(X, patch.ravel(), rcond=None)[0]
    H = np.array([[2 * c[3], c[4]], [c[4], 2 * c[5]]])
    if np.linalg.det(H) <= 0 or H[0, 0] <= 0:
        return float(ln_d[i]), float(ln_w[j])
    grid_step = np.array([ln_d[1] - ln_d[0], ln_w[1] - ln_w[0]])
    step = np.clip(np.linalg.solve(H, -c[1:3]), -grid_step, grid_step)
    return float(ln_d[i] + step[0]), float(ln_w[j] + step[1])


def _signed(v: float) -> str:
    """"+ 3.2" or "− 14.54": a term's sign as an operator (never "+ -14.54")."""
    return f"{'−' if v < 0 else '+'} {abs(v):.4g}"
