"""The persistence study's numbers over many runs: cells of seeds, their verdicts and controls,
depth trends, the test against the paper's ℓ(W), the rate over training and loss against depth.

A run is a dict as `studies/persistence_study.load_study_runs` reads it (name, study,
parametrization, depth, width, lr, dtypes, seed, loss, loss_se, wall_time_s and its
``profile``, a :class:`~depthdelusion.analysis.table.runs.GradientProfile`). A cell is the runs
that differ only by seed (:func:`cell_key`). Per-run fits and intervals are
:mod:`.persistence`'s; here they are pooled. Every bootstrap is seeded from the run's name, so
the numbers are the same whichever roots are read, in any order.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from ..fitting.seed_intervals import mean_interval
from .persistence import (
    MIN_SEEDS,
    PRIMARY_SKIP_BOTTOM,
    PersistenceFit,
    PersistenceScaling,
    PowerLawTest,
    SeedInterval,
    block_ratios,
    compare_with_paper,
    paper_implied_length,
    persistence_length,
    persistence_scaling,
    power_law_test,
    seed_interval,
    window_bounds,
    windowed_fit,
    windowed_norms,
)

TIMELINE = (1, 25, 50, 100, 200, 400, 600, 800, 1000)  # steps at which the rate is tabulated
KINDS = ("weight", "activation")
WARMUP_STEP, WARMUP_WINDOW = 50, 0.5  # steps 25–75: early in training, where the paper measures
CRITICAL_EPS = 0.1  # g_0/g_{D−1} at or below this: the gradient has faded to ε (the paper's largest ε)
TRENDS = ("rises", "falls")


def run_seed(name: str) -> int:
    """A bootstrap seed from the run's name: the same whichever roots are read, in any order."""
    return zlib.crc32(name.encode())


def windowed_fits(runs: list[dict], step: int, window: float,
                  skip_bottom: int = PRIMARY_SKIP_BOTTOM) -> dict:
    """{(name, kind): PersistenceFit} with the windowed protocol; ``skip_bottom`` blocks nearest
    the input are left out (1, the primary fit; 0, all blocks)."""
    out = {}
    for r in runs:
        for kind in KINDS:
            if r["profile"] is None or not r["profile"].steps(kind):
                continue
            out[(r["name"], kind)] = windowed_fit(r["profile"], step=step, window=window, kind=kind,
                                                  name=r["name"], width=r["width"], seed=run_seed(r["name"]),
                                                  skip_bottom=skip_bottom)
    return out


def window_ratios(runs: list[dict], step: int, window: float) -> dict:
    """{name: block_ratios} of the weight-gradient norms averaged over the window, per run that
    logged them."""
    return {r["name"]: block_ratios(windowed_norms(r["profile"], step, window, "weight")[1])
            for r in runs if r["profile"] is not None and r["profile"].steps("weight")}


def cell_key(r: dict) -> tuple:
    """Runs that differ only by seed: same study, parametrization, shape, lr and dtypes."""
    return (r["study"], r["parametrization"], r["depth"], r["width"], r["lr"], r["dtypes"])


def cell_sort_key(key) -> tuple:
    # an lr missing from a run's config sorts first instead of failing to compare with a float
    return tuple((v is not None, v if v is not None else 0) for v in key)


def cell_label(key) -> str:
    study, pz, d, w, lr, dt = key
    return f"{pz} {d}L×{w}"


def cell_members(runs: list[dict], fits: dict, kind: str = "weight") -> dict:
    """{cell key: the ``kind`` fits of its runs}, in the runs' order."""
    groups: dict = {}
    for r in runs:
        if (r["name"], kind) in fits:
            groups.setdefault(cell_key(r), []).append(fits[(r["name"], kind)])
    return groups


def cells(runs: list[dict], fits: dict, kind: str = "weight") -> dict:
    """{cell key: SeedInterval over its seeds' rates} for the runs with a ``kind`` fit."""
    groups = cell_members(runs, fits, kind)
    return {k: seed_interval(v) for k, v in sorted(groups.items(), key=lambda kv: cell_sort_key(kv[0]))}


