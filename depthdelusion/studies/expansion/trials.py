"""The two trained tests of depth expansion (docs/depth_expansion.md), on finished sweeps:

- `measure_prediction`: does the probe's first-order signal rank insertion points the way training
  each child does? Per parent (one init seed): the signal at every k, then one child per k
  (`expand --after k`, the block the probe measured) trained N more steps; the Spearman
  correlation of the signal with the realised drop in validation loss; over seeds, the mean
  correlation with a t interval over seeds (cut to [-1, 1]) and a within-seed permutation
  p-value.
- `measure_growth`: growth against a compute-matched from-scratch baseline, each arm at its tuned
  learning rate (the depth-confound study's rule: the grid point nearest the vertex of a
  parabola in ln lr through the best mean validation loss and its neighbours), the paired
  difference over seeds with its t interval — on held-out seeds that took no part in the lr
  choice when they are given (a best-of-grid choice on the same seeds favours an arm by its
  luck on them).

Each measures into a frozen `TrialResults` (its rows and summary: the statistic, its interval and
test); `sections` renders its Markdown and `write_outputs` writes a CSV of the rows, the summary
JSON and the Markdown into `out` (RUNS and OUT local or gs://); the verdict is only as strong as
the interval. The commands' flags are frozen specs (`PredictionSpec`, `GrowthSpec`) built through
`spec.from_flags`: a bad flag is one line naming it.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Callable

import numpy as np
from scipy import stats

from depthdelusion import model_size, rundir
from depthdelusion.analysis.fitting.options import SEED
from depthdelusion.analysis.formats.table_text import markdown_table, write_csv
from depthdelusion.config import bounded, parse_scalar
from depthdelusion.studies.common import spec as study_spec
from depthdelusion.studies.common.lr_grid import fit_lr_curve
from depthdelusion.studies.expansion import surgery
from depthdelusion.studies.expansion.options import GrowthOptions, PredictionOptions
from depthdelusion.studies.expansion.probe import probe_run
MIN_SEEDS = 3
# a growth sweep's run name: depth, width, steps, lr, init seed
RUN_NAME = re.compile(r"^d(\d+)_w(\d+)_steps(\d+)_lr([0-9.e-]+)_seed(\d+)$")


@dataclasses.dataclass(frozen=True)
class PredictionSpec:
    """`expansion-prediction`: the parents' sweep directory, the steps each child trains after
    its expansion and the batches per probe."""

    runs: str
    steps: int = bounded(PredictionOptions.steps, ge=1)
    probe_batches: int = bounded(PredictionOptions.probe_batches, ge=1)

    def validate(self) -> None:
        if not rundir.as_path(self.runs).is_dir():
            raise study_spec.spec_error("runs", self.runs, "no such directory; give the parents' sweep directory")


@dataclasses.dataclass(frozen=True)
class GrowthSpec:
    """`expansion-growth`: the growth sweep to grow and compare (`runs`) and/or the static control
    sweep to compare the grown arm with (`static_control`, its grid `static_grid`), the parents'
    checkpoint grown from, and the seeds kept out of the lr choice."""

    runs: str | None = None
    switch_step: int = bounded(GrowthOptions.switch_step, ge=1)
    test_seeds: list[int] = dataclasses.field(default_factory=list)
    static_control: str | None = None
    static_grid: str = GrowthOptions.static_grid

    def validate(self) -> None:
        if not self.runs and not self.static_control:
            raise ValueError("give --runs GROWTH_SWEEP (grow and compare), --static-control CONTROL_SWEEP "
                             "(compare OUT/growth_matched.csv with the static control), or both")
        if self.runs and not rundir.as_path(self.runs).is_dir():
            raise study_spec.spec_error("runs", self.runs, "no such directory; give the growth sweep's directory")
        if self.static_control and not self.test_seeds:
            raise ValueError("--static-control needs --test-seeds: the held-out seeds the difference is "
                             "measured on (the other seeds choose each arm's lr)")


def growth_spec_from_flags(**flags) -> GrowthSpec:
    """The spec from `expansion-growth`'s flags (keyed by field; --test-seeds comma-separated), with
    the field checks of every study spec (`spec.from_flags`): a bad one is a ValueError naming its flag."""
    seeds = flags.get("test_seeds")
    if isinstance(seeds, str):  # each item as `--set` reads a value; one that is not an integer is named
        flags["test_seeds"] = [parse_scalar(x) for x in seeds.split(",") if x.strip()]
    return study_spec.from_flags(GrowthSpec, flags)


def _ranks(x) -> np.ndarray:
    return stats.rankdata(np.asarray(x, float))  # average ranks for ties


def _pearson_rows(a_MxN: np.ndarray, b_N: np.ndarray) -> np.ndarray:
    a = a_MxN - a_MxN.mean(axis=-1, keepdims=True)
    b = b_N - b_N.mean()
    return (a @ b) / np.sqrt(np.sum(a * a, axis=-1) * np.sum(b * b))


def spearman(x, y) -> float:
    """Spearman's ρ (average ranks for ties); nan where either side is constant."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(_pearson_rows(_ranks(x)[None], _ranks(y))[0])


