"""Redundancy laws ("Scaling laws are redundancy laws"): a spectral tail λ_i ∝ i^(−β) and a source smoothness s set the
data-scaling exponent of kernel ridge regression, excess risk ∝ n^(−2βs/(2βs+1)).

Everything here is numpy: Gaussian features with a chosen covariance spectrum, ridge regression in
its dual form (one eigendecomposition of the n × n Gram matrix per sample, then every
regularisation strength at O(n·p)), the *exact* excess risk (θ̂ − θ*)ᵀ Σ (θ̂ − θ*) of each
estimate (no test set, so no test-set noise), learning curves at the oracle-tuned regularisation,
and the slope of log risk against log n with a bootstrap interval over independent seeds.

The target follows the source condition at its borderline, λ_i θ*_i² = λ_i^(2s) / i, which for
λ_i = i^(−β) is i^(−1−2βs) (Caponnetto & De Vito 2007; Cui et al. 2021, whose noisy-regime rate
with optimal ridge is this module's `predicted_exponent`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..fitting.options import SEED

DEFAULT_REGS = np.logspace(-7, 1, 49)  # ridge λ (the penalty is n·λ·‖θ‖² in the dual form)


def predicted_exponent(beta: float, s: float) -> float:
    """The exponent b of excess risk ∝ n^(−b) for tail index β and source smoothness s ≤ 1."""
    return 2.0 * beta * s / (2.0 * beta * s + 1.0)


def power_law_spectrum(p: int, beta: float) -> np.ndarray:
    """λ_i = i^(−β), i = 1..p: the population covariance's eigenvalues (p,)."""
    return np.arange(1, p + 1, dtype=float) ** -beta


def source_target(spectrum_P: np.ndarray, s: float) -> np.ndarray:
    """θ* (p,) with λ_i θ*_i² = λ_i^(2s) / i: the borderline source condition of smoothness s in the
    eigenbasis of the covariance (eigenvalues sorted from the largest)."""
    lam = np.asarray(spectrum_P, dtype=float)
    i = np.arange(1, len(lam) + 1, dtype=float)
    return np.sqrt(lam ** (2.0 * s) / (i * lam))


@dataclass
class Design:
    """How features are drawn. x = A·(√λ ⊙ z), z ~ N(0, I); with ``mixture`` each sample takes the
    spectrum of one of the components with equal probability (a scale mixture of Gaussians whose
    population covariance is the components' mean). ``transform`` A (p, p) is applied to the
    features the learner sees; the target is the same function of the untransformed x."""

    spectra: list  # one or more (p,) spectra; more than one = an equal-weight mixture
    transform: np.ndarray | None = None

    @property
    def covariance_diag(self) -> np.ndarray:
        return np.mean(np.stack(self.spectra), axis=0)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        z_NxP = rng.standard_normal((n, len(self.spectra[0])))
        which_N = rng.integers(len(self.spectra), size=n)
        scale_NxP = np.sqrt(np.stack(self.spectra))[which_N]
        return z_NxP * scale_NxP  # untransformed x, rows are samples


@dataclass
class LearningCurve:
    ns: np.ndarray  # (n_points,)
    risk_SxNxR: np.ndarray  # excess risk per seed, sample size and regularisation
    regs: np.ndarray  # (R,)

    def oracle(self, seeds=None) -> tuple[np.ndarray, np.ndarray]:
        """Mean excess risk over the given seeds at the λ minimising that mean, per n; and λ."""
        r = self.risk_SxNxR if seeds is None else self.risk_SxNxR[seeds]
        mean_NxR = r.mean(axis=0)
        best_N = np.argmin(mean_NxR, axis=1)
        return mean_NxR[np.arange(len(self.ns)), best_N], self.regs[best_N]


def ridge_excess_risks(x_NxP: np.ndarray, y_N: np.ndarray, theta_star_P: np.ndarray,
                       cov_P: np.ndarray, regs: np.ndarray, transform: np.ndarray | None = None
                       ) -> np.ndarray:
    """Exact excess risk (R,) of ridge regression on features x·Aᵀ for every λ in ``regs``.

    Dual form: θ̂ = Xᵀ (XXᵀ + nλ I)⁻¹ y. With features x' = A x the prediction is θ̂ᵀ A x, so the
    error vector in the original coordinates is Aᵀθ̂ − θ*, weighed by the covariance Σ = diag(cov)."""
    feats_NxP = x_NxP if transform is None else x_NxP @ transform.T
    n = len(y_N)
    gram_NxN = feats_NxP @ feats_NxP.T
    evals_N, evecs_NxN = np.linalg.eigh(gram_NxN)
    evals_N = np.clip(evals_N, 0.0, None)
    uy_N = evecs_NxN.T @ y_N
    # every λ at once: α_R×N = U diag(1/(k + nλ)) Uᵀ y, θ̂ = Xᵀα
    alpha_RxN = (uy_N[None, :] / (evals_N[None, :] + n * regs[:, None])) @ evecs_NxN.T
    theta_RxP = alpha_RxN @ feats_NxP
    if transform is not None:
        theta_RxP = theta_RxP @ transform
    err_RxP = theta_RxP - theta_star_P[None, :]
    return np.einsum("rp,p,rp->r", err_RxP, cov_P, err_RxP)


