"""Gradient persistence length ℓ (the paper's Proposition 3.1) and its scaling with width.

Per run (the windowed protocol): ln g_l is averaged over every logged step inside a window
around the requested step (default the paper's step 1000, window ±20%), and a straight line
ln ḡ_l = b − rate·(D − l) is fitted (l counted from the input, a free intercept b so a noisy top
layer does not set the scale). The primary fit uses blocks 1 … D−1: the bottom block reads the
embedding stream, whose norm under pre-LN is far smaller than the summed stream above it, so its
gradient stands apart from the rest of the stack and alone can turn a decay into growth (its
ratio to block 1 is reported separately, :func:`block_ratios`). rate = 1/ℓ is kept with its
sign: rate > 0 is the paper's decay towards the input, rate < 0 is growth towards the input.
Its interval for one run is a moving-block bootstrap over the logged steps of the window (the
steps are autocorrelated, so they are resampled in blocks of ⌈S^(1/3)⌉ consecutive steps); with
fewer than 3 steps in the window, the t-interval of the regression slope. Where a shape was
trained with several seeds, :func:`seed_interval` gives the interval from the spread across
seeds (Student t with n − 1 degrees of freedom), which is the one a verdict should use.

Across runs: rate(W) is fitted over ALL runs (decaying, flat and growing alike — no selection on
the outcome) in two forms, the paper's power law ℓ = c·W^p (rate = W^−p / c) and its log form
ℓ = a·ln W + b (rate = 1/(a ln W + b)), by least squares on the rates weighted by their
bootstrap variances, compared by weighted R² on the rates. The interval of p is a profile
likelihood (Gaussian errors of unknown scale: n·ln(RSS(p)/RSS_min) ≤ χ²₁,0.95 = 3.84).

The quantitative test of the paper's numbers: D_crit = κ·ln W and D_crit = ℓ·ln(1/ε) give
ℓ(W) = κ·ln W / ln(1/ε) (:func:`paper_implied_length`, κ from :mod:`.reference`), compared with
the measured rate's interval (:func:`compare_with_paper`); the paper's ℓ ∝ W^p across widths is tested by
:func:`power_law_test` on seed rows (a lack-of-fit F, calibrated at 3 seeds; widths with one run
are not tested, since a run's own bootstrap variance is no yardstick for seed-to-seed scatter).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..formats.interval_text import interval_text
from ..reference import PAPER_KAPPA, PAPER_PERSISTENCE_EXPONENT
from ..table.load import load_runs
from ..fitting.options import SEED

# scipy (a second to import) is imported by the functions that fit: the commands' help
# reads the two defaults below (report, persistence; studies/persistence/options.py)
DEFAULT_STEP = 1000  # the paper measures "after 1000 training steps"
DEFAULT_WINDOW = 0.2  # relative half-width: logged steps in [step·(1 − w), step·(1 + w)]
BOOTSTRAP = 400  # resamples of the window's steps per run
PRIMARY_SKIP_BOTTOM = 1  # the primary fit leaves out the bottom block (blocks 1 … D−1)
PAPER_EPSILONS = (0.1, 0.01, 0.001)  # thresholds ε of D_crit = ℓ·ln(1/ε) the test spans
MIN_SEEDS = 3  # a cell a verdict rests on has at least this many seeds
CHI2_95 = 3.841458820694124  # χ²₁ 95% point, for profile-likelihood intervals


@dataclass
class PersistenceFit:
    """The gradient profile of one run around one step.

    ``status``: ``"decay"`` (gradients shrink towards the input: the rate's 95% CI is above 0),
    ``"growth"`` (they grow towards the input: the CI is below 0), ``"flat"`` (the CI spans 0)
    or ``"too few layers"``. ``rate`` = 1/ℓ per layer (signed) and its interval are always given
    for depth ≥ 3; ``length`` = 1/rate (negative for growth) unless flat. ``steps`` are the logged
    steps averaged; ``warning`` says when they are far from the requested step."""

    name: str
    depth: int
    width: int
    kind: str
    step: int | None  # the mean of the steps used, rounded
    requested_step: int | None
    status: str
    rate: float
    rate_ci: tuple
    r2: float
    length: float | None
    ci: tuple | None
    steps: tuple = ()
    window: tuple | None = None
    ci_method: str = "t-interval of the slope"
    rate_se: float = math.nan
    warning: str | None = None
    skip_bottom: int = 0  # blocks nearest the input left out of the fit

    def describe(self) -> str:
        where = f"{self.name} ({self.depth}L×{self.width}, {self.kind} gradients"
        if self.skip_bottom:
            where += f", blocks {self.skip_bottom}–{self.depth - 1}"
        if self.steps:
            where += (f", step {self.steps[0]}" if len(self.steps) == 1 else
                      f", mean of {len(self.steps)} logged steps {self.steps[0]}–{self.steps[-1]}")
        where += ")"
        warn = f"  WARNING: {self.warning}" if self.warning else ""
        if self.status == "too few layers":
            return f"{where}: too few layers{warn}"
        rate = (f"rate 1/ℓ {self.rate:+.3g}/layer, 95% CI [{self.rate_ci[0]:+.3g}, "
                f"{self.rate_ci[1]:+.3g}] ({self.ci_method}), R² {self.r2:.2f}")
        if self.status == "decay":
            return (f"{where}: decay towards the input, ℓ = {self.length:.3g} layers "
                    f"{interval_text(self.ci, '.3g')}; {rate}{warn}")
        if self.status == "growth":
            return (f"{where}: growth towards the input (gradients e-fold every "
                    f"{-self.length:.3g} layers going down); {rate}{warn}")
        return f"{where}: flat — no significant decay or growth; {rate}{warn}"


def _status(rate_ci) -> str:
    if rate_ci[0] > 0:
        return "decay"
    if rate_ci[1] < 0:
        return "growth"
    return "flat"


def _length_ci(rate: float, rate_ci: tuple, status: str):
    if status == "flat":
        return None, None
    lo, hi = rate_ci  # same sign: 1/hi < 1/lo for decay (both > 0) and growth (both < 0)
    return 1.0 / rate, (1.0 / hi, 1.0 / lo)


def _line(log_g_D: np.ndarray):
    """rate (= −slope of ln g against D − l), its stderr and R²."""
    from scipy import stats

    depth = len(log_g_D)
    distance = depth - 1 - np.arange(depth)  # D − l: 0 at the top block
    res = stats.linregress(distance, log_g_D)
    return -res.slope, res.stderr, res.rvalue ** 2


def _rates(log_g_SxD: np.ndarray) -> np.ndarray:
    """rate of each row's profile (vectorised least-squares slope)."""
    depth = log_g_SxD.shape[1]
    distance = depth - 1 - np.arange(depth)
    dc = distance - distance.mean()
    return -(log_g_SxD - log_g_SxD.mean(1, keepdims=True)) @ dc / (dc @ dc)


def block_length(n_steps: int) -> int:
    """Moving-block length for ``n_steps`` logged steps: ⌈n^(1/3)⌉ (the usual rate for the
    variance of a mean), at least 1 and at most n."""
    return int(min(n_steps, max(1, math.ceil(n_steps ** (1 / 3) - 1e-9))))


def moving_block_indices(rng, n: int, length: int, draws: int) -> np.ndarray:
    """[draws, n] step indices: ⌈n/length⌉ blocks of ``length`` consecutive steps, starts drawn
    uniformly from the n − length + 1 possible ones (Künsch's moving-block bootstrap), cut to n."""
    per = math.ceil(n / length)
    starts = rng.integers(0, n - length + 1, size=(draws, per))
    return (starts[:, :, None] + np.arange(length)).reshape(draws, -1)[:, :n]


def persistence_length(norms, *, name: str = "", width: int = 0, kind: str = "weight",
                       step: int | None = None, requested_step: int | None = None,
                       seed: int = SEED) -> PersistenceFit:
    """Fit the rate 1/ℓ to per-layer gradient norms (index 0 = bottom block, nearest the input).

    ``norms``: one profile [D], or several logged steps' profiles [S, D] (the window), whose
    ln g are averaged; with S ≥ 3 the interval is a moving-block bootstrap over the S steps."""
    from scipy import stats

    g = np.asarray(norms, dtype=float)
    g_SxD = g[None, :] if g.ndim == 1 else g
    depth = g_SxD.shape[1]
    if g_SxD.size and (not np.all(np.isfinite(g_SxD)) or np.any(g_SxD <= 0)):
        raise ValueError(f"{name or 'profile'}: per-layer {kind} gradient norms must be positive "
                         f"and finite; got {g.tolist()}")
    steps = (step,) if step is not None else ()
    base = dict(name=name, depth=depth, width=int(width), kind=kind, step=step,
                requested_step=requested_step, steps=steps)
    if depth < 3:  # an intercept and a slope leave no degree of freedom for an interval
        return PersistenceFit(**base, status="too few layers", rate=math.nan,
                              rate_ci=(math.nan, math.nan), r2=math.nan, length=None, ci=None)
    log_g_SxD = np.log(g_SxD)
    rate, stderr, r2 = _line(log_g_SxD.mean(0))
    n_steps = len(log_g_SxD)
    if n_steps >= 3:
        length = block_length(n_steps)
        pick_BxS = moving_block_indices(np.random.default_rng(seed), n_steps, length, BOOTSTRAP)
        boot = _rates(log_g_SxD[pick_BxS].mean(1))
        rate_ci = (float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975)))
        se = float(boot.std(ddof=1))
        method = f"moving-block bootstrap over {n_steps} steps, blocks of {length}"
    else:
        tq = stats.t.ppf(0.975, depth - 2)
        rate_ci = (rate - tq * stderr, rate + tq * stderr)
        se = float(stderr)
        method = "t-interval of the slope"
    status = _status(rate_ci)
    length, ci = _length_ci(rate, rate_ci, status)
    return PersistenceFit(**base, status=status, rate=float(rate), rate_ci=rate_ci, r2=float(r2),
                          length=length, ci=ci, ci_method=method, rate_se=se)