def verdict_of(intervals: dict) -> tuple[str, bool]:
    """(sentence, rests on single runs): the decay verdict over the cells with ≥ MIN_SEEDS seeds,
    or over every cell, said so, when none has that many."""
    used = {k: v for k, v in intervals.items() if v.enough_seeds and np.isfinite(v.mean)}
    single = not used
    if single:
        used = {k: v for k, v in intervals.items() if np.isfinite(v.mean)}
    n = {s: sum(v.status == s for v in used.values()) for s in ("decay", "flat", "growth")}
    total = sum(n.values())
    if not total:
        return "no cell has a rate", single
    if n["decay"] == total:
        what = "decay towards the input in every cell"
    elif n["decay"] == 0:
        what = "no decay towards the input in any cell"
    else:
        what = "decay in some cells only"
    return (f"{what} ({n['decay']} decay, {n['flat']} flat, {n['growth']} growth of {total} cell(s) "
            + ("— rests on single runs: no cell has ≥ 3 seeds)" if single else f"with ≥ {MIN_SEEDS} seeds)")), single


def verdict_class(sentence: str) -> str:
    """The verdict without its counts: what a control compares."""
    return sentence.split(" (")[0]


def status_counts(fits: dict, kind: str = "weight") -> dict:
    """{status: how many of the ``kind`` fits have it} for decay, flat and growth."""
    return {st: sum(f.status == st for f in fits.values() if f.kind == kind) for st in ("decay", "flat", "growth")}


def depth_trend(cells_by_depth: list[tuple[int, object]]) -> str:
    """'rises' / 'falls' when the cells' mean rate is strictly monotone in depth over ≥ 3 depths
    AND the deepest cell's 95% interval lies clear of the shallowest's; else 'none'."""
    if len(cells_by_depth) < 3:
        return "too few depths"
    ivs = [v for _, v in sorted(cells_by_depth, key=lambda dv: dv[0])]
    d = np.diff([v.mean for v in ivs])
    if np.all(d > 0) and ivs[-1].lo > ivs[0].hi:
        return "rises"
    if np.all(d < 0) and ivs[-1].hi < ivs[0].lo:
        return "falls"
    return "none"


def mean_se(values) -> tuple[float, float]:
    """Mean and its standard error (NaN for one value)."""
    v = np.asarray(values, float)
    return float(v.mean()), (float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan)


def run_signs(runs: list[dict], fits: dict, key) -> tuple[int, int]:
    """(runs with a positive weight-gradient rate, runs) over the runs of one cell."""
    rates = [fits[(r["name"], "weight")].rate for r in runs
             if cell_key(r) == key and (r["name"], "weight") in fits]
    return sum(x > 0 for x in rates), len(rates)


def dtype_pairs(intervals: dict) -> list[tuple]:
    """Pairs of cells that differ only in their compute/residual dtypes."""
    keys = sorted(intervals, key=cell_sort_key)
    return [(a, b) for i, a in enumerate(keys) for b in keys[i + 1:] if a[:5] == b[:5] and a[5] != b[5]]


def main_seed(runs) -> int:
    """The seed every shape was run with (the most common one)."""
    seeds = [r["seed"] for r in runs]
    return max(set(seeds), key=seeds.count)


@dataclass(frozen=True)
class EarlyCell:
    """One cell's rate in the warm-up window beside the end-of-training window, with how many of
    its runs have a positive rate in each (positive, runs)."""

    key: tuple
    warm: SeedInterval
    warm_signs: tuple
    end: SeedInterval
    end_signs: tuple


@dataclass(frozen=True)
class EarlyAgainstLate:
    """The same fit over the warm-up window (:data:`WARMUP_STEP` ± :data:`WARMUP_WINDOW`) and the
    end-of-training window, per cell with ≥ MIN_SEEDS seeds, and the two verdicts."""

    warm_bounds: tuple
    end_bounds: tuple
    cells: tuple
    warm_verdict: str
    end_verdict: str


def early_against_late(runs: list[dict], end_fits: dict, step: int, window: float) -> EarlyAgainstLate:
    warm = windowed_fits(runs, WARMUP_STEP, WARMUP_WINDOW)
    iv_end, iv_warm = cells(runs, end_fits), cells(runs, warm)
    rows = []
    for key, e in iv_end.items():
        w = iv_warm.get(key)
        if w is None or not e.enough_seeds:
            continue
        rows.append(EarlyCell(key, w, run_signs(runs, warm, key), e, run_signs(runs, end_fits, key)))
    return EarlyAgainstLate(window_bounds(WARMUP_STEP, WARMUP_WINDOW), window_bounds(step, window), tuple(rows),
                            verdict_of(iv_warm)[0], verdict_of(iv_end)[0])


