"""The depth-vs-size study's pre-specified tests (issue 60), numbers only (`report.py` words them):

- per arm and level, the trend of the loss in ln(D/W) over every test seed of every complete cell
  (`seed_effect_slope`: OLS with a fixed effect per seed), and the deepest-narrowest shape against
  the shallowest-widest (the two ends of D/W, Welch), Holm-corrected together over every arm and
  level (`trend_family`);
- per arm and level, the series that hold one dimension fixed (`series`): loss against ln D at one
  width, against ln W at one depth, each slope with its t interval (Holm over the level's series),
  and each shape's contrast to the level's base shape (Welch, description);
- the paper's critical depth D_crit = κ·ln W with κ fixed (`below_critical`): the shapes below it
  should differ by N alone; the deepest-narrowest against the shallowest-widest among them (Welch,
  Holm over arms and levels).

Cells are the study's `Cell`s with every test seed finished and finite, their seeds in one order.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from scipy import stats

from depthdelusion.analysis.fitting.seed_intervals import Interval, welch_interval, welch_p

LEVEL = 0.95


class LackOfFit(NamedTuple):
    """The straight line against the cell means (two-way layout cells × seeds): F, its dofs, p."""

    f: float
    df_lack: int
    df_pure: int
    p: float


class Slope(NamedTuple):
    """d loss / d x with its t interval (`Interval`: estimate, se, lo, hi, df), two-sided p, the
    cells and seeds it rests on, and the line's lack of fit (None below 3 cells)."""

    interval: Interval
    p: float
    cells: int
    seeds: int
    lack_of_fit: LackOfFit | None