def window_bounds(step: int, window: float) -> tuple[int, int]:
    if not window >= 0:
        raise ValueError(f"window={window!r}: the relative half-width must be >= 0 (e.g. 0.2)")
    return math.floor(step * (1 - window)), math.ceil(step * (1 + window))


def windowed_norms(profile, step: int, window: float = DEFAULT_WINDOW, kind: str = "weight"):
    """(steps used, norms [S, D], warning or None): every logged step in the window; if none,
    the nearest logged step, with a warning naming how far it is."""
    lo, hi = window_bounds(step, window)
    table = profile.by_kind(kind)
    used = [s for s in sorted(table) if lo <= s <= hi]
    warning = None
    if not used:
        nearest, _ = profile.nearest(step, kind)
        used = [nearest]
        warning = (f"no per-layer norms logged in the window [{lo}, {hi}] around the requested "
                   f"step {step}; used step {nearest} instead")
    elif len(used) < 3:
        warning = (f"only {len(used)} logged step(s) in the window [{lo}, {hi}]: the interval is "
                   f"the regression's, not a bootstrap over steps")
    return tuple(used), np.stack([table[s] for s in used]), warning


def windowed_fit(profile, *, step: int, window: float, kind: str, name: str, width: int,
                 seed: int, skip_bottom: int = 0) -> PersistenceFit:
    """The rate 1/ℓ of one run from its logged steps around ``step`` (:func:`windowed_norms`),
    recording the steps used; ``skip_bottom`` leaves out that many blocks nearest the input
    (``depth`` stays the run's)."""
    used, norms_SxD, warning = windowed_norms(profile, step, window, kind)
    f = persistence_length(norms_SxD[:, skip_bottom:], name=name, width=width, kind=kind,
                           requested_step=step, seed=seed)
    f.steps, f.step, f.window, f.warning = used, int(round(np.mean(used))), window_bounds(step, window), warning
    f.depth, f.skip_bottom = norms_SxD.shape[1], skip_bottom
    return f


