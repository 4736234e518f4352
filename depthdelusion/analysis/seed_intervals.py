"""Intervals over a handful of seeds: Student's t for one mean, Welch's t for the difference of
two means (unequal variances, Welch–Satterthwaite degrees of freedom), and the paired t for
differences taken seed by seed. With 3 seeds these are
the intervals that cover at their nominal rate under normal seed noise; a percentile bootstrap
over 3 values is 2-3x too narrow (it cannot see beyond the values it resamples)."""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence


class SeedInterval(NamedTuple):
    estimate: float  # the mean (or difference of means)
    lo: float
    hi: float
    dof: float  # t's degrees of freedom (nan: fewer than 2 values on a side)


def t_interval(xs: Sequence[float], level: float = 0.95) -> SeedInterval:
    """Mean of `xs` with its Student-t interval (n − 1 dof); nan ends for fewer than 2 values."""
    from scipy import stats

    n = len(xs)
    if n == 0:
        return SeedInterval(math.nan, math.nan, math.nan, math.nan)
    mean = sum(xs) / n
    if n < 2:
        return SeedInterval(mean, math.nan, math.nan, math.nan)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return SeedInterval(mean, mean - half, mean + half, float(n - 1))


def welch_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> SeedInterval:
    """mean(a) − mean(b) with Welch's interval; nan ends when a side has fewer than 2 values."""
    from scipy import stats

    if not a or not b:
        return SeedInterval(math.nan, math.nan, math.nan, math.nan)
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    if len(a) < 2 or len(b) < 2:
        return SeedInterval(ma - mb, math.nan, math.nan, math.nan)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1) / len(a)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1) / len(b)
    se2 = va + vb
    if se2 == 0:
        return SeedInterval(ma - mb, ma - mb, ma - mb, math.inf)
    dof = se2 ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = float(stats.t.ppf(0.5 + level / 2, dof)) * math.sqrt(se2)
    return SeedInterval(ma - mb, ma - mb - half, ma - mb + half, dof)


def paired_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> SeedInterval:
    """mean(a − b) over pairs (a[i], b[i] at the same seed) with the t interval of the
    differences (n − 1 dof): for two conditions that share each seed's data, where the seed's
    own effect cancels in the difference."""
    if len(a) != len(b):
        raise ValueError(f"paired interval: {len(a)} and {len(b)} values; pairs need equal counts")
    return t_interval([x - y for x, y in zip(a, b)], level)