def rank_agreement(per_seed: list[tuple[list[float], list[float]]], n_perm: int = 20000,
                   seed: int = SEED) -> dict:
    """Mean over seeds of Spearman's ρ(predicted, realised), its 95% t interval over seeds (cut
    to [-1, 1]) and a one-sided permutation p-value: the share of
    `n_perm` random within-seed relabellings (plus the observed one) whose ρ̄ is at least the
    observed."""
    if len(per_seed) < MIN_SEEDS:
        raise ValueError(f"the rank test needs at least {MIN_SEEDS} seeds, got {len(per_seed)}")
    rhos = np.array([spearman(p, r) for p, r in per_seed])
    if not np.all(np.isfinite(rhos)):
        raise ValueError("the rank test: a seed's predictions or realised losses are all equal")
    rng = np.random.default_rng(seed)
    observed = float(rhos.mean())
    # a t interval over seeds, cut to [-1, 1]: a bootstrap over 3 seeds' values cannot reach
    # beyond their range, which is far narrower than the seed-to-seed spread allows
    half = float(stats.t.ppf(0.975, len(rhos) - 1) * rhos.std(ddof=1) / math.sqrt(len(rhos)))
    null = np.zeros(n_perm)
    for p, r in per_seed:
        ranks = _ranks(p)
        shuffled = ranks[np.argsort(rng.random((n_perm, len(ranks))), axis=1)]  # random permutations
        null += _pearson_rows(shuffled, _ranks(r))
    null /= len(per_seed)
    p_value = (1 + np.sum(null >= observed - 1e-12)) / (1 + n_perm)
    return {"seeds": len(rhos), "rho_per_seed": [round(float(r), 4) for r in rhos],
            "rho_mean": observed, "rho_ci95": [max(observed - half, -1.0), min(observed + half, 1.0)],
            "interval": "t over seeds, cut to [-1, 1]", "p_permutation": float(p_value)}


def paired_difference(a: list[float], b: list[float]) -> dict:
    """mean(a − b) over paired seeds with its 95% t interval."""
    if len(a) != len(b) or len(a) < MIN_SEEDS:
        raise ValueError(f"paired difference: needs at least {MIN_SEEDS} paired seeds, got {len(a)} and {len(b)}")
    d = np.asarray(a, float) - np.asarray(b, float)
    se = float(d.std(ddof=1) / math.sqrt(len(d)))
    t = float(stats.t.ppf(0.975, len(d) - 1))
    return {"seeds": len(d), "diff_mean": float(d.mean()), "diff_ci95": [float(d.mean() - t * se), float(d.mean() + t * se)],
            "interval": "t, paired over seeds"}


def _eval_loss(run_dir) -> float:
    summary = rundir.read_summary(run_dir) or {}
    if summary.get("eval_loss") is None:
        raise ValueError(f"{run_dir}: summary.json has no eval_loss (set train.eval_batches > 0 and finish the run)")
    return float(summary["eval_loss"])


@dataclasses.dataclass(frozen=True)
class TrialResults:
    """What a trained test measured: its name (`stem` of its files), one row per run and the
    summary (the statistic with its interval and test, or why it was not tested)."""

    stem: str
    rows: tuple
    summary: dict


