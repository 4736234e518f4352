"""Intervals and tests over a handful of seeds: the one place the studies get them from.

With three seeds a percentile bootstrap of the mean is too narrow (it resamples 3 values, so its
spread is the plug-in SD × √(2/3)/√3 and it ignores the uncertainty of the SD itself); Student's
t covers at its nominal rate when the seed noise is Gaussian. So:

- a mean over seeds: Student's t on n − 1 degrees of freedom;
- a difference of two means: Welch's t with the Welch–Satterthwaite degrees of freedom;
- a difference of two conditions that share each seed (its data, its held-out batches): the
  paired t on the seed-by-seed differences, in which the seed's own effect cancels;
- a ratio of two independent estimates: Fieller's interval (unbounded when the denominator is
  not distinguishable from 0 at the same level);
- a law fitted to seed rows against the seed noise: the lack-of-fit F test (the spread of the
  cell means about the law against the spread of the seeds within cells), whose null
  distribution holds for any number of seeds under Gaussian noise of one variance.

Convention (analysis/README.md): "m ± s" after a mean over seeds is the mean ± the seeds' standard
deviation s (n − 1 in the denominator); "[lo, hi]" is a 95% interval by the method named beside it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    """An estimate, its standard error, its interval at ``level`` and its degrees of freedom."""

    estimate: float
    se: float
    lo: float
    hi: float
    df: float
    level: float = LEVEL


def _finite(xs) -> list[float]:
    xs = [float(x) for x in xs]
    if not all(math.isfinite(x) for x in xs):
        raise ValueError("seed values must be finite (a diverged seed has no mean)")
    return xs


def mean_se(xs) -> tuple[float, float, float]:
    """(mean, SD with n − 1, standard error) of seed values (SD and SE nan for one value)."""
    xs = _finite(xs)
    n = len(xs)
    m = sum(xs) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1)) if n > 1 else math.nan
    return m, sd, sd / math.sqrt(n)


def _t_quantile(df: float, level: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + level / 2, df))


def mean_interval(xs, level: float = LEVEL) -> Interval:
    """Student's t interval for the mean over seeds (n − 1 df; needs ≥ 2 values)."""
    m, _, se = mean_se(xs)
    df = len(xs) - 1
    if df < 1:
        raise ValueError("a t interval needs at least 2 seeds")
    h = _t_quantile(df, level) * se
    return Interval(m, se, m - h, m + h, df, level)


def welch_df(se_a: float, df_a: float, se_b: float, df_b: float) -> float:
    """Welch–Satterthwaite degrees of freedom of a difference of two independent estimates."""
    num = (se_a ** 2 + se_b ** 2) ** 2
    den = se_a ** 4 / df_a + se_b ** 4 / df_b
    return num / den if den > 0 else float(df_a + df_b)


def welch_interval(a, b, level: float = LEVEL) -> Interval:
    """Welch's t interval for mean(a) − mean(b) (each ≥ 2 seeds)."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("a Welch interval needs at least 2 seeds on each side")
    ma, _, sa = mean_se(a)
    mb, _, sb = mean_se(b)
    se = math.hypot(sa, sb)
    df = welch_df(sa, len(a) - 1, sb, len(b) - 1)
    h = _t_quantile(df, level) * se
    return Interval(ma - mb, se, ma - mb - h, ma - mb + h, df, level)


def paired_interval(a, b, level: float = LEVEL) -> Interval:
    """mean(a − b) over pairs (a[i], b[i] at the same seed) with the t interval of the
    differences (n − 1 df)."""
    if len(a) != len(b):
        raise ValueError(f"paired interval: {len(a)} and {len(b)} values; pairs need equal counts")
    return mean_interval([x - y for x, y in zip(a, b)], level)


def welch_p(a, b) -> float:
    """Two-sided p-value of Welch's t test of equal means."""
    from scipy import stats

    iv = welch_interval(a, b)
    if iv.se == 0:
        return 0.0 if iv.estimate != 0 else 1.0
    return float(2 * stats.t.sf(abs(iv.estimate / iv.se), iv.df))


def fieller_ratio(num: Interval, den: Interval, level: float = LEVEL) -> tuple[float, float, float]:
    """(ratio, lo, hi): Fieller's interval for num/den of two independent estimates, t quantile
    on the smaller of their degrees of freedom (conservative). (ratio, -inf, inf) when the
    denominator's own interval includes 0 (the set is then unbounded)."""
    t = _t_quantile(min(num.df, den.df), level)
    a, b, sa, sb = num.estimate, den.estimate, num.se, den.se
    ratio = a / b if b else math.nan
    qa = b * b - (t * sb) ** 2
    if qa <= 0:
        return ratio, -math.inf, math.inf
    disc = (a * b) ** 2 - qa * (a * a - (t * sa) ** 2)
    root = math.sqrt(max(disc, 0.0))
    return ratio, (a * b - root) / qa, (a * b + root) / qa


@dataclass(frozen=True)
class LackOfFit:
    """The lack-of-fit F test: ``f`` on (``df_lof``, ``df_pure``) degrees of freedom, ``p``."""

    f: float
    df_lof: int
    df_pure: int
    p: float
    rss: float
    rss_pure: float
    max_cell_residual: float  # the largest |mean over a cell's seeds of data − law|


def lack_of_fit(y, fitted, cells, k: int) -> LackOfFit:
    """The law's fit of rows ``y`` (``fitted``: its predictions, ``k`` its parameters) against
    the seed noise: cells are the rows' cell labels (rows in one cell differ only by seed).
    F = [(RSS − RSS_pure)/(m − k)] / [RSS_pure/(n − m)], m cells; exact for a linear law under
    Gaussian noise of one variance, first-order for a nonlinear one."""
    from scipy import stats

    groups: dict = {}
    for yi, fi, c in zip(y, fitted, cells):
        groups.setdefault(c, []).append((float(yi), float(fi)))
    n, m = sum(len(g) for g in groups.values()), len(groups)
    if m <= k or n <= m:
        raise ValueError(f"a lack-of-fit test needs more cells ({m}) than parameters ({k}) "
                         f"and replicated cells (rows {n})")
    rss = sum((yi - fi) ** 2 for g in groups.values() for yi, fi in g)
    pure = sum((yi - sum(v for v, _ in g) / len(g)) ** 2 for g in groups.values() for yi, _ in g)
    df_lof, df_pure = m - k, n - m
    f = ((rss - pure) / df_lof) / (pure / df_pure) if pure > 0 else math.inf
    worst = max(abs(sum(yi - fi for yi, fi in g) / len(g)) for g in groups.values())
    return LackOfFit(f, df_lof, df_pure, float(stats.f.sf(f, df_lof, df_pure)), rss, pure, worst)
