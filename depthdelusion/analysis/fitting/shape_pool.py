"""The pooled shape laws of ``depthdelusion shape`` (issue 58): suites (tables whose losses are
not comparable: other data, tokenizers) fitted together, sharing only what a law says they share.

Every law is Chinchilla's form per suite s plus a shape term in u = ln(D/W):

    L = E_s + A_s·(N/1e9)^−α_s + B_s·(T/1e10)^−β_s + a·u² + b·u,   N = N_nonemb + ε·N_emb

``bowl`` (the default): E, A, α, B, β per suite; the bowl a·u² + b·u = a·(u − c)² − a·c² (its
curvature a and centre c = −b/(2a); the constant folds into E_s) and ε shared.
``kink``: the paper's critical-depth penalty instead of the bowl (SPEC Eq. 6, absolute form),
λ·max(0, D − κ·ln W)·W^−γ with λ ≥ 0, κ, γ and ε shared; ``kink_relative``: its relative form,
the excess depth over D_crit = κ·ln W as a fraction of D_crit (λ·max(0, D − D_crit)/D_crit·W^−γ).
(The power form, D_crit = c·W^p, is not pooled: a third shared nonlinear parameter that the
public suites' few depths per width cannot place; fit it per table with ``fit``.)
``chinchilla``: no shape term (ε shared). ``separate``: every suite fitted alone (its own bowl
and ε). ``shared``: one E, A, α, B, β, bowl and ε for all suites.
``inverse_depth``: Liu et al. 2026's additive law (``laws.inverse_depth``) pooled: per suite E,
B, β; the width term Aw·W^−aw and the depth term Ad·D^−ad shared (they are its shape response, as
the bowl is the others'; in nats, like the bowl). It has no N term: ε does not enter it (N only
sets T = C/(6·N_total) at a budget).

Fitted by variable projection: E, A, B, a, b are linear, solved by least squares (A, B ≥ 0) for
each value of the nonlinear α, β, ε, which scipy's bounded least squares moves. Objective: least
squares on loss (nats), every row weighted equally (or by its resampling count).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import least_squares, lsq_linear

from ..reference import PAPER_KAPPA
from .shape_laws import KINK_LAWS, LAWS, NO_N_TERM

N_UNIT, T_UNIT = 1e9, 1e10  # N and T enter the law as N/1e9 and T/1e10 (conditioning)
EXPONENT_BOUNDS = (0.02, 1.5)
EPS_BOUNDS = (0.0, 1.0)
#: (aw, ad) starts of the inverse-depth law's shared exponents: Liu et al.'s (1, 1) among them.
_POWER_STARTS = ((1.0, 1.0), (0.3, 0.3), (0.3, 1.0), (1.0, 0.3))
POWER_BOUNDS = (0.02, 3.0)
#: A nonlinear shape parameter this close to a bound (in its own units: exponents, κ in layers
#: per e-fold of W) counts as on it; the solver stops within ~1e-8 of an active bound.
AT_BOUND = 1e-3
_STARTS = (0.15, 0.35, 0.7)  # α, β starts of a suite's first fit
KAPPA_BOUNDS, GAMMA_BOUNDS = (0.1, 10.0), (-1.0, 2.0)
_KINK_STARTS = ((1.5, 0.0), (PAPER_KAPPA, 0.35), (4.0, 0.35), (PAPER_KAPPA, 1.0))  # (κ, γ): the paper's κ among them


@dataclass(frozen=True)
class Pooled:
    """Suites stacked, arrays of shape (n,): suite index, depth, width, N_nonemb, N_emb, N_total,
    tokens, loss, run (cluster label)."""

    names: tuple
    suite: np.ndarray
    depth: np.ndarray
    width: np.ndarray
    nonemb: np.ndarray
    emb: np.ndarray
    total: np.ndarray
    tokens: np.ndarray
    loss: np.ndarray
    run: np.ndarray

    @classmethod
    def of(cls, suites: list) -> "Pooled":
        """Stacked :class:`..table.shape_suites.Suite` s, in order."""
        cat = lambda f: np.concatenate([f(s) for s in suites])  # noqa: E731
        return cls(tuple(s.name for s in suites), cat(lambda s: np.full(len(s), suites.index(s))),
                   cat(lambda s: s.depth), cat(lambda s: s.width), cat(lambda s: s.params_nonemb),
                   cat(lambda s: s.params_emb), cat(lambda s: s.params_total), cat(lambda s: s.tokens),
                   cat(lambda s: s.loss), cat(lambda s: s.run))

    def rows(self, mask: np.ndarray) -> "Pooled":
        """The rows where ``mask``, the suites renumbered to those left (names kept in order)."""
        kept = [i for i in range(len(self.names)) if np.any(mask & (self.suite == i))]
        renumber = np.full(len(self.names), -1)
        renumber[kept] = np.arange(len(kept))
        return Pooled(tuple(self.names[i] for i in kept), renumber[self.suite[mask]], self.depth[mask],
                      self.width[mask],
                      self.nonemb[mask], self.emb[mask], self.total[mask], self.tokens[mask],
                      self.loss[mask], self.run[mask])

    @property
    def compute(self) -> np.ndarray:
        return 6.0 * self.total * self.tokens

    @property
    def u(self) -> np.ndarray:
        return np.log(self.depth / self.width)


@dataclass(frozen=True)
class PooledFit:
    """A fitted pooled law; every parameter per suite, arrays of shape (S,) in ``names`` order
    (a shared parameter repeats). The shape term: the bowl a·u² + b·u (``curvature`` a,
    ``slope`` b) plus the kink λ·max(0, D − κ·ln W)·W^−γ (``kink`` (λ, κ, γ) or None)."""

    law: str
    names: tuple
    eps: np.ndarray
    E: np.ndarray
    A: np.ndarray
    alpha: np.ndarray
    B: np.ndarray
    beta: np.ndarray
    curvature: np.ndarray
    slope: np.ndarray
    rss: float
    n_rows: int
    n_params: int
    kink: tuple | None = None
    #: the inverse-depth law's width and depth terms (Aw, aw, Ad, ad), arrays of shape (S,), or None
    power: tuple | None = None

    @property
    def has_shape(self) -> bool:
        return self.law != "chinchilla"

    @property
    def uses_eps(self) -> bool:
        """Whether ε acts on the law (it has an N term)."""
        return self.law not in NO_N_TERM

    def shape_parameters(self, s: int = 0) -> dict:
        """The shape term's parameters by name: the bowl's curvature a and centre c (in
        u = ln(D/W)), the kink's λ, κ, γ; empty without a shape term."""
        if self.kink is not None:
            return {name: float(v[s]) for name, v in zip(("lambda", "kappa", "gamma"), self.kink)}
        if self.power is not None:
            return {name: float(v[s]) for name, v in zip(("Aw", "aw", "Ad", "ad"), self.power)}
        if not self.has_shape:
            return {}
        return {"curvature": float(self.curvature[s]), "centre": self.centre(s)}

    def at_bound(self, s: int = 0) -> tuple:
        """The shape term's nonlinear parameters (κ, γ; aw, ad) that lie on their search bound
        (within :data:`AT_BOUND`): the fit is then a degenerate form of the law (e.g. a width
        term flat over the data), not the law itself."""
        bounds = {"kappa": KAPPA_BOUNDS, "gamma": GAMMA_BOUNDS, "aw": POWER_BOUNDS, "ad": POWER_BOUNDS}
        return tuple(k for k, v in self.shape_parameters(s).items()
                     if k in bounds and min(abs(v - b) for b in bounds[k]) < AT_BOUND)

    def centre(self, s: int = 0) -> float:
        """c = −b/(2a), the bowl's bottom in u = ln(D/W) (NaN without a bowl: a ≤ 0)."""
        a = self.curvature[s]
        return float(-self.slope[s] / (2 * a)) if a > 0 else float("nan")

    def shape_term(self, s: int, depth, width) -> np.ndarray:
        """Suite ``s``'s shape term at (D, W) in nats, broadcast."""
        D, W = np.asarray(depth, float), np.asarray(width, float)
        u = np.log(D / W)
        out = self.curvature[s] * u ** 2 + self.slope[s] * u
        if self.kink is not None:
            out = out + self.kink[0][s] * kink_column(D, W, self.kink[1][s], self.kink[2][s],
                                                       relative=self.law == "kink_relative")
        if self.power is not None:
            Aw, aw, Ad, ad = (v[s] for v in self.power)
            out = out + Aw * W ** -aw + Ad * D ** -ad
        return out

    def suite_loss(self, s: int, depth, width, nonemb, emb, tokens) -> np.ndarray:
        """The law of suite ``s`` at (D, W, N_nonemb, N_emb, T), broadcast."""
        N = (np.asarray(nonemb, float) + self.eps[s] * np.asarray(emb, float)) / N_UNIT
        with np.errstate(all="ignore"):
            capacity = self.A[s] * N ** -self.alpha[s] if self.uses_eps else 0.0
            return (self.E[s] + capacity
                    + self.B[s] * (np.asarray(tokens, float) / T_UNIT) ** -self.beta[s]
                    + self.shape_term(s, depth, width))

    def predict(self, data: Pooled) -> np.ndarray:
        out = np.empty(len(data.loss))
        for s, name in enumerate(data.names):
            i, m = self.names.index(name), data.suite == s
            out[m] = self.suite_loss(i, data.depth[m], data.width[m], data.nonemb[m], data.emb[m],
                                     data.tokens[m])
        return out