def seed_effect_slope(xs: Sequence[float], samples: Sequence[Sequence[float]]) -> Slope:
    """OLS of loss on x over every seed of every cell (`samples[c][s]`: cell c at seed s; x is the
    cell's), with a fixed effect per seed: the slope of the seed-centred points (each loss minus
    its seed's mean over these cells), on C·S − S − 1 dof (an intercept and S − 1 seed effects).
    Assumes the loss linear in x within the cells and the seed noise independent with one
    variance; the lack-of-fit F of the line (C − 2 and (C − 1)(S − 1) dof) checks the first."""
    n_cells, n_seeds = len(xs), len(samples[0]) if samples else 0
    if n_cells < 2 or n_seeds < 2 or any(len(s) != n_seeds for s in samples) or len(samples) != n_cells:
        raise ValueError(f"a seed-effect slope needs >= 2 cells with the same >= 2 seeds each; got {len(samples)} cells")
    seed_mean = [sum(s[k] for s in samples) / n_cells for k in range(n_seeds)]
    grand = sum(seed_mean) / n_seeds
    x_bar = sum(xs) / n_cells
    sxx = n_seeds * sum((x - x_bar) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("a seed-effect slope needs at least two distinct x")
    slope = sum((x - x_bar) * (y - seed_mean[k]) for x, s in zip(xs, samples) for k, y in enumerate(s)) / sxx
    rss = sum((y - seed_mean[k] - slope * (x - x_bar)) ** 2 for x, s in zip(xs, samples) for k, y in enumerate(s))
    df = n_cells * n_seeds - n_seeds - 1
    se = math.sqrt(rss / df / sxx)
    half = stats.t.ppf(0.5 + LEVEL / 2, df) * se
    p = float(2 * stats.t.sf(abs(slope / se), df)) if se > 0 else float(slope == 0)
    lof = None
    if n_cells >= 3:
        pure = sum((y - sum(s) / n_seeds - seed_mean[k] + grand) ** 2 for s in samples for k, y in enumerate(s))
        df_lack, df_pure = n_cells - 2, (n_cells - 1) * (n_seeds - 1)
        f = ((rss - pure) / df_lack) / (pure / df_pure) if pure > 0 else math.inf
        lof = LackOfFit(f, df_lack, df_pure, float(stats.f.sf(f, df_lack, df_pure)))
    return Slope(Interval(slope, se, slope - half, slope + half, df, LEVEL), p, n_cells, n_seeds, lof)


def holm(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as `ps`): reject where adjusted ≤ α."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [math.nan] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out


class Test(NamedTuple):
    """One test of a family: where (level, arm), what ("trend", "ends", a series' "depth" or
    "width", "below_crit"), its interval and p, Holm's adjusted p over its family, and the shapes
    it compares (a contrast: (this, that) as (width, depth); a slope: every cell's)."""

    level: int
    arm: str
    kind: str
    interval: Interval
    p: float
    p_holm: float
    shapes: tuple
    slope: Slope | None = None


def _aspect(cell) -> float:
    return cell.shape["depth"] / cell.shape["width"]


def _shape(cell) -> tuple[int, int]:
    return cell.shape["width"], cell.shape["depth"]


def _contrast(level: int, arm: str, kind: str, this, that) -> Test:
    return Test(level, arm, kind, welch_interval(this.losses, that.losses), welch_p(this.losses, that.losses),
                math.nan, (_shape(this), _shape(that)))


def _slope(level: int, arm: str, kind: str, group: list, x) -> Test:
    got = seed_effect_slope([x(c) for c in group], [c.losses for c in group])
    return Test(level, arm, kind, got.interval, got.p, math.nan, tuple(_shape(c) for c in group), got)


def with_holm(tests: list[Test]) -> tuple[Test, ...]:
    return tuple(t._replace(p_holm=q) for t, q in zip(tests, holm([t.p for t in tests])))


def trend_family(groups: dict) -> tuple[Test, ...]:
    """`groups`: (level, arm) -> that arm's complete cells at the level. Per group with >= 2
    aspect ratios: the trend in ln(D/W) and the contrast of its largest D/W against its smallest
    (largest − smallest); Holm over all of them."""
    tests = []
    for (level, arm), group in groups.items():
        if len({_aspect(c) for c in group}) < 2:
            continue
        tests.append(_slope(level, arm, "trend", group, lambda c: math.log(_aspect(c))))
        tests.append(_contrast(level, arm, "ends", max(group, key=_aspect), min(group, key=_aspect)))
    return with_holm(tests)


class Series(NamedTuple):
    """Shapes of one level and arm at one width ("depth": loss against ln D) or at one depth
    ("width": loss against ln W): the slope test (Holm over the level's series) and each shape's
    contrast to the level's base shape (this − base, Welch; uncorrected description)."""

    test: Test
    fixed: int  # the width (depth series) or the depth (width series) held
    to_base: tuple  # Test per shape other than the base


def series(level: int, arm: str, group: list, base: tuple[int, int]) -> list[Series]:
    """The depth series (one per width with >= 2 complete depths) and the width series (one per
    depth with >= 2 complete widths) among `group`, each with its contrasts to `base`
    (width, depth) where the base is in it. Holm is applied by `series_family`."""
    out = []
    for kind, key, var in (("depth", "width", "depth"), ("width", "depth", "width")):
        for held in sorted({c.shape[key] for c in group}):
            cells_ = sorted((c for c in group if c.shape[key] == held), key=lambda c: c.shape[var])
            if len(cells_) < 2:
                continue
            test = _slope(level, arm, kind, cells_, lambda c, v=var: math.log(c.shape[v]))
            at_base = [c for c in cells_ if _shape(c) == tuple(base)]
            to_base = tuple(_contrast(level, arm, "to_base", c, at_base[0]) for c in cells_
                            if at_base and c is not at_base[0])
            out.append(Series(test, held, to_base))
    return out


def series_family(found: list[Series]) -> tuple[Series, ...]:
    """Holm over the slopes of every series given (one level's, both arms)."""
    tests = with_holm([s.test for s in found])
    return tuple(s._replace(test=t) for s, t in zip(found, tests))


def below_critical(groups: dict, kappa: float) -> tuple[Test, ...]:
    """Per group, the shapes with D < κ·ln W (below the critical depth, where the kink law says
    depth is free): the contrast of the largest D/W among them against the smallest (Welch;
    they differ in N by at most the level's match tolerance); Holm over the groups."""
    tests = []
    for (level, arm), group in groups.items():
        below = [c for c in group if c.shape["depth"] < kappa * math.log(c.shape["width"])]
        if len({_aspect(c) for c in below}) >= 2:
            tests.append(_contrast(level, arm, "below_crit", max(below, key=_aspect), min(below, key=_aspect)))
    return with_holm(tests)
