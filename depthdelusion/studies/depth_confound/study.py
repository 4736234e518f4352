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
The report adds, per arm, the laws with their calibrated tests (`studies/common/laws.py`).

Runs are named by what they are (`sp_w32_d8_lr0.004_s1`; iso-FLOP runs add `_n<steps>`), so an
arm is a view over runs and a run two arms share is trained once. What to train is a pure
function of the finished runs (`plan`): each invocation plans, trains a few of the planned runs
through the sweep runner (finished skipped, unfinished resumed, failed retried), plans again,
and stops when nothing is left or `max_runs` were trained. Run directories hold config.yaml,
metrics.jsonl (per-layer norms every `train.layer_stats_every` updates) and summary.json. OUT may
be local or gs:// (the runs trained there by the sweep runner; the figure drawn locally).

The study's shape: its spec (`DepthConfoundSpec`, read by `spec.load_spec`), `measure` to a
frozen `DepthConfoundResults`, whose report and command are in `depth_confound/report.py`.
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import NamedTuple

from depthdelusion.analysis.fitting.options import SEED
from depthdelusion.analysis.fitting.seed_intervals import fieller_ratio, welch_interval
from depthdelusion.analysis.science.depth_penalty import penalty_against_best, robust_seed_sd
from depthdelusion.config import Config, bounded, from_dict
from depthdelusion.model_size import count_params
from depthdelusion.studies.common import laws, planned_runs
from depthdelusion.studies.common.laws import no_depth_term
from depthdelusion.studies.common.planned_runs import Run, make_run, run_name
from depthdelusion.studies.common.lr_grid import (  # noqa: F401 (LrFit: re-exported)
    LrFit,
    extend_lr_grid,
    fit_lr_curve,
    grid_optimum,
)
from depthdelusion.studies.common.spec import check_run_config, required, spec_error

DEFAULT_LAW_REPLICATES = 200


@dataclasses.dataclass(frozen=True)
class CompletePSpec:
    """CompleteP's base shape (its lr tuned there and transferred) and the cells it is also
    tuned at, [width, depth] each."""

    base_width: int = required(ge=1)
    base_depth: int = required(ge=1)
    tuned_cells: list[list[int]]


@dataclasses.dataclass(frozen=True)
class IsoFlopSpec:
    """The iso-FLOP slice: at `width`, each depth trains the compute of `reference_depth`."""

    width: int = required(ge=1)
    reference_depth: int = required(ge=1)
    depths: list[int]


@dataclasses.dataclass(frozen=True)
class DepthConfoundSpec:
    """experiments/depth_confound.yaml (read by `spec.load_spec`)."""

    base: dict  # a run config (sections model, data, train); width, depth, lr, seed vary
    widths: list[int]
    depths: list[int]
    lrs: list[float]  # the initial grid of every tuned shape, sorted
    lr_bounds: list[float]  # [low, high]: a grid is extended by 2x beyond an edge best up to these
    seeds: list[int]
    arm_a_depth: int
    completep: CompletePSpec
    iso_flop: IsoFlopSpec
    metric: str
    law_replicates: int = bounded(DEFAULT_LAW_REPLICATES, ge=0, note=" (a whole number of "
                                  "parametric-bootstrap replicates)")
    #: the iso-FLOP slice's steps per depth (derived from the rest by `validate`)
    iso_flop_steps: dict = dataclasses.field(init=False, default_factory=dict)

    def validate(self) -> None:
        lrs = sorted(self.lrs)
        if len(lrs) < 5 or any(b / a > 2.0 + 1e-9 for a, b in zip(lrs, lrs[1:])):
            raise spec_error("lrs", self.lrs, "need at least 5 learning rates spaced by at most 2x")
        object.__setattr__(self, "lrs", lrs)
        if len(self.lr_bounds) != 2:
            raise spec_error("lr_bounds", self.lr_bounds, "need [low, high]")
        if self.arm_a_depth not in self.depths:
            raise spec_error("arm_a_depth", self.arm_a_depth, f"must be one of depths {self.depths}")
        if self.iso_flop.width not in self.widths:
            raise spec_error("iso_flop.width", self.iso_flop.width, f"must be one of widths {self.widths}")
        if any(len(cell) != 2 for cell in self.completep.tuned_cells):
            raise spec_error("completep.tuned_cells", self.completep.tuned_cells, "need [width, depth] pairs")
        check_run_config(self.base)  # fail before the first run
        object.__setattr__(self, "iso_flop_steps", {d: _iso_flop_steps(self, d) for d in self.iso_flop.depths})


