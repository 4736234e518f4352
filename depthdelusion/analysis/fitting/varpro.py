"""Variable projection: the global search over a law's nonlinear parameters, with the linear
ones solved exactly for each.

Most scaling laws are linear in some of their parameters: Chinchilla's L = E + A·N^−α + B·T^−β
is linear in E, A and B once α and β are fixed. For fixed nonlinear parameters the best linear
ones solve a small non-negative least-squares problem, so the least-squares objective
reduces to a function of the nonlinear parameters alone (Golub & Pereyra 1973; the reduced
functional has the same global minimiser as the full problem). We evaluate it on a grid over
the nonlinear parameters' start ranges — 12 × 12 for Chinchilla's (α, β) — which is a global
search at the cost of a few law evaluations per grid point, then polish the grid's best local
minima on every row with all parameters free (:func:`polish`). For least squares the reduced
objective is the fit's own; for Huber on log-loss residuals it is weighted least squares with
weights 1/L² (a residual (prediction − L)/L ≈ ln prediction − ln L), a start generator whose
polished optima are the Huber fit's.

The non-negative least squares is exact: with at most ``MAX_LINEAR`` linear parameters every
set of them held at 0 is tried and the best feasible unconstrained solution on the rest kept
(the NNLS optimum is the unconstrained optimum on its own support).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from .options import SEED
from .problem import Problem
from .solver import BLOCK_ROWS, FAILED, BatchResult

GRID_POINTS = 144  # reduced-objective evaluations in all (12 per axis with two nonlinear parameters)
MAX_LINEAR = 6  # 2^6 support sets per grid point at most
AUTO_NONLINEAR = 2  # the default search uses variable projection up to this many nonlinear parameters
SEARCH_ROWS = 512  # the grid is evaluated on a seeded subsample of this many rows at most
POLISH = 4  # grid minima polished on every row, at most
COMPETING = 2.0  # ... those whose reduced objective is within this factor of the best
_LINEAR_RTOL = 1e-8


@dataclass
class Split:
    """Free-parameter indices of ``problem`` that enter the law linearly, and the others."""

    linear: list
    nonlinear: list
    nonneg: np.ndarray  # per linear parameter: bounded below by 0 (NNLS), else free

    def describe(self, problem: Problem) -> str:
        lin = ", ".join(problem.names[j] for j in self.linear)
        non = ", ".join(problem.names[j] for j in self.nonlinear)
        how = "NNLS" if self.nonneg.all() else "bounded least squares"
        return f"{lin} solved by {how} for each ({non})" if non else f"{lin} solved by {how}"


def _natural_predict(problem: Problem, nat, x=None) -> np.ndarray:
    x = problem.x if x is None else x
    vals = dict(problem.fixed)
    for j, p in enumerate(problem.free):
        vals[p.name] = nat[:, j:j + 1]
    with np.errstate(all="ignore"):
        return np.asarray(problem.law(x, **vals), float) * np.ones((len(nat), len(x.D)))


def split(problem: Problem, seed: int = SEED) -> Split | None:
    """The linear/nonlinear split of ``problem``'s free parameters, found numerically (the
    law must be affine in the linear ones jointly, at random values of the others), or None
    where variable projection does not apply: group offsets, a law that does not broadcast,
    no linear parameter, more than ``MAX_LINEAR``, or a linear one bounded other than [0, ∞)
    or (−∞, ∞)."""
    if problem.offset_groups is not None or problem.broadcasts is False:
        return None
    cand = [j for j, p in enumerate(problem.free) if tuple(p.bounds) in ((0.0, math.inf), (-math.inf, math.inf))]
    if not cand:
        return None
    rng = np.random.default_rng(seed)
    lo = np.array([math.log(p.init[0]) if p.log else p.init[0] for p in problem.free])
    hi = np.array([math.log(p.init[1]) if p.log else p.init[1] for p in problem.free])
    base = problem.natural(lo + rng.uniform(size=(3, len(lo))) * (hi - lo))
    x = problem.x.take(np.arange(min(len(problem.y), 64)))
    try:
        cand = [j for j in cand if _affine(problem, base, [j], x)]
        while cand and not _affine(problem, base, cand, x):
            cand = cand[:-1]
    except (ValueError, TypeError):
        return None
    if not cand or len(cand) > MAX_LINEAR:
        return None
    nonlinear = [j for j in range(problem.k) if j not in cand]
    return Split(cand, nonlinear, np.array([problem.free[j].bounds[0] == 0 for j in cand]))


def _affine(problem, base, idx, x) -> bool:
    zero = base.copy()
    zero[:, idx] = 0.0
    with np.errstate(all="ignore"):
        f0 = _natural_predict(problem, zero, x)
        phi = []
        for j in idx:
            one = zero.copy()
            one[:, j] = 1.0
            phi.append(_natural_predict(problem, one, x) - f0)
        for scale in (0.5, 3.0):
            v = base[:, idx] * scale
            pt = zero.copy()
            pt[:, idx] = v
            want = f0 + sum(v[:, i:i + 1] * phi[i] for i in range(len(idx)))
            got = _natural_predict(problem, pt, x)
            if not np.all(np.isfinite(got)) or not np.allclose(got, want, rtol=_LINEAR_RTOL,
                                                               atol=_LINEAR_RTOL * np.abs(want).max()):
                return False
    return True


@dataclass
class GridSearch:
    """The reduced objective on the grid: θ of each grid point with its best linear parameters
    (G, k), the reduced objective (G,), and the indices of its local minima, best first."""

    theta: np.ndarray
    objective: np.ndarray
    minima: np.ndarray
    shape: tuple
    describe: str
    #: the linear parameters' design at the best grid point has a null direction (a column no
    #: row depends on, or collinear ones): a ridge of equally good fits, which one polished
    #: start cannot show
    rank_deficient: bool = False
    #: the grid's best point lies on the edge of the grid (a nonlinear parameter at an end of its
    #: start range): the optimum may lie beyond the grid, where its resolution says nothing
    at_edge: bool = False


def grid_search(problem: Problem, sp: Split, points: int = GRID_POINTS) -> GridSearch:
    """The reduced objective ½·Σ wᵢ rᵢ² at every point of a grid over the nonlinear
    parameters' start ranges (log space for scales), the linear ones solved exactly."""
    m = len(sp.nonlinear)
    per = max(3, int(points ** (1 / m) + 1e-9)) if m else 1
    axes = []
    for j in sp.nonlinear:
        p = problem.free[j]
        a, b = (math.log(p.init[0]), math.log(p.init[1])) if p.log else p.init
        axes.append(np.linspace(a, b, per))
    nl = np.array(list(itertools.product(*axes)), float).reshape(-1, m)
    G, L = len(nl), len(sp.linear)
    theta = np.zeros((G, problem.k))
    theta[:, sp.nonlinear] = nl
    nat = problem.natural(theta)
    pts = np.repeat(nat[:, None, :], L + 1, axis=1)
    pts[:, :, sp.linear] = np.vstack([np.zeros(L), np.eye(L)])[None]
    F = _natural_predict(problem, pts.reshape(-1, problem.k)).reshape(G, L + 1, -1)
    f0, phi = F[:, 0], F[:, 1:] - F[:, :1]
    w = 1.0 / problem.y ** 2 if problem.huber else np.ones_like(problem.y)
    coef, rss, gram = _bounded_lsq(phi, problem.y - f0, w, sp.nonneg)
    for i, j in enumerate(sp.linear):
        p = problem.free[j]
        theta[:, j] = np.log(np.maximum(coef[:, i], 1e-6 * p.init[0])) if p.log else coef[:, i]
    obj = 0.5 * rss
    minima = _local_minima(obj.reshape((per,) * m) if m else obj, m)
    what = sp.describe(problem)
    size = " × ".join([str(per)] * m) if m > 1 else f"{per}-point"
    deficient = at_edge = False
    if len(minima) and np.all(np.isfinite(gram[minima[0]])):
        ev = np.linalg.eigvalsh(gram[minima[0]])
        deficient = bool(ev[0] <= 1e-10 * max(ev[-1], 1e-300))
    if len(minima) and m:
        at_edge = any(int(i) in (0, per - 1) for i in np.unravel_index(minima[0], (per,) * m))
    return GridSearch(theta, obj, minima, (per,) * m,
                      f"variable projection ({what}, on a {size} grid over their start ranges"
                      + (", weights 1/L² as a start for the Huber fit" if problem.huber else "") + ")",
                      deficient, at_edge)


