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
so a partial study reports whole levels and whole cells. The report and the command are in
`depth_vs_size_report`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from depthdelusion.config import Config, from_dict
from depthdelusion.studies import experiment_file, planned_runs
from depthdelusion.studies.depth_confound import Run, make_run
from depthdelusion.studies.lr_grid import extend_lr_grid, grid_optimum

KEYS = ("base", "levels", "tokens_per_param", "warmup_fraction", "match_tolerance", "lrs",
        "lr_bounds", "tuning_seed", "seeds", "metric")
OPTIONAL_KEYS = ("law_replicates",)
DEFAULT_LAW_REPLICATES = 200
PER_SHAPE = ("steps", "warmup_steps", "eval_every", "lr", "seed")  # base.train keys the study sets


def load_experiment(path: str | Path) -> dict[str, Any]:
    """The experiment, validated (every error one line naming the key), with each level's shapes
    resolved: {"width", "depth", "params" (non-embedding), "steps", "tokens"}."""
    path = Path(path)
    raw = experiment_file.read_experiment(path, KEYS, OPTIONAL_KEYS)
    if not isinstance(raw["base"], dict):
        raise ValueError(f"{path}: base: need a run configuration (sections model, data, train)")
    fixed = sorted(set(raw["base"].get("train") or {}) & set(PER_SHAPE))
    if fixed:
        raise ValueError(f"{path}: base.train.{fixed[0]} is set per shape by the study; remove it "
                         f"(the study sets {', '.join(PER_SHAPE)})")
    _check_numbers(path, raw)
    from_dict(raw["base"], f"{path}: base").validate()  # fail before the first run
    raw["levels"] = [_resolve_level(path, raw, i, level) for i, level in enumerate(raw["levels"])]
    shapes = [(s["width"], s["depth"]) for level in raw["levels"] for s in level["shapes"]]
    twice = sorted({s for s in shapes if shapes.count(s) > 1})
    if twice:
        raise ValueError(f"{path}: levels: shape {list(twice[0])} is in more than one level; a shape "
                         "has one N, so it belongs to one level")
    return raw


def _check_numbers(path: Path, raw: dict) -> None:
    lrs = sorted(float(x) for x in raw["lrs"])
    if len(lrs) < 3 or any(b / a > 2.0 + 1e-9 for a, b in zip(lrs, lrs[1:])):
        raise ValueError(f"{path}: lrs={raw['lrs']}: need at least 3 learning rates spaced by at most 2x")
    raw["lrs"] = lrs
    bounds = raw["lr_bounds"]
    if (not isinstance(bounds, list) or len(bounds) != 2 or not all(isinstance(b, (int, float)) for b in bounds)
            or not 0 < bounds[0] <= lrs[0] or not bounds[1] >= lrs[-1]):
        raise ValueError(f"{path}: lr_bounds={bounds!r}: need [low, high] with 0 < low <= {lrs[0]:g} "
                         f"and high >= {lrs[-1]:g} (the grid is extended within them)")
    seeds = raw["seeds"]
    if not isinstance(seeds, list) or len(set(seeds)) < 2 or len(set(seeds)) != len(seeds):
        raise ValueError(f"{path}: seeds={seeds!r}: need at least 2 distinct test seeds (3 for the study)")
    if raw["tuning_seed"] in seeds:
        raise ValueError(f"{path}: tuning_seed={raw['tuning_seed']} is one of seeds {seeds}: the lr must "
                         "be tuned on a seed that is not reported")
    for key in ("tokens_per_param", "warmup_fraction", "match_tolerance"):
        if not isinstance(raw[key], (int, float)) or not raw[key] > 0:
            raise ValueError(f"{path}: {key}={raw[key]!r}: need a number > 0")
    if not raw["warmup_fraction"] < 1:
        raise ValueError(f"{path}: warmup_fraction={raw['warmup_fraction']}: need a fraction in (0, 1)")
    n = raw.get("law_replicates", 0)
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"{path}: law_replicates={n!r}: need a whole number >= 0")
    if not isinstance(raw["levels"], list) or not raw["levels"]:
        raise ValueError(f"{path}: levels: need a list of levels, each {{shapes: [[width, depth], ...], "
                         "completep_base: [width, depth]}")