def kink_column(D, W, kappa, gamma, relative: bool = False) -> np.ndarray:
    """max(0, D − κ·ln W)·W^−γ: the paper's excess depth over D_crit, scaled by width; relative:
    the excess as a fraction of D_crit."""
    d_crit = kappa * np.log(W)
    excess = np.maximum(0.0, D - d_crit)
    return (excess / d_crit if relative else excess) * W ** -gamma


class _Layout:
    """Where each parameter sits: the nonlinear vector (α per suite or shared unless the law has
    no N term, β likewise, then ε if free, then κ, γ for the kink or aw, ad for the inverse-depth
    law) and the linear columns (E, A (with the N term), B per suite or shared, then a, b for the
    bowl, λ for the kink or Aw, Ad for the inverse-depth law, unless the shape term is held at
    ``shape_fixed``'s)."""

    def __init__(self, n_suites: int, law: str, eps_fixed, shape_fixed):
        self.S, self.per_suite = n_suites, law != "shared"
        self.k = n_suites if self.per_suite else 1
        self.n_term = law not in NO_N_TERM
        # without an N term ε acts on nothing: held (at NaN, so that no number pretends to be one)
        self.eps_fixed = eps_fixed if self.n_term else np.nan
        self.shape_fixed = shape_fixed
        self.bowl = law in ("bowl", "separate", "shared") and shape_fixed is None
        self.kink = law in KINK_LAWS and shape_fixed is None
        self.relative = law == "kink_relative"
        self.power = law == "inverse_depth" and shape_fixed is None
        self.n_alpha = self.k if self.n_term else 0

    def unpack(self, theta):
        """(α, β, ε, (κ, γ) or (aw, ad) or None) from the nonlinear vector."""
        alpha = theta[:self.n_alpha] if self.n_term else np.zeros(self.k)
        beta = theta[self.n_alpha:self.n_alpha + self.k]
        at = self.n_alpha + self.k
        eps = self.eps_fixed if self.eps_fixed is not None else theta[at]
        at += self.eps_fixed is None
        return alpha, beta, eps, (tuple(theta[at:at + 2]) if self.kink or self.power else None)

    def bounds(self) -> tuple[list, list]:
        free_eps = self.eps_fixed is None
        lo = [EXPONENT_BOUNDS[0]] * (self.n_alpha + self.k) + ([EPS_BOUNDS[0]] if free_eps else [])
        hi = [EXPONENT_BOUNDS[1]] * (self.n_alpha + self.k) + ([EPS_BOUNDS[1]] if free_eps else [])
        if self.kink:
            lo, hi = lo + [KAPPA_BOUNDS[0], GAMMA_BOUNDS[0]], hi + [KAPPA_BOUNDS[1], GAMMA_BOUNDS[1]]
        if self.power:
            lo, hi = lo + [POWER_BOUNDS[0]] * 2, hi + [POWER_BOUNDS[1]] * 2
        return lo, hi

    def design(self, data: Pooled, theta) -> tuple[np.ndarray, np.ndarray]:
        """(X (n, p), the target y minus any fixed shape term)."""
        alpha, beta, eps, extra = self.unpack(theta)
        idx = data.suite if self.per_suite else np.zeros(len(data.loss), int)
        onehot = np.eye(self.k)[idx]
        t_scaled = data.tokens / T_UNIT
        cols = [onehot]
        if self.n_term:
            n_scaled = (data.nonemb + eps * data.emb) / N_UNIT
            cols.append(onehot * n_scaled[:, None] ** -alpha[idx][:, None])
        cols.append(onehot * t_scaled[:, None] ** -beta[idx][:, None])
        if self.bowl:
            cols.append(np.stack([data.u ** 2, data.u], axis=1))
        if self.kink:
            cols.append(kink_column(data.depth, data.width, *extra, relative=self.relative)[:, None])
        if self.power:
            cols.append(np.stack([data.width ** -extra[0], data.depth ** -extra[1]], axis=1))
        y = data.loss
        if self.shape_fixed is not None:
            y = y - self.shape_fixed.shape_term(0, data.depth, data.width)
        return np.concatenate(cols, axis=1), y

    @property
    def n_own(self) -> int:
        """The number of per-suite linear coefficients: E, A (with an N term), B."""
        return (3 if self.n_term else 2) * self.k

    def nonnegative(self, p: int) -> np.ndarray:
        """Which of the p linear coefficients are bounded below by 0: A, B, the kink's λ and the
        inverse-depth law's Aw, Ad."""
        mask = np.zeros(p, bool)
        mask[self.k:self.n_own] = True
        mask[self.n_own:] = self.kink or self.power
        return mask