def run_config(exp: DepthConfoundSpec, run: Run) -> Config:
    raw = json.loads(json.dumps(exp.base))  # deep copy
    model = raw.setdefault("model", {})
    model.update(width=run.width, depth=run.depth, parametrization=run.parametrization)
    if run.parametrization == "completep":
        model.update(base_width=exp.completep.base_width, base_depth=exp.completep.base_depth)
    train = raw.setdefault("train", {})
    train.update(lr=run.lr, seed=run.seed)
    raw.setdefault("data", {})["seed"] = run.seed
    if run.steps:
        base_steps = train["steps"]
        train.update(steps=run.steps, eval_every=run.steps,
                     warmup_steps=max(1, round(train.get("warmup_steps", 0) * run.steps / base_steps)))
    return from_dict(raw, f"depth-confound run {run.name}").validate()


# ---------------------------------------------------------------------------------- planning
def trained_as(exp: DepthConfoundSpec, p: str, width: int, depth: int) -> str:
    """The parametrization a shape's runs are trained under: CompleteP at its own base shape is
    SP exactly (every multiplier is 1), so those runs are SP's and are trained once."""
    cp = exp.completep
    return "sp" if p == "completep" and (width, depth) == (cp.base_width, cp.base_depth) else p


def _grid_lrs(exp: DepthConfoundSpec, losses: dict[str, float], p: str, w: int, d: int, seed: int) -> tuple[list[float], bool]:
    """The lrs of one shape's grid (`lr_grid.extend_lr_grid` from `lrs` within `lr_bounds`) and
    whether it is settled."""
    p = trained_as(exp, p, w, d)
    return extend_lr_grid(exp.lrs, exp.lr_bounds, lambda lr: losses.get(run_name(p, w, d, lr, seed)))


def tuned_lr(exp: DepthConfoundSpec, losses: dict[str, float], p: str, w: int, d: int) -> float | None:
    """The grid lr an arm reports for a tuned shape: the grid point nearest (in ln lr) to the
    quadratic fit's optimum, or the grid's best where the fit has no minimum; None until the grid
    is settled."""
    seed = exp.seeds[0]
    lrs, settled = _grid_lrs(exp, losses, p, w, d, seed)
    if not settled:
        return None
    p = trained_as(exp, p, w, d)
    return grid_optimum([(lr, losses[run_name(p, w, d, lr, seed)]) for lr in lrs])


def iso_flop_steps(exp: DepthConfoundSpec, depth: int) -> int | None:
    """The iso-FLOP slice's steps at `depth` (None where they equal the base recipe's)."""
    steps = exp.iso_flop_steps[depth]
    return None if steps == exp.base["train"]["steps"] else steps


def _iso_flop_steps(exp: DepthConfoundSpec, depth: int) -> int:
    """Steps at `depth` that spend the reference depth's training compute (6 N T, N the exact
    parameter count with embeddings) at the iso-FLOP width."""

    iso = exp.iso_flop
    def params(d: int) -> int:
        return count_params(run_config(exp, make_run("sp", iso.width, d, 1e-3, 0)).model)
    steps = exp.base["train"]["steps"]
    return max(1, round(steps * params(iso.reference_depth) / params(depth)))