def _bounded_lsq(phi, t, w, nonneg):
    """Per grid point g, argmin over c of Σ wᵢ (tᵍᵢ − Σⱼ cⱼ φᵍⱼᵢ)² with cⱼ ≥ 0 where ``nonneg``:
    every support set tried (exact for ≤ ``MAX_LINEAR`` coefficients), each by a batched QR of
    the weighted, column-scaled design (not the normal equations, whose residual sum would
    cancel digits when the fit is good relative to the losses' size). Returns (c (G, L), rss
    (G,), the column-scaled Gram matrices (G, L, L))."""
    G, L, _ = phi.shape
    sw = np.sqrt(w)
    with np.errstate(all="ignore"):
        X = np.transpose(phi, (0, 2, 1)) * sw[None, :, None]  # (G, n, L)
        scale = np.linalg.norm(X, axis=1)
        scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
        X = X / scale[:, None, :]
        y = t * sw
    ok_g = np.all(np.isfinite(X), axis=(1, 2)) & np.all(np.isfinite(y), axis=1)
    X = np.where(ok_g[:, None, None], X, 0.0)
    y = np.where(ok_g[:, None], y, 0.0)
    best_rss, best_c = np.einsum("gn,gn->g", y, y), np.zeros((G, L))
    holdable = np.flatnonzero(nonneg)
    for held in itertools.chain.from_iterable(itertools.combinations(holdable, r) for r in range(len(holdable) + 1)):
        free = np.setdiff1d(np.arange(L), held)
        if not len(free):
            continue
        c = _lstsq(X[:, :, free], y)
        with np.errstate(all="ignore"):
            r = y - np.einsum("gnl,gl->gn", X[:, :, free], c)
            rss = np.einsum("gn,gn->g", r, r)
        feasible = np.all((c >= 0) | ~nonneg[free], axis=1) & np.isfinite(rss) & (rss < best_rss)
        full = np.zeros((G, L))
        full[:, free] = c
        best_rss[feasible] = rss[feasible]
        best_c[feasible] = full[feasible]
    gram = np.einsum("gnl,gnm->glm", X, X)
    best_rss = np.where(ok_g, best_rss, np.inf)
    return best_c / scale, best_rss, gram


