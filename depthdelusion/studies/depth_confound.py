"""The depth-confound study: is there a depth penalty once the learning rate is right for each
shape? Three arms at every (depth, width) cell, all at the same tokens:

- A, SP at one learning rate per width: the lr tuned at the shallowest depth (`arm_a_depth`),
  used unchanged at every depth (the practice of the paper's grid: one lr per width);
- B, SP tuned per cell: an lr grid spaced by at most 2x, extended until the best lr is
  interior; the optimum and the loss at it from a quadratic fit in ln lr;
- C, CompleteP (depth exponent 1) with the base lr tuned once at its base shape (the same rule
  as B) and transferred unchanged; on `completep.tuned_cells` also tuned per cell.

Plus an iso-FLOP slice at one width: depth traded against tokens at the compute of a reference
depth. Every point an arm reports is trained at every seed in `seeds`; lr grids at the first.
The report adds, per arm, the laws with their calibrated tests (`depth_confound_laws`).

Runs are named by what they are (`sp_w32_d8_lr0.004_s1`; iso-FLOP runs add `_n<steps>`), so an
arm is a view over runs and a run two arms share is trained once. What to train is a pure
function of the finished runs (`plan`): each invocation plans, trains a few of the planned runs
through the sweep runner (finished skipped, unfinished resumed, failed retried), plans again,
and stops when nothing is left or `max_runs` were trained. Run directories hold config.yaml,
metrics.jsonl (per-layer norms every `train.layer_stats_every` updates) and summary.json. OUT may
be local or gs:// (the runs trained there by the sweep runner; the figure drawn locally).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, NamedTuple

from depthdelusion.config import Config, from_dict
from depthdelusion.studies import experiment_file, planned_runs
from depthdelusion.studies.lr_grid import (  # noqa: F401 (LrFit: re-exported)
    LrFit,
    extend_lr_grid,
    fit_lr_curve,
    grid_optimum,
)

KEYS = ("base", "widths", "depths", "lrs", "lr_bounds", "seeds", "arm_a_depth", "completep",
        "iso_flop", "metric")
OPTIONAL_KEYS = ("law_replicates",)  # parametric-bootstrap replicates of the laws' tests
DEFAULT_LAW_REPLICATES = 200


class Run(NamedTuple):
    name: str
    parametrization: str
    width: int
    depth: int
    lr: float
    seed: int
    steps: int | None  # None: the base recipe's steps (same tokens for every cell)


def load_experiment(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    raw = experiment_file.read_experiment(path, KEYS, OPTIONAL_KEYS)
    if not isinstance(raw.get("law_replicates", 0), int) or raw.get("law_replicates", 0) < 0:
        raise ValueError(f"{path}: law_replicates={raw['law_replicates']!r}: need a whole number >= 0")
    lrs = sorted(float(x) for x in raw["lrs"])
    if len(lrs) < 5 or any(b / a > 2.0 + 1e-9 for a, b in zip(lrs, lrs[1:])):
        raise ValueError(f"{path}: lrs={raw['lrs']}: need at least 5 learning rates spaced by at most 2x")
    raw["lrs"] = lrs
    if raw["arm_a_depth"] not in raw["depths"]:
        raise ValueError(f"{path}: arm_a_depth={raw['arm_a_depth']} is not one of depths {raw['depths']}")
    if raw["iso_flop"]["width"] not in raw["widths"]:
        raise ValueError(f"{path}: iso_flop.width={raw['iso_flop']['width']} is not one of widths {raw['widths']}")
    from_dict(raw["base"], f"{path}: base").validate()  # fail before the first run
    raw["iso_flop"]["steps"] = {d: _iso_flop_steps(raw, d) for d in raw["iso_flop"]["depths"]}
    return raw


def run_name(p: str, width: int, depth: int, lr: float, seed: int, steps: int | None = None) -> str:
    return f"{p}_w{width}_d{depth}_lr{lr:g}_s{seed}" + (f"_n{steps}" if steps else "")


def make_run(p: str, width: int, depth: int, lr: float, seed: int, steps: int | None = None) -> Run:
    return Run(run_name(p, width, depth, lr, seed, steps), p, width, depth, lr, seed, steps)


def run_config(exp: dict, run: Run) -> Config:
    raw = json.loads(json.dumps(exp["base"]))  # deep copy
    model = raw.setdefault("model", {})
    model.update(width=run.width, depth=run.depth, parametrization=run.parametrization)
    if run.parametrization == "completep":
        model.update(base_width=exp["completep"]["base_width"], base_depth=exp["completep"]["base_depth"])
    train = raw.setdefault("train", {})
    train.update(lr=run.lr, seed=run.seed)
    raw.setdefault("data", {})["seed"] = run.seed
    if run.steps:
        base_steps = train["steps"]
        train.update(steps=run.steps, eval_every=run.steps,
                     warmup_steps=max(1, round(train.get("warmup_steps", 0) * run.steps / base_steps)))
    return from_dict(raw, f"depth-confound run {run.name}").validate()


# ---------------------------------------------------------------------------------- planning
def trained_as(exp: dict, p: str, width: int, depth: int) -> str:
    """The parametrization a shape's runs are trained under: CompleteP at its own base shape is
    SP exactly (every multiplier is 1), so those runs are SP's and are trained once."""
    cp = exp["completep"]
    return "sp" if p == "completep" and (width, depth) == (cp["base_width"], cp["base_depth"]) else p