def plan(exp: DepthConfoundSpec, losses: dict[str, float]) -> list[Run]:
    """Every run the study needs given the finished ones (`losses`: run name -> metric, +inf for
    a failed or diverged run), in training order: width-major, so that a partial study reports
    whole widths, and within a width the order that answers first (A and C against depth at one
    seed). A run whose lr depends on a grid that is not settled is not planned yet."""
    seeds = exp.seeds
    s0 = seeds[0]
    cp = exp.completep
    out: list[Run] = []

    def grid(p: str, w: int, d: int) -> None:
        lrs, _ = _grid_lrs(exp, losses, p, w, d, s0)
        out.extend(make_run(trained_as(exp, p, w, d), w, d, lr, s0) for lr in lrs)

    def seeded(p: str, w: int, d: int, lr: float | None, steps: int | None = None) -> None:
        if lr is not None:
            out.extend(make_run(trained_as(exp, p, w, d), w, d, lr, s, steps) for s in seeds)

    base_w, base_d = cp.base_width, cp.base_depth
    lr_c = tuned_lr(exp, losses, "completep", base_w, base_d)
    for w in exp.widths:
        # the two grids arms A and C need first, then A and C at one seed over depth (the first
        # answer), then B's grids, then every seed, then the iso-FLOP slice
        if w == exp.widths[0]:
            grid("completep", base_w, base_d)
        grid("sp", w, exp.arm_a_depth)
        lr_a = tuned_lr(exp, losses, "sp", w, exp.arm_a_depth)
        for d in exp.depths:
            if lr_a is not None:
                out.append(make_run("sp", w, d, lr_a, s0))
            if lr_c is not None:
                out.append(make_run(trained_as(exp, "completep", w, d), w, d, lr_c, s0))
        for d in exp.depths:
            grid("sp", w, d)
        for d in exp.depths:
            seeded("sp", w, d, lr_a)
            seeded("sp", w, d, tuned_lr(exp, losses, "sp", w, d))
            seeded("completep", w, d, lr_c)
        if w == exp.iso_flop.width:
            for d in exp.iso_flop.depths:
                steps = iso_flop_steps(exp, d)
                seeded("sp", w, d, lr_a, steps)
                seeded("sp", w, d, tuned_lr(exp, losses, "sp", w, d), steps)
                seeded("completep", w, d, lr_c, steps)
    for w, d in cp.tuned_cells:
        grid("completep", w, d)
        seeded("completep", w, d, tuned_lr(exp, losses, "completep", w, d))
    return list(dict.fromkeys(out))  # runs two arms share, once


# --------------------------------------------------------------------------------- running
def results(exp: DepthConfoundSpec, runs_dir: Path) -> tuple[dict[str, float], dict[str, dict]]:
    """(metric per finished or failed run: +inf for failed or non-finite, its summary)."""
    return planned_runs.results(exp.metric, runs_dir)