@dataclass(frozen=True)
class CriticalCell:
    """A cell's bottom-to-top ratio g_0/g_{D−1}: geometric mean over its seeds and the t interval
    of ln(ratio), exponentiated."""

    key: tuple
    seeds: int
    ratio: float
    lo: float
    hi: float

    @property
    def reached(self) -> bool:
        return self.hi <= CRITICAL_EPS


@dataclass(frozen=True)
class CriticalDepth:
    """The headline test of "a critical depth is reached": g_0/g_{D−1} of every run (sorted) in the
    end-of-training window and in the warm-up window, and per cell with ≥ MIN_SEEDS seeds."""

    end: tuple
    early: tuple
    end_median: float
    early_median: float
    cells: tuple

    @property
    def reached(self) -> int:
        return sum(c.reached for c in self.cells)


def critical_depth(runs: list[dict], ratios: dict) -> CriticalDepth | None:
    """None when no run logged weight-gradient norms. Reached when the ratio is at or below
    :data:`CRITICAL_EPS`."""
    ends = {r["name"]: ratios[r["name"]]["ends"] for r in runs if r["name"] in ratios}
    if not ends:
        return None
    vals = sorted(ends.values())
    early = sorted(v["ends"] for v in window_ratios(runs, WARMUP_STEP, WARMUP_WINDOW).values())
    groups: dict = {}
    for r in runs:
        if r["name"] in ends:
            groups.setdefault(cell_key(r), []).append(math.log(ends[r["name"]]))
    rows = []
    for key in sorted(groups, key=cell_sort_key):
        logs = groups[key]
        if len(logs) < MIN_SEEDS:
            continue
        iv = mean_interval(logs)
        rows.append(CriticalCell(key, len(logs), math.exp(iv.estimate), math.exp(iv.lo), math.exp(iv.hi)))
    return CriticalDepth(tuple(vals), tuple(early), float(np.median(vals)), float(np.median(early)), tuple(rows))


@dataclass(frozen=True)
class Control:
    """A control of the verdict: its sentence, whether it changes the verdict, and whether it is
    one cell's status against another's (``a → b``) rather than a verdict of its own."""

    name: str
    sentence: str
    changes: bool
    of_cell: bool


def controls(main: str, intervals: dict, all_blocks: dict) -> tuple[Control, ...]:
    """Activation against weight gradients, the bottom block left in, each parametrization alone,
    and the cells that differ only in their dtypes. ``intervals`` and ``all_blocks``: {kind: cells}."""
    named = [("activation gradients instead of weight gradients", verdict_of(intervals["activation"])[0]),
             ("all blocks (the bottom block left in)", verdict_of(all_blocks["weight"])[0])]
    pzs = sorted({k[1] for k in intervals["weight"]})
    if len(pzs) > 1:
        for pz in pzs:
            named.append((f"{pz} only", verdict_of({k: v for k, v in intervals["weight"].items() if k[1] == pz})[0]))
    out = [Control(name, s, verdict_class(s) != verdict_class(main), False) for name, s in named]
    for key_a, key_b in dtype_pairs(intervals["weight"]):
        a, b = intervals["weight"][key_a].status, intervals["weight"][key_b].status
        out.append(Control(f"{cell_label(key_b)}, dtypes {key_b[5]} instead of {key_a[5]}", f"{a} → {b}", a != b, True))
    return tuple(out)


@dataclass(frozen=True)
class DepthTrend:
    """The rate against depth at one width, with the bottom block left out and left in."""

    study: str
    parametrization: str
    width: int
    without_bottom: str
    with_bottom: str
    min_seeds: int

    @property
    def kept(self) -> str:
        t1, t0 = self.without_bottom, self.with_bottom
        return ("withdrawn (set by the bottom block)" if t0 in TRENDS and t1 != t0 else
                "survives" if t0 == t1 and t0 in TRENDS else
                "new without the bottom block" if t1 in TRENDS else "no trend")


