"""Model shape from a fitted law: critical depth, compute-optimal shape, audit of published LLMs.

The optimum is found numerically, never from the paper's bookkeeping: for each budget the
fitted law is evaluated on a grid of integer depths D = 1..depth_max and log-spaced widths,
with a parabolic refinement in ln W around each depth's best width. Parameters are counted as
N(D, W) = 12·D·W² + 2·V·W (non-embedding blocks plus untied input embedding and LM head,
V = 50,257), tokens as T = C / (6·N).

A law whose depth penalty vanishes below D_crit has a *plateau* of optimal shapes: every
D ≤ D_crit(W) with the same N gives the same loss. We report the plateau's depth range and
take the deepest unpenalised shape as "the" optimum (the paper's D* = D_crit reading).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .fitting import FitResult
from .reference import ModelShapes, load_reference

VOCAB = 50257
#: Chinchilla's data term (Hoffmann et al. 2022, Approach 3): B = 410.7, β = 0.28. Used when the
#: fitted law has no token term of its own, which is the case for the paper's data.
CHINCHILLA_TOKEN_TERM = (410.7, 0.28)
PLATEAU_TOL = 1e-5  # nats: shapes within this of the minimum count as equally optimal


def params_of_shape(depth, width, vocab: int = VOCAB):
    """N = 12·D·W² + 2·V·W (the convention the shape search uses)."""
    D, W = np.asarray(depth, float), np.asarray(width, float)
    return 12.0 * D * W ** 2 + 2.0 * vocab * W


def critical_depth(fit_or_params, width) -> np.ndarray:
    """D_crit(W) in layers: κ·ln W, or c·W^p for the power-law variant."""
    p = fit_or_params.all_params if isinstance(fit_or_params, FitResult) else dict(fit_or_params)
    W = np.asarray(width, float)
    if "kappa" in p:
        return p["kappa"] * np.log(W)
    if "c" in p and "p" in p:
        return p["c"] * W ** p["p"]
    raise ValueError(f"this law has no critical depth (parameters: {sorted(p)}); fit "
                     "'depth_delusion', 'depth_delusion_relative' or 'depth_delusion_power'")


@dataclass
class ShapeOptimum:
    budget: float           # C in FLOPs, or N in parameters for the fixed-N search
    depth: float            # the deepest depth on the optimal plateau (layers)
    width: float            # its optimal width
    depth_min: float        # shallowest depth on the plateau
    params: float
    tokens: float
    loss: float             # nats


@dataclass
class OptimalShape:
    """Optimal (D, W) per budget and the fitted exponents D* ∝ budget^a, W* ∝ budget^b."""

    constraint: str  # "compute" (C = 6NT, FLOPs) or "params" (N fixed)
    law: str
    rows: list
    depth_exponent: float
    width_exponent: float
    depth_exponent_ci: tuple | None = None
    width_exponent_ci: tuple | None = None
    n_bootstrap: int = 0
    assumptions: list = field(default_factory=list)

    @property
    def determined(self) -> bool:
        return np.isfinite(self.depth_exponent)

    def summary(self) -> str:
        unit = "C (FLOPs)" if self.constraint == "compute" else "N (params)"
        lines = [f"Optimal shape of {self.law!r} at fixed {unit}:",
                 f"{unit:>12} {'D*':>6} {'D range':>10} {'W*':>8} {'N':>10} {'T':>10} {'loss':>7}"]
        for r in self.rows:
            lines.append(f"{r.budget:>12.3g} {r.depth:>6.0f} {f'{r.depth_min:.0f}–{r.depth:.0f}':>10} "
                         f"{r.width:>8.0f} {r.params:>10.3g} {r.tokens:>10.3g} {r.loss:>7.4f}")
        lines.append(f"D* ∝ budget^{_exp(self.depth_exponent, self.depth_exponent_ci)}, "
                     f"W* ∝ budget^{_exp(self.width_exponent, self.width_exponent_ci)}"
                     + (f" (bootstrap over {self.n_bootstrap} parameter draws)" if self.n_bootstrap else ""))
        lines += [f"  - {a}" for a in self.assumptions]
        return "\n".join(lines)


def _exp(v, ci) -> str:
    if not np.isfinite(v):
        return "undetermined"
    return f"{v:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _loss_grid(law, values, D, W, budget, constraint, token_term):
    """Loss on a (budgets, depths, widths) grid; also N and T."""
    N = params_of_shape(D, W)
    if constraint == "compute":
        T = budget / (6.0 * N)
    else:
        T = np.full(np.broadcast(budget, N).shape, np.nan)
    from .laws import LawInputs

    x = LawInputs(*np.broadcast_arrays(D * 1.0, W * 1.0, N, T))
    with np.errstate(all="ignore"):
        loss = np.asarray(law(x, **values), float) * np.ones(x.D.shape)
        if token_term is not None and constraint == "compute":
            loss = loss + token_term[0] * T ** -token_term[1]
    return loss, N, T


def _optimise(law, values, budgets, constraint, token_term, depth_max, widths):
    budgets = np.asarray(budgets, float)
    D = np.arange(1, depth_max + 1, dtype=float)
    if constraint == "compute":
        Wg = widths[None, None, :]
        loss, N, T = _loss_grid(law, values, D[None, :, None], Wg, budgets[:, None, None],
                                constraint, token_term)
        j = np.nanargmin(np.where(np.isfinite(loss), loss, np.inf), axis=2)  # best width per depth
        lw = np.log(widths)
        jc = np.clip(j, 1, len(widths) - 2)
        take = lambda a, jj: np.take_along_axis(a, jj[..., None], axis=2)[..., 0]  # noqa: E731
        y0, y1, y2 = take(loss, jc - 1), take(loss, jc), take(loss, jc + 1)
        h = lw[1] - lw[0]
        denom = y0 - 2 * y1 + y2
        with np.errstate(all="ignore"):
            shift = np.where(denom > 0, 0.5 * h * (y0 - y2) / denom, 0.0)
        shift = np.clip(shift, -h, h)
        w_refined = np.exp(lw[jc] + shift)
        refined, _, _ = _loss_grid(law, values, D[None, :], w_refined, budgets[:, None],
                                   constraint, token_term)
        # Keep the refinement only where it improves on the grid point.
        w_best = np.where(refined <= take(loss, j), w_refined, widths[j])
        loss_d, N_d, T_d = _loss_grid(law, values, D[None, :], w_best, budgets[:, None],
                                      constraint, token_term)
    else:
        # Fixed N: the width is set by the depth (positive root of 12·D·W² + 2VW = N).
        Nb = budgets[:, None]
        w_best = (-2 * VOCAB + np.sqrt(4.0 * VOCAB ** 2 + 48.0 * D[None, :] * Nb)) / (24.0 * D[None, :])
        loss_d, N_d, T_d = _loss_grid(law, values, D[None, :], w_best, Nb, constraint, None)
    rows = []
    for i, budget in enumerate(budgets):
        ld = np.where(np.isfinite(loss_d[i]), loss_d[i], np.inf)
        best = float(ld.min())
        plateau = np.flatnonzero(ld <= best + PLATEAU_TOL)
        k = plateau.max()
        rows.append(ShapeOptimum(float(budget), float(D[k]), float(w_best[i, k]),
                                 float(D[plateau.min()]), float(N_d[i, k]), float(T_d[i, k]), best))
    return rows


def _shape_free(law, values, depth_max) -> bool:
    """True when, at fixed N, every depth is equally good (the law ignores shape)."""
    rows = _optimise(law, values, np.geomspace(1e7, 1e13, 7), "params", None, depth_max, None)
    return all(r.depth_min == 1 and r.depth == depth_max for r in rows)


def _slope(budgets, values) -> float:
    values = np.asarray(values, float)
    if np.ptp(np.log(values)) == 0 and np.all(values > 0):
        return 0.0
    return float(np.polyfit(np.log(budgets), np.log(values), 1)[0])


def optimal_shape(fit: FitResult, budgets=None, *, constraint: str = "compute",
                  token_term=None, depth_max: int = 200, bootstrap: int = 200,
                  width_range=(64.0, 131072.0), width_points: int = 240) -> OptimalShape:
    """Minimise the fitted law over (D, W) at each budget: compute C = 6·N·T in FLOPs
    (``constraint="compute"``) or parameters N (``constraint="params"``).

    ``token_term=(B, β)`` adds B·T^−β when the fitted law has no token term of its own
    (default: Chinchilla's); ``bootstrap`` re-solves with that many of the fit's bootstrap
    parameter draws to give intervals on the exponents.
    """
    if constraint not in ("compute", "params"):
        raise ValueError(f"constraint must be 'compute' or 'params', got {constraint!r}")
    if budgets is None:
        budgets = np.geomspace(1e19, 1e25, 13) if constraint == "compute" else np.geomspace(1e8, 1e12, 9)
    budgets = np.asarray(budgets, float)
    if len(budgets) < 2 or np.any(budgets <= 0):
        raise ValueError("budgets must be at least two positive numbers")
    law, values = fit.law, fit.all_params
    assumptions = [f"N = 12·D·W² + 2·V·W (V = {VOCAB}); D integer 1..{depth_max}; W continuous "
                   f"in [{width_range[0]:g}, {width_range[1]:g}]",
                   f"plateau: shapes within {PLATEAU_TOL:g} nats of the minimum are equally optimal; "
                   "D* is the deepest of them (at large budgets the plateau's shallow end is cut "
                   "by the width limit)"]
    has_own_tokens = "B" in fit.params or fit.law.needs_tokens
    if constraint == "compute":
        assumptions.insert(0, "T = C / (6·N) tokens")
        if not has_own_tokens:
            token_term = tuple(token_term or CHINCHILLA_TOKEN_TERM)
            assumptions.append(f"the fitted law has no token term, so B·T^−β with B = {token_term[0]:g}, "
                               f"β = {token_term[1]:g} is added (assumed, not fitted; "
                               "default: Hoffmann et al. 2022)")
        else:
            token_term = None
    widths = np.geomspace(*width_range, width_points)
    rows = _optimise(law, values, budgets, constraint, token_term, depth_max, widths)
    if _shape_free(law, values, depth_max):
        assumptions.append("the law does not depend on shape here (every depth is optimal): "
                           "no optimal shape exists")
        return OptimalShape(constraint, law.name, rows, math.nan, math.nan, assumptions=assumptions)
    if any(r.depth == depth_max for r in rows):
        assumptions.append(f"D* reached the search limit {depth_max} for some budgets")
    a = _slope(budgets, [r.depth for r in rows])
    b = _slope(budgets, [r.width for r in rows])
    result = OptimalShape(constraint, law.name, rows, a, b, assumptions=assumptions)
    draws = fit.bootstrap_params[:bootstrap] if (bootstrap and fit.bootstrap_params is not None) else []
    if len(draws):
        exps = []
        for draw in draws:
            vals = {**fit.fixed, **dict(zip(fit.param_names, draw))}
            r = _optimise(law, vals, budgets, constraint, token_term, depth_max, widths)
            exps.append((_slope(budgets, [x.depth for x in r]), _slope(budgets, [x.width for x in r])))
        exps = np.array(exps)
        result.depth_exponent_ci = tuple(np.percentile(exps[:, 0], [2.5, 97.5]).tolist())
        result.width_exponent_ci = tuple(np.percentile(exps[:, 1], [2.5, 97.5]).tolist())
        result.n_bootstrap = len(draws)
    return result


@dataclass
class ShapeAudit:
    """D / D_crit(W) for published models, from a fit and from the paper's κ = 2.43."""

    model: list
    depth: np.ndarray
    width: np.ndarray
    d_crit: np.ndarray
    ratio: np.ndarray
    d_crit_paper: np.ndarray
    ratio_paper: np.ndarray

    def summary(self) -> str:
        lines = [f"{'model':<26} {'D':>4} {'W':>6} {'D_crit':>7} {'D/D_crit':>8} "
                 f"{'D_crit(κ=2.43)':>15} {'D/D_crit':>8}"]
        for i, m in enumerate(self.model):
            lines.append(f"{m:<26} {self.depth[i]:>4d} {self.width[i]:>6d} {self.d_crit[i]:>7.1f} "
                         f"{self.ratio[i]:>8.2f} {self.d_crit_paper[i]:>15.1f} {self.ratio_paper[i]:>8.2f}")
        return "\n".join(lines)


PAPER_KAPPA = 2.43


def audit_shapes(fit_or_params, shapes: ModelShapes | None = None) -> ShapeAudit:
    """For every model in ``shapes`` (default: the bundled LLM shapes): D, W, D_crit(W), D/D_crit."""
    shapes = shapes or load_reference("llm_shapes")
    d_crit = critical_depth(fit_or_params, shapes.width)
    paper = PAPER_KAPPA * np.log(shapes.width.astype(float))
    return ShapeAudit(list(shapes.model), shapes.depth, shapes.width, d_crit,
                      shapes.depth / d_crit, paper, shapes.depth / paper)
