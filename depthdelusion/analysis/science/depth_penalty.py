"""What a depth costs, over a handful of seeds: the noise of one seed (robust to a seed that
diverged), each depth's penalty against the best depth with Welch's interval, and whether a
loss curve over depth is U-shaped. Used by the depth-confound and lr-transfer studies; the
intervals themselves are :mod:`..fitting.seed_intervals`'."""
from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence

from depthdelusion.analysis.fitting.seed_intervals import Interval, welch_interval


def robust_seed_sd(samples: Iterable[Sequence[float]]) -> tuple[float | None, int | None]:
    """Seed standard deviation σ over every sample of >= 2 finite values (the seeds of one
    condition), and its degrees of freedom; (None, None) when there is none. Robust: each
    sample's variance s² over its ν = n − 1 dof is ~ σ² χ²_ν/ν, so σ² is the median over samples
    of s² divided by the median of χ²_ν/ν — one condition at the edge of stability (a seed that
    diverged) does not set the noise of every other, as it would in a pooled mean of squares."""
    from scipy import stats

    ratios, dof = [], 0
    for xs in samples:
        if len(xs) >= 2 and all(math.isfinite(x) for x in xs):
            n = len(xs)
            m = sum(xs) / n
            s2 = sum((x - m) ** 2 for x in xs) / (n - 1)
            ratios.append(s2 / (stats.chi2.median(n - 1) / (n - 1)))
            dof += n - 1
    if not ratios:
        return None, None
    ratios.sort()
    k = len(ratios)
    med = ratios[k // 2] if k % 2 else (ratios[k // 2 - 1] + ratios[k // 2]) / 2
    return math.sqrt(med), dof


def penalty_against_best(samples: dict[Hashable, Sequence[float]]) -> dict[Hashable, Interval]:
    """Per key (a depth), mean(key) − mean(best key) of its seeds with Welch's 95% t interval,
    the best key (lowest mean) taken as given: the interval does not count its choice. The best
    key itself: 0 and no interval. Only over keys with >= 2 seeds, all finite; {} when fewer
    than two such keys."""
    full = {k: xs for k, xs in samples.items() if len(xs) >= 2 and all(math.isfinite(x) for x in xs)}
    if len(full) < 2:
        return {}
    best = min(full, key=lambda k: sum(full[k]) / len(full[k]))
    return {k: (Interval(0.0, 0.0, math.nan, math.nan, math.nan) if k == best
                else welch_interval(xs, full[best])) for k, xs in full.items()}


def is_u_shaped(losses: Sequence[float], tolerance: float) -> bool:
    """Strictly interior minimum that beats both ends by more than `tolerance` nats."""
    i = min(range(len(losses)), key=losses.__getitem__)
    return 0 < i < len(losses) - 1 and min(losses[0], losses[-1]) - losses[i] > tolerance