def depth_trends(studies, weight: dict, weight_all: dict) -> tuple[DepthTrend, ...]:
    """Per study, parametrization and width with one lr (else depth is confounded with lr):
    :func:`depth_trend` over the primary cells and over the all-block cells."""
    out = []
    for study in studies:
        for pz in sorted({k[1] for k in weight}):
            for w in sorted({k[3] for k in weight if k[0] == study and k[1] == pz}):
                sel = [(k, v) for k, v in weight.items() if k[0] == study and k[1] == pz and k[3] == w]
                if len({k[4] for k, _ in sel}) > 1:
                    continue  # several lrs at one width: depth is confounded with lr here
                t1 = depth_trend([(k[2], v) for k, v in sel])
                t0 = depth_trend([(k[2], weight_all[k]) for k, _ in sel if k in weight_all])
                out.append(DepthTrend(study, pz, w, t1, t0, min(v.n for _, v in sel)))
    return tuple(out)


@dataclass(frozen=True)
class PaperCell:
    """A cell's rate interval against the paper's implied ℓ(W): {ε: (ℓ, 1/ℓ inside)}."""

    key: tuple
    interval: SeedInterval
    implied: dict

    @property
    def consistent(self) -> bool:
        return any(c for _, c in self.implied.values())


@dataclass(frozen=True)
class PaperWidth:
    """The cells of one study and width that a verdict uses (those with ≥ MIN_SEEDS seeds, or
    every cell when none has them: ``seeded`` False) against the paper's ℓ at each ε."""

    study: str
    width: int
    implied: tuple
    cells: tuple
    seeded: bool

    @property
    def verdict(self) -> str:
        n_ok = sum(c.consistent for c in self.cells)
        return ("consistent" if n_ok == len(self.cells) else "not consistent" if n_ok == 0 else
                f"mixed ({n_ok} of {len(self.cells)} consistent)")


def paper_cells(weight: dict) -> tuple[PaperCell, ...]:
    """:func:`compare_with_paper` for every cell with a rate."""
    return tuple(PaperCell(k, v, compare_with_paper(k[3], v.lo, v.hi)) for k, v in weight.items()
                 if np.isfinite(v.mean))


def paper_widths(cells_: tuple[PaperCell, ...], epsilons) -> tuple[PaperWidth, ...]:
    per_width: dict = {}
    for c in cells_:
        per_width.setdefault((c.key[0], c.key[3]), []).append(c)
    out = []
    for (study, w), entries in sorted(per_width.items()):
        strong = [c for c in entries if c.interval.enough_seeds]
        implied = tuple(paper_implied_length(w, e) for e in epsilons)
        out.append(PaperWidth(study, w, implied, tuple(strong or entries), bool(strong)))
    return tuple(out)


@dataclass(frozen=True)
class WidthPowerTest:
    """ℓ ∝ W^p across the widths of one study, parametrization and depth; ``test`` None when
    fewer than 2 widths have ≥ MIN_SEEDS seeds."""

    study: str
    parametrization: str
    depth: int
    test: PowerLawTest | None


def width_power_tests(studies, weight: dict, members: dict) -> tuple[WidthPowerTest, ...]:
    """Per study, parametrization and depth with one lr and ≥ 2 widths."""
    out = []
    for study in studies:
        for pz in sorted({k[1] for k in weight}):
            for d in sorted({k[2] for k in weight if k[0] == study and k[1] == pz}):
                sel = [(k, v) for k, v in weight.items() if k[0] == study and k[1] == pz and k[2] == d
                       and np.isfinite(v.mean)]
                use = [(k, v) for k, v in sel if v.enough_seeds]
                if len({k[4] for k, _ in sel}) > 1 or len({k[3] for k, _ in sel}) < 2:
                    continue
                test = None
                if len({k[3] for k, _ in use}) >= 2:
                    test = power_law_test([k[3] for k, _ in use], [[f.rate for f in members[k]] for k, _ in use])
                out.append(WidthPowerTest(study, pz, d, test))
    return tuple(out)


