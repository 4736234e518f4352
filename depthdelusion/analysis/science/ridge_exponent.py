"""A data-exponent test that depends on the spectrum: ridge readouts on frozen features.

The redundancy law (analysis/science/redundancy.py) says ridge regression on features with covariance
eigenvalues λ_i ∝ i^(−β), for a linear target of source smoothness s, has excess risk ∝ n^(−b),
b = 2βs/(2βs+1). This module measures b on given features and compares it with the value the
features' own spectrum predicts, and with values from deliberately wrong spectra. Numpy only.

The procedure (`learning_curves`, then `measured_exponent`):

- features come from ``draw(n, rng)`` (rows are i.i.d. samples of a population whose covariance
  ``cov`` is known: a pool of frozen features resampled with replacement, whose covariance
  is the pool's, or Gaussian features); the target is y = xᵀθ* + σε, ε ~ N(0, 1), so the excess
  risk of an estimate θ̂ is exactly (θ̂ − θ*)ᵀ Σ (θ̂ − θ*): no test set, no unknown noise floor;
- n over a geometric grid; within a replicate the samples are nested (the first n of one draw);
  replicates are independent;
- at every n, ridge θ̂ = (XᵀX + nλI)⁻¹Xᵀy for every λ of a log grid (``REGS``, in units of the
  covariance's trace: callers scale the features to trace 1); λ is tuned per n to the least
  mean excess risk over the replicates: the optimally tuned ridge the law is about (a grid edge
  reached is reported). Beside it, for reference, each replicate's own λ chosen on its training
  sample alone by generalised cross-validation, GCV(λ) = (RSS/n) / (1 − df/n)² (unreliable
  where n is close to P, where a few bad choices can dominate its slope);
- b measured = −slope of log(mean excess risk over replicates) on log n (least squares); 95%
  interval: 2.5–97.5 percentiles over bootstrap resamples of the replicates (λ re-tuned in
  each).

The prediction: from eigenpairs (λ_i, u_i) of the features' covariance, β is the tail fit of
λ_i over a rank range (spectra.fit_range's rule), and a of the readout power
a_i² = λ_i (u_iᵀθ*)² ∝ i^(−a) over the same ranks (readout.decay_rate); a = 1 + 2βs, so
s = (a − 1)/(2β) and b = (a − 1)/a. Controls: the same s with β halved and with β doubled
(spectra off by a factor 2 in the exponent), b = 2β's/(2β's+1). Intervals: delete-one-group
jackknife over groups of samples (eigenpairs recomputed), as spectra.py and readout.py do.

The law's expected exponent for the design itself (`finite_size_exponent`: the
deterministic-equivalent risk of ridge at the best λ per n, over the same n) is the unbiased
reference on synthetic features (tests/analysis/science/test_ridge_exponent.py: inside every interval
with no allowance); the asymptotic b above is not, at these n.

Verdict (`verdict`): the prediction's interval is widened by ``TOLERANCE`` on each side (the
finite-size bias of the asymptotic b: tests/analysis/science/test_ridge_exponent.py bounds it on the
synthetic (β, s) grid); a prediction is *consistent* when its widened interval overlaps the measured
interval, else *rejected*. The test agrees when the measured spectrum's prediction is consistent
and both wrong ones are rejected; it disagrees when the measured spectrum's prediction is
rejected; otherwise it cannot tell (the measurement does not separate the spectra).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .readout import decay_rate, implied, jackknife_ci
from .redundancy import predicted_exponent
from .spectra import fit_range, fit_tail_index
from ..fitting.options import SEED

REGS = np.logspace(-8, 1, 37)  # ridge λ; the penalty is n·λ·‖θ‖²
TOLERANCE = 0.05  # finite-size bias allowance of the measured exponent (see the module docstring)
WRONG_FACTORS = (0.5, 2.0)  # the controls: β multiplied by these, s kept


def ridge_path(gram_PxP: np.ndarray, xty_P: np.ndarray, yty: float, n: int,
               regs: np.ndarray = REGS) -> tuple[np.ndarray, np.ndarray]:
    """(θ̂ (R, P), GCV score (R,)) of ridge regression for every λ in ``regs`` from the sufficient
    statistics XᵀX, Xᵀy, yᵀy of n samples (one eigendecomposition of XᵀX)."""
    d_P, v_PxP = np.linalg.eigh(gram_PxP)
    d_P = np.clip(d_P, 0.0, None)
    z_P = v_PxP.T @ xty_P
    denom_RxP = d_P[None, :] + n * regs[:, None]
    theta_RxP = (z_P[None, :] / denom_RxP) @ v_PxP.T
    # RSS = ‖y outside the column space‖² + Σ_k (nλ)² z_k² / (d_k (d_k + nλ)²): no cancellation
    # between large terms as λ → 0 (where GCV's numerator and denominator both vanish at n ≤ P)
    pos_P = (d_P > d_P.max() * 1e-10) & (np.arange(len(d_P)) >= len(d_P) - n)  # rank ≤ n
    # n samples of rank n span y: nothing outside (a subtraction would leave rounding noise there)
    perp = 0.0 if pos_P.sum() >= n else max(yty - float(np.sum(z_P[pos_P] ** 2 / d_P[pos_P])), 0.0)
    shrink_RxP = np.where(pos_P[None, :], (n * regs[:, None]) ** 2 * z_P[None, :] ** 2
                          / (np.where(pos_P, d_P, 1.0)[None, :] * denom_RxP ** 2), 0.0)
    rss_R = perp + shrink_RxP.sum(axis=1)
    df_R = np.sum(np.where(pos_P, d_P, 0.0)[None, :] / denom_RxP, axis=1)  # null space: rounding
    with np.errstate(divide="ignore", invalid="ignore"):
        gcv_R = np.where(df_R < n, np.clip(rss_R, 0.0, None) / n / (1.0 - df_R / n) ** 2, np.inf)
    return theta_RxP, gcv_R


def excess_risks(theta_RxP: np.ndarray, theta_star_P: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """(θ̂ − θ*)ᵀ Σ (θ̂ − θ*) for every row of theta_RxP (R,); ``cov`` is Σ (P, P) or, for a
    diagonal Σ, its diagonal (P,)."""
    err_RxP = theta_RxP - theta_star_P[None, :]
    if cov.ndim == 1:
        return np.einsum("rp,p,rp->r", err_RxP, cov, err_RxP)
    return np.einsum("rp,pq,rq->r", err_RxP, cov, err_RxP, optimize=True)


@dataclass
class Curves:
    ns: np.ndarray  # (N,)
    risk_RxNxL: np.ndarray  # exact excess risk per replicate, n and λ of ``regs``
    gcv_RxN: np.ndarray  # index of the GCV-chosen λ per replicate and n
    regs: np.ndarray  # (L,)

    def tuned(self, reps=None) -> np.ndarray:
        """Mean excess risk (N,) over the replicates ``reps`` (default all) at the λ that
        minimises that mean, per n: the law's optimally tuned ridge."""
        risk = self.risk_RxNxL if reps is None else self.risk_RxNxL[reps]
        return risk.mean(axis=0).min(axis=1)

    def tuned_regs(self) -> np.ndarray:
        """The λ (N,) that minimises the mean excess risk over all replicates, per n."""
        return self.regs[np.argmin(self.risk_RxNxL.mean(axis=0), axis=1)]

    def at_grid_edge(self) -> list[int]:
        """The n whose tuned λ is the grid's smallest or largest (the optimum may lie outside)."""
        reg_N = self.tuned_regs()
        return [int(n) for n, r in zip(self.ns, reg_N) if r in (self.regs[0], self.regs[-1])]

    def gcv(self) -> np.ndarray:
        """Excess risk (R, N) at each replicate's own GCV-chosen λ."""
        r, n = np.indices(self.gcv_RxN.shape)
        return self.risk_RxNxL[r, n, self.gcv_RxN]


