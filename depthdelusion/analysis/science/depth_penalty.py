"""What a depth costs, over a handful of seeds: the noise of one seed (robust to a seed that
diverged), each depth's penalty against the best depth with Welch's interval, whether a
loss curve over depth is U-shaped, each shape against its neighbours in depth (Welch and paired
intervals; which is worse beyond the noise) and a seed's shared effect removed. Used by the
depth-confound, lr-transfer and depth-vs-size studies; the intervals themselves are
:mod:`..fitting.seed_intervals`'."""
from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence

from depthdelusion.analysis.fitting.seed_intervals import (
    Interval,
    mean_interval,
    paired_interval,
    welch_interval,
)


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


def neighbour_intervals(samples: Sequence[Sequence[float] | None]) -> list[tuple[Interval | None, ...]]:
    """Along conditions in order (shapes by depth), each one's (mean with its t interval, its
    difference to the next by Welch's interval, and by the paired t over seeds); a condition
    given as None (not every seed finished, or one diverged) has no mean and is compared with
    neither neighbour. Paired: seed k is one draw of what every condition shares (its corpus,
    its held-out batches), which cancels in a seed-by-seed difference; Welch counts it as noise."""
    out = []
    for k, xs in enumerate(samples):
        nxt = samples[k + 1] if xs is not None and k + 1 < len(samples) else None
        out.append((None if xs is None else mean_interval(xs),
                    None if nxt is None else welch_interval(xs, nxt),
                    None if nxt is None else paired_interval(xs, nxt)))
    return out


def seed_centred(samples: Sequence[Sequence[float]]) -> list[list[float]]:
    """Conditions that share each seed (seed k draws one corpus and one set of held-out batches
    for all of them): each value minus its seed's mean over the conditions plus the grand mean,
    which removes a seed's shared effect and keeps each condition's mean. Leaves n − 1 free
    values per seed (a slight negative correlation between conditions). Every sample holds its
    seeds in one order."""
    n = len(samples[0])
    seed_mean = [sum(xs[k] for xs in samples) / len(samples) for k in range(n)]
    grand = sum(seed_mean) / n
    return [[x - seed_mean[k] + grand for k, x in enumerate(xs)] for xs in samples]