def measure_prediction(spec: PredictionSpec, out, log: Callable[[str], None] = print) -> TrialResults:
    """Probe every finished parent (cached under OUT/probes), train a child per insertion point,
    and rank the signal against the realised drop."""
    from depthdelusion.train.loop import train  # JAX only when training: see surgery.py's note

    runs, out, steps, probe_batches = rundir.as_path(spec.runs), rundir.as_path(out), spec.steps, spec.probe_batches
    (out / "probes").mkdir(parents=True, exist_ok=True)
    children_dir = runs.parent / f"{runs.name}_children"
    rows, per_seed = [], []
    parents = sorted(d for d in runs.iterdir() if d.is_dir() and rundir.status(d) == "finished")
    for parent in parents:
        cfg = surgery.read_run_config(parent)
        cache = out / "probes" / f"{parent.name}.json"
        if cache.exists():
            probe = json.loads(cache.read_text())
        else:
            log(f"probing {parent.name}")
            probe = probe_run(parent, n_batches=probe_batches, seed=cfg.train.seed, etas=(0.01,))
            cache.write_text(json.dumps(probe, indent=2) + "\n")
        parent_eval = _eval_loss(parent)
        step = surgery.latest_step(parent)
        signal, drop = [], []
        for row in probe["signal"]:
            k = row["after"]
            child = children_dir / f"{parent.name}_after{k}"
            if not (child / "expansion.json").exists():
                log(f"expanding {parent.name} after {k}")
                surgery.expand_run(parent, [k], child, seed=cfg.train.seed, overrides=[f"train.steps={step + steps}"])
            if rundir.status(child) != "finished":
                train(surgery.read_run_config(child), child)
            realised = parent_eval - _eval_loss(child)
            rows.append({"parent": parent.name, "seed": cfg.train.seed, "after": k,
                         "signal_train": row["signal_train"], "unbiased_sq_train": row["unbiased_sq_train"],
                         "parent_eval": parent_eval, "child_eval": parent_eval - realised, "realised_drop": realised})
            signal.append(row["signal_train"])
            drop.append(realised)
        per_seed.append((signal, drop))
    summary = {"steps_after_expansion": steps, "probe_batches": probe_batches}
    try:
        summary.update(rank_agreement(per_seed))
    except ValueError as err:
        summary["not_tested"] = str(err)
    return TrialResults("prediction", tuple(rows), summary)


def measure_growth(spec: GrowthSpec, log: Callable[[str], None] = print) -> TrialResults:
    """Grow every parent of `spec.runs` and train it on; compare with the scratch arm.
    `spec.test_seeds`: seeds kept out of the lr choice; the difference is measured on them at
    each arm's chosen lr (the tuning seeds' difference is reported beside it, labelled as
    measured on the seeds that chose the lrs)."""
    from depthdelusion.train.loop import train  # JAX only when training: see surgery.py's note

    runs, switch_step = rundir.as_path(spec.runs), spec.switch_step
    parsed = {d.name: RUN_NAME.match(d.name) for d in sorted(runs.iterdir())}
    parsed = {n: m.groups() for n, m in parsed.items() if m}
    depths = sorted({int(g[0]) for g in parsed.values()})
    if len(depths) != 2:
        raise ValueError(f"{runs}: expected the runs of two depths (parents and scratch), found {depths}")
    small, large = depths
    rows = []
    for name, (depth, _, _, lr, seed) in parsed.items():
        if int(depth) != small:
            continue
        parent = runs / name
        grown = runs.parent / f"{runs.name}_grown" / f"grown_{name}"
        if not (grown / "expansion.json").exists():
            log(f"growing {name} from step {switch_step}")
            surgery.expand_run(parent, range(small), grown, seed=int(seed), step=switch_step)
        if rundir.status(grown) != "finished":
            train(surgery.read_run_config(grown), grown)
        cfg, gcfg = surgery.read_run_config(parent), surgery.read_run_config(grown)
        tokens = cfg.train.batch_size * cfg.model.seq_len
        flops = (model_size.flops_per_token(cfg.model) * switch_step
                 + model_size.flops_per_token(gcfg.model) * (gcfg.train.steps - switch_step)) * tokens
        rows.append({"arm": "grown", "lr": float(lr), "seed": int(seed), "eval_loss": _eval_loss(grown), "flops": flops})
    for name, (depth, _, steps, lr, seed) in parsed.items():
        if int(depth) == large:
            cfg = surgery.read_run_config(runs / name)
            flops = model_size.flops_per_token(cfg.model) * int(steps) * cfg.train.batch_size * cfg.model.seq_len
            rows.append({"arm": "scratch", "lr": float(lr), "seed": int(seed), "eval_loss": _eval_loss(runs / name),
                         "flops": flops})
    test_seeds = sorted(spec.test_seeds)
    tuning = [r for r in rows if r["seed"] not in test_seeds]
    best = {arm: best_lr(tuning, arm) for arm in ("grown", "scratch")}
    pick = {arm: {r["seed"]: r for r in best[arm][1]} for arm in best}
    seeds = sorted(set(pick["grown"]) & set(pick["scratch"]))
    summary = {"best_lr": {arm: best[arm][0] for arm in best},
               "best_lr_at_grid_edge": {arm: best[arm][2] for arm in best},
               "lr_rule": "grid point nearest the vertex of a parabola in ln lr through the best "
                          "mean loss and its neighbours (the depth-confound study's rule), chosen on "
                          + (f"seeds {', '.join(map(str, sorted({r['seed'] for r in tuning})))}; the "
                             "difference measured on the test seeds" if test_seeds else
                             "the same seeds that the difference is measured on"),
               "lr_fit": {arm: best[arm][3] for arm in best},
               "flops_ratio_grown_over_scratch": float(np.mean([pick["grown"][s]["flops"] / pick["scratch"][s]["flops"] for s in seeds])) if seeds else None}
    try:
        in_sample = paired_difference([pick["grown"][s]["eval_loss"] for s in seeds],
                                      [pick["scratch"][s]["eval_loss"] for s in seeds])
    except ValueError as err:
        in_sample = {"not_tested": str(err)}
    if not test_seeds:
        summary.update(in_sample)
    else:
        summary.update(_held_out_difference(rows, best, test_seeds))
        summary["tuning_seeds_difference"] = in_sample
    return TrialResults("growth_matched", tuple(rows), summary)