def train(exp: DepthConfoundSpec, source: str, out: Path, *, max_runs: int | None = None, batch: int = 2,
          log=print, train_fn=None) -> tuple[int, bool]:
    """Plan, train up to `batch` unfinished runs, plan again, until nothing is left or
    `max_runs` were trained. Returns (runs trained, preempted)."""
    return planned_runs.train_planned(lambda losses: plan(exp, losses), lambda r: run_config(exp, r),
                                      exp.metric, source, out, max_runs=max_runs, batch=batch,
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


def arm_lr(exp: DepthConfoundSpec, losses: dict[str, float], arm: str, w: int, d: int) -> float | None:
    cp = exp.completep
    if arm == "A":
        return tuned_lr(exp, losses, "sp", w, exp.arm_a_depth)
    if arm == "B":
        return tuned_lr(exp, losses, "sp", w, d)
    return tuned_lr(exp, losses, "completep", cp.base_width, cp.base_depth)


def points(exp: DepthConfoundSpec, losses: dict[str, float], iso: bool = False) -> list[Point]:
    """Every arm's point at every cell (equal tokens), or along the iso-FLOP slice."""
    out = []
    widths = [exp.iso_flop.width] if iso else exp.widths
    depths = exp.iso_flop.depths if iso else exp.depths
    for arm, _ in ARMS:
        for w in widths:
            for d in depths:
                p = trained_as(exp, "completep" if arm == "C" else "sp", w, d)
                lr = arm_lr(exp, losses, arm, w, d)
                steps = None
                if iso:
                    steps = iso_flop_steps(exp, d)
                got = () if lr is None else tuple(
                    losses[n] for n in (run_name(p, w, d, lr, s, steps) for s in exp.seeds) if n in losses)
                out.append(Point(arm, w, d, steps, lr, got))
    return out


def depth_penalty(pts: list[Point]) -> dict[int, object]:
    """Per depth, loss(D) − loss(best D) of the seed means with Welch's 95% t interval, the best
    depth taken as given (`analysis.science.depth_penalty.penalty_against_best`)."""

    return penalty_against_best({p.depth: p.losses for p in pts})


def arm_records(exp: DepthConfoundSpec, losses: dict, summaries: dict, arm: str) -> tuple[list[dict], int]:
    """(one record per finished finite seed at the arm's lr in every equal-token cell, the
    number of diverged seeds left out)."""
    records, diverged = [], 0
    for w in exp.widths:
        for d in exp.depths:
            lr = arm_lr(exp, losses, arm, w, d)
            if lr is None:
                continue
            p = trained_as(exp, "completep" if arm == "C" else "sp", w, d)
            for s in exp.seeds:
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


def arm_laws(exp: DepthConfoundSpec, losses: dict, summaries: dict, *, seed: int = SEED) -> list:
    """Every arm's laws and tests (:mod:`depthdelusion.studies.common.laws`), `law_replicates` replicates each."""
    replicates = int(exp.law_replicates)
    return [laws.fit_arm(arm, *arm_records(exp, losses, summaries, arm), replicates=replicates, seed=seed)
            for arm, _ in ARMS]


def transfer_cost(exp: DepthConfoundSpec, losses: dict[str, float]) -> list[dict]:
    """On each of `completep.tuned_cells`: CompleteP at the transferred lr against CompleteP at
    the lr tuned for that cell (both over every seed), the difference transferred − tuned with
    Welch's 95% t interval."""

    rows = []
    lr_c = arm_lr(exp, losses, "C", 0, 0)
    for w, d in exp.completep.tuned_cells:
        lr_t = tuned_lr(exp, losses, "completep", w, d)
        if lr_c is None or lr_t is None:
            continue
        p = trained_as(exp, "completep", w, d)
        got = [tuple(losses[n] for n in (run_name(p, w, d, lr, s) for s in exp.seeds)
                     if n in losses) for lr in (lr_c, lr_t)]
        pts = [Point("C", w, d, None, lr, g) for lr, g in zip((lr_c, lr_t), got)]
        diff = lo = hi = math.nan
        if all(len(p.losses) >= 2 and math.isfinite(p.mean) for p in pts):
            iv = welch_interval(pts[0].losses, pts[1].losses)
            diff, lo, hi = iv.estimate, iv.lo, iv.hi
        rows.append({"width": w, "depth": d, "transferred": pts[0], "tuned": pts[1],
                     "cost": diff, "cost_lo": float(lo), "cost_hi": float(hi)})
    return rows


def lr_curves(exp: DepthConfoundSpec, losses: dict[str, float], sigma: float | None, dof: int | None) -> list[dict]:
    """One row per tuned shape: its grid, the grid's best, and the fitted optimum with intervals."""
    cp = exp.completep
    shapes = [("sp", w, d) for w in exp.widths for d in exp.depths]
    shapes += [("completep", cp.base_width, cp.base_depth)]
    shapes += [("completep", w, d) for w, d in cp.tuned_cells]
    rows = []
    s0 = exp.seeds[0]
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
            "lrs": tuple(lr for lr, _ in curve), "losses": tuple(y for _, y in curve),
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
    degrees of freedom (`analysis.science.depth_penalty.robust_seed_sd`: robust to a seed that
    diverged); (None, None) when there is none yet."""

    return robust_seed_sd(p.losses for p in pts)


def _fixed_width_records(exp: DepthConfoundSpec, losses: dict, summaries: dict, arm: str) -> list[dict]:
    """Every finished finite seed of the arm at the iso-FLOP width: its equal-token cells and
    its iso-FLOP cells (the reference depth is in both, once)."""
    w, recs = exp.iso_flop.width, {}
    for p in points(exp, losses) + points(exp, losses, iso=True):
        if p.arm != arm or p.width != w or p.lr is None:
            continue
        for s in exp.seeds:
            name = run_name(trained_as(exp, "completep" if arm == "C" else "sp", w, p.depth), w, p.depth, p.lr, s, p.steps)
            summary = summaries.get(name, {})
            if name in losses and math.isfinite(losses[name]) and summary.get("params") and summary.get("tokens"):
                recs[name] = {"name": name, "depth": p.depth, "width": w, "params": summary["params"],
                              "tokens": summary["tokens"], "loss": losses[name]}
    return list(recs.values())


def no_depth_tests(exp: DepthConfoundSpec, losses: dict, summaries: dict) -> tuple:
    """Is the fixed-compute penalty more than size and steps? Per arm, (arm, the lack-of-fit test
    of the law in parameters and tokens only) fitted to the seed rows of every cell at the
    iso-FLOP width (`studies/common/laws.no_depth_term`); arms with too few cells left out."""

    tests = ((arm, no_depth_term(_fixed_width_records(exp, losses, summaries, arm))) for arm, _ in ARMS)
    return tuple((arm, got[1]) for arm, got in tests if got)


def held_out_penalties(exp: DepthConfoundSpec, pts: list[Point]) -> tuple:
    """(arm, width, penalty at the deepest depth) from the seeds that did not choose the lrs
    (every lr grid ran at the first seed, which is also a reported seed)."""
    held = [p._replace(losses=p.losses[1:]) for p in pts]
    dmax = max(exp.depths)
    out = []
    for arm, _ in ARMS:
        for w in exp.widths:
            got = depth_penalty([p for p in held if p.arm == arm and p.width == w])
            if dmax in got:
                out.append((arm, w, got[dmax]))
    return tuple(out)


def kept_shares(penalties: dict, dmax: int) -> dict:
    """How much of arm A's penalty at `dmax` arms B and C keep (Fieller's interval of the ratio,
    {arm: (ratio, lo, hi)}), where A's own penalty is above 0 and the arm's has an interval."""

    a = penalties.get("A")
    if a is None or not a.lo > 0:
        return {}
    return {arm: fieller_ratio(penalties[arm], a) for arm in ("B", "C")
            if arm in penalties and penalties[arm].se != 0}


def penalties_at(pts: list[Point], penalties: dict, w: int, dmax: int) -> dict:
    """{arm: penalty at `dmax`} at width `w`, for the arms with >= 2 finished points there."""
    out = {}
    for arm, _ in ARMS:
        finished = [p for p in pts if p.arm == arm and p.width == w and math.isfinite(p.mean)]
        got = penalties.get((arm, w), {})
        if len(finished) >= 2 and dmax in got:
            out[arm] = got[dmax]
    return out


@dataclasses.dataclass(frozen=True)
class Regime:
    """Tokens per parameter (total N) of the finished runs, per slice ({slice: (smallest,
    largest, runs)}: "equal tokens" at the base budget, "iso-FLOP" the runs at other step
    counts), and the embedding share 1 − N_non-embedding / N over the equal-token runs."""

    tokens_per_param: dict
    embedding_share: tuple  # (smallest, largest); NaN when the summaries lack the count


def regime(exp: DepthConfoundSpec, summaries: dict) -> Regime:
    """The tokens-per-parameter regime and the embedding share, from the runs' summaries."""
    t = exp.base["train"]
    budget = t["steps"] * t["batch_size"] * exp.base["model"]["seq_len"]
    ratios: dict = {}
    shares = []
    for s in summaries.values():
        n, tokens = s.get("params"), s.get("tokens")
        if not n or not tokens:
            continue
        ratios.setdefault("equal tokens" if tokens == budget else "iso-FLOP", []).append(tokens / n)
        if tokens == budget and s.get("params_non_embedding"):
            shares.append(1 - s["params_non_embedding"] / n)
    return Regime({k: (min(v), max(v), len(v)) for k, v in sorted(ratios.items())},
                  (min(shares), max(shares)) if shares else (math.nan, math.nan))