def learning_curves(draw, theta_star_P: np.ndarray, cov: np.ndarray, noise_std: float, ns,
                    *, reps: int, seed: int, regs: np.ndarray = REGS) -> Curves:
    """Excess risks of ridge at every λ, ``reps`` independent replicates of nested samples drawn
    by ``draw(n, rng)`` (rows of x, centred at the population mean, whose covariance is ``cov``:
    (P, P), or its diagonal (P,))."""
    ns = np.asarray(sorted(int(n) for n in ns))
    risk = np.empty((reps, len(ns), len(regs)))
    gcv = np.empty((reps, len(ns)), dtype=int)
    for r in range(reps):
        rng = np.random.default_rng([seed, r])
        x_NxP = draw(int(ns[-1]), rng)
        y_N = x_NxP @ theta_star_P + noise_std * rng.standard_normal(len(x_NxP))
        gram, xty, yty, start = 0.0, 0.0, 0.0, 0
        for j, n in enumerate(ns):
            xs, ys = x_NxP[start:n], y_N[start:n]
            gram, xty, yty, start = gram + xs.T @ xs, xty + xs.T @ ys, yty + float(ys @ ys), n
            theta_RxP, gcv_R = ridge_path(gram, xty, yty, n, regs)
            risk[r, j] = excess_risks(theta_RxP, theta_star_P, cov)
            gcv[r, j] = int(np.argmin(gcv_R))
    return Curves(ns, risk, gcv, np.asarray(regs))