def learning_curve(design: Design, theta_star_P: np.ndarray, ns, *, noise_std: float = 1.0,
                   seeds: int = 12, regs: np.ndarray = DEFAULT_REGS, seed: int = SEED) -> LearningCurve:
    """Excess risks (seeds, len(ns), len(regs)) of ridge regression with y = θ*ᵀx + noise.

    Within a seed the samples are nested (the first n of one draw of max(ns)), so the curve's
    slope is not swamped by independent draws at neighbouring n; seeds are independent."""
    ns = np.asarray(ns, dtype=int)
    cov_P = design.covariance_diag
    risk = np.empty((seeds, len(ns), len(regs)))
    for k in range(seeds):
        rng = np.random.default_rng([seed, k])
        x_NxP = design.sample(int(ns.max()), rng)
        y_N = x_NxP @ theta_star_P + noise_std * rng.standard_normal(len(x_NxP))
        for j, n in enumerate(ns):
            risk[k, j] = ridge_excess_risks(x_NxP[:n], y_N[:n], theta_star_P, cov_P, regs,
                                            design.transform)
    return LearningCurve(ns, risk, np.asarray(regs))


@dataclass
class RateFit:
    """Fitted b in risk ∝ n^(−b) over ``ns`` with a percentile-bootstrap interval over seeds."""

    exponent: float
    ci: tuple
    ns: np.ndarray
    local: list = field(default_factory=list)  # (n_mid, slope) between consecutive n

    def contains(self, value: float) -> bool:
        return self.ci[0] <= value <= self.ci[1]


def _slope(ns, risk) -> float:
    return -float(np.polyfit(np.log(ns), np.log(risk), 1)[0])


def fit_rate(curve: LearningCurve, *, n_min: int = 0, n_boot: int = 400, seed: int = SEED) -> RateFit:
    """Least-squares slope of log(oracle risk) against log n for n ≥ n_min; the interval is the
    2.5–97.5 percentile of the slope over seed resamples (each resample re-tunes λ)."""
    mask = curve.ns >= n_min
    ns = curve.ns[mask]
    risk, _ = curve.oracle()
    b = _slope(ns, risk[mask])
    rng = np.random.default_rng(seed)
    n_seeds = curve.risk_SxNxR.shape[0]
    boots = [_slope(ns, curve.oracle(rng.integers(n_seeds, size=n_seeds))[0][mask])
             for _ in range(n_boot)]
    lo, hi = np.percentile(boots, [2.5, 97.5])
    local = [(math.sqrt(a * c), -math.log(rb / ra) / math.log(c / a))
             for a, c, ra, rb in zip(ns[:-1], ns[1:], risk[mask][:-1], risk[mask][1:])]
    return RateFit(b, (float(lo), float(hi)), ns, local)


def random_rotation(p: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-random orthogonal matrix (p, p) (QR of a Gaussian matrix with the sign fix)."""
    q, r = np.linalg.qr(rng.standard_normal((p, p)))
    return q * np.sign(np.diag(r))[None, :]


def bounded_transform(p: int, rng: np.random.Generator, condition: float = 10.0) -> np.ndarray:
    """A = R·S: a random rotation after a diagonal rescaling S with entries in [1, condition]
    (log-uniform), so ‖A‖‖A⁻¹‖ ≤ condition: a boundedly invertible change of features."""
    scales = np.exp(rng.uniform(0.0, math.log(condition), p))
    return random_rotation(p, rng) * scales[None, :]


def constant_exponent_power(intervals, grid=None) -> tuple[int, float, float]:
    """How much a set of exponent intervals says about the law's dependence on (β, s): the most of
    `intervals` ((lo, hi) pairs) that one constant exponent, blind to β and s, lies inside, and
    the range of such constants (on `grid`, by default 0 to 1 in steps of 0.01)."""
    grid = np.round(np.arange(0.0, 1.0001, 0.01), 2) if grid is None else np.asarray(grid)
    inside = np.array([sum(lo <= c <= hi for lo, hi in intervals) for c in grid])
    best = grid[inside == inside.max()]
    return int(inside.max()), float(best.min()), float(best.max())