def block_ratios(norms) -> dict:
    """The two end blocks' steps, from the (geometric) mean profile over the rows of ``norms``
    [S, D] or one profile [D]: ``bottom`` = g_0/g_1 (the bottom block against its neighbour),
    ``top`` = g_{D−1}/g_{D−2} (the top block against its neighbour), ``inner`` = g_1/g_{D−1} (the
    ends of the primary fit's blocks) and ``ends`` = g_0/g_{D−1}."""
    g = np.exp(np.log(np.atleast_2d(np.asarray(norms, float))).mean(0))
    if len(g) < 2:
        return {"bottom": math.nan, "top": math.nan, "inner": math.nan, "ends": math.nan}
    return {"bottom": float(g[0] / g[1]), "top": float(g[-1] / g[-2]),
            "inner": float(g[1] / g[-1]), "ends": float(g[0] / g[-1])}


def persistence_lengths(runs, *, step: int = DEFAULT_STEP, kind: str = "weight",
                        window: float = DEFAULT_WINDOW,
                        skip_bottom: int = PRIMARY_SKIP_BOTTOM) -> list[PersistenceFit]:
    """The windowed rate for every run that logged per-layer gradient norms (by default over
    blocks 1 … D−1, the primary fit)."""
    runs = load_runs(runs)
    fits = []
    for i, profile in enumerate(runs.profiles):
        if profile is None or not profile.steps(kind):
            continue
        fits.append(windowed_fit(profile, step=step, window=window, kind=kind,
                                 name=str(runs.name[i]), width=int(runs.width[i]), seed=i,
                                 skip_bottom=skip_bottom))
    return fits