def _grid_lrs(exp: dict, losses: dict[str, float], p: str, w: int, d: int, seed: int) -> tuple[list[float], bool]:
    """The lrs of one shape's grid (`lr_grid.extend_lr_grid` from `lrs` within `lr_bounds`) and
    whether it is settled."""
    p = trained_as(exp, p, w, d)
    return extend_lr_grid(exp["lrs"], exp["lr_bounds"], lambda lr: losses.get(run_name(p, w, d, lr, seed)))


def tuned_lr(exp: dict, losses: dict[str, float], p: str, w: int, d: int) -> float | None:
    """The grid lr an arm reports for a tuned shape: the grid point nearest (in ln lr) to the
    quadratic fit's optimum, or the grid's best where the fit has no minimum; None until the grid
    is settled."""
    seed = exp["seeds"][0]
    lrs, settled = _grid_lrs(exp, losses, p, w, d, seed)
    if not settled:
        return None
    p = trained_as(exp, p, w, d)
    return grid_optimum([(lr, losses[run_name(p, w, d, lr, seed)]) for lr in lrs])


def iso_flop_steps(exp: dict, depth: int) -> int | None:
    """The iso-FLOP slice's steps at `depth` (None where they equal the base recipe's)."""
    steps = exp["iso_flop"]["steps"][depth]
    return None if steps == exp["base"]["train"]["steps"] else steps


def _iso_flop_steps(exp: dict, depth: int) -> int:
    """Steps at `depth` that spend the reference depth's training compute (6 N T, N the exact
    parameter count with embeddings) at the iso-FLOP width."""
    from depthdelusion.model_size import count_params

    iso = exp["iso_flop"]
    def params(d: int) -> int:
        return count_params(run_config(exp, make_run("sp", iso["width"], d, 1e-3, 0)).model)
    steps = exp["base"]["train"]["steps"]
    return max(1, round(steps * params(iso["reference_depth"]) / params(depth)))


def plan(exp: dict, losses: dict[str, float]) -> list[Run]:
    """Every run the study needs given the finished ones (`losses`: run name -> metric, +inf for
    a failed or diverged run), in training order: width-major, so that a partial study reports
    whole widths, and within a width the order that answers first (A and C against depth at one
    seed). A run whose lr depends on a grid that is not settled is not planned yet."""
    seeds = exp["seeds"]
    s0 = seeds[0]
    cp = exp["completep"]
    out: list[Run] = []

    def grid(p: str, w: int, d: int) -> None:
        lrs, _ = _grid_lrs(exp, losses, p, w, d, s0)
        out.extend(make_run(trained_as(exp, p, w, d), w, d, lr, s0) for lr in lrs)

    def seeded(p: str, w: int, d: int, lr: float | None, steps: int | None = None) -> None:
        if lr is not None:
            out.extend(make_run(trained_as(exp, p, w, d), w, d, lr, s, steps) for s in seeds)

    base_w, base_d = cp["base_width"], cp["base_depth"]
    lr_c = tuned_lr(exp, losses, "completep", base_w, base_d)
    for w in exp["widths"]:
        # the two grids arms A and C need first, then A and C at one seed over depth (the first
        # answer), then B's grids, then every seed, then the iso-FLOP slice
        if w == exp["widths"][0]:
            grid("completep", base_w, base_d)
        grid("sp", w, exp["arm_a_depth"])
        lr_a = tuned_lr(exp, losses, "sp", w, exp["arm_a_depth"])
        for d in exp["depths"]:
            if lr_a is not None:
                out.append(make_run("sp", w, d, lr_a, s0))
            if lr_c is not None:
                out.append(make_run(trained_as(exp, "completep", w, d), w, d, lr_c, s0))
        for d in exp["depths"]:
            grid("sp", w, d)
        for d in exp["depths"]:
            seeded("sp", w, d, lr_a)
            seeded("sp", w, d, tuned_lr(exp, losses, "sp", w, d))
            seeded("completep", w, d, lr_c)
        if w == exp["iso_flop"]["width"]:
            for d in exp["iso_flop"]["depths"]:
                steps = iso_flop_steps(exp, d)
                seeded("sp", w, d, lr_a, steps)
                seeded("sp", w, d, tuned_lr(exp, losses, "sp", w, d), steps)
                seeded("completep", w, d, lr_c, steps)
    for w, d in cp["tuned_cells"]:
        grid("completep", w, d)
        seeded("completep", w, d, tuned_lr(exp, losses, "completep", w, d))
    return list(dict.fromkeys(out))  # runs two arms share, once


