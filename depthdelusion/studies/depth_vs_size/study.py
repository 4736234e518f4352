"""The depth-vs-size study: at fixed non-embedding parameters N and fixed tokens (T ≈
`tokens_per_param` · N), trade depth against width. Every compute level is a set of shapes
(width, depth) whose N match within `match_tolerance`; each shape trains T tokens (its steps are
T over the tokens per step, so T is exact to one step). Two arms per shape (`arms` may keep one):

- SP, lr tuned per shape: the `lr_grid` rule (a grid spaced by at most 2x, extended by 2x beyond
  an edge best until the best is interior) on `tuning_seed` alone;
- CompleteP (depth exponent 1), its lr tuned once per level at the level's `completep_base`
  shape (where CompleteP is SP exactly, so that grid is SP's) and transferred unchanged.

A level may instead fix SP's lr per shape (`sp_lrs`, e.g. lrs tuned by an earlier study at
another token budget): then no grid runs, and CompleteP takes the base shape's fixed lr.

Every reported point is trained at every test seed in `seeds`, none of which is the tuning seed,
so no reported loss is the one its lr was picked on. Runs are named by what they are
(`sp_w32_d8_lr0.004_s1_n987`, n = steps); what to train is a pure function of the finished runs
(`plan`), trained through the sweep runner by `planned_runs.train_planned` (finished skipped,
unfinished resumed, failed retried). The plan is level-major, and shape by shape within a level,
so a partial study reports whole levels and whole cells. `measure` reads the finished runs into
a frozen `DepthVsSizeResults` (every number the report states; the tests are `trend`'s);
`report` renders it and holds the command.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import NamedTuple

from scipy import stats

from depthdelusion import rundir
from depthdelusion.analysis import fit
from depthdelusion.analysis.fitting.options import SEED
from depthdelusion.analysis.fitting.seed_intervals import lack_of_fit
from depthdelusion.analysis.reference import PAPER_KAPPA
from depthdelusion.analysis.science.depth_penalty import neighbour_intervals, robust_seed_sd
from depthdelusion.analysis.science.depth_penalty import seed_centred as centred_losses
from depthdelusion.analysis.table.load import load_runs
from depthdelusion.config import Config, bounded, from_dict
from depthdelusion.model_size import count_params, non_embedding_params
from depthdelusion.studies.common import laws, planned_runs
from depthdelusion.studies.common.lr_grid import extend_lr_grid, fit_lr_curve, grid_optimum
from depthdelusion.studies.common.planned_runs import Run, make_run
from depthdelusion.studies.common.spec import check_run_config, required, spec_error
from depthdelusion.studies.depth_vs_size import trend

DEFAULT_LAW_REPLICATES = 200
ARMS = (("SP", "sp", "SP, lr tuned per shape on the tuning seed"),
        ("CompleteP", "completep", "CompleteP, lr tuned at the level's base shape and transferred"))
PER_SHAPE = ("steps", "warmup_steps", "eval_every", "lr", "seed")  # base.train keys the study sets


@dataclasses.dataclass(frozen=True)
class LevelSpec:
    """One compute level: its shapes, [width, depth] or [width, depth, ffn_hidden] each (the
    FFN width; default the model's 4·width), and CompleteP's base shape [width, depth] among them."""

    shapes: list[list[int]]
    completep_base: list[int]
    #: [[width, depth, lr], ...]: SP's lr at every shape of the level, fixed (no lr grid is run;
    #: CompleteP takes the base shape's); [] (default): tuned on the tuning seed
    sp_lrs: list[list[float]] = dataclasses.field(default_factory=list)
    #: [[width, depth], ...]: shapes asked for that no FFN width matches in N (checked: even with
    #: F = 1 their N is above the tolerance); the report says so
    unmatched: list[list[int]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class DepthVsSizeSpec:
    """experiments/depth_vs_size.yaml (read by `spec.load_spec`)."""

    base: dict  # a run config (sections model, data, train) less the keys in PER_SHAPE
    levels: list[LevelSpec]
    tokens_per_param: float = required(gt=0)
    warmup_fraction: float = required(gt=0, lt=1)
    match_tolerance: float = required(gt=0)  # every shape's N within this fraction of its level's median
    lrs: list[float] = required()  # the initial grid of every shape, sorted
    lr_bounds: list[float] = required()  # [low, high]: the grid is extended within them
    tuning_seed: int = required()  # lr grids only; never reported
    seeds: list[int] = required()  # the test seeds of every reported point
    metric: str = required()
    arms: list[str] = dataclasses.field(default_factory=lambda: [a for a, _, _ in ARMS])  # a subset of ARMS
    law_replicates: int = bounded(DEFAULT_LAW_REPLICATES, ge=0, note=" (a whole number of "
                                  "parametric-bootstrap replicates)")
    #: each level's shapes resolved by `validate`: {"shapes": [{"width", "depth", "params"
    #: (non-embedding), "params_total", "steps", "tokens"[, "ffn"]}, ...] by depth,
    #: "completep_base": (width, depth), "sp_lrs": {(width, depth): lr} (empty: tuned),
    #: "unmatched": [{"width", "depth", "params" (at F = 1), "off" (from the median)}]}
    resolved_levels: list = dataclasses.field(init=False, default_factory=list)

    def validate(self) -> None:
        fixed = sorted(set(self.base.get("train") or {}) & set(PER_SHAPE))
        if fixed:
            raise ValueError(f"base.train.{fixed[0]} is set per shape by the study; remove it "
                             f"(the study sets {', '.join(PER_SHAPE)})")
        _check_numbers(self)
        check_run_config(self.base)  # fail before the first run
        object.__setattr__(self, "resolved_levels", [_resolve_level(self, i, level)
                                                     for i, level in enumerate(self.levels)])
        shapes = [(s["width"], s["depth"]) for level in self.resolved_levels for s in level["shapes"]]
        twice = sorted({s for s in shapes if shapes.count(s) > 1})
        if twice:
            raise ValueError(f"levels: shape {list(twice[0])} is in more than one level; a shape "
                             "has one N, so it belongs to one level")


def _check_numbers(exp: DepthVsSizeSpec) -> None:
    lrs = sorted(exp.lrs)
    if len(lrs) < 3 or any(b / a > 2.0 + 1e-9 for a, b in zip(lrs, lrs[1:])):
        raise spec_error("lrs", exp.lrs, "need at least 3 learning rates spaced by at most 2x")
    object.__setattr__(exp, "lrs", lrs)
    bounds = exp.lr_bounds
    if len(bounds) != 2 or not 0 < bounds[0] <= lrs[0] or not bounds[1] >= lrs[-1]:
        raise spec_error("lr_bounds", bounds, f"need [low, high] with 0 < low <= {lrs[0]:g} and high >= "
                         f"{lrs[-1]:g} (the grid is extended within them)")
    seeds = exp.seeds
    if len(set(seeds)) < 2 or len(set(seeds)) != len(seeds):
        raise spec_error("seeds", seeds, "need at least 2 distinct test seeds (3 for the study)")
    if exp.tuning_seed in seeds:
        raise ValueError(f"tuning_seed={exp.tuning_seed} is one of seeds {seeds}: the lr must "
                         "be tuned on a seed that is not reported")
    known = [a for a, _, _ in ARMS]
    if not exp.arms or len(set(exp.arms)) != len(exp.arms) or any(a not in known for a in exp.arms):
        raise spec_error("arms", exp.arms, f"need distinct arms among {known}")
    if not exp.levels:
        raise ValueError("levels: need a list of levels, each {shapes: [[width, depth], ...], "
                         "completep_base: [width, depth]}")


def _resolve_level(exp: DepthVsSizeSpec, i: int, level: LevelSpec) -> dict:
    """One level's shapes with their N (non-embedding and total), steps and tokens; N matched
    within the tolerance of the level's median; its fixed SP lrs and its unmatched shapes."""
    where = f"levels[{i}]"
    shapes = [tuple(s) + (None,) * (3 - len(s)) for s in level.shapes if len(s) in (2, 3)]
    if len(shapes) != len(level.shapes) or len(shapes) < 2:
        raise ValueError(f"{where}.shapes: need at least 2 [width, depth] or [width, depth, ffn_hidden] items")
    base = tuple(level.completep_base)
    if base not in [s[:2] for s in shapes]:
        raise ValueError(f"{where}.completep_base={level.completep_base!r} is not one of its shapes {[list(s[:2]) for s in shapes]}")
    train = exp.base.get("train") or {}
    per_step = train.get("batch_size", 8) * (exp.base.get("model") or {}).get("seq_len", 64)
    out = []
    for w, d, f in shapes:
        n, total = _counts(exp, w, d, f, where)
        steps = max(1, round(exp.tokens_per_param * n / per_step))
        out.append({"width": w, "depth": d, "params": n, "params_total": total, "steps": steps,
                    "tokens": steps * per_step, **({"ffn": f} if f is not None else {})})
    mid = sorted(s["params"] for s in out)[len(out) // 2]
    for s in out:
        if abs(s["params"] / mid - 1) > exp.match_tolerance:
            raise ValueError(f"{where}.shapes: [{s['width']}, {s['depth']}] has {s['params']:,} non-embedding "
                             f"parameters, {100 * (s['params'] / mid - 1):+.1f}% from the level's median "
                             f"{mid:,}; match_tolerance is {exp.match_tolerance}")
    return {"shapes": sorted(out, key=lambda s: s["depth"]), "completep_base": base,
            "sp_lrs": _fixed_lrs(level, where, [s[:2] for s in shapes]),
            "unmatched": [_unmatched(exp, where, mid, item) for item in level.unmatched]}


def _counts(exp: DepthVsSizeSpec, w: int, d: int, ffn: int | None, where: str) -> tuple[int, int]:
    """(non-embedding, total) parameters of a shape."""
    try:
        cfg = _config(exp, w, d, "sp", None, steps=1, lr=1e-3, seed=SEED, ffn=ffn, where=f"{where}.shapes {[w, d]}")
    except ValueError as err:
        raise ValueError(f"{where}.shapes: {[w, d]}: {err}") from None
    return non_embedding_params(cfg.model), count_params(cfg.model)


def _fixed_lrs(level: LevelSpec, where: str, shapes: list[tuple]) -> dict:
    """{(width, depth): lr} from `sp_lrs`: every shape of the level once, each lr > 0; {} when unset."""
    if not level.sp_lrs:
        return {}
    got = {}
    for item in level.sp_lrs:
        if len(item) != 3 or not item[2] > 0 or tuple(int(v) for v in item[:2]) in got:
            raise spec_error(f"{where}.sp_lrs", level.sp_lrs, "need one [width, depth, lr] per shape, lr > 0")
        got[(int(item[0]), int(item[1]))] = float(item[2])
    if sorted(got) != sorted(shapes):
        raise spec_error(f"{where}.sp_lrs", level.sp_lrs, f"need exactly the level's shapes {[list(s) for s in shapes]}")
    return got


def _unmatched(exp: DepthVsSizeSpec, where: str, mid: int, item: list[int]) -> dict:
    """A shape said to be unmatchable: its N with the narrowest FFN (F = 1) must be above the
    tolerance (N grows with F, so then no F matches it)."""
    if len(item) != 2:
        raise spec_error(f"{where}.unmatched", item, "need [width, depth]")
    w, d = item
    n, _ = _counts(exp, w, d, 1, where)
    off = n / mid - 1
    if off <= exp.match_tolerance:
        raise spec_error(f"{where}.unmatched", item, f"with F = 1 its N is {n:,} ({100 * off:+.1f}% from the "
                         f"median {mid:,}), so some FFN width matches it: put it in shapes")
    return {"width": w, "depth": d, "params": n, "off": off}


def _config(exp: DepthVsSizeSpec, w: int, d: int, p: str, cp_base: tuple | None, *, steps: int, lr: float,
            seed: int, where: str, ffn: int | None = None) -> Config:
    raw = json.loads(json.dumps(exp.base))  # deep copy
    model = raw.setdefault("model", {})
    model.update(width=w, depth=d, parametrization=p)
    if ffn is not None:
        model["ffn_hidden"] = ffn
    if p == "completep":
        model.update(base_width=cp_base[0], base_depth=cp_base[1])
    train = raw.setdefault("train", {})
    train.update(steps=steps, eval_every=steps, lr=lr, seed=seed,
                 warmup_steps=max(1, round(exp.warmup_fraction * steps)))
    raw.setdefault("data", {})["seed"] = seed
    return from_dict(raw, where).validate()


# ---------------------------------------------------------------------------------- planning
def level_of(exp: DepthVsSizeSpec, w: int, d: int) -> dict:
    return next(level for level in exp.resolved_levels if any((s["width"], s["depth"]) == (w, d) for s in level["shapes"]))


def shape_of(exp: DepthVsSizeSpec, w: int, d: int) -> dict:
    return next(s for s in level_of(exp, w, d)["shapes"] if (s["width"], s["depth"]) == (w, d))


def trained_as(exp: DepthVsSizeSpec, p: str, w: int, d: int) -> str:
    """CompleteP at its level's base shape is SP exactly (every multiplier 1): trained once, as SP."""
    return "sp" if p == "completep" and (w, d) == level_of(exp, w, d)["completep_base"] else p


def run(exp: DepthVsSizeSpec, p: str, w: int, d: int, lr: float, seed: int) -> Run:
    """A shape with its own FFN width is named for it (`sp_w32_d4_f320_lr…`)."""
    shape = shape_of(exp, w, d)
    r = make_run(trained_as(exp, p, w, d), w, d, lr, seed, shape["steps"])
    if "ffn" in shape:
        r = r._replace(name=r.name.replace(f"_d{d}_", f"_d{d}_f{shape['ffn']}_", 1))
    return r


def run_config(exp: DepthVsSizeSpec, r: Run) -> Config:
    return _config(exp, r.width, r.depth, r.parametrization, level_of(exp, r.width, r.depth)["completep_base"],
                   steps=r.steps, lr=r.lr, seed=r.seed, ffn=shape_of(exp, r.width, r.depth).get("ffn"),
                   where=f"depth-vs-size run {r.name}")


def grid(exp: DepthVsSizeSpec, losses: dict[str, float], w: int, d: int) -> tuple[list[float], bool]:
    """SP's lr grid at one shape on the tuning seed, and whether it is settled; none (settled)
    where the level fixes SP's lrs."""
    if level_of(exp, w, d)["sp_lrs"]:
        return [], True
    s = exp.tuning_seed
    return extend_lr_grid(exp.lrs, exp.lr_bounds, lambda lr: losses.get(run(exp, "sp", w, d, lr, s).name))


def tuned_lr(exp: DepthVsSizeSpec, losses: dict[str, float], p: str, w: int, d: int) -> float | None:
    """The lr an arm reports at a shape: SP's own grid optimum; CompleteP's is the grid optimum at
    its level's base shape. None until that grid is settled. A level's fixed lrs (`sp_lrs`)
    stand in for the grid optima."""
    if p == "completep":
        w, d = level_of(exp, w, d)["completep_base"]
    fixed = level_of(exp, w, d)["sp_lrs"]
    if fixed:
        return fixed[(w, d)]
    lrs, settled = grid(exp, losses, w, d)
    if not settled:
        return None
    return grid_optimum([(lr, losses[run(exp, "sp", w, d, lr, exp.tuning_seed).name]) for lr in lrs])


def plan(exp: DepthVsSizeSpec, losses: dict[str, float]) -> list[Run]:
    """Every run the study needs given the finished ones (`losses`: name -> metric, +inf for a
    diverged run), in training order: level by level, and in a level shape by shape from the
    shallowest: its grid on the tuning seed, then its SP and CompleteP points at every test seed
    as soon as their lrs are known. So a partial study has whole cells at the shallow end of a
    level rather than grids everywhere and no test seed. A run whose lr depends on a grid that
    is not settled is not planned yet."""
    out: list[Run] = []
    for level in exp.resolved_levels:
        for s in level["shapes"]:
            w, d = s["width"], s["depth"]
            out.extend(run(exp, "sp", w, d, lr, exp.tuning_seed) for lr in grid(exp, losses, w, d)[0])
            for _, p, _ in arms(exp):
                lr = tuned_lr(exp, losses, p, w, d)
                if lr is not None:
                    out.extend(run(exp, p, w, d, lr, seed) for seed in exp.seeds)
    return list(dict.fromkeys(out))  # CompleteP's base-shape runs are SP's: once


def arms(exp: DepthVsSizeSpec) -> tuple:
    """The spec's arms, as `ARMS` entries (name, parametrization, description)."""
    return tuple(a for a in ARMS if a[0] in exp.arms)


def train(exp: DepthVsSizeSpec, source: str, out: Path, *, max_runs: int | None = None, log=print,
          train_fn=None) -> tuple[int, bool]:
    return planned_runs.train_planned(lambda losses: plan(exp, losses), lambda r: run_config(exp, r),
                                      exp.metric, source, out, max_runs=max_runs, log=log, train_fn=train_fn)


# ---------------------------------------------------------------------------------- measuring
class Cell(NamedTuple):
    level: int
    arm: str
    shape: dict  # width, depth, params (non-embedding), steps, tokens
    lr: float | None
    losses: tuple[float, ...]  # finished test seeds (inf: diverged)

    @property
    def complete(self) -> bool:
        return self.lr is not None and len(self.losses) > 0 and all(math.isfinite(x) for x in self.losses)


def cells(exp: DepthVsSizeSpec, losses: dict[str, float]) -> list[Cell]:
    out = []
    for i, level in enumerate(exp.resolved_levels):
        for arm, p, _ in arms(exp):
            for s in level["shapes"]:
                w, d = s["width"], s["depth"]
                lr = tuned_lr(exp, losses, p, w, d)
                got = () if lr is None else tuple(
                    losses[n] for n in (run(exp, p, w, d, lr, seed).name for seed in exp.seeds) if n in losses)
                out.append(Cell(i + 1, arm, s, lr, got))
    return out


class CellRow(NamedTuple):
    """A cell with its mean (t interval) and its difference to the next deeper shape (this −
    next) by Welch's interval and by the paired t over seeds; None where not compared. The
    differences describe; the tests are `trend`'s, chosen before the data."""

    cell: Cell
    mean: object
    welch: object
    paired: object


class Comparison(NamedTuple):
    """One level's arm in depth order: its rows."""

    rows: tuple


def complete(cell: Cell, n_seeds: int) -> bool:
    """Every test seed finished and finite: the cells every comparison and test uses."""
    return cell.complete and len(cell.losses) == n_seeds


def compare(group: list[Cell], n_seeds: int) -> Comparison:
    """One row per cell of a level's arm (depth order), only cells with all `n_seeds` finished
    compared (`depth_penalty.neighbour_intervals`)."""
    full = [c.losses if complete(c, n_seeds) else None for c in group]
    return Comparison(tuple(CellRow(c, *got) for c, got in zip(group, neighbour_intervals(full))))


def seed_centred(got: list[Cell]) -> list[tuple[Cell, list[float]]]:
    """(cell, its losses with each seed's level effect removed: `depth_penalty.seed_centred` over
    the level's cells). Cells hold their seeds in one order (complete cells)."""
    out = []
    for level in sorted({c.level for c in got}):
        cells_ = [c for c in got if c.level == level]
        out += list(zip(cells_, centred_losses([c.losses for c in cells_])))
    return out


class DepthFree(NamedTuple):
    """The depth-free law E + A·N^−α (`laws.BASELINE`) on one N convention: its fit and its lack
    of fit against the seed noise (F, dofs, p)."""

    convention: str  # "non-embedding" or "total"
    fit: object
    lack_of_fit: trend.LackOfFit


class ArmTests(NamedTuple):
    """One arm's law-based tests: the laws (`laws.fit_arm`), the kink law with the paper's κ
    fixed (its fit and the λ = 0 verdict) and the depth-free law in both N conventions."""

    laws: object
    kappa_fit: object
    kappa_verdict: object
    depth_free: tuple


def law_records(arm: str, got: list[Cell], n_key: str) -> list[dict]:
    """Seed-centred rows (one per test seed of each complete cell, with its level), N = the
    shape's `n_key` ("params": non-embedding; "params_total")."""
    return [{"name": f"{arm}_w{c.shape['width']}_d{c.shape['depth']}_s{k}", "depth": c.shape["depth"],
             "width": c.shape["width"], "params": c.shape[n_key], "loss": x, "level": c.level}
            for c, xs in seed_centred(got) for k, x in enumerate(xs)]


def depth_free(records: list[dict], convention: str, n_seeds: int) -> DepthFree | None:
    """`laws.BASELINE` fitted to seed-centred rows and tested against the seed noise: the
    cell-by-seed interaction is the pure error ((C − 1)(S − 1) dof per level, as centring used
    S − 1 per level), the law's misfit of the cell means the lack of fit (cells − K dof). None
    with 3 cells or fewer."""
    if len({(r["depth"], r["width"]) for r in records}) <= 3:
        return None
    runs = load_runs(records)
    f = fit(runs, laws.BASELINE, bootstrap=0, profile=False, leave_one_out=False)
    got = lack_of_fit([r["loss"] for r in records], f.predict(runs),
                      [(r["depth"], r["width"]) for r in records], f.k)
    df_pure = got.df_pure - (n_seeds - 1) * len({r["level"] for r in records})
    f_value = ((got.rss - got.rss_pure) / got.df_lof) / (got.rss_pure / df_pure) if got.rss_pure > 0 else math.inf
    return DepthFree(convention, f, trend.LackOfFit(f_value, got.df_lof, df_pure,
                                                    float(stats.f.sf(f_value, got.df_lof, df_pure))))


def arm_tests(exp: DepthVsSizeSpec, all_cells: list[Cell], *, seed: int = SEED) -> list[ArmTests]:
    """Per arm, the laws of `common/laws.py` fitted to every test seed of every complete cell over
    all levels, N = non-embedding parameters; the kink law with κ fixed at the paper's value and
    its λ = 0 test; the depth-free law in non-embedding and in total N. T = tokens_per_param · N
    at every cell, so the capacity term A·N^−α carries the data term too (no separate T term).
    Each seed's shared effect on a level is removed first (`seed_centred`)."""
    out = []
    for arm, _, _ in arms(exp):
        got = [c for c in all_cells if c.arm == arm and complete(c, len(exp.seeds))]
        records = law_records(arm, got, "params")
        fitted = laws.fit_arm(arm, records, 0, replicates=exp.law_replicates, seed=seed)
        kappa_fit, kappa_verdict = (laws.kappa_fixed_test(records, PAPER_KAPPA, replicates=exp.law_replicates,
                                                          seed=seed) if fitted.fits else (None, None))
        free = tuple(x for x in (depth_free(records, "non-embedding", len(exp.seeds)),
                                 depth_free(law_records(arm, got, "params_total"), "total", len(exp.seeds)))
                     if x is not None)
        out.append(ArmTests(fitted, kappa_fit, kappa_verdict, free))
    return out


def lr_rows(exp: DepthVsSizeSpec, losses: dict[str, float], sigma: float | None, dof: int | None) -> list[dict]:
    """Per shape, SP's grid on the tuning seed (lrs and losses), the lr chosen and the fitted
    optimum (Fieller's 95% interval with the seed noise σ of the test seeds)."""
    rows = []
    for i, level in enumerate(exp.resolved_levels):
        for s in level["shapes"]:
            w, d = s["width"], s["depth"]
            lrs, settled = grid(exp, losses, w, d)
            names = [run(exp, "sp", w, d, lr, exp.tuning_seed).name for lr in lrs]
            curve = [(lr, losses[n]) for lr, n in zip(lrs, names) if n in losses]
            if not curve:
                continue
            parabola = fit_lr_curve(curve, sigma, dof)
            rows.append({"level": i + 1, "width": w, "depth": d, "settled": settled,
                         "lrs": tuple(lr for lr, _ in curve), "losses": tuple(y for _, y in curve),
                         "chosen_lr": tuned_lr(exp, losses, "sp", w, d),
                         "fit_lr": math.exp(parabola.log_lr) if parabola.identified else math.nan,
                         "fit_lr_lo": math.exp(parabola.log_lr_ci[0]) if parabola.identified else math.nan,
                         "fit_lr_hi": math.exp(parabola.log_lr_ci[1]) if parabola.identified else math.nan,
                         "note": parabola.note if settled else "grid not settled yet"})
    return rows


@dataclasses.dataclass(frozen=True)
class DepthVsSizeResults:
    """What the study measured from its finished runs, numbers only (rendered by
    `report.sections`)."""

    spec: DepthVsSizeSpec
    source: str  # the experiment file, as given on the command line
    runs_dir: Path  # OUT/runs: OUT is in the command that reproduces the study
    groups: dict  # (level, arm) -> Comparison: every cell and its neighbours (description)
    sigma: float | None  # SP's seed noise over its cells (`robust_seed_sd`) and its dof; None before seeds
    dof: int | None
    curves: tuple  # `lr_rows`
    laws: tuple  # ArmTests per arm
    trends: tuple  # `trend.trend_family`: the pre-specified tests, Holm-corrected
    series: dict  # level -> `trend.series_family` of that level (both arms)
    below_crit: tuple  # `trend.below_critical` at the paper's κ
    checkpoints: int  # finished runs whose checkpoints are on disk (re-evaluable on more batches)
    done: int  # planned runs finished
    todo: tuple  # planned runs not finished
    runs: int  # finished runs read
    wall_s: float  # their training wall time
    devices: tuple  # (device_kind, most devices a run used) per kind their summaries name, sorted


def complete_groups(exp: DepthVsSizeSpec, got: list[Cell]) -> dict:
    """(level, arm) -> that arm's complete cells at the level, in depth order."""
    return {(i + 1, arm): [c for c in got if c.level == i + 1 and c.arm == arm and complete(c, len(exp.seeds))]
            for i in range(len(exp.resolved_levels)) for arm, _, _ in arms(exp)}


def level_series(exp: DepthVsSizeSpec, full: dict) -> dict:
    """level -> its depth and width series over both arms, Holm-corrected within the level."""
    out = {}
    for i, level in enumerate(exp.resolved_levels):
        found = [s for arm, _, _ in arms(exp) for s in trend.series(i + 1, arm, full[(i + 1, arm)],
                                                                      level["completep_base"])]
        out[i + 1] = trend.series_family(found)
    return out


def measure(exp: DepthVsSizeSpec, source: str, runs_dir, *, seed: int = SEED) -> DepthVsSizeResults:
    """Everything the report states, from the finished runs in `runs_dir` (local or gs://)."""
    runs_dir = rundir.as_path(runs_dir)
    losses, summaries = planned_runs.results(exp.metric, runs_dir)
    got = cells(exp, losses)
    groups = {(i + 1, arm): compare([c for c in got if c.level == i + 1 and c.arm == arm], len(exp.seeds))
              for i in range(len(exp.resolved_levels)) for arm, _, _ in arms(exp)}
    full = complete_groups(exp, got)
    sigma, dof = robust_seed_sd(c.losses for c in got if c.arm == "SP")
    planned = plan(exp, losses)
    return DepthVsSizeResults(
        spec=exp, source=source, runs_dir=runs_dir, groups=groups, sigma=sigma, dof=dof,
        curves=tuple(lr_rows(exp, losses, sigma, dof)), laws=tuple(arm_tests(exp, got, seed=seed)),
        trends=trend.trend_family(full), series=level_series(exp, full),
        below_crit=trend.below_critical(full, PAPER_KAPPA),
        checkpoints=sum(1 for name in summaries if (runs_dir / name / "checkpoints").exists()),
        done=sum(1 for r in planned if r.name in losses),
        todo=tuple(r for r in planned if r.name not in losses), runs=len(summaries),
        wall_s=sum(float(s.get("wall_time_s") or 0) for s in summaries.values()),
        devices=_devices(summaries.values()))


def _devices(summaries) -> tuple:
    """((device_kind, most devices one run used), ...) over the summaries that record a kind."""
    most: dict[str, int] = {}
    for s in summaries:
        if s.get("device_kind"):
            kind = str(s["device_kind"])
            most[kind] = max(most.get(kind, 1), int(s.get("devices") or 1))
    return tuple(sorted(most.items()))