def timeline(runs: list[dict], kind: str = "weight") -> list[dict]:
    """The rate (blocks 1 … D−1) at each step of TIMELINE (the nearest logged step) for every
    run with D ≥ 8."""
    rows = []
    for r in runs:
        if r["profile"] is None or r["depth"] < 8:
            continue
        for t in TIMELINE:
            used, g = r["profile"].nearest(t, kind)
            f = persistence_length(g[PRIMARY_SKIP_BOTTOM:], name=r["name"], width=r["width"], kind=kind,
                                   step=used)
            rows.append({"name": r["name"], "parametrization": r["parametrization"], "depth": r["depth"],
                         "width": r["width"], "step": used, "rate": f.rate, "status": f.status})
    return rows


def timeline_table(rows: list[dict], params) -> tuple:
    """Per parametrization and width: at each step of TIMELINE (logged steps within 10%), None or
    (median rate, (runs with decay, flat, growth))."""
    out = []
    for pz in params:
        for w in sorted({r["width"] for r in rows if r["parametrization"] == pz}):
            at = []
            for t in TIMELINE:
                sel = [r for r in rows if r["parametrization"] == pz and r["width"] == w
                       and abs(r["step"] - t) <= max(1, t // 10)]
                at.append(None if not sel else (np.median([r["rate"] for r in sel]),
                                                tuple(sum(r["status"] == s for r in sel)
                                                      for s in ("decay", "flat", "growth"))))
            out.append((pz, w, tuple(at)))
    return tuple(out)


def width_scalings(runs: list[dict], fits: dict, params) -> dict:
    """{(parametrization, kind): PersistenceScaling over all its runs, or why it was not fitted}."""
    by_name = {r["name"]: r for r in runs}
    out: dict[tuple, PersistenceScaling | str] = {}
    for pz in params:
        for kind in KINDS:
            sel = [f for (name, k), f in fits.items() if k == kind and by_name[name]["parametrization"] == pz]
            try:
                out[(pz, kind)] = persistence_scaling(sel)
            except ValueError as err:
                out[(pz, kind)] = str(err)
    return out


@dataclass(frozen=True)
class LossAtDepth:
    """Final loss of one cell: the mean over its seeds and its SE, or one run's loss and SE."""

    loss: float
    se: float
    seeds: int


@dataclass(frozen=True)
class LossRow:
    """Loss against depth at one width, (depth, LossAtDepth or None where the depth was not run)
    per depth of its study, parametrization, lr and dtypes, and the best depth."""

    study: str
    parametrization: str
    width: int
    losses: tuple
    best_depth: int | None


def loss_by_depth(runs: list[dict], studies) -> tuple[tuple[LossRow, ...], tuple[dict, ...]]:
    """The rows per study, parametrization, lr, dtypes and width, and the points of the figure
    (the first study's, when it has one lr and dtypes)."""
    groups: dict = {}
    for r in runs:
        groups.setdefault(cell_key(r), []).append(r)
    rows, points = [], []
    for (study, pz, lr, dt) in sorted({(k[0], k[1], k[4], k[5]) for k in groups}, key=cell_sort_key):
        depths = sorted({k[2] for k in groups if (k[0], k[1], k[4], k[5]) == (study, pz, lr, dt)})
        for w in sorted({k[3] for k in groups if (k[0], k[1], k[4], k[5]) == (study, pz, lr, dt)}):
            losses, best = [], None
            for d in depths:
                rs = groups.get((study, pz, d, w, lr, dt))
                if not rs:
                    losses.append(None)
                    continue
                m, se = mean_se([r["loss"] for r in rs]) if len(rs) > 1 else (rs[0]["loss"], rs[0]["loss_se"])
                losses.append(LossAtDepth(m, se, len(rs)))
                if study == studies[0] and len({(k[4], k[5]) for k in groups if k[0] == study}) == 1:
                    points.append({"label": pz, "width": w, "depth": d, "loss": m, "se": se})
                if best is None or m < best[1]:
                    best = (d, m)
            rows.append(LossRow(study, pz, w, tuple(zip(depths, losses)), best[0] if best else None))
    return tuple(rows), tuple(points)


def window_profile(profile, fit: PersistenceFit) -> np.ndarray:
    """The weight-gradient profile averaged on the log scale over the fit's steps."""
    return np.exp(np.mean([np.log(profile.weight[s]) for s in fit.steps], axis=0))