def _lstsq(X, y):
    """Batched least squares by reduced QR; a rank-deficient design by the pseudo-inverse."""
    Q, R = np.linalg.qr(X)
    rhs = np.einsum("gnl,gn->gl", Q, y)
    d = np.abs(np.einsum("gll->gl", R))
    if np.all(d > 1e-10 * np.maximum(d.max(axis=1, keepdims=True), 1e-300)):
        return np.linalg.solve(R, rhs[:, :, None])[:, :, 0]
    return np.einsum("glm,gm->gl", np.linalg.pinv(R, rcond=1e-10), rhs)


def _local_minima(obj, m) -> np.ndarray:
    """Flat indices of the grid points no higher than any axis neighbour, best first."""
    flat = obj.reshape(-1)
    is_min = np.isfinite(obj)
    for ax in range(m):
        for shift in (1, -1):
            nb = np.roll(obj, shift, axis=ax)
            edge = [slice(None)] * m
            edge[ax] = 0 if shift == 1 else -1
            nb[tuple(edge)] = np.inf
            is_min &= obj <= nb
    idx = np.flatnonzero(is_min.reshape(-1))
    if not len(idx):
        idx = np.array([int(np.nanargmin(np.where(np.isfinite(flat), flat, np.nan)))]) if np.isfinite(flat).any() else idx
    return idx[np.argsort(flat[idx], kind="stable")]


def polish_candidates(search: GridSearch) -> np.ndarray:
    """Grid indices to polish: local minima within ``COMPETING`` times the best, at most
    ``POLISH``, the best always."""
    if not len(search.minima):
        return search.minima
    best = search.objective[search.minima[0]]
    keep = [i for i in search.minima if search.objective[i] <= COMPETING * max(best, 1e-300)]
    return np.array(keep[:POLISH], int)


def polish(problem: Problem, starts) -> BatchResult:
    """Each start refined on every row with every parameter free: scipy's trust-region
    reflective least squares (the solver lmfit calls; Huber loss where the fit is Huber),
    which converges in few iterations, then the bounded LM of :mod:`.solver` from there, so
    that the objective and the convergence status are the solver's own (it only moves
    downhill). The asymmetric loss, which scipy does not offer, goes to the LM directly."""
    starts = np.atleast_2d(np.asarray(starts, float))
    if problem.overestimate_weight is None:
        starts = np.array([_trf(problem, s) for s in starts])
    return problem.solve(starts)


def _trf(problem: Problem, start):
    width = np.where(np.isfinite(problem.hi - problem.lo), problem.hi - problem.lo, 1.0)
    x0 = np.clip(start, problem.lo + 1e-10 * width, problem.hi - 1e-10 * width)
    loss, scale = ("huber", problem.huber) if problem.huber else ("linear", 1.0)

    def fun(t):
        r = problem.residuals(t[None])[0]
        return np.where(np.isfinite(r), r, 1e10)

    def jac(t):  # forward differences, every column in one batched law evaluation
        h = 1.5e-8 * np.maximum(1.0, np.abs(t))
        h = np.where(t + h > problem.hi, -h, h)
        pts = np.vstack([t, t + np.diag(h)])
        with np.errstate(all="ignore"):
            if len(problem.y) > BLOCK_ROWS:  # one point at a time: the same numbers, less memory
                r0 = problem.residuals(pts[:1])[0]
                J = np.stack([(problem.residuals(p[None])[0] - r0) / hj for p, hj in zip(pts[1:], h)]).T
            else:
                r = problem.residuals(pts)
                J = ((r[1:] - r[0]) / h[:, None]).T
        return np.where(np.isfinite(J), J, 0.0)
    try:
        out = optimize.least_squares(fun, x0, jac=jac, bounds=(problem.lo, problem.hi), method="trf",
                                     loss=loss, f_scale=scale, ftol=1e-12, xtol=1e-12, gtol=1e-12)
    except (ValueError, np.linalg.LinAlgError):
        return start
    return out.x if np.all(np.isfinite(out.x)) else start


def failed(res: BatchResult) -> np.ndarray:
    return (res.status == FAILED) | ~np.isfinite(res.objective)