@dataclass
class SeedInterval:
    """A rate over the seeds of one shape: mean, SD across seeds, and the 95% interval
    mean ± t_{n−1}·SD/√n (``half_width``); with one seed, the run's own interval and SD NaN."""

    n: int
    mean: float
    sd: float
    half_width: float
    lo: float
    hi: float
    method: str

    @property
    def status(self) -> str:
        return _status((self.lo, self.hi)) if np.isfinite(self.lo) else "too few layers"

    @property
    def enough_seeds(self) -> bool:
        return self.n >= MIN_SEEDS


def seed_interval(fits: list[PersistenceFit]) -> SeedInterval:
    """The interval on the rate of one shape from the spread of its seeds' rates (t-based,
    n − 1 degrees of freedom); a single run keeps its moving-block bootstrap interval."""
    from scipy import stats

    used = [f for f in fits if np.isfinite(f.rate)]
    if not used:
        return SeedInterval(0, math.nan, math.nan, math.nan, math.nan, math.nan, "no rate")
    if len(used) == 1:
        f = used[0]
        return SeedInterval(1, f.rate, math.nan, (f.rate_ci[1] - f.rate_ci[0]) / 2, f.rate_ci[0],
                            f.rate_ci[1], f"one run: {f.ci_method}")
    r = np.array([f.rate for f in used])
    n, mean, sd = len(r), float(r.mean()), float(r.std(ddof=1))
    half = float(stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n))
    return SeedInterval(n, mean, sd, half, mean - half, mean + half, f"t over {n} seeds ({n - 1} df)")


def paper_implied_length(width, eps: float) -> float:
    """ℓ(W) = κ·ln W / ln(1/ε): the persistence length the paper's D_crit = κ·ln W implies when
    D_crit is the depth at which g_0/g_D has fallen to ε (D_crit = ℓ·ln(1/ε))."""
    if not 0 < eps < 1:
        raise ValueError(f"eps={eps!r}: the threshold must lie in (0, 1), e.g. 0.01")
    return PAPER_KAPPA * math.log(width) / math.log(1 / eps)