# --------------------------------------------------------------------------------- running
def results(exp: dict, runs_dir: Path) -> tuple[dict[str, float], dict[str, dict]]:
    """(metric per finished or failed run: +inf for failed or non-finite, its summary)."""
    return planned_runs.results(exp["metric"], runs_dir)


def train(exp: dict, source: str, out: Path, *, max_runs: int | None = None, batch: int = 2,
          log=print, train_fn=None) -> tuple[int, bool]:
    """Plan, train up to `batch` unfinished runs, plan again, until nothing is left or
    `max_runs` were trained. Returns (runs trained, preempted)."""
    return planned_runs.train_planned(lambda losses: plan(exp, losses), lambda r: run_config(exp, r),
                                      exp["metric"], source, out, max_runs=max_runs, batch=batch,
                                      log=log, train_fn=train_fn)


# ---------------------------------------------------------------------------------- report
ARMS = (("A", "SP, one lr per width (tuned at the shallowest depth)"),
        ("B", "SP, lr tuned per cell"),
        ("C", "CompleteP, base lr transferred"))


class Point(NamedTuple):
    """One arm's reported point at one cell: the lr it uses and the metric over seeds."""

    arm: str
    width: int
    depth: int
    steps: int | None
    lr: float | None
    losses: tuple[float, ...]  # one per finished seed (inf: diverged)

    @property
    def mean(self) -> float:
        finite = [x for x in self.losses if math.isfinite(x)]
        return sum(finite) / len(finite) if finite and len(finite) == len(self.losses) else math.nan

    @property
    def sd(self) -> float:
        xs = self.losses
        if len(xs) < 2 or not all(math.isfinite(x) for x in xs):
            return math.nan
        m = sum(xs) / len(xs)
        return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def arm_lr(exp: dict, losses: dict[str, float], arm: str, w: int, d: int) -> float | None:
    cp = exp["completep"]
    if arm == "A":
        return tuned_lr(exp, losses, "sp", w, exp["arm_a_depth"])
    if arm == "B":
        return tuned_lr(exp, losses, "sp", w, d)
    return tuned_lr(exp, losses, "completep", cp["base_width"], cp["base_depth"])


def points(exp: dict, losses: dict[str, float], iso: bool = False) -> list[Point]:
    """Every arm's point at every cell (equal tokens), or along the iso-FLOP slice."""
    out = []
    widths = [exp["iso_flop"]["width"]] if iso else exp["widths"]
    depths = exp["iso_flop"]["depths"] if iso else exp["depths"]
    for arm, _ in ARMS:
        for w in widths:
            for d in depths:
                p = trained_as(exp, "completep" if arm == "C" else "sp", w, d)
                lr = arm_lr(exp, losses, arm, w, d)
                steps = None
                if iso:
                    steps = iso_flop_steps(exp, d)
                got = () if lr is None else tuple(
                    losses[n] for n in (run_name(p, w, d, lr, s, steps) for s in exp["seeds"]) if n in losses)
                out.append(Point(arm, w, d, steps, lr, got))
    return out


def depth_penalty(pts: list[Point]) -> dict[int, object]:
    """Per depth, loss(D) − loss(best D) of the seed means with Welch's 95% t interval
    (:mod:`..analysis.seed_intervals`), the best depth (lowest seed mean) taken as given: the
    interval does not count its choice. The best depth itself: 0 and no interval. Only over
    depths whose every seed finished (≥ 2 seeds); {} when fewer than two such depths."""
    from depthdelusion.analysis.fitting.seed_intervals import Interval, welch_interval

    full = [p for p in pts if p.losses and math.isfinite(p.mean) and len(p.losses) >= 2]
    if len(full) < 2:
        return {}
    best = min(full, key=lambda p: p.mean)
    return {p.depth: (Interval(0.0, 0.0, math.nan, math.nan, math.nan) if p is best
                      else welch_interval(p.losses, best.losses)) for p in full}