def short_points(exp: DepthConfoundSpec, pts: list[Point]) -> tuple:
    """The reported points with fewer finished seeds than the spec's, or no lr yet."""
    return tuple(p for p in pts if p.lr is None or len(p.losses) < len(exp.seeds))


@dataclasses.dataclass(frozen=True)
class DepthConfoundResults:
    """What the study measured from its finished runs, numbers only (rendered by
    `report.sections`)."""

    spec: DepthConfoundSpec
    source: str  # the experiment file, as given on the command line
    points: tuple  # every arm's Point at every equal-token cell
    iso_points: tuple  # and along the iso-FLOP slice
    sigma: float | None  # the seed noise (`seed_noise`) and its dof; None before replicates
    dof: int | None
    curves: tuple  # `lr_curves` rows
    penalties: dict  # (arm, width) -> {depth: Interval}, equal tokens
    iso_penalties: dict  # arm -> {depth: Interval}, iso-FLOP
    kept: dict  # (width, iso) -> {arm: Fieller (ratio, lo, hi)} of A's penalty kept
    laws: tuple  # depth_confound_laws.ArmLaws per arm
    no_depth: tuple  # (arm, LackOfFit)
    held_out: tuple  # (arm, width, Interval)
    transfer: tuple  # `transfer_cost` rows
    done: int  # planned runs finished
    todo: tuple  # planned runs not finished
    runs: int  # finished runs read
    wall_s: float  # their training wall time
    regime: Regime | None = None  # tokens per parameter, embedding share
    short: tuple = ()  # `short_points` of both slices


