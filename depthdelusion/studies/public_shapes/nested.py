"""The nested kink test (issue 62, item 2): the paper's kink *inside* gemstones_width_depth (a smooth shape law), with its
power against the paper's own kink.

The kink-vs-smooth test of the core is non-nested (the kink law has no smooth shape term, so its
LR is ≈ −290 and says nothing). Here the alternative contains the null:

    smooth:  L = E + Aw·W^−aw + Ad·D^−ad + A·N^−α + B·T^−β           (gemstones_width_depth)
    kink:    smooth + λ·max(0, D − κ·ln W)/(κ·ln W)·W^−γ,  λ ≥ 0, γ ≥ 0  (the relative form)

so LR = n·ln(RSS_smooth / RSS_kink) ≥ 0. Both are fitted by variable projection: the linear
coefficients (E free, Aw, Ad, A, B, λ ≥ 0) by bounded least squares for given exponents, the
exponents (aw, ad, α, β, γ in [0, 2]) by L-BFGS-B from the smooth fit; κ (not differentiable: the
kink moves across whole shapes) from a grid with the other exponents held at the smooth fit's,
then the exponents refined at that κ. The same procedure fits every replicate, so the calibration
holds for the procedure as run.

The null's token term is additive (B·T^−β, as in the law) or, with ``Model(interaction=True)``, has
an N × T interaction: B·T^−β + c·ln(N/N̄)·T^−β (c of either sign), the form the residuals ask for
(each run's residual slope in ln T correlates with N, issue 62 item 5). ``Model(shape=False)``
drops the smooth shape terms: the kink nested in chinchilla, the λ = 0 test in the same frame.

Calibration: the null is the smooth fit plus *whole runs' residual series* (each run gets the
residual series, in token order, of a run drawn with replacement from those with at least as many
checkpoints): within-run autocorrelation and run-level offsets travel with the residuals, where
the core's parametric bootstrap drew independent checkpoints. Power: the same draws with the
paper's kink (relative form, at its λ, κ, γ: `PAPER_KINK`) added at full, half and quarter size,
the test's level-5% critical value from the null draws.

Under Huber on log-loss (``huber=True``, the authors' fitting loss, δ = 10⁻³: issue 62 item 4)
both laws minimise H = Σ h_δ(ln y − ln ŷ) over every parameter (scipy's trust-region solver with
its Huber loss, from the least-squares fit), κ picked on the same grid by the exact H at each
grid point's weighted least-squares solution (the Huber null fit's IRLS weights), then every
parameter refined at that κ. The statistic is n·ln(H_null / H_kink) ≥ 0, the least-squares LR
with H in place of the RSS (as the fitting engine's Huber profile), and the residual series
resampled are the log residuals (ŷ·exp(r*)): the bootstrap calibrates that statistic as run.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

from depthdelusion.analysis.fitting.problem import HUBER_THRESHOLD
from depthdelusion.analysis.reference import PAPER_FIT

KAPPA_GRID = tuple(np.round(np.linspace(1.0, 6.0, 21), 2))
GAMMA_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)
BOUNDS = (0.0, 2.0)                 # every exponent: aw, ad, α, β, γ (γ ≥ 0: the paper's sign)
SIZES = (1.0, 0.5, 0.25)            # the paper's kink at full, half and quarter size
LEVEL = 0.05
#: The Huber kink's refits from the Huber null: a small λ (at its bound 0 the step would not leave
#: it) at each κ of the grid and these γ (flat, the paper's, steep).
NULL_START_LAMBDA = 1e-3
NULL_START_GAMMAS = (0.0, 0.35, 1.0)
#: an LR below this is the solvers' rounding, not a fit: a kink fit that finds nothing (λ = 0)
#: returns the null's RSS to ~1e-15 relative, an LR of ~1e-13, so that an observed "0" was ranked
#: against null draws of exactly 0 and of ~1e-13 by noise (hot total N, chinchilla: p 0.805 or 1)
LR_ROUNDING = 1e-9
#: the same under Huber: its solver stops at a relative change of 1e-8 in H, so a kink that finds
#: nothing leaves an LR of up to ~n·1e-8·(a few iterations) ≈ 1e-5 (seen: 1.5e-8 to 4e-8 at λ ≈ 0)
HUBER_ROUNDING = 1e-4
#: the smallest predicted loss the log residual ln y − ln ŷ takes (ŷ below it, even ≤ 0, is held there)
FLOOR = 1e-12
PAPER_KINK = {"lam": PAPER_FIT["lam"][0], "kappa": PAPER_FIT["kappa"][0], "gamma": PAPER_FIT["gamma"][0]}


@dataclass(frozen=True)
class Design:
    """One arm's rows as the test needs them; ``series``: each run's row indices in token order."""

    D: np.ndarray
    W: np.ndarray
    N: np.ndarray
    T: np.ndarray
    series: tuple


@dataclass(frozen=True)
class NestedKink:
    arm: str
    lr: float                  # observed LR (≥ 0)
    p: float                   # (1 + #{LR* ≥ LR}) / (1 + replicates)
    critical: float            # the null draws' 95th percentile
    replicates: int
    kink: tuple                # (λ, κ, γ) of the kink fit to the data
    power: tuple               # (size, penalty at the deepest-narrowest shape in nats, power)
    worst_shape: str           # where the paper's penalty is largest
    null: str = "gemstones_width_depth"   # the law the kink is nested in (Model.name)
    structure: tuple = (np.nan, np.nan, np.nan)   # residual_structure of the null's residuals
    power_draws: int = 0       # draws per size behind each power

    @property
    def rejects(self) -> bool:
        """p ≤ 5%: the Monte-Carlo test's rule (``lr_test.LRTest.rejects``), whose size is exactly
        5% when 5% of (1 + replicates) is a whole number (99, 199 draws)."""
        return bool(np.isfinite(self.p) and self.p <= LEVEL + 1e-12)

    def excluded(self) -> str:
        """The smallest simulated size the test detects with power ≥ 0.8, in nats at the worst
        shape; or that none of the sizes reaches it."""
        hit = [(s, pen) for s, pen, pw in self.power if pw >= 0.8]
        if not hit:
            return "none of the simulated sizes is detected with power ≥ 0.8"
        s, pen = min(hit)
        return (f"penalties of ≳ {pen:.2g} nats at {self.worst_shape} ({s:g}× the paper's) would be "
                "detected with power ≥ 0.8")


def power_draws(replicates: int) -> int:
    """Draws per size of the paper's kink for a power curve: half the null's (a power's
    Monte-Carlo error is then ≤ 0.5/√draws: ±0.05 at the default 200 replicates), which halves
    the study's dominant cost."""
    return max(1, replicates // 2)


def design(runs, clusters) -> Design:
    T = np.asarray(runs.tokens, float)
    series = tuple(np.flatnonzero(clusters == c)[np.argsort(T[clusters == c], kind="stable")]
                   for c in sorted(set(clusters.tolist())))
    return Design(np.asarray(runs.depth, float), np.asarray(runs.width, float),
                  np.asarray(runs.params, float) / 1e9, T / 1e10, series)


def paper_penalty(d: Design, kappa: float = PAPER_KINK["kappa"], gamma: float = PAPER_KINK["gamma"]):
    """The relative-form excess max(0, D − κ·ln W)/(κ·ln W)·W^−γ per row (λ = 1)."""
    d_crit = kappa * np.log(d.W)
    return np.maximum(0.0, d.D - d_crit) / d_crit * d.W ** -gamma


@dataclass(frozen=True)
class Model:
    """The null law the kink is nested in: ``shape`` the smooth shape terms Aw·W^−aw + Ad·D^−ad
    (gemstones_width_depth) or none (chinchilla); ``interaction`` the N × T term in the token term."""

    shape: bool = True
    interaction: bool = False

    @property
    def exponents(self) -> int:
        return 4 if self.shape else 2

    @property
    def name(self) -> str:
        return (("gemstones_width_depth" if self.shape else "chinchilla")
                + (" + N×T interaction" if self.interaction else ""))

    def start(self, smooth_start) -> np.ndarray:
        """Starting exponents from gemstones_width_depth's (aw, ad, α, β)."""
        return np.asarray(smooth_start if self.shape else smooth_start[2:4], float)


SMOOTH = Model()


def _columns(d: Design, theta, model: Model = SMOOTH) -> tuple[np.ndarray, int]:
    """The law's linear columns for exponents ``theta`` and how many lead them with a free sign
    (E, and the interaction's c); the others' coefficients are ≥ 0."""
    alpha, beta = theta[model.exponents - 2:model.exponents]
    free = [np.ones_like(d.D)]
    if model.interaction:
        free.append(d.T ** -beta * np.log(d.N / np.exp(np.mean(np.log(d.N)))))
    shape = [d.W ** -theta[0], d.D ** -theta[1]] if model.shape else []
    return np.column_stack(free + shape + [d.N ** -alpha, d.T ** -beta]), len(free)


def _rss(X: np.ndarray, y: np.ndarray, free: int = 1) -> tuple[float, np.ndarray]:
    """Bounded least squares, the first ``free`` coefficients free, the others ≥ 0."""
    lower = np.r_[np.full(free, -np.inf), np.zeros(X.shape[1] - free)]
    sol = optimize.lsq_linear(X, y, bounds=(lower, np.inf), method="bvls")
    return float(2 * sol.cost), sol.x


def _rss_at(d: Design, y, theta, model: Model, extra=None) -> tuple[float, np.ndarray]:
    X, free = _columns(d, theta, model)
    return _rss(X if extra is None else np.c_[X, extra], y, free)


def fit_smooth(d: Design, y, start, model: Model = SMOOTH) -> tuple[np.ndarray, float]:
    """The null's exponents ((aw, ad,) α, β) and its RSS by variable projection."""
    res = optimize.minimize(lambda th: _rss_at(d, y, th, model)[0], np.clip(start, *BOUNDS),
                            method="L-BFGS-B", bounds=[BOUNDS] * model.exponents)
    return np.asarray(res.x), float(res.fun)


def fit_kink(d: Design, y, theta_s, model: Model = SMOOTH) -> tuple[float, tuple]:
    """The RSS of the nested kink law and its (λ, κ, γ): κ and γ from the grid at the null's
    exponents, then the exponents and γ refined at that κ."""
    X, free = _columns(d, theta_s, model)
    best = (np.inf, None, None)
    for kappa in KAPPA_GRID:
        for gamma in GAMMA_GRID:
            rss = _rss(np.c_[X, paper_penalty(d, kappa, gamma)], y, free)[0]
            if rss < best[0]:
                best = (rss, kappa, gamma)
    _, kappa, gamma = best

    def rss_at(th):
        return _rss_at(d, y, th, model, paper_penalty(d, kappa, th[-1]))[0]

    res = optimize.minimize(rss_at, np.r_[theta_s, gamma], method="L-BFGS-B",
                            bounds=[BOUNDS] * (model.exponents + 1))
    th = res.x if res.fun <= best[0] else np.r_[theta_s, gamma]
    rss, coef = _rss_at(d, y, th, model, paper_penalty(d, kappa, th[-1]))
    return rss, (float(coef[-1]), float(kappa), float(th[-1]))


def huber_objective(y, fitted) -> float:
    """Σ h_δ(ln y − ln ŷ): r²/2 within δ, δ·|r| − δ²/2 beyond (δ = HUBER_THRESHOLD)."""
    r = np.abs(np.log(y) - np.log(np.maximum(fitted, FLOOR)))
    return float(np.sum(np.where(r <= HUBER_THRESHOLD, 0.5 * r ** 2, HUBER_THRESHOLD * (r - 0.5 * HUBER_THRESHOLD))))


def _huber_refit(d: Design, y, coef, theta, model: Model,
                 kappa: float | None = None) -> tuple[float, np.ndarray, np.ndarray]:
    """(H, fitted values, [coefficients, exponents]) of the law (with the kink at ``kappa``, γ the
    last of ``theta``) refitted by Huber on log-loss over every parameter from ``coef`` and ``theta``.
    The solver gets the residuals' exact Jacobian (:func:`_log_jacobian`): forward differences cost
    one prediction per parameter each step, most of the test's time."""
    k, free = len(coef), 1 + model.interaction

    def design_at(x):
        X = _columns(d, x[k:k + model.exponents], model)[0]
        return X if kappa is None else np.c_[X, paper_penalty(d, kappa, x[-1])]

    def predict(x):
        return design_at(x) @ x[:k]

    def jac(x):
        return _log_jacobian(d, design_at(x), x, k, model, kappa)

    lower = np.r_[np.full(free, -np.inf), np.zeros(k - free), np.full(len(theta), BOUNDS[0])]
    upper = np.r_[np.full(k, np.inf), np.full(len(theta), BOUNDS[1])]
    res = optimize.least_squares(lambda x: np.log(y) - np.log(np.maximum(predict(x), FLOOR)),
                                 np.clip(np.r_[coef, theta], lower, upper), jac=jac, bounds=(lower, upper),
                                 loss="huber", f_scale=HUBER_THRESHOLD, method="trf", x_scale="jac")
    return huber_objective(y, predict(res.x)), predict(res.x), res.x


def _log_jacobian(d: Design, X_NxK, x, k: int, model: Model, kappa: float | None) -> np.ndarray:
    """∂(ln y − ln ŷ)/∂x for ŷ = X·x[:k] (``X_NxK`` the law's columns at x's exponents, the kink's
    last with ``kappa``): −(∂ŷ/∂x)/ŷ, 0 where ŷ is held at FLOOR (as the residual is). A column
    c·v^−e moves by −c·ln v·v^−e with its exponent e; β moves the interaction's column too."""
    coef, free = x[:k], 1 + model.interaction
    fitted = X_NxK @ coef
    dyhat = [X_NxK]
    shape = [(d.W, free), (d.D, free + 1)] if model.shape else []
    n_col, t_col = free + 2 * model.shape, free + 2 * model.shape + 1
    for v, col in shape + [(d.N, n_col)]:
        dyhat.append(-coef[col] * np.log(v) * X_NxK[:, col])
    d_beta = -coef[t_col] * np.log(d.T) * X_NxK[:, t_col]
    if model.interaction:
        d_beta = d_beta - coef[1] * np.log(d.T) * X_NxK[:, 1]
    dyhat.append(d_beta)
    if kappa is not None:
        dyhat.append(-coef[k - 1] * np.log(d.W) * X_NxK[:, k - 1])
    J = np.column_stack(dyhat)
    live = fitted > FLOOR
    return np.where(live[:, None], -J / np.where(live, fitted, 1.0)[:, None], 0.0)


def huber_ratio(d: Design, y, start, model: Model = SMOOTH) -> tuple[float, tuple, np.ndarray, np.ndarray]:
    """:func:`likelihood_ratio` under Huber on log-loss: (n·ln(H_null / H_kink), kink (λ, κ, γ),
    the least-squares null's exponents (the next fit's start), the Huber null's fitted values)."""
    theta, _ = fit_smooth(d, y, start, model)
    h_s, fitted, null = _huber_refit(d, y, _rss_at(d, y, theta, model)[1], theta, model)
    r = np.abs(np.log(y / fitted))
    sw = np.sqrt(np.minimum(1.0, HUBER_THRESHOLD / np.maximum(r, 1e-300))) / fitted   # IRLS, on the loss scale
    X, free = _columns(d, theta, model)
    best = (np.inf, None, None, None)
    for kappa in KAPPA_GRID:
        for gamma in GAMMA_GRID:
            Xk = np.c_[X, paper_penalty(d, kappa, gamma)]
            coef = _rss(Xk * sw[:, None], y * sw, free)[1]
            h = huber_objective(y, Xk @ coef)
            if h < best[0]:
                best = (h, kappa, gamma, coef)
    h_k, kappa, gamma, coef = best
    k0 = len(coef) - 1
    # the grid's best point refitted, and a small kink refitted from the Huber null at every κ
    # (a few γ): the grid scores κ at the least-squares exponents, where a Huber kink near the
    # Huber null can score worse than none (issue 62's second review)
    tries = [(kappa, _huber_refit(d, y, coef, np.r_[theta, gamma], model, kappa))]
    tries += [(k, _huber_refit(d, y, np.r_[null[:k0], NULL_START_LAMBDA], np.r_[null[k0:], g], model, k))
              for k in KAPPA_GRID for g in NULL_START_GAMMAS]
    k_best, refit = min(tries, key=lambda t: t[1][0])
    if refit[0] < h_k:
        h_k, kappa, lam, gamma = refit[0], k_best, refit[2][k0], refit[2][-1]
    else:
        lam = coef[-1]
    lr = len(y) * float(np.log(h_s / min(h_k, h_s)))
    return (lr if lr > HUBER_ROUNDING else 0.0), (float(lam), float(kappa), float(gamma)), theta, fitted


def likelihood_ratio(d: Design, y, start, model: Model = SMOOTH) -> tuple[float, tuple, np.ndarray, np.ndarray]:
    """(LR, kink (λ, κ, γ), the null's exponents, its fitted values) for the rows' losses ``y``."""
    theta, rss_s = fit_smooth(d, y, start, model)
    rss_k, kink = fit_kink(d, y, theta, model)
    X, free = _columns(d, theta, model)
    fitted = X @ _rss(X, y, free)[1]
    lr = len(y) * float(np.log(rss_s / min(rss_k, rss_s)))
    return (lr if lr > LR_ROUNDING else 0.0), kink, theta, fitted


def residual_structure(d: Design, resid) -> tuple[float, float, float]:
    """(lag-1 autocorrelation ρ of the residuals within runs: consecutive checkpoints of one run
    paired, pooled over runs; correlation across runs of each run's least-squares residual slope
    in ln T with ln N; a run's checkpoints' worth in independent ones for its mean level under an
    AR(1) with that ρ at the median run length n, :func:`effective_checkpoints`). NaN where a run
    has too few checkpoints."""
    pairs = np.array([(resid[s][i], resid[s][i + 1]) for s in d.series for i in range(len(s) - 1)])
    slopes = [(np.log(d.N[s[0]]), np.polyfit(np.log(d.T[s]), resid[s], 1)[0]) for s in d.series
              if len(s) > 2 and np.ptp(d.T[s]) > 0]
    lag1 = float(np.corrcoef(pairs.T)[0, 1]) if len(pairs) > 2 else np.nan
    corr = float(np.corrcoef(np.array(slopes).T)[0, 1]) if len(slopes) > 2 else np.nan
    n = float(np.median([len(s) for s in d.series]))
    return lag1, corr, effective_checkpoints(lag1, int(n)) if np.isfinite(lag1) else np.nan


def effective_checkpoints(rho: float, n: int) -> float:
    """What n checkpoints of an AR(1) series with lag-1 correlation ρ are worth in independent ones
    for their mean: n² / Σᵢⱼ ρ^|i−j|, the ratio of an independent mean's variance to theirs. The
    exact count at a run's length, not the long-series n·(1 − ρ)/(1 + ρ), which at ten checkpoints
    falls below 1 (0.05 at ρ = 0.99) where the mean of n positively correlated points is never
    worth less than one of them."""
    lags = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    return float(n * n / np.sum(float(rho) ** lags))


def resampled_series(d: Design, resid, rng) -> np.ndarray:
    """Residuals with each run's series replaced by a drawn run's (same or longer), in token order."""
    out = np.empty_like(resid)
    lengths = np.array([len(s) for s in d.series])
    for s in d.series:
        donors = np.flatnonzero(lengths >= len(s))
        donor = d.series[int(rng.choice(donors))]
        out[s] = resid[donor[:len(s)]]
    return out


def nested_test(arm, *, replicates: int, seed: int, start=(0.3, 0.5, 0.3, 0.3), model: Model = SMOOTH,
                power_draws: int | None = None, huber: bool = False) -> NestedKink | None:
    """The kink nested in ``model`` on ``arm`` with ``replicates`` null draws and ``power_draws``
    (default: as many; 0: no power curve) per size of the paper's kink; None without replicates.
    ``huber``: both laws fitted by Huber on log-loss (:func:`huber_ratio`), the log residuals'
    series resampled."""
    if not replicates:
        return None
    d = design(arm.runs, arm.clusters)
    y = np.asarray(arm.runs.loss, float)
    ratio = huber_ratio if huber else likelihood_ratio
    lr, kink, theta, fitted = ratio(d, y, model.start(start), model)
    resid, rng = (np.log(y / fitted) if huber else y - fitted), np.random.default_rng(seed)

    def drawn(mean):   # a draw around ``mean``: a resampled residual series on the fitted loss's scale
        r = resampled_series(d, resid, rng)
        return mean * np.exp(r) if huber else mean + r

    null = np.array([ratio(d, drawn(fitted), theta, model)[0] for _ in range(replicates)])
    critical = float(np.quantile(null, 1 - LEVEL))
    pen = PAPER_KINK["lam"] * paper_penalty(d)
    worst = int(np.argmax(pen))
    power = []
    for size in SIZES if power_draws is None or power_draws else ():
        alt = [ratio(d, drawn(fitted + size * pen), theta, model)[0]
               for _ in range(replicates if power_draws is None else power_draws)]
        power.append((size, float(size * pen[worst]), float(np.mean(np.array(alt) > critical))))
    p = (1 + int(np.sum(null >= lr))) / (1 + replicates)
    return NestedKink(arm.label, lr, p, critical, replicates, kink, tuple(power),
                      f"{int(d.W[worst])}x{int(d.D[worst])}", model.name + (", Huber on log-loss" if huber else ""),
                      residual_structure(d, resid), len(alt) if power else 0)


def rows(found) -> list[dict]:
    """nested_kink.csv: per arm the observed LR, p, critical value, the kink fitted, and the power
    at each size of the paper's kink."""
    return [{"arm": k.arm, "null": k.null, "lr": round(k.lr, 2), "p": round(k.p, 3), "critical_lr_95": round(k.critical, 2),
             "replicates": k.replicates, "lam": float(f"{k.kink[0]:.3g}"), "kappa": k.kink[1],
             "gamma": round(k.kink[2], 3), "size_of_papers_kink": size, "penalty_at_worst_shape": round(pen, 4),
             "worst_shape": k.worst_shape, "power": round(pw, 3), "power_draws": k.power_draws,
             "residual_lag1": round(k.structure[0], 2), "slope_vs_ln_n": round(k.structure[1], 2)}
            for k in found for size, pen, pw in (k.power or [(None, np.nan, np.nan)])]