def arm_records(exp: dict, losses: dict, summaries: dict, arm: str) -> tuple[list[dict], int]:
    """(one record per finished finite seed at the arm's lr in every equal-token cell, the
    number of diverged seeds left out)."""
    records, diverged = [], 0
    for w in exp["widths"]:
        for d in exp["depths"]:
            lr = arm_lr(exp, losses, arm, w, d)
            if lr is None:
                continue
            p = trained_as(exp, "completep" if arm == "C" else "sp", w, d)
            for s in exp["seeds"]:
                name = run_name(p, w, d, lr, s)
                if name not in losses:
                    continue
                summary = summaries[name]
                if not math.isfinite(losses[name]) or not summary.get("params"):
                    diverged += not math.isfinite(losses[name])
                    continue
                records.append({"name": name, "depth": d, "width": w, "params": summary["params"],
                                "tokens": summary.get("tokens"), "loss": losses[name]})
    return records, diverged


def arm_laws(exp: dict, losses: dict, summaries: dict, *, seed: int = 0) -> list:
    """Every arm's laws and tests (:mod:`.depth_confound_laws`), `law_replicates` replicates each."""
    from depthdelusion.studies import depth_confound_laws as laws

    replicates = int(exp.get("law_replicates", DEFAULT_LAW_REPLICATES))
    return [laws.fit_arm(arm, *arm_records(exp, losses, summaries, arm), replicates=replicates, seed=seed)
            for arm, _ in ARMS]


def transfer_cost(exp: dict, losses: dict[str, float]) -> list[dict]:
    """On each of `completep.tuned_cells`: CompleteP at the transferred lr against CompleteP at
    the lr tuned for that cell (both over every seed), the difference transferred − tuned with
    Welch's 95% t interval."""
    from depthdelusion.analysis.fitting.seed_intervals import welch_interval

    rows = []
    lr_c = arm_lr(exp, losses, "C", 0, 0)
    for w, d in exp["completep"]["tuned_cells"]:
        lr_t = tuned_lr(exp, losses, "completep", w, d)
        if lr_c is None or lr_t is None:
            continue
        p = trained_as(exp, "completep", w, d)
        got = [tuple(losses[n] for n in (run_name(p, w, d, lr, s) for s in exp["seeds"])
                     if n in losses) for lr in (lr_c, lr_t)]
        pts = [Point("C", w, d, None, lr, g) for lr, g in zip((lr_c, lr_t), got)]
        diff = lo = hi = math.nan
        if all(len(p.losses) >= 2 and math.isfinite(p.mean) for p in pts):
            iv = welch_interval(pts[0].losses, pts[1].losses)
            diff, lo, hi = iv.estimate, iv.lo, iv.hi
        rows.append({"width": w, "depth": d, "transferred": pts[0], "tuned": pts[1],
                     "cost": diff, "cost_lo": float(lo), "cost_hi": float(hi)})
    return rows


def _fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else "–"


def _lr_fmt(lr: float | None) -> str:
    return "–" if lr is None else f"{lr:g}"


def lr_curves(exp: dict, losses: dict[str, float], sigma: float | None, dof: int | None) -> list[dict]:
    """One row per tuned shape: its grid, the grid's best, and the fitted optimum with intervals."""
    cp = exp["completep"]
    shapes = [("sp", w, d) for w in exp["widths"] for d in exp["depths"]]
    shapes += [("completep", cp["base_width"], cp["base_depth"])]
    shapes += [("completep", w, d) for w, d in cp["tuned_cells"]]
    rows = []
    s0 = exp["seeds"][0]
    for p, w, d in shapes:
        lrs, settled = _grid_lrs(exp, losses, p, w, d, s0)
        q = trained_as(exp, p, w, d)
        curve = [(lr, losses[run_name(q, w, d, lr, s0)]) for lr in lrs if run_name(q, w, d, lr, s0) in losses]
        if not curve:
            continue
        fit = fit_lr_curve(curve, sigma, dof)
        best_lr, best_loss = min(curve, key=lambda c: c[1])
        rows.append({
            "parametrization": p, "width": w, "depth": d, "settled": settled,
            "lrs": " ".join(f"{lr:g}" for lr, _ in curve),
            "losses": " ".join(_fmt(y) for _, y in curve),
            "grid_best_lr": best_lr, "grid_best_loss": best_loss,
            "fit_lr": math.exp(fit.log_lr) if fit.identified else math.nan,
            "fit_lr_lo": math.exp(fit.log_lr_ci[0]) if fit.identified else math.nan,
            "fit_lr_hi": math.exp(fit.log_lr_ci[1]) if fit.identified else math.nan,
            "fit_loss": fit.loss if fit.identified else math.nan,
            "fit_loss_lo": fit.loss_ci[0] if fit.identified else math.nan,
            "fit_loss_hi": fit.loss_ci[1] if fit.identified else math.nan,
            "note": fit.note if settled else "grid not settled yet",
        })
    return rows