def expected_risk(lam_P: np.ndarray, power_P: np.ndarray, noise_std: float, n: int, reg: float) -> float:
    """The excess risk of ridge (penalty n·reg·‖θ‖²) on n samples of features with covariance
    eigenvalues ``lam_P`` and a target whose coefficient along eigenvector i has
    λ_i(u_iᵀθ*)² = ``power_P[i]``, by the deterministic equivalent of Gaussian-design ridge: κ
    solves κ(1 − df₁(κ)/n) = reg, df_k = Σ (λ_i/(λ_i + κ))^k; bias κ² Σ power_i/(λ_i + κ)² and
    variance σ²·df₂/n, both divided by 1 − df₂/n. Exact as n, P → ∞ together; at finite n it is
    the expected risk the law's asymptotic exponent is a limit of."""
    from scipy.optimize import brentq

    def gap(kappa):
        return kappa * (1.0 - float(np.sum(lam_P / (lam_P + kappa))) / n) - reg

    top = reg + float(np.sum(lam_P)) / n  # gap(top) ≥ 0 ≥ gap(reg)
    kappa = reg if gap(reg) >= 0 else brentq(gap, reg, top, xtol=1e-14 * top, rtol=1e-12)
    df2 = float(np.sum((lam_P / (lam_P + kappa)) ** 2))
    bias = kappa ** 2 * float(np.sum(power_P / (lam_P + kappa) ** 2))
    return (bias + noise_std ** 2 * df2 / n) / (1.0 - df2 / n)


def finite_size_exponent(lam_P: np.ndarray, power_P: np.ndarray, noise_std: float, ns,
                         regs: np.ndarray = REGS) -> float:
    """The exponent the law predicts for this design rather than as n → ∞: the slope of the
    expected risk (`expected_risk`) at the best λ of ``regs`` per n, over the same ``ns`` and
    fitted as `measured_exponent` fits the measured curve. It removes the bias of comparing a
    finite n range with the asymptotic 2βs/(2βs+1) (tests/analysis/science/test_ridge_exponent.py)."""
    ns = np.asarray(sorted(int(n) for n in ns))
    lam_P, power_P = np.asarray(lam_P, float), np.asarray(power_P, float)
    risk = [min(expected_risk(lam_P, power_P, noise_std, int(n), float(r)) for r in regs) for n in ns]
    return slope_exponent(ns, np.asarray(risk))