def length_statement(lo: float, hi: float) -> str:
    """What a 95% interval [lo, hi] on the rate says about ℓ = 1/rate."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "no rate"
    if lo > 0:
        return f"ℓ in {interval_text((1 / hi, 1 / lo), '.3g')} layers (decay)"
    if hi < 0:
        return f"growth towards the input (no decay; growth length {-1 / lo:.3g}–{-1 / hi:.3g} layers)"
    bound = 1 / max(abs(lo), abs(hi))
    return f"no decay or growth seen: |ℓ| > {bound:.3g} layers at 95%"


def compare_with_paper(width: int, lo: float, hi: float, epsilons=PAPER_EPSILONS) -> dict:
    """{ε: (implied ℓ, whether its rate 1/ℓ lies inside [lo, hi])} for one width."""
    out = {}
    for eps in epsilons:
        ell = paper_implied_length(width, eps)
        out[eps] = (ell, bool(lo <= 1 / ell <= hi))
    return out


@dataclass
class PowerLawTest:
    """rate = k·W^−p at the paper's fixed p across widths, fitted to the seed rows (least squares,
    one seed variance): k with its t interval on n − 1 df, and the lack-of-fit F of the width
    means about k·W^−p against the seeds' scatter (:func:`.seed_intervals.lack_of_fit`), whose
    null distribution holds at 3 seeds. No test without replicated widths."""

    p: float
    widths: tuple
    rates: tuple  # the seed mean per width
    sd: tuple     # the seed SD per width
    k: float
    k_ci: tuple
    f: float
    dof: tuple    # (widths − 1, rows − widths)
    pvalue: float

    @property
    def consistent(self) -> bool:
        """The paper's law holds if the common factor is a decay (k's interval above 0) and the
        width means follow W^−p within the seed noise (lack-of-fit p ≥ 0.05)."""
        return self.k_ci[0] > 0 and self.pvalue >= 0.05

    def summary(self) -> str:
        pts = ", ".join(f"W={w}: {r:+.4f} ± {s:.4f}" for w, r, s in zip(self.widths, self.rates, self.sd))
        fails = ([f"k is not a decay (its interval reaches 0 or below)"] if self.k_ci[0] <= 0 else []) + (
            [f"the rates do not scale as W^−{self.p:g} (F {self.f:.3g} on {self.dof} df, p = {self.pvalue:.2g})"]
            if self.pvalue < 0.05 else [])
        why = "consistent" if self.consistent else "not consistent: " + "; ".join(fails)
        return (f"rate = k·W^−{self.p:g}: k = {self.k:+.3g} [{self.k_ci[0]:+.3g}, {self.k_ci[1]:+.3g}], "
                f"lack of fit F {self.f:.3g} on {self.dof} df (p = {self.pvalue:.2g}); rates "
                f"(mean ± SD over seeds) {pts} — {why}")


def power_law_test(widths, seed_rates, p: float = PAPER_PERSISTENCE_EXPONENT) -> PowerLawTest:
    """Test rate ∝ W^−p (ℓ ∝ W^p, the paper's p by default) on per-width seed rates (one
    sequence per width, ≥ 2 seeds each); needs at least 2 distinct widths."""
    from scipy import stats

    from ..fitting.seed_intervals import lack_of_fit, mean_se

    W = [int(w) for w in widths]
    if len(set(W)) < 2:
        raise ValueError(f"the W^-p test needs rates at 2 or more widths; got {sorted(set(W))}")
    if any(len(r) < 2 for r in seed_rates):
        raise ValueError("the W^-p test needs at least 2 seeds at every width (the seed noise "
                         "is its yardstick)")
    x = np.concatenate([np.full(len(r), w ** -p) for w, r in zip(W, seed_rates)])
    y = np.concatenate([np.asarray(r, float) for r in seed_rates])
    k = float(x @ y / (x @ x))
    dof = len(y) - 1
    k_se = math.sqrt(float(np.sum((y - k * x) ** 2)) / dof / float(x @ x))
    t = stats.t.ppf(0.975, dof)
    cells = np.concatenate([np.full(len(r), w) for w, r in zip(W, seed_rates)])
    lof = lack_of_fit(y, k * x, cells.tolist(), 1)
    stats_ = [mean_se(r) for r in seed_rates]
    return PowerLawTest(p=p, widths=tuple(W), rates=tuple(m for m, _, _ in stats_),
                        sd=tuple(sd for _, sd, _ in stats_), k=k, k_ci=(k - t * k_se, k + t * k_se),
                        f=lof.f, dof=(lof.df_lof, lof.df_pure), pvalue=lof.p)


@dataclass
class PersistenceScaling:
    """rate(W) = 1/ℓ(W) over all runs: power law ℓ = c·W^p and log form ℓ = a·ln W + b."""

    widths: np.ndarray
    rates: np.ndarray
    rate_se: np.ndarray
    c: float  # ℓ = c·W^p; c < 0 means growth towards the input
    p: float
    p_ci: tuple  # profile likelihood; ±inf where the profile does not close inside |p| ≤ 4
    r2_power: float
    a: float
    b: float
    r2_log: float
    n_growth: int
    n_flat: int

    @property
    def lengths(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return 1.0 / self.rates

    def predict_power(self, W):
        return self.c * np.asarray(W, float) ** self.p

    def predict_log(self, W):
        return self.a * np.log(np.asarray(W, float)) + self.b

    def predict_rate_power(self, W):
        return 1.0 / self.predict_power(W)

    def predict_rate_log(self, W):
        with np.errstate(divide="ignore"):
            return 1.0 / self.predict_log(W)

    def summary(self) -> str:
        better = ("neither (equal R²)" if abs(self.r2_power - self.r2_log) < 1e-3 else
                  "power law" if self.r2_power > self.r2_log else "log form")
        n = len(self.widths)
        sign = ("" if self.c > 0 else
                "  (c < 0: the fitted rates are negative — gradients grow towards the input, so "
                "this is a growth length, not the paper's decay)\n")
        return (f"ℓ(W) from the rate 1/ℓ of all {n} runs ({len(set(self.widths.tolist()))} widths; "
                f"{n - self.n_growth - self.n_flat} decay, {self.n_flat} flat, {self.n_growth} "
                f"growth; none excluded), weighted by the rates' variances:\n"
                f"  power law  ℓ = {self.c:.4g}·W^{self.p:.3f}  (p 95% profile-likelihood CI "
                f"{interval_text(self.p_ci, '.3g')})  weighted R² on 1/ℓ = "
                f"{self.r2_power:.3f}\n{sign}"
                f"  log form   ℓ = {self.a:.4g}·ln W {self.b:+.4g}  weighted R² on 1/ℓ = {self.r2_log:.3f}\n"
                f"  better by R²: {better}")


def _wr2(y, pred, w) -> float:
    mean = np.sum(w * y) / np.sum(w)
    tss = float(np.sum(w * (y - mean) ** 2))
    return 1 - float(np.sum(w * (y - pred) ** 2)) / tss if tss > 0 else math.nan


def _power_profile(W, r, w, p):
    """Best k for rate = k·W^−p at fixed p (linear), and the weighted RSS."""
    x = W ** -p
    k = np.sum(w * r * x) / np.sum(w * x * x)
    return k, float(np.sum(w * (r - k * x) ** 2))


def persistence_scaling(fits: list[PersistenceFit]) -> PersistenceScaling:
    """Fit 1/ℓ(W) over every run with a rate (all statuses but "too few layers")."""
    from scipy import optimize, stats

    used = [f for f in fits if np.isfinite(f.rate)]
    W = np.array([f.width for f in used], float)
    r = np.array([f.rate for f in used], float)
    if len(used) < 3 or len(set(W.tolist())) < 2:
        raise ValueError(f"ℓ(W) needs at least 3 runs with ≥ 3 layers over at least 2 widths; "
                         f"got {len(used)} run(s) over {len(set(W.tolist()))} width(s)")
    se = np.array([f.rate_se for f in used], float)
    # A floor keeps one near-noiseless run from taking all the weight.
    se = np.where(np.isfinite(se), se, np.nanmax(np.append(se, 1e-3)))
    se = np.maximum(se, max(np.nanmedian(se) * 0.1, 1e-6))
    w = 1.0 / se ** 2
    n = len(used)

    grid = np.linspace(-4, 4, 1601)
    rss = np.array([_power_profile(W, r, w, p)[1] for p in grid])
    i = int(np.argmin(rss))
    lo_b, hi_b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    res = optimize.minimize_scalar(lambda p: _power_profile(W, r, w, p)[1], bounds=(lo_b, hi_b),
                                   method="bounded")
    p, rss_min = float(res.x), float(res.fun)
    k, _ = _power_profile(W, r, w, p)
    inside = n * np.log(np.maximum(rss, 1e-300) / max(rss_min, 1e-300)) <= CHI2_95
    below, above = grid[grid < p], grid[grid > p]
    p_lo = -math.inf if inside[grid < p].all() else float(below[~inside[grid < p]].max())
    p_hi = math.inf if inside[grid > p].all() else float(above[~inside[grid > p]].min())
    c = 1.0 / k if k != 0 else math.inf

    # log form: rate = 1/(a ln W + b); start from a straight line of ℓ on ln W where ℓ > 0.
    pos = r > 0
    if pos.sum() >= 2 and len(set(W[pos].tolist())) >= 2:
        start = stats.linregress(np.log(W[pos]), 1.0 / r[pos])
        x0 = (start.slope, start.intercept)
    else:
        x0 = (0.0, 1.0 / np.mean(r) if np.mean(r) != 0 else 1e3)
    lw = np.log(W)

    def resid(ab):
        den = ab[0] * lw + ab[1]
        den = np.where(np.abs(den) < 1e-9, 1e-9, den)
        return np.sqrt(w) * (r - 1.0 / den)

    fit_log = optimize.least_squares(resid, x0, method="lm", max_nfev=20000)
    a, b = (float(v) for v in fit_log.x)
    with np.errstate(divide="ignore"):
        r2_log = _wr2(r, 1.0 / (a * lw + b), w)
    return PersistenceScaling(
        widths=W, rates=r, rate_se=se, c=float(c), p=p, p_ci=(p_lo, p_hi),
        r2_power=_wr2(r, k * W ** -p, w), a=a, b=b, r2_log=r2_log,
        n_growth=sum(f.status == "growth" for f in used), n_flat=sum(f.status == "flat" for f in used))