def _solve_linear(X, y, nonnegative) -> np.ndarray:
    """Least squares with the ``nonnegative`` coefficients (A, B, λ) bounded below by 0."""
    coef = np.linalg.lstsq(X, y, rcond=None)[0]
    if np.all(coef[nonnegative] >= 0):
        return coef
    lower = np.where(nonnegative, 0.0, -np.inf)
    return lsq_linear(X, y, bounds=(lower, np.inf), method="bvls").x


def _residuals(theta, data, layout, sqrt_w):
    X, y = layout.design(data, theta)
    coef = _solve_linear(X * sqrt_w[:, None], y * sqrt_w, layout.nonnegative(X.shape[1]))
    return sqrt_w * (y - X @ coef)


def fit_shape_law(data: Pooled, law: str, *, eps: float | None = None, weights=None,
                  start: PooledFit | None = None, shape_fixed: PooledFit | None = None) -> PooledFit:
    """Fit ``law`` (a key of :data:`LAWS`) to ``data``. ``eps``: ε held at this value (None:
    fitted in [0, 1]); ``weights``: a count per row (a resample; rows weighted 0 are left out);
    ``start``: a fit to start from (one start: a warm refit) instead of the cold search;
    ``shape_fixed``: a fit whose shape term (its first suite's) is held: only the suites' own
    terms and ε are fitted."""
    if law not in LAWS:
        raise ValueError(f"unknown shape law {law!r}; known: {', '.join(LAWS)}")
    if weights is not None:
        keep = np.asarray(weights) > 0
        data, weights = data.rows(keep), np.asarray(weights, float)[keep]
    sqrt_w = np.sqrt(weights) if weights is not None else np.ones(len(data.loss))
    if law == "separate":
        return _fit_separate(data, eps, sqrt_w, start)
    layout = _Layout(len(data.names), law, eps, shape_fixed)
    lo, hi = layout.bounds()
    starts = ([_theta_of(start, data.names, layout)] if start is not None
              else _cold_starts(data, layout, sqrt_w))
    best = None
    for theta0 in starts:
        sol = least_squares(_residuals, np.clip(theta0, lo, hi), bounds=(lo, hi),
                            args=(data, layout, sqrt_w), xtol=1e-10, ftol=1e-10)
        if best is None or sol.cost < best.cost:
            best = sol
    return _assemble(law, data, layout, best.x, sqrt_w)