def seed_noise(pts: list[Point]) -> tuple[float | None, int | None]:
    """Seed standard deviation σ over every point with >= 2 finished finite seeds, and its
    degrees of freedom; (None, None) when there is none yet. Robust: each point's variance s²
    over its ν = n − 1 dof is ~ σ² χ²_ν/ν, so σ² is the median over points of s² divided by the
    median of χ²_ν/ν — one cell at the edge of stability (a seed that diverged) does not set
    the noise of every lr fit, as it would in a pooled mean of squares."""
    from scipy import stats

    ratios, dof = [], 0
    for p in pts:
        if len(p.losses) >= 2 and all(math.isfinite(x) for x in p.losses):
            n = len(p.losses)
            m = sum(p.losses) / n
            s2 = sum((x - m) ** 2 for x in p.losses) / (n - 1)
            ratios.append(s2 / (stats.chi2.median(n - 1) / (n - 1)))
            dof += n - 1
    if not ratios:
        return None, None
    ratios.sort()
    k = len(ratios)
    med = ratios[k // 2] if k % 2 else (ratios[k // 2 - 1] + ratios[k // 2]) / 2
    return math.sqrt(med), dof


def _iv_text(iv) -> str:
    return f"{_fmt(iv.estimate)} [{_fmt(iv.lo)}, {_fmt(iv.hi)}]"


def _arm_part(arm: str, arm_pts: list[Point], got: dict, dmax: int) -> str:
    """One arm's clause: its best depth, the depths Welch's t cannot tell from it, its penalty
    at the deepest depth."""
    best = min(arm_pts, key=lambda p: p.mean)
    ties = [f"D = {d} +{_iv_text(iv)}" for d, iv in sorted(got.items())
            if d != best.depth and iv.lo <= 0]
    pen = got[dmax]
    return (f"arm {arm} is best at D = {best.depth} ({len(arm_pts)} depths; "
            + (f"not distinguishable from it: {', '.join(ties)}" if ties else "every other depth worse beyond its seeds")
            + f"), penalty at D = {dmax} " + ("0 (its best depth)" if dmax == best.depth else _iv_text(pen)))


def _kept_text(pen: dict, dmax: int) -> str:
    """How much of arm A's penalty B and C keep: Fieller's interval of the ratio."""
    from depthdelusion.analysis.fitting.seed_intervals import fieller_ratio

    a = pen["A"]
    if not a.lo > 0:
        return f" Arm A's own penalty at D = {dmax} is not distinguishable from 0, so there is no penalty to explain here."
    out = ""
    for arm in ("B", "C"):
        if arm not in pen:
            continue
        if pen[arm].se == 0:
            out += f" {arm} keeps none of A's penalty (D = {dmax} is its best depth)."
            continue
        r, lo, hi = fieller_ratio(pen[arm], a)
        out += (f" {arm} keeps {100 * r:.0f}% [{100 * lo:.0f}%, {100 * hi:.0f}%] of A's penalty"
                + (" (its own penalty's interval includes 0)" if pen[arm].lo <= 0 else "") + ".")
    return out


def verdict_lines(exp: dict, pts: list[Point], penalties: dict, *, iso: bool = False) -> list[str]:
    """One sentence per width (or the iso-FLOP slice): each arm's best depth, the depths its
    seeds cannot tell from it and its penalty at the deepest depth (Welch), then how much of arm
    A's penalty B and C keep (Fieller). Only over points whose seeds all finished."""
    lines = []
    dmax = max(exp["iso_flop"]["depths"] if iso else exp["depths"])
    for w in ([exp["iso_flop"]["width"]] if iso else exp["widths"]):
        parts, pen = [], {}
        for arm, _ in ARMS:
            arm_pts = [p for p in pts if p.arm == arm and p.width == w and math.isfinite(p.mean)]
            got = penalties.get((arm, w), {})
            if len(arm_pts) < 2 or dmax not in got:
                parts.append(f"arm {arm}: not enough finished points yet")
                continue
            pen[arm] = got[dmax]
            parts.append(_arm_part(arm, arm_pts, got, dmax))
        head = f"- **fixed compute, W = {w}**: " if iso else f"- **W = {w}**: "
        lines.append(head + "; ".join(parts) + "." + (_kept_text(pen, dmax) if "A" in pen else ""))
    return lines


def _fixed_width_records(exp: dict, losses: dict, summaries: dict, arm: str) -> list[dict]:
    """Every finished finite seed of the arm at the iso-FLOP width: its equal-token cells and
    its iso-FLOP cells (the reference depth is in both, once)."""
    w, recs = exp["iso_flop"]["width"], {}
    for p in points(exp, losses) + points(exp, losses, iso=True):
        if p.arm != arm or p.width != w or p.lr is None:
            continue
        for s in exp["seeds"]:
            name = run_name(trained_as(exp, "completep" if arm == "C" else "sp", w, p.depth), w, p.depth, p.lr, s, p.steps)
            summary = summaries.get(name, {})
            if name in losses and math.isfinite(losses[name]) and summary.get("params") and summary.get("tokens"):
                recs[name] = {"name": name, "depth": p.depth, "width": w, "params": summary["params"],
                              "tokens": summary["tokens"], "loss": losses[name]}
    return list(recs.values())


def no_depth_lines(exp: dict, losses: dict, summaries: dict) -> list[str]:
    """Is the fixed-compute penalty more than size and steps? Per arm, the law in parameters and
    tokens only fitted to the seed rows of every cell at the iso-FLOP width, tested against the
    seed noise (lack-of-fit F)."""
    from depthdelusion.studies.depth_confound_laws import NO_DEPTH, no_depth_term

    parts = []
    for arm, _ in ARMS:
        got = no_depth_term(_fixed_width_records(exp, losses, summaries, arm))
        if got:
            t = got[1]
            parts.append(f"arm {arm}: largest cell-mean residual {t.max_cell_residual:.3f} nats, "
                         f"F = {t.f:.2f} on ({t.df_lof}, {t.df_pure}) df, p = {t.p:.2g}")
    if not parts:
        return []
    return [f"**Depth beyond size and steps at fixed width** (W = {exp['iso_flop']['width']}, every "
            f"equal-token and iso-FLOP cell): the law with parameters and tokens only (`{NO_DEPTH}`, "
            "no depth term) fitted to the seed rows, against the seed noise by the lack-of-fit F test "
            "(assumes one Gaussian seed variance across cells): " + "; ".join(parts)
            + ". A large p: the cells are explained by N and T, with no depth term needed.", ""]


def held_out_lines(exp: dict, pts: list[Point]) -> list[str]:
    """The penalties at the deepest depth from the seeds that did not choose the lrs (every lr
    grid ran at the first seed, which is also a reported seed)."""
    held = [p._replace(losses=p.losses[1:]) for p in pts]
    dmax = max(exp["depths"])
    parts = []
    for arm, _ in ARMS:
        for w in exp["widths"]:
            got = depth_penalty([p for p in held if p.arm == arm and p.width == w])
            if dmax in got:
                parts.append(f"{arm}, W = {w}: " + ("0 (best)" if got[dmax].se == 0 else _iv_text(got[dmax])))
    return ([f"Seed {exp['seeds'][0]} chose every lr and is one of the reported seeds, which biases "
             "the tuned arms' means down. Penalty at D = %d from the other seeds %s alone (Welch, "
             "2 seeds a side): " % (dmax, exp["seeds"][1:]) + "; ".join(parts) + ".", ""]
            if parts and len(exp["seeds"]) >= 3 else [])


def _point_rows(exp, pts, iso_pts, penalties, iso_pen) -> list[dict]:
    """points.csv's rows: every arm × cell of both slices with its penalty interval."""
    point_rows = []
    for kind, group, pen in (("equal tokens", pts, penalties), ("iso-FLOP", iso_pts, None)):
        for p in group:
            iv = ((pen or {}).get((p.arm, p.width), {}) if pen else iso_pen[p.arm]).get(p.depth)
            e, lo, hi = (iv.estimate, iv.lo, iv.hi) if iv else (math.nan,) * 3
            point_rows.append({"slice": kind, "arm": p.arm, "width": p.width, "depth": p.depth,
                               "steps": p.steps or exp["base"]["train"]["steps"], "lr": _lr_fmt(p.lr),
                               "seeds": len(p.losses), "loss_mean": _fmt(p.mean, 4), "loss_sd": _fmt(p.sd, 4),
                               "penalty": _fmt(e, 4), "penalty_lo": _fmt(lo, 4), "penalty_hi": _fmt(hi, 4)})
    return point_rows


def _loss_tables(exp, pts, iso_pts) -> list[str]:
    """Mean ± SD over seeds per arm, width and depth, for both slices."""
    from depthdelusion.analysis.formats.table_text import markdown_table

    lines = []
    for kind, group in (("equal tokens", pts), ("iso-FLOP", iso_pts)):
        lines += [f"### {kind}", ""]
        header = ["arm", "width"] + [f"D={d}" for d in (exp["iso_flop"]["depths"] if kind == "iso-FLOP" else exp["depths"])]
        rows = []
        for arm, _ in ARMS:
            for w in sorted({p.width for p in group}):
                cells = [p for p in group if p.arm == arm and p.width == w]
                rows.append([arm, w] + [f"{_fmt(p.mean)} ± {_fmt(p.sd)} (n={len(p.losses)}, lr {_lr_fmt(p.lr)})"
                                        if p.losses else "–" for p in cells])
        lines += [markdown_table(header, rows), ""]
    return lines


def _transfer_lines(exp, losses) -> list[str]:
    """What transfer loses on the CompleteP cells tuned per cell (none tuned: no lines)."""
    from depthdelusion.analysis.formats.table_text import markdown_table

    lines = []
    transfer = transfer_cost(exp, losses)
    if transfer:
        lines += ["## What transfer loses (CompleteP, tuned cells)", "",
                  "CompleteP at the lr transferred from its base shape against CompleteP with the lr "
                  "tuned for the cell (B's rule), every seed of both; cost = transferred − tuned, "
                  "Welch's 95% t interval.", ""]
        rows = [[r["width"], r["depth"],
                 *(f"{_fmt(p.mean)} ± {_fmt(p.sd)} (n={len(p.losses)}, lr {_lr_fmt(p.lr)})"
                   for p in (r["transferred"], r["tuned"])),
                 f"{_fmt(r['cost'])} [{_fmt(r['cost_lo'])}, {_fmt(r['cost_hi'])}]"] for r in transfer]
        lines += [markdown_table(["W", "D", "transferred lr", "tuned lr", "cost (nats)"], rows), ""]
    return lines


def _lr_curve_lines(exp, curves, sigma, dof) -> list[str]:
    """The lr grids of every tuned shape with the optimum of each."""
    from depthdelusion.analysis.formats.interval_text import interval_text
    from depthdelusion.analysis.formats.table_text import markdown_table

    lines = []
    lines += ["## Learning-rate curves (seed %d)" % exp["seeds"][0], "",
              "Optimum from the quadratic in ln lr through the grid's best point and its two "
              "neighbours; 95% intervals (Fieller's for lr*, delta method for the loss there) with t quantiles, the noise σ "
              + (f"= {sigma:.4f} over seed replicates (median-based, robust to a cell where a seed "
                 f"diverged; {dof} dof)." if sigma else
                 "not yet measured (no seed replicates): no intervals yet."), ""]
    rows = [[c["parametrization"], c["width"], c["depth"], c["lrs"], c["losses"],
             f"{c['fit_lr']:.3g} {interval_text((c['fit_lr_lo'], c['fit_lr_hi']), '.3g')}" if math.isfinite(c["fit_lr"]) else "–",
             f"{_fmt(c['fit_loss'])} [{_fmt(c['fit_loss_lo'])}, {_fmt(c['fit_loss_hi'])}]" if math.isfinite(c["fit_loss"]) else "–",
             c["note"]] for c in curves]
    lines += [markdown_table(["param", "W", "D", "lrs", "losses", "fitted lr* [95%]", "loss at lr* [95%]", "note"], rows), ""]
    return lines


def write_report(exp: dict, source: str, out: Path, planned: int, seed: int = 0) -> Path:
    """report.md, points.csv, lr_curves.csv and loss_vs_depth.png from the finished runs in
    OUT/runs; OUT local or gs:// (the figure drawn locally and copied up)."""
    from depthdelusion import rundir
    from depthdelusion.analysis.formats.table_text import Table
    from depthdelusion.studies import depth_confound_laws as laws

    out = rundir.as_path(out)
    losses, summaries = results(exp, out / "runs")
    pts = points(exp, losses)
    iso_pts = points(exp, losses, iso=True)
    sigma, dof = seed_noise(pts + iso_pts)
    curves = lr_curves(exp, losses, sigma, dof)
    penalties = {(arm, w): depth_penalty([p for p in pts if p.arm == arm and p.width == w])
                 for arm, _ in ARMS for w in exp["widths"]}
    iso_pen = {arm: depth_penalty([p for p in iso_pts if p.arm == arm]) for arm, _ in ARMS}
    fitted_laws = arm_laws(exp, losses, summaries, seed=seed)
    done = sum(1 for r in plan(exp, losses) if r.name in losses)
    todo = [r for r in plan(exp, losses) if r.name not in losses]
    wall = sum(float(s.get("wall_time_s") or 0) for s in summaries.values())
    partial = bool(todo)

    point_rows = _point_rows(exp, pts, iso_pts, penalties, iso_pen)
    (out / "points.csv").write_text(Table("points", "", list(point_rows[0]),
                                          [list(r.values()) for r in point_rows]).csv())
    if curves:
        (out / "lr_curves.csv").write_text(Table("lr_curves", "", list(curves[0]), [
            [_fmt(v, 5) if isinstance(v, float) else v for v in r.values()] for r in curves]).csv())
    with rundir.local_dir(out) as local_out:
        plot(exp, pts, iso_pts, local_out / "loss_vs_depth.png")

    t = exp["base"]["train"]
    lines = ["# The depth confound: a depth penalty once the lr is right for each shape? "
             "(generated by `depthdelusion depth-confound`)", ""]
    lines += planned_runs.partial_lines(done, todo)
    lines += [
        f"Experiment: `{source}`. Widths {exp['widths']}, depths {exp['depths']}, {t['steps']} steps of "
        f"{t['batch_size']} × {exp['base']['model']['seq_len']} tokens at every cell (equal tokens), seeds "
        f"{exp['seeds']} (init and data order; lr grids at seed {exp['seeds'][0]}). Metric: `{exp['metric']}` "
        f"(validation loss, nats/byte, {t['eval_batches']} fixed held-out batches). Training wall time"
        f"{' so far' if partial else ''}: "
        f"{wall / 60:.0f} min ({len(summaries)} runs, on a shared 2-core CPU).", "",
        "Arms: " + "; ".join(f"**{a}** {text}" for a, text in ARMS) + ".", "",
        "## Verdict", "",
        *verdict_lines(exp, pts, penalties),
        *verdict_lines(exp, iso_pts, {(arm, exp["iso_flop"]["width"]): v for arm, v in iso_pen.items()}, iso=True), "",
        *no_depth_lines(exp, losses, summaries),
        *held_out_lines(exp, pts),
        "Assumptions: one token budget for every cell (no compute matching except the iso-FLOP slice); "
        "the penalty is loss(D) − loss(best D) of seed means, its 95% interval Welch's t (Welch–"
        "Satterthwaite df) with the best depth taken as given; a depth is \"not distinguishable\" from "
        "the best when that interval includes 0; the share of A's penalty kept is Fieller's 95% "
        "interval of the ratio (t on the smaller df); points with fewer than 2 finished seeds are left "
        "out; ± is the SD over seeds.", "",
        "## Loss against depth (mean ± SD over seeds)", ""]
    lines += _loss_tables(exp, pts, iso_pts)
    lines += _transfer_lines(exp, losses)
    lines += laws.report_lines(fitted_laws)
    law_rows = laws.csv_rows(fitted_laws)
    if law_rows:
        (out / "laws.csv").write_text(Table("laws", "", list(law_rows[0]),
                                            [list(r.values()) for r in law_rows]).csv())
    lines += _lr_curve_lines(exp, curves, sigma, dof)
    lines += planned_runs.not_finished_lines(todo)
    report = out / "report.md"
    report.write_text("\n".join(lines))
    return report


def plot(exp: dict, pts: list[Point], iso_pts: list[Point], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(f"W = {w}, equal tokens", [p for p in pts if p.width == w]) for w in exp["widths"]]
    panels.append((f"W = {exp['iso_flop']['width']}, iso-FLOP", iso_pts))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (title, group) in zip(axes[0], panels):
        for (arm, label), color in zip(ARMS, ("tab:red", "tab:blue", "tab:green")):
            got = [p for p in group if p.arm == arm and math.isfinite(p.mean)]
            if got:
                ax.errorbar([p.depth for p in got], [p.mean for p in got],
                            yerr=[p.sd if math.isfinite(p.sd) else 0 for p in got],
                            marker="o", capsize=3, color=color, label=f"{arm}: {label}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("depth D")
        ax.set_title(title, fontsize=9)
    axes[0][0].set_ylabel(f"{exp['metric']} (nats/byte), mean ± SD over seeds")
    # one legend for the arms, in their order, from whichever panels plot them (a partial
    # study's first panel may be empty)
    drawn = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            drawn.setdefault(label, handle)
    labels = [name for name in (f"{arm}: {label}" for arm, label in ARMS) if name in drawn]
    if labels:
        axes[0][0].legend([drawn[x] for x in labels], labels, fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_command(*, experiment: str, out: str, max_runs: int | None = None, report_only: bool = False) -> int:
    """`depthdelusion depth-confound` (the parser is `depthdelusion.cli`)."""
    import sys

    from depthdelusion import exit_codes, rundir

    exp = load_experiment(experiment)
    out_dir = rundir.as_path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not report_only:
        _, preempted = train(exp, experiment, out_dir, max_runs=max_runs, log=lambda t: print(t, flush=True))
        if preempted:
            print("preempted: run the same command again to resume", file=sys.stderr)
            return exit_codes.PREEMPTED
    report = write_report(exp, experiment, out_dir, planned=0)
    print(report.read_text())
    print(f"report written to {report}")
    return exit_codes.OK