def slope_exponent(ns: np.ndarray, risk_N: np.ndarray) -> float:
    """b of risk ∝ n^(−b): minus the least-squares slope of log risk on log n."""
    return -float(np.polyfit(np.log(ns), np.log(risk_N), 1)[0])


@dataclass
class Measured:
    exponent: float
    ci: tuple
    gcv_exponent: float  # the same slope with each replicate's GCV-chosen λ (a practical reference)
    gcv_ci: tuple


def measured_exponent(curves: Curves, *, n_boot: int = 1000, seed: int = SEED) -> Measured:
    """b of the tuned mean curve; percentile-bootstrap interval over replicates (λ re-tuned in
    every resample); likewise with GCV-chosen λ."""
    ns, reps = curves.ns, curves.risk_RxNxL.shape[0]
    gcv_RxN = curves.gcv()
    rng = np.random.default_rng(seed)
    boots, boots_gcv = [], []
    for _ in range(n_boot):
        pick = rng.integers(reps, size=reps)
        boots.append(slope_exponent(ns, curves.tuned(pick)))
        boots_gcv.append(slope_exponent(ns, gcv_RxN[pick].mean(axis=0)))

    def ci(values):
        lo, hi = np.percentile(values, [2.5, 97.5])
        return float(lo), float(hi)

    return Measured(slope_exponent(ns, curves.tuned()), ci(boots),
                    slope_exponent(ns, gcv_RxN.mean(axis=0)), ci(boots_gcv))


@dataclass
class Prediction:
    beta: float
    beta_ci: tuple
    decay: float
    s: float
    s_ci: tuple
    b: float
    b_ci: tuple
    wrong: dict  # {factor: (b, (lo, hi))}: β × factor, s kept
    rank_range: tuple | None