def measure(exp: DepthConfoundSpec, source: str, runs_dir, *, seed: int = SEED) -> DepthConfoundResults:
    """Everything the report states, from the finished runs in `runs_dir`."""
    losses, summaries = results(exp, runs_dir)
    pts, iso_pts = points(exp, losses), points(exp, losses, iso=True)
    sigma, dof = seed_noise(pts + iso_pts)
    penalties = {(arm, w): depth_penalty([p for p in pts if p.arm == arm and p.width == w])
                 for arm, _ in ARMS for w in exp.widths}
    iso_pen = {arm: depth_penalty([p for p in iso_pts if p.arm == arm]) for arm, _ in ARMS}
    iso_w, dmax, iso_dmax = exp.iso_flop.width, max(exp.depths), max(exp.iso_flop.depths)
    kept = {(w, False): kept_shares(penalties_at(pts, penalties, w, dmax), dmax) for w in exp.widths}
    kept[iso_w, True] = kept_shares(penalties_at(iso_pts, {(a, iso_w): v for a, v in iso_pen.items()},
                                                 iso_w, iso_dmax), iso_dmax)
    planned = plan(exp, losses)
    return DepthConfoundResults(
        spec=exp, source=source, points=tuple(pts), iso_points=tuple(iso_pts), sigma=sigma, dof=dof,
        curves=tuple(lr_curves(exp, losses, sigma, dof)), penalties=penalties, iso_penalties=iso_pen,
        kept=kept, laws=tuple(arm_laws(exp, losses, summaries, seed=seed)),
        no_depth=no_depth_tests(exp, losses, summaries), held_out=held_out_penalties(exp, pts),
        transfer=tuple(transfer_cost(exp, losses)), done=sum(1 for r in planned if r.name in losses),
        todo=tuple(r for r in planned if r.name not in losses), runs=len(summaries),
        wall_s=sum(float(s.get("wall_time_s") or 0) for s in summaries.values()),
        regime=regime(exp, summaries), short=short_points(exp, pts + iso_pts))