def _theta_of(fit: PooledFit, names: tuple, layout: _Layout) -> np.ndarray:
    at = [fit.names.index(n) for n in names] if layout.per_suite else [0]
    theta = ([*fit.alpha[at]] if layout.n_term else []) + [*fit.beta[at]]
    theta += [] if layout.eps_fixed is not None else [float(fit.eps[at[0]])]
    if layout.kink:
        theta += [float(fit.kink[1][at[0]]), float(fit.kink[2][at[0]])] if fit.kink else list(_KINK_STARTS[1])
    if layout.power:
        theta += [float(fit.power[1][at[0]]), float(fit.power[3][at[0]])] if fit.power else list(_POWER_STARTS[0])
    return np.array(theta)


def _cold_starts(data: Pooled, layout: _Layout, sqrt_w) -> list[np.ndarray]:
    """Each suite's best (α, β) of a 3 × 3 grid (Chinchilla alone, ε = 0.5), with ε from 0.1,
    0.5 and 0.9 when ε is fitted; for a shared law the grid itself."""
    eps_starts = [None] if layout.eps_fixed is not None else [0.1, 0.5, 0.9]
    grid = [(a, b) for a in _STARTS for b in _STARTS]
    if not layout.per_suite:
        pairs = [([a], [b]) for a, b in grid]
    else:
        alpha, beta = [], []
        for s in range(layout.S):
            m = data.suite == s
            held_eps = layout.eps_fixed if layout.eps_fixed is not None and np.isfinite(layout.eps_fixed) else 0.5
            one = _Layout(1, "chinchilla", held_eps, None)
            part = data.rows(m)
            costs = [np.sum(_residuals(np.array(g), part, one, sqrt_w[m]) ** 2) for g in grid]
            alpha.append(grid[int(np.argmin(costs))][0])
            beta.append(grid[int(np.argmin(costs))][1])
        pairs = [(alpha, beta)]
    if not layout.n_term:
        pairs = [([], b) for _, b in pairs]
    extras = _KINK_STARTS if layout.kink else _POWER_STARTS if layout.power else [()]
    return [np.array([*a, *b] + ([] if e is None else [e]) + list(kg))
            for a, b in pairs for e in eps_starts for kg in extras]