def eigenpairs(cov_PxP: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (P,) and eigenvectors (P, P), largest first."""
    evals, evecs = np.linalg.eigh(cov_PxP)
    return evals[::-1], evecs[:, ::-1]


def point_prediction(cov_PxP: np.ndarray, theta_star_P: np.ndarray, rank_range) -> tuple:
    """(β, a, s, b, {factor: b}) of one covariance over ``rank_range``."""
    evals, evecs = eigenpairs(cov_PxP)
    beta = fit_tail_index(evals, *rank_range)
    decay = decay_rate(evals * (evecs.T @ theta_star_P) ** 2, *rank_range)
    s, b = implied(beta, decay)
    wrong = {f: predicted_exponent(f * beta, s) if math.isfinite(s) else math.nan
             for f in WRONG_FACTORS}
    return beta, decay, s, b, wrong


def _pooled(group_covs: list, group_counts: list, idx) -> np.ndarray:
    """The covariance of the groups ``idx`` together (each group's weighted by its count)."""
    counts = np.asarray(group_counts, float)
    idx = list(idx)
    return sum(group_covs[i] * counts[i] for i in idx) / counts[idx].sum()


def spectral_prediction(group_covs: list, group_counts: list, theta_star_P: np.ndarray) -> Prediction:
    """The prediction from per-group covariances (each of ``group_counts`` samples, an even number
    of groups ≥ 2) about the same mean: all groups, the two halves (the rank range's rule) and
    the delete-one-group jackknife."""
    def pooled(idx):
        return _pooled(group_covs, group_counts, idx)

    g = len(group_covs)
    if g < 2 or g % 2:
        raise ValueError(f"groups: {g}; the prediction needs an even number ≥ 2")
    full = pooled(range(g))
    halves = [eigenpairs(pooled(range(g // 2)))[0], eigenpairs(pooled(range(g // 2, g)))[0]]
    rank_range = fit_range(eigenpairs(full)[0], *halves)
    if rank_range is None:
        nan2 = (math.nan, math.nan)
        return Prediction(math.nan, nan2, math.nan, math.nan, nan2, math.nan, nan2,
                          {f: (math.nan, nan2) for f in WRONG_FACTORS}, None)
    beta, decay, s, b, wrong = point_prediction(full, theta_star_P, rank_range)
    jack = [point_prediction(pooled([i for i in range(g) if i != k]), theta_star_P, rank_range)
            for k in range(g)]
    return Prediction(beta, jackknife_ci(beta, [j[0] for j in jack]), decay, s,
                      jackknife_ci(s, [j[2] for j in jack]), b, jackknife_ci(b, [j[3] for j in jack]),
                      {f: (wrong[f], jackknife_ci(wrong[f], [j[4][f] for j in jack]))
                       for f in WRONG_FACTORS}, rank_range)


@dataclass
class FiniteSizePrediction:
    """The law's expected exponent for the design (`finite_size_exponent`) from the measured
    eigenpairs, with wrong spectra passed through the same computation: eigenvalues λ_i^f
    (f in WRONG_FACTORS: the tail exponent × f, rank order kept, unit trace) with the target's
    coefficients u_iᵀθ* and the noise ratio unchanged. Jackknife 95% over groups."""
    b: float
    b_ci: tuple
    wrong: dict  # {factor: (b, (lo, hi))}


def _finite_size_bs(cov_PxP, theta_star_P, noise_ratio: float, ns, factors) -> dict:
    """{factor: the finite-size exponent with eigenvalues λ_i^factor} of one covariance, from
    one eigendecomposition."""
    evals, evecs = eigenpairs(cov_PxP)
    coef2 = (evecs.T @ theta_star_P) ** 2
    out = {}
    for factor in factors:
        lam = np.clip(evals, 0.0, None) ** factor
        lam = lam / lam.sum()
        power = lam * coef2
        out[factor] = finite_size_exponent(lam, power, noise_ratio * math.sqrt(float(power.sum())), ns)
    return out


def finite_size_prediction(group_covs: list, group_counts: list, theta_star_P: np.ndarray,
                           noise_ratio: float, ns) -> FiniteSizePrediction:
    """`FiniteSizePrediction` from per-group covariances (as `spectral_prediction` takes them);
    ``noise_ratio``: the noise sd over the signal's sd, as the learning curves were drawn."""
    def pooled(idx):
        return _pooled(group_covs, group_counts, idx)

    g, factors = len(group_covs), (1.0, *WRONG_FACTORS)
    full = _finite_size_bs(pooled(range(g)), theta_star_P, noise_ratio, ns, factors)
    rest = [_finite_size_bs(pooled([i for i in range(g) if i != k]), theta_star_P, noise_ratio, ns, factors)
            for k in range(g)]
    out = {f: (full[f], jackknife_ci(full[f], [r[f] for r in rest])) for f in factors}
    return FiniteSizePrediction(out[1.0][0], out[1.0][1], {f: out[f] for f in WRONG_FACTORS})


def consistent(measured_ci: tuple, predicted_ci: tuple, tolerance: float = TOLERANCE) -> bool:
    """Whether the prediction's interval, widened by ``tolerance`` each side, meets the measured."""
    (m_lo, m_hi), (p_lo, p_hi) = measured_ci, predicted_ci
    return p_lo - tolerance <= m_hi and m_lo <= p_hi + tolerance


def verdict(measured: Measured, prediction: "Prediction | FiniteSizePrediction",
            tolerance: float = TOLERANCE) -> str:
    """'agrees', 'disagrees', 'cannot tell' or 'no prediction' (rules: the module docstring);
    a `FiniteSizePrediction` is judged with ``tolerance=0`` (it has no finite-size bias)."""
    if not all(math.isfinite(v) for v in prediction.b_ci):
        return "no prediction"
    if not consistent(measured.ci, prediction.b_ci, tolerance):
        return "disagrees"
    wrong_rejected = all(math.isfinite(ci[0]) and not consistent(measured.ci, ci, tolerance)
                         for _, ci in prediction.wrong.values())
    return "agrees" if wrong_rejected else "cannot tell"