def _held_out_difference(rows: list[dict], best: dict, test_seeds: list[int]) -> dict:
    """The paired difference on the seeds that did not choose the lrs, each arm at its chosen lr."""
    at = {arm: {r["seed"]: r["eval_loss"] for r in rows
                if r["arm"] == arm and r["lr"] == best[arm][0] and r["seed"] in test_seeds}
          for arm in best}
    missing = {arm: sorted(set(test_seeds) - set(at[arm])) for arm in at}
    out = {"test_seeds": test_seeds}
    if any(missing.values()):
        return {**out, "not_tested": "no finished run of the test seeds at the chosen lr: " + "; ".join(
            f"{arm} lr {best[arm][0]:g} seeds {', '.join(map(str, m))}" for arm, m in missing.items() if m)
            + " (add them to the grid)"}
    try:
        return {**out, **paired_difference([at["grown"][s] for s in test_seeds],
                                           [at["scratch"][s] for s in test_seeds])}
    except ValueError as err:
        return {**out, "not_tested": str(err)}


def best_lr(rows: list[dict], arm: str) -> tuple[float, list[dict], bool, dict]:
    """The depth-confound study's rule (`depth_confound.fit_lr_curve`): a parabola in ln lr
    through the grid's best mean validation loss (over seeds) and its neighbours; the arm's lr
    is the grid point nearest its vertex (for a parabola through three points that is the
    grid's best), the grid's best where it has no interior minimum. Returns (lr, its rows, at the grid's edge, the fit: vertex lr with its Fieller 95%
    interval from the seeds' spread, and any note); at the edge the optimum is not bracketed:
    the arm is not tuned, only the grid's best."""
    by_lr: dict = {}
    for r in rows:
        if r["arm"] == arm:
            by_lr.setdefault(r["lr"], []).append(r)
    # a diverged run (non-finite loss) makes its lr's mean +inf: that lr is not chosen
    means = {lr: float(np.mean([r["eval_loss"] for r in rs])) if all(math.isfinite(r["eval_loss"]) for r in rs)
             else math.inf for lr, rs in by_lr.items()}
    # the noise of one run's loss, pooled over the lrs whose seed replicates all finished
    finite = {lr: rs for lr, rs in by_lr.items() if math.isfinite(means[lr])}
    dev = [r["eval_loss"] - means[lr] for lr, rs in finite.items() for r in rs]
    dof = sum(len(rs) - 1 for rs in finite.values())
    sigma = math.sqrt(sum(d * d for d in dev) / dof) if dof > 0 else None
    n_seeds = min(len(rs) for rs in by_lr.values())
    fit = fit_lr_curve(sorted(means.items()), sigma / math.sqrt(n_seeds) if sigma else None, dof or None)
    lr = (min(by_lr, key=lambda g: abs(math.log(g) - fit.log_lr)) if fit.identified
          else min(means, key=means.get))
    edge = len(by_lr) < 3 or min(means, key=means.get) in (min(by_lr), max(by_lr))
    summary = {"vertex_lr": math.exp(fit.log_lr) if fit.identified else None,
               "vertex_lr_ci95": ([math.exp(x) for x in fit.log_lr_ci] if all(map(math.isfinite, fit.log_lr_ci))
                                  else "unbounded (the curvature is not distinguishable from 0)")
                                 if fit.identified else None,
               "note": fit.note or ("" if fit.identified else "no parabola: the grid's best")}
    return lr, by_lr[lr], edge, summary


def sections(r: TrialResults) -> str:
    """The test's Markdown: its summary, one key per row."""
    return markdown_table(["key", "value"], [[k, json.dumps(v)] for k, v in r.summary.items()]) + "\n"


def write_outputs(r: TrialResults, out) -> None:
    """STEM.csv (the rows), STEM_summary.json and STEM.md into OUT (local or gs://)."""
    out = rundir.as_path(out)
    out.mkdir(parents=True, exist_ok=True)
    if r.rows:
        write_csv(out / f"{r.stem}.csv", list(r.rows[0]),
                  [{k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()} for row in r.rows])
    (out / f"{r.stem}_summary.json").write_text(json.dumps(r.summary, indent=2) + "\n")
    (out / f"{r.stem}.md").write_text(sections(r))