def _assemble(law: str, data: Pooled, layout: _Layout, theta, sqrt_w) -> PooledFit:
    alpha, beta, eps, extra = layout.unpack(theta)
    X, y = layout.design(data, theta)
    coef = _solve_linear(X * sqrt_w[:, None], y * sqrt_w, layout.nonnegative(X.shape[1]))
    rss = float(np.sum((sqrt_w * (y - X @ coef)) ** 2))
    S, k, own = layout.S, layout.k, layout.n_own
    per = (lambda v: np.asarray(v, float)) if layout.per_suite else (lambda v: np.full(S, float(np.ravel(v)[0])))
    shared = lambda values: tuple(np.full(S, float(v)) for v in values)  # noqa: E731
    a = b = 0.0
    kink_values = power_values = None
    if layout.bowl:
        a, b = coef[own], coef[own + 1]
    elif layout.kink:
        kink_values = shared((coef[own], *extra))
    elif layout.power:
        power_values = shared((coef[own], extra[0], coef[own + 1], extra[1]))
    elif layout.shape_fixed is not None:
        held = layout.shape_fixed
        a, b = held.curvature[0], held.slope[0]
        kink_values = None if held.kink is None else shared(v[0] for v in held.kink)
        power_values = None if held.power is None else shared(v[0] for v in held.power)
    A = per(coef[k:2 * k]) if layout.n_term else np.zeros(S)
    return PooledFit(law, data.names, np.full(S, float(eps)), per(coef[:k]), A,
                     per(alpha), per(coef[own - k:own]), per(beta), np.full(S, float(a)),
                     np.full(S, float(b)), rss, len(y), len(theta) + X.shape[1], kink_values, power_values)


def _fit_separate(data: Pooled, eps, sqrt_w, start) -> PooledFit:
    fits = []
    for s in range(len(data.names)):
        m = data.suite == s
        warm = None if start is None else replace(one_suite(start, data.names[s]), law="bowl")
        fits.append(fit_shape_law(data.rows(m), "bowl", eps=eps, weights=sqrt_w[m] ** 2, start=warm))
    cat = lambda f: np.concatenate([getattr(x, f) for x in fits])  # noqa: E731
    return PooledFit("separate", data.names, cat("eps"), cat("E"), cat("A"), cat("alpha"), cat("B"),
                     cat("beta"), cat("curvature"), cat("slope"), sum(x.rss for x in fits),
                     sum(x.n_rows for x in fits), sum(x.n_params for x in fits))


def one_suite(fit: PooledFit, name: str) -> PooledFit:
    """Suite ``name``'s terms of ``fit`` as a one-suite fit (a warm start; no RSS)."""
    i = fit.names.index(name)
    pick = lambda v: v[i:i + 1]  # noqa: E731
    return PooledFit(fit.law, (name,), pick(fit.eps), pick(fit.E), pick(fit.A), pick(fit.alpha),
                     pick(fit.B), pick(fit.beta), pick(fit.curvature), pick(fit.slope), 0.0, 0, 0)