def _resolve_level(path: Path, raw: dict, i: int, level: Any) -> dict:
    """One level's shapes with their N (non-embedding), steps and tokens; N matched within the
    tolerance of the level's median."""
    from depthdelusion.model_size import non_embedding_params

    where = f"{path}: levels[{i}]"
    if not isinstance(level, dict) or set(level) != {"shapes", "completep_base"}:
        raise ValueError(f"{where}: need exactly the keys shapes, completep_base")
    shapes = [tuple(s) for s in level["shapes"] if isinstance(s, (list, tuple)) and len(s) == 2]
    if len(shapes) != len(level["shapes"]) or len(shapes) < 2:
        raise ValueError(f"{where}.shapes: need at least 2 [width, depth] pairs")
    base = tuple(level["completep_base"]) if isinstance(level["completep_base"], list) else None
    if base not in shapes:
        raise ValueError(f"{where}.completep_base={level['completep_base']!r} is not one of its shapes {[list(s) for s in shapes]}")
    train = raw["base"].get("train") or {}
    per_step = train.get("batch_size", 8) * (raw["base"].get("model") or {}).get("seq_len", 64)
    out = []
    for w, d in shapes:
        try:
            cfg = _config(raw, w, d, "sp", None, steps=1, lr=1e-3, seed=0, where=f"{where}.shapes {[w, d]}")
        except ValueError as err:
            raise ValueError(f"{where}.shapes: {[w, d]}: {err}") from None
        n = non_embedding_params(cfg.model)
        steps = max(1, round(raw["tokens_per_param"] * n / per_step))
        out.append({"width": w, "depth": d, "params": n, "steps": steps, "tokens": steps * per_step})
    mid = sorted(s["params"] for s in out)[len(out) // 2]
    for s in out:
        if abs(s["params"] / mid - 1) > raw["match_tolerance"]:
            raise ValueError(f"{where}.shapes: [{s['width']}, {s['depth']}] has {s['params']:,} non-embedding "
                             f"parameters, {100 * (s['params'] / mid - 1):+.1f}% from the level's median "
                             f"{mid:,}; match_tolerance is {raw['match_tolerance']}")
    return {"shapes": sorted(out, key=lambda s: s["depth"]), "completep_base": base}


def _config(exp: dict, w: int, d: int, p: str, cp_base: tuple | None, *, steps: int, lr: float,
            seed: int, where: str) -> Config:
    raw = json.loads(json.dumps(exp["base"]))  # deep copy
    model = raw.setdefault("model", {})
    model.update(width=w, depth=d, parametrization=p)
    if p == "completep":
        model.update(base_width=cp_base[0], base_depth=cp_base[1])
    train = raw.setdefault("train", {})
    train.update(steps=steps, eval_every=steps, lr=lr, seed=seed,
                 warmup_steps=max(1, round(exp["warmup_fraction"] * steps)))
    raw.setdefault("data", {})["seed"] = seed
    return from_dict(raw, where).validate()


# ---------------------------------------------------------------------------------- planning
def level_of(exp: dict, w: int, d: int) -> dict:
    return next(level for level in exp["levels"] if any((s["width"], s["depth"]) == (w, d) for s in level["shapes"]))


def shape_of(exp: dict, w: int, d: int) -> dict:
    return next(s for s in level_of(exp, w, d)["shapes"] if (s["width"], s["depth"]) == (w, d))


def trained_as(exp: dict, p: str, w: int, d: int) -> str:
    """CompleteP at its level's base shape is SP exactly (every multiplier 1): trained once, as SP."""
    return "sp" if p == "completep" and (w, d) == level_of(exp, w, d)["completep_base"] else p


def run(exp: dict, p: str, w: int, d: int, lr: float, seed: int) -> Run:
    return make_run(trained_as(exp, p, w, d), w, d, lr, seed, shape_of(exp, w, d)["steps"])


def run_config(exp: dict, r: Run) -> Config:
    return _config(exp, r.width, r.depth, r.parametrization, level_of(exp, r.width, r.depth)["completep_base"],
                   steps=r.steps, lr=r.lr, seed=r.seed, where=f"depth-vs-size run {r.name}")


def grid(exp: dict, losses: dict[str, float], w: int, d: int) -> tuple[list[float], bool]:
    """SP's lr grid at one shape on the tuning seed, and whether it is settled."""
    s = exp["tuning_seed"]
    return extend_lr_grid(exp["lrs"], exp["lr_bounds"], lambda lr: losses.get(run(exp, "sp", w, d, lr, s).name))


def tuned_lr(exp: dict, losses: dict[str, float], p: str, w: int, d: int) -> float | None:
    """The lr an arm reports at a shape: SP's own grid optimum; CompleteP's is the grid optimum at
    its level's base shape. None until that grid is settled."""
    if p == "completep":
        w, d = level_of(exp, w, d)["completep_base"]
    lrs, settled = grid(exp, losses, w, d)
    if not settled:
        return None
    return grid_optimum([(lr, losses[run(exp, "sp", w, d, lr, exp["tuning_seed"]).name]) for lr in lrs])


def plan(exp: dict, losses: dict[str, float]) -> list[Run]:
    """Every run the study needs given the finished ones (`losses`: name -> metric, +inf for a
    diverged run), in training order: level by level, and in a level shape by shape from the
    shallowest: its grid on the tuning seed, then its SP and CompleteP points at every test seed
    as soon as their lrs are known. So a partial study has whole cells at the shallow end of a
    level rather than grids everywhere and no test seed. A run whose lr depends on a grid that
    is not settled is not planned yet."""
    out: list[Run] = []
    for level in exp["levels"]:
        for s in level["shapes"]:
            w, d = s["width"], s["depth"]
            out.extend(run(exp, "sp", w, d, lr, exp["tuning_seed"]) for lr in grid(exp, losses, w, d)[0])
            for p in ("sp", "completep"):
                lr = tuned_lr(exp, losses, p, w, d)
                if lr is not None:
                    out.extend(run(exp, p, w, d, lr, seed) for seed in exp["seeds"])
    return list(dict.fromkeys(out))  # CompleteP's base-shape runs are SP's: once


def train(exp: dict, source: str, out: Path, *, max_runs: int | None = None, log=print,
          train_fn=None) -> tuple[int, bool]:
    return planned_runs.train_planned(lambda losses: plan(exp, losses), lambda r: run_config(exp, r),
                                      exp["metric"], source, out, max_runs=max_runs, log=log, train_fn=train_fn)
