"""The depth-vs-size study: at fixed non-embedding parameters N and fixed tokens (T ≈
`tokens_per_param` · N), trade depth against width. Every compute level is a set of shapes
(width, depth) whose N match within `match_tolerance`; each shape trains T tokens (its steps are
T over the tokens per step, so T is exact to one step). Two arms per shape:

- SP, lr tuned per shape: the `lr_grid` rule (a grid spaced by at most 2x, extended by 2x beyond
  an edge best until the best is interior) on `tuning_seed` alone;
- CompleteP (depth exponent 1), its lr tuned once per level at the level's `completep_base`
  shape (where CompleteP is SP exactly, so that grid is SP's) and transferred unchanged.

Every reported point is trained at every test seed in `seeds`, none of which is the tuning seed,
so no reported loss is the one its lr was picked on. Runs are named by what they are
(`sp_w32_d8_lr0.004_s1_n987`, n = steps); what to train is a pure function of the finished runs
(`plan`), trained through the sweep runner by `planned_runs.train_planned` (finished skipped,
unfinished resumed, failed retried). The plan is level-major, and shape by shape within a level,
so a partial study reports whole levels and whole cells. `measure` reads the finished runs into
a frozen `DepthVsSizeResults` (every number the report states); `depth_vs_size_report` renders
it and holds the command.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import NamedTuple

from depthdelusion.config import Config, bounded, from_dict
from depthdelusion.studies.common import planned_runs
from depthdelusion.studies.common.planned_runs import Run, make_run
from depthdelusion.studies.common.lr_grid import extend_lr_grid, grid_optimum
from depthdelusion.studies.common.spec import check_run_config, required, spec_error

DEFAULT_LAW_REPLICATES = 200
ARMS = (("SP", "sp", "SP, lr tuned per shape on the tuning seed"),
        ("CompleteP", "completep", "CompleteP, lr tuned at the level's base shape and transferred"))
METHODS = ("welch", "paired")  # the two intervals of a neighbouring difference (`compare`)
PER_SHAPE = ("steps", "warmup_steps", "eval_every", "lr", "seed")  # base.train keys the study sets


@dataclasses.dataclass(frozen=True)
class LevelSpec:
    """One compute level: its shapes, [width, depth] or [width, depth, ffn_hidden] each (the
    FFN width; default the model's 4·width), and CompleteP's base shape [width, depth] among them."""

    shapes: list[list[int]]
    completep_base: list[int]


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
    law_replicates: int = bounded(DEFAULT_LAW_REPLICATES, ge=0, note=" (a whole number of "
                                  "parametric-bootstrap replicates)")
    #: each level's shapes resolved by `validate`: {"shapes": [{"width", "depth", "params"
    #: (non-embedding), "steps", "tokens"}, ...] by depth, "completep_base": (width, depth)}
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
    if not exp.levels:
        raise ValueError("levels: need a list of levels, each {shapes: [[width, depth], ...], "
                         "completep_base: [width, depth]}")


def _resolve_level(exp: DepthVsSizeSpec, i: int, level: LevelSpec) -> dict:
    """One level's shapes with their N (non-embedding), steps and tokens; N matched within the
    tolerance of the level's median."""
    from depthdelusion.model_size import non_embedding_params

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
        try:
            cfg = _config(exp, w, d, "sp", None, steps=1, lr=1e-3, seed=0, ffn=f, where=f"{where}.shapes {[w, d]}")
        except ValueError as err:
            raise ValueError(f"{where}.shapes: {[w, d]}: {err}") from None
        n = non_embedding_params(cfg.model)
        steps = max(1, round(exp.tokens_per_param * n / per_step))
        out.append({"width": w, "depth": d, "params": n, "steps": steps, "tokens": steps * per_step,
                    **({"ffn": f} if f is not None else {})})
    mid = sorted(s["params"] for s in out)[len(out) // 2]
    for s in out:
        if abs(s["params"] / mid - 1) > exp.match_tolerance:
            raise ValueError(f"{where}.shapes: [{s['width']}, {s['depth']}] has {s['params']:,} non-embedding "
                             f"parameters, {100 * (s['params'] / mid - 1):+.1f}% from the level's median "
                             f"{mid:,}; match_tolerance is {exp.match_tolerance}")
    return {"shapes": sorted(out, key=lambda s: s["depth"]), "completep_base": base}


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
    """SP's lr grid at one shape on the tuning seed, and whether it is settled."""
    s = exp.tuning_seed
    return extend_lr_grid(exp.lrs, exp.lr_bounds, lambda lr: losses.get(run(exp, "sp", w, d, lr, s).name))


def tuned_lr(exp: DepthVsSizeSpec, losses: dict[str, float], p: str, w: int, d: int) -> float | None:
    """The lr an arm reports at a shape: SP's own grid optimum; CompleteP's is the grid optimum at
    its level's base shape. None until that grid is settled."""
    if p == "completep":
        w, d = level_of(exp, w, d)["completep_base"]
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
            for p in ("sp", "completep"):
                lr = tuned_lr(exp, losses, p, w, d)
                if lr is not None:
                    out.extend(run(exp, p, w, d, lr, seed) for seed in exp.seeds)
    return list(dict.fromkeys(out))  # CompleteP's base-shape runs are SP's: once


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
        for arm, p, _ in ARMS:
            for s in level["shapes"]:
                w, d = s["width"], s["depth"]
                lr = tuned_lr(exp, losses, p, w, d)
                got = () if lr is None else tuple(
                    losses[n] for n in (run(exp, p, w, d, lr, seed).name for seed in exp.seeds) if n in losses)
                out.append(Cell(i + 1, arm, s, lr, got))
    return out


class CellRow(NamedTuple):
    """A cell with its mean (t interval) and its difference to the next deeper shape (this −
    next) by Welch's interval and by the paired t over seeds; None where not compared."""

    cell: Cell
    mean: object
    welch: object
    paired: object


class Worse(NamedTuple):
    """A shape worse than a neighbour beyond the seed noise: ("shallower" or "deeper", the
    interval of this − that neighbour) per such neighbour."""

    cell: Cell
    sides: tuple

    @property
    def both(self) -> bool:
        return len(self.sides) == 2


class Comparison(NamedTuple):
    """One level's arm in depth order: its rows, and per method ("welch", "paired") the shapes
    worse than a neighbour."""

    rows: tuple
    worse: dict


def neighbour_rows(group: list[Cell], n_seeds: int) -> list[CellRow]:
    """One row per cell of a level's arm (depth order), only cells with all `n_seeds` finished
    compared (`analysis.science.depth_penalty.neighbour_intervals`)."""
    from depthdelusion.analysis.science.depth_penalty import neighbour_intervals

    full = [c.losses if c.complete and len(c.losses) == n_seeds else None for c in group]
    return [CellRow(c, *got) for c, got in zip(group, neighbour_intervals(full))]


def worse_than_neighbours(rows: list[CellRow], key: str = "welch") -> tuple[Worse, ...]:
    """Each shape whose loss exceeds a neighbour's beyond the seed noise (the 95% interval of
    the difference by `key`, "welch" or "paired", excludes 0)."""
    from depthdelusion.analysis.science import depth_penalty

    found = depth_penalty.worse_than_neighbours([getattr(r, key) for r in rows])
    side = {-1: "shallower", +1: "deeper"}
    return tuple(Worse(r.cell, tuple((side[k], iv) for k, iv in got)) for r, got in zip(rows, found) if got)


def compare(group: list[Cell], n_seeds: int) -> Comparison:
    rows = tuple(neighbour_rows(group, n_seeds))
    return Comparison(rows, {key: worse_than_neighbours(list(rows), key) for key in METHODS})


def seed_centred(got: list[Cell]) -> list[tuple[Cell, list[float]]]:
    """(cell, its losses with each seed's level effect removed: `depth_penalty.seed_centred` over
    the level's cells). Cells hold their seeds in one order (complete cells)."""
    from depthdelusion.analysis.science.depth_penalty import seed_centred as centred

    out = []
    for level in sorted({c.level for c in got}):
        cells_ = [c for c in got if c.level == level]
        out += list(zip(cells_, centred([c.losses for c in cells_])))
    return out


def law_results(exp: DepthVsSizeSpec, all_cells: list[Cell], *, seed: int = 0) -> list:
    """Per arm, the laws of `depth_confound_laws` fitted to every test seed of every complete
    cell over all levels, N = non-embedding parameters. T = tokens_per_param · N at every cell,
    so the capacity term A·N^−α carries the data term too (no separate T term). Each seed's
    shared effect on a level (its corpus and held-out batches may move every shape alike) is
    removed first (`seed_centred`)."""
    from depthdelusion.studies.common import laws
    out = []
    for arm, _, _ in ARMS:
        got = [c for c in all_cells if c.arm == arm and c.complete and len(c.losses) == len(exp.seeds)]
        records = [{"name": f"{arm}_w{c.shape['width']}_d{c.shape['depth']}_s{k}", "depth": c.shape["depth"],
                    "width": c.shape["width"], "params": c.shape["params"], "loss": x}
                   for c, xs in seed_centred(got) for k, x in enumerate(xs)]
        out.append(laws.fit_arm(arm, records, 0, replicates=exp.law_replicates, seed=seed))
    return out


def lr_rows(exp: DepthVsSizeSpec, losses: dict[str, float], sigma: float | None, dof: int | None) -> list[dict]:
    """Per shape, SP's grid on the tuning seed (lrs and losses), the lr chosen and the fitted
    optimum (Fieller's 95% interval with the seed noise σ of the test seeds)."""
    from depthdelusion.studies.common.lr_grid import fit_lr_curve

    rows = []
    for i, level in enumerate(exp.resolved_levels):
        for s in level["shapes"]:
            w, d = s["width"], s["depth"]
            lrs, settled = grid(exp, losses, w, d)
            names = [run(exp, "sp", w, d, lr, exp.tuning_seed).name for lr in lrs]
            curve = [(lr, losses[n]) for lr, n in zip(lrs, names) if n in losses]
            if not curve:
                continue
            fit = fit_lr_curve(curve, sigma, dof)
            rows.append({"level": i + 1, "width": w, "depth": d, "settled": settled,
                         "lrs": tuple(lr for lr, _ in curve), "losses": tuple(y for _, y in curve),
                         "chosen_lr": tuned_lr(exp, losses, "sp", w, d),
                         "fit_lr": math.exp(fit.log_lr) if fit.identified else math.nan,
                         "fit_lr_lo": math.exp(fit.log_lr_ci[0]) if fit.identified else math.nan,
                         "fit_lr_hi": math.exp(fit.log_lr_ci[1]) if fit.identified else math.nan,
                         "note": fit.note if settled else "grid not settled yet"})
    return rows


@dataclasses.dataclass(frozen=True)
class DepthVsSizeResults:
    """What the study measured from its finished runs, numbers only (rendered by
    `depth_vs_size_report.sections`)."""

    spec: DepthVsSizeSpec
    source: str  # the experiment file, as given on the command line
    runs_dir: Path  # OUT/runs: OUT is in the command that reproduces the study
    groups: dict  # (level, arm) -> Comparison: every cell, its neighbours, the shapes worse than one
    sigma: float | None  # SP's seed noise over its cells (`robust_seed_sd`) and its dof; None before seeds
    dof: int | None
    curves: tuple  # `lr_rows`
    laws: tuple  # depth_confound_laws.ArmLaws per arm
    done: int  # planned runs finished
    todo: tuple  # planned runs not finished
    runs: int  # finished runs read
    wall_s: float  # their training wall time


def measure(exp: DepthVsSizeSpec, source: str, runs_dir, *, seed: int = 0) -> DepthVsSizeResults:
    """Everything the report states, from the finished runs in `runs_dir` (local or gs://)."""
    from depthdelusion import rundir
    from depthdelusion.analysis.science.depth_penalty import robust_seed_sd

    runs_dir = rundir.as_path(runs_dir)
    losses, summaries = planned_runs.results(exp.metric, runs_dir)
    got = cells(exp, losses)
    groups = {(i + 1, arm): compare([c for c in got if c.level == i + 1 and c.arm == arm], len(exp.seeds))
              for i in range(len(exp.resolved_levels)) for arm, _, _ in ARMS}
    sigma, dof = robust_seed_sd(c.losses for c in got if c.arm == "SP")
    curves = lr_rows(exp, losses, sigma, dof)
    fitted = law_results(exp, got, seed=seed)
    planned = plan(exp, losses)
    return DepthVsSizeResults(
        spec=exp, source=source, runs_dir=runs_dir, groups=groups, sigma=sigma, dof=dof, curves=tuple(curves),
        laws=tuple(fitted), done=sum(1 for r in planned if r.name in losses),
        todo=tuple(r for r in planned if r.name not in losses), runs=len(summaries),
        wall_s=sum(float(s.get("wall_time_s") or 0) for s in summaries.values()))
