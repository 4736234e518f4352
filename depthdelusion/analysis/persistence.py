"""Gradient persistence length ℓ (the paper's Proposition 3.1) and its scaling with width.

Per run: g_l / g_D = exp(−(D − l)/ℓ), l = 1..D counted from the input, fitted as a straight
line ln g_l = b − (D − l)/ℓ (a free intercept b, so a noisy top layer does not set the scale).
Across runs: ℓ(W) = c·W^p against ℓ(W) = a·ln W + b, compared by R² in ℓ (as in the paper's §4.7).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from .runs import load_runs

DEFAULT_STEP = 1000  # the paper measures "after 1000 training steps"


@dataclass
class PersistenceFit:
    """ℓ (layers) of one gradient profile. ``status`` is ``"decay"``, ``"no decay"`` (gradients
    do not shrink towards the input, significantly) or ``"too few layers"``; ``length`` and
    ``ci`` are None unless status is ``"decay"``. ``rate`` = 1/ℓ (per layer) is always given."""

    name: str
    depth: int
    width: int
    kind: str
    step: int | None
    requested_step: int | None
    status: str
    rate: float
    rate_ci: tuple
    r2: float
    length: float | None
    ci: tuple | None

    def describe(self) -> str:
        where = f"{self.name} ({self.depth}L×{self.width}, {self.kind} gradients"
        where += f", step {self.step}" if self.step is not None else ""
        where += f" for requested {self.requested_step})" if self.requested_step not in (None, self.step) else ")"
        if self.status == "decay":
            return (f"{where}: ℓ = {self.length:.3g} layers, 95% CI [{self.ci[0]:.3g}, "
                    f"{_fmt_inf(self.ci[1])}], R² = {self.r2:.3f}")
        if self.status == "no decay":
            return (f"{where}: no decay — gradients do not shrink towards the input "
                    f"(rate {self.rate:+.3g}/layer, 95% CI [{self.rate_ci[0]:+.3g}, {self.rate_ci[1]:+.3g}])")
        return f"{where}: {self.status}"


def _fmt_inf(v: float) -> str:
    return "∞" if not np.isfinite(v) else f"{v:.3g}"


def persistence_length(norms, *, name: str = "", width: int = 0, kind: str = "weight",
                       step: int | None = None, requested_step: int | None = None) -> PersistenceFit:
    """Fit ℓ to per-layer gradient norms (index 0 = bottom block, nearest the input)."""
    g = np.asarray(norms, dtype=float)
    depth = len(g)
    if depth and (not np.all(np.isfinite(g)) or np.any(g <= 0)):
        raise ValueError(f"{name or 'profile'}: per-layer {kind} gradient norms must be positive "
                         f"and finite; got {g.tolist()}")
    base = dict(name=name, depth=depth, width=int(width), kind=kind, step=step,
                requested_step=requested_step)
    if depth < 3:  # an intercept and a slope leave no degree of freedom for an interval
        return PersistenceFit(**base, status="too few layers", rate=math.nan,
                              rate_ci=(math.nan, math.nan), r2=math.nan, length=None, ci=None)
    distance = depth - 1 - np.arange(depth)  # D − l: 0 at the top block
    res = stats.linregress(distance, np.log(g))
    rate = -res.slope  # 1/ℓ: how fast ln g falls per layer towards the input
    tq = stats.t.ppf(0.975, depth - 2)
    rate_ci = (rate - tq * res.stderr, rate + tq * res.stderr)
    r2 = res.rvalue ** 2
    if rate_ci[0] <= 0:
        return PersistenceFit(**base, status="no decay", rate=rate, rate_ci=rate_ci, r2=r2,
                              length=None, ci=None)
    ci = (1.0 / rate_ci[1], 1.0 / rate_ci[0])
    return PersistenceFit(**base, status="decay", rate=rate, rate_ci=rate_ci, r2=r2,
                          length=1.0 / rate, ci=ci)


def persistence_lengths(runs, *, step: int = DEFAULT_STEP, kind: str = "weight") -> list[PersistenceFit]:
    """ℓ for every run that logged per-layer gradient norms, at the logged step nearest ``step``."""
    runs = load_runs(runs)
    fits = []
    for i, profile in enumerate(runs.profiles):
        if profile is None or not profile.steps(kind):
            continue
        used, norms = profile.nearest(step, kind)
        fits.append(persistence_length(norms, name=str(runs.name[i]), width=int(runs.width[i]),
                                       kind=kind, step=used, requested_step=step))
    return fits


@dataclass
class PersistenceScaling:
    """ℓ(W) across runs: power law c·W^p and log form a·ln W + b, each with R² in ℓ-space."""

    widths: np.ndarray
    lengths: np.ndarray
    c: float
    p: float
    p_ci: tuple
    r2_power: float
    a: float
    b: float
    r2_log: float
    n_excluded: int

    def predict_power(self, W):
        return self.c * np.asarray(W, float) ** self.p

    def predict_log(self, W):
        return self.a * np.log(np.asarray(W, float)) + self.b

    def summary(self) -> str:
        better = "power law" if self.r2_power > self.r2_log else "log form"
        return (f"ℓ(W) over {len(self.widths)} runs ({len(set(self.widths.tolist()))} widths"
                f"{f', {self.n_excluded} runs without decay excluded' if self.n_excluded else ''}):\n"
                f"  power law  ℓ = {self.c:.4g}·W^{self.p:.3f}  (p 95% CI [{self.p_ci[0]:.3f}, "
                f"{self.p_ci[1]:.3f}])  R² = {self.r2_power:.3f}\n"
                f"  log form   ℓ = {self.a:.4g}·ln W {self.b:+.4g}  R² = {self.r2_log:.3f}\n"
                f"  better by R²: {better}")


def _r2(y, pred) -> float:
    tss = float(((y - y.mean()) ** 2).sum())
    return 1 - float(((y - pred) ** 2).sum()) / tss if tss > 0 else math.nan


def persistence_scaling(fits: list[PersistenceFit]) -> PersistenceScaling:
    """Fit ℓ(W) = c·W^p and ℓ(W) = a·ln W + b to the runs whose gradients decay."""
    used = [f for f in fits if f.status == "decay"]
    W = np.array([f.width for f in used], float)
    ell = np.array([f.length for f in used], float)
    if len(used) < 3 or len(set(W.tolist())) < 2:
        raise ValueError(f"ℓ(W) needs at least 3 runs with decaying gradients over at least 2 "
                         f"widths; got {len(used)} run(s) over {len(set(W.tolist()))} width(s)")
    start = stats.linregress(np.log(W), np.log(ell))
    (c, p), cov = optimize.curve_fit(lambda w, c, p: c * w ** p, W, ell,
                                     p0=(math.exp(start.intercept), start.slope), maxfev=10000)
    if len(used) > 2:
        half = stats.t.ppf(0.975, len(used) - 2) * math.sqrt(max(cov[1, 1], 0.0))
    else:
        half = math.inf
    lin = stats.linregress(np.log(W), ell)
    return PersistenceScaling(
        widths=W, lengths=ell, c=float(c), p=float(p), p_ci=(p - half, p + half),
        r2_power=_r2(ell, c * W ** p), a=float(lin.slope), b=float(lin.intercept),
        r2_log=_r2(ell, lin.slope * np.log(W) + lin.intercept), n_excluded=len(fits) - len(used))
