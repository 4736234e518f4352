"""The depth-expansion study (analysis/depth_expansion/): one command trains what is missing
(two sweeps, resumable), grows the growth parents, probes every depth-sweep run and writes the
tables and figures.

  depthdelusion expansion-study --depth-grid experiments/depth_expansion.yaml \
      --growth-grid experiments/depth_expansion_growth.yaml --runs runs --out analysis/depth_expansion

RUNS and OUT may be local or gs:// (rundir.as_path); the figures and tables are drawn into a
local directory and copied up when OUT is remote (matplotlib writes local files).

Tables: signal.csv (per run and insertion point), runs.csv (per run: max signal, mean cosine,
largest helpful η), jumpboard.csv, covariance.csv, growth.csv (per seed and arm) and
growth_curves.csv; figures: signal.png, alignment.png, covariance.png, growth.png,
signal_beside_grad.png, signal_over_grad.png. Every probe is cached as probes/<run>.json (rerunning skips it).
The command's flags are a frozen :class:`ExpansionSpec` (:func:`spec_from_flags`); :func:`measure`
trains, grows and probes what it says and computes the tables once into a frozen
:class:`ExpansionResults`; :func:`sections` renders results.md from it.
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal

import numpy as np
from scipy import stats

from depthdelusion import model_size as size
from depthdelusion import rundir
from depthdelusion.analysis.formats.table_text import markdown_table, write_csv
from depthdelusion.config import bounded
from depthdelusion.studies.common import spec as study_spec
from depthdelusion.studies.expansion import surgery
from depthdelusion.studies.expansion.options import ExpansionStudyOptions
from depthdelusion.studies.expansion.probe import is_current, probe_run
from depthdelusion.sweep import load_grid, run_sweep
if TYPE_CHECKING:
    from etils import epath

GROWTH_PARENT = re.compile(r"^d(\d+)_w(\d+)_steps(\d+)_seed(\d+)$")
GRIDS_TRAINED = {"depth_grid": ("all",), "growth_grid": ("all", "growth")}  # by the `train` modes named


@dataclass(frozen=True)
class ExpansionSpec:
    """What the study trains and probes: the depth grid (every run probed) and the growth grid
    (its parents grown), both sweeps' parent folder `runs` (local or gs://), the batches per probe,
    and what to train first (`train`: "all" both grids and the grown runs, "growth" the growth grid
    and the grown runs, "none" nothing: report what is finished). Built from the command's flags
    by :func:`spec_from_flags`."""

    depth_grid: str = ExpansionStudyOptions.depth_grid
    growth_grid: str = ExpansionStudyOptions.growth_grid
    runs: str = ExpansionStudyOptions.runs
    probe_batches: int = bounded(ExpansionStudyOptions.probe_batches, ge=1)
    train: Literal["all", "growth", "none"] = ExpansionStudyOptions.train

    def validate(self) -> None:
        """A grid the `train` mode trains must be there; with nothing to train, the depth grid's
        runs must be."""
        for name, modes in GRIDS_TRAINED.items():
            grid = getattr(self, name)
            if self.train in modes and not rundir.as_path(grid).is_file():
                raise study_spec.spec_error(name, grid, f"no such file; --train {self.train} trains this "
                                            "grid, so give its YAML (or --train none to report what is finished)")
        if self.train == "none" and not (rundir.as_path(self.runs) / "depth_expansion").is_dir():
            raise study_spec.spec_error("runs", self.runs, "holds no depth_expansion/ run directories to report "
                                        "on; give the folder the study trained into (or --train all to train)")


def spec_from_flags(**flags) -> ExpansionSpec:
    """The spec from the command's flags (keyed by field; flag --field-name), with the field
    checks of every study spec (`spec.from_flags`): a bad one is a ValueError naming its flag."""
    return study_spec.from_flags(ExpansionSpec, flags)


def _write_csv(rows: list[dict], path) -> None:
    """Floats at 6 significant digits; nothing for no rows."""
    if rows:
        write_csv(path, rows[0], [{k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()}
                                  for row in rows])


def _read_csv(path) -> list[dict]:
    """A table this module wrote (local or gs://), numbers as numbers (empty cells stay "")."""
    def value(v: str):
        if v == "" or not re.fullmatch(r"[-+0-9.eE]+|nan|inf|-inf", v):
            return v
        return int(v) if re.fullmatch(r"[-+]?\d+", v) else float(v)

    text = rundir.as_path(path).read_text(encoding="utf-8")
    return [{k: value(v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text, newline=""))]


def rerender_probe_tables(out) -> None:
    """signal.csv, the interval columns of runs.csv, signal_beside_grad.csv's signal_over_grad,
    signal_over_grad.png and results.md again from the cached probes and the other committed
    tables, for when the run directories are not at hand; the other figures and tables are left
    as they are. A cache made another way is refused (ValueError)."""
    out = rundir.as_path(out)
    probes = {}
    for cache in sorted((p for p in (out / "probes").iterdir() if p.name.endswith(".json")), key=str):
        result = json.loads(cache.read_text())
        if not is_current(result):
            raise ValueError(f"{cache}: a probe made by an older version (other intervals or another "
                             "inserted block); run expansion-study with the run directories to probe again")
        probes[cache.stem] = result
    ordered = sorted(probes.items(), key=lambda kv: (kv[1]["width"], kv[1]["depth"]))
    _write_csv([{"run": name, "depth": p["depth"], "width": p["width"], **r}
                for name, p in ordered for r in p["signal"]], out / "signal.csv")
    run_rows = _read_csv(out / "runs.csv")
    for row in run_rows:
        p = probes[row["run"]]
        best = max(p["signal"], key=lambda r: r["signal_train"])
        row.update(max_signal_lo=best["signal_train_lo"], max_signal_hi=best["signal_train_hi"],
                   min_cosine_lo=min(r["cosine_lo"] for r in p["signal"]),
                   largest_eta_lowering_test=p["largest_eta_lowering_test"])
    _write_csv(run_rows, out / "runs.csv")
    growth = None
    if (out / "growth.csv").exists():
        growth = (_read_csv(out / "growth.csv"), _read_csv(out / "growth_curves.csv"),
                  json.loads((out / "growth_summary.json").read_text()))
    beside = _read_csv(out / "signal_beside_grad.csv") if (out / "signal_beside_grad.csv").exists() else None
    if beside:
        beside = [{**r, "signal_over_grad": signal_over_grad(r)} for r in beside]
        _write_csv(beside, out / "signal_beside_grad.csv")
        with rundir.local_dir(out) as local_out:
            plot_normalised_signal(run_rows, beside, local_out / "signal_over_grad.png")
    tables = {"runs.csv": run_rows, "jumpboard.csv": _read_csv(out / "jumpboard.csv"),
              "signal_beside_grad.csv": beside or []}
    (out / "results.md").write_text(results_markdown(ExpansionResults(tables, probes, growth)))


def train_grid(grid_path: str, out: Path | epath.Path, log: Callable[[str], None]) -> None:
    run_sweep(load_grid(grid_path), out, report=False, log=log)


def grow(runs: Path | epath.Path, log: Callable[[str], None], train_runs: bool = True) -> list[dict]:
    """Expand every growth parent (depth D, N steps) by one block after every layer and train it
    to the scratch runs' step count (`train_runs` False: only collect the finished ones);
    returns one row per seed: the parent, grown and scratch run names."""
    from depthdelusion.train.loop import train  # JAX only when training: see surgery.py's note

    growth_dir = runs / "depth_expansion_growth"
    names = sorted(p.name for p in growth_dir.iterdir() if GROWTH_PARENT.match(p.name))
    parsed = {n: tuple(int(x) for x in GROWTH_PARENT.match(n).groups()) for n in names}
    rows = []
    for name, (depth, width, steps, seed) in parsed.items():
        scratch = [n for n, (d, w, s, sd) in parsed.items() if d == 2 * depth and w == width and sd == seed]
        if not scratch:
            continue
        total_steps = parsed[scratch[0]][2]
        grown = growth_dir / f"grown_{name}_to_d{2 * depth}"
        if not train_runs:
            finished = all(rundir.status(d) == "finished" for d in (grown, growth_dir / scratch[0]))
            if finished:
                rows.append({"seed": seed, "parent": name, "grown": grown.name, "scratch": scratch[0]})
            continue
        if not (grown / "expansion.json").exists():
            log(f"expanding {name} -> {grown.name}")
            surgery.expand_run(growth_dir / name, range(depth), grown, seed=seed,
                                 overrides=[f"train.steps={total_steps}"])
        summary = train(surgery.read_run_config(grown), grown)
        log(f"{grown.name}: {summary['status']} eval {summary.get('eval_loss')}")
        rows.append({"seed": seed, "parent": name, "grown": grown.name, "scratch": scratch[0]})
    return rows


def _curve(run_dir: Path | epath.Path, key: str) -> dict[int, float]:
    return {r["step"]: r[key] for r in rundir.read_metrics(run_dir) if key in r}


def growth_tables(runs: Path | epath.Path, pairs: list[dict]) -> tuple[list[dict], list[dict], dict]:
    """Per-seed final losses of both arms, curves, and the paired comparison."""
    growth_dir = runs / "depth_expansion_growth"
    per_seed, curves = [], []
    for pair in pairs:
        parent, grown, scratch = (growth_dir / pair[k] for k in ("parent", "grown", "scratch"))
        pcfg, gcfg = surgery.read_run_config(parent), surgery.read_run_config(grown)
        tokens_per_step = gcfg.train.batch_size * gcfg.model.seq_len
        p_steps, total = pcfg.train.steps, gcfg.train.steps
        flops_grown = (size.flops_per_token(pcfg.model) * p_steps
                       + size.flops_per_token(gcfg.model) * (total - p_steps)) * tokens_per_step
        flops_scratch = size.flops_per_token(gcfg.model) * total * tokens_per_step
        g_eval = {**_curve(parent, "eval_loss"), **_curve(grown, "eval_loss")}
        s_eval = _curve(scratch, "eval_loss")
        g_loss = {**_curve(parent, "loss"), **_curve(grown, "loss")}
        s_loss = _curve(scratch, "loss")
        gsum, ssum = rundir.read_summary(grown), rundir.read_summary(scratch)
        per_seed.append({
            "seed": pair["seed"], "grown_eval": g_eval[total], "scratch_eval": s_eval[total],
            "grown_final_train": gsum["final_loss"], "scratch_final_train": ssum["final_loss"],
            "grown_flops": flops_grown, "scratch_flops": flops_scratch,
            "grown_wall_s": rundir.read_summary(parent)["wall_time_s"] + gsum["wall_time_s"],
            "scratch_wall_s": ssum["wall_time_s"], "switch_step": p_steps, "steps": total,
            "tokens": total * tokens_per_step,
        })
        for step in sorted(set(g_loss) | set(s_loss)):
            curves.append({"seed": pair["seed"], "step": step, "grown_loss": g_loss.get(step, ""),
                           "scratch_loss": s_loss.get(step, ""), "grown_eval": g_eval.get(step, ""),
                           "scratch_eval": s_eval.get(step, "")})
    diffs = np.array([r["grown_eval"] - r["scratch_eval"] for r in per_seed])
    n = len(diffs)
    summary: dict[str, Any] = {"seeds": n}
    if n >= 2:
        se = float(diffs.std(ddof=1) / math.sqrt(n))
        t = float(stats.t.ppf(0.975, n - 1))
        summary.update({
            "grown_eval_mean": float(np.mean([r["grown_eval"] for r in per_seed])),
            "grown_eval_se": float(np.std([r["grown_eval"] for r in per_seed], ddof=1) / math.sqrt(n)),
            "scratch_eval_mean": float(np.mean([r["scratch_eval"] for r in per_seed])),
            "scratch_eval_se": float(np.std([r["scratch_eval"] for r in per_seed], ddof=1) / math.sqrt(n)),
            "paired_diff_mean": float(diffs.mean()), "paired_diff_ci95": [float(diffs.mean() - t * se), float(diffs.mean() + t * se)],
            "flops_ratio": per_seed[0]["grown_flops"] / per_seed[0]["scratch_flops"],
        })
    return per_seed, curves, summary


def signal_beside_grad_norms(run_dir, probe: dict) -> list[dict]:
    """Per layer l: the weight-gradient norm g_l of the run's last layer-stats record (the
    persistence study's quantity) beside the first-order signal of a block inserted after l.
    The persistence figure can draw these two columns side by side where both exist."""
    records = [r for r in rundir.read_metrics(run_dir) if "per_layer_grad_norm" in r]
    g_D = records[-1]["per_layer_grad_norm"] if records else [None] * probe["depth"]
    rows = [{"layer": r["after"], "grad_norm": g_D[r["after"]], "signal_train": r["signal_train"],
             "signal_test": r["signal_test"], "step": records[-1]["step"] if records else None}
            for r in probe["signal"]]
    return [{**r, "signal_over_grad": signal_over_grad(r)} for r in rows]


def signal_over_grad(row: dict) -> float | None:
    """The signal after layer l in the model's own gradient units: signal_train / g_l (None where
    the run logged no layer stats). SP's gradient scale differs by shape, so an absolute trend
    with depth may be the scale's, not the signal's."""
    g = row.get("grad_norm")
    return None if g in (None, "") else float(row["signal_train"]) / float(g)


def plot_signal_beside_grad(ax, rows: list[dict], label: str = "") -> None:
    """Onto `ax`: g_l and the first-order signal after layer l, both normalised by their max
    (shapes compare, units differ)."""
    layers = [r["layer"] for r in rows]
    g = np.array([r["grad_norm"] for r in rows], float)
    s = np.array([r["signal_train"] for r in rows], float)
    ax.plot(layers, g / np.nanmax(g), "o-", label=f"g_l / max {label}")
    ax.plot(layers, s / np.nanmax(s), "s--", label=f"signal after l / max {label}")
    ax.set_xlabel("layer l (0 = bottom)")


def _pyplot():
    # here, not at the top: only a run that draws pays matplotlib's import (4 s measured), after Agg is chosen
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _run_row(name: str, p: dict, summary: dict) -> dict:
    """runs.csv's row of one probed run: its largest signal with its interval, alignment and
    covariance summaries."""
    best = max(p["signal"], key=lambda r: r["signal_train"])
    return {
        "run": name, "depth": p["depth"], "width": p["width"], "eval_loss": summary["eval_loss"],
        "train_wall_s": summary["wall_time_s"], "probe_wall_s": p["wall_time_s"],
        "max_signal_train": best["signal_train"], "max_signal_lo": best["signal_train_lo"],
        "max_signal_hi": best["signal_train_hi"], "argmax_after": best["after"],
        "max_unbiased_signal": math.sqrt(max(max(r["unbiased_sq_train"] for r in p["signal"]), 0.0)),
        "min_signal_train": min(r["signal_train"] for r in p["signal"]),
        "mean_cosine": float(np.mean([r["cosine"] for r in p["signal"]])),
        "min_cosine_lo": min(r["cosine_lo"] for r in p["signal"]),
        "largest_eta_lowering_test": p["largest_eta_lowering_test"],
        "mean_offdiag": float(np.mean([r["offdiag_fraction"] for r in p["covariance"]])),
        "mean_offdiag_null": float(np.mean([r["offdiag_fraction_null"] for r in p["covariance"]])),
    }


def probe_tables(runs: Path | epath.Path, probes: dict[str, dict]) -> dict[str, list[dict]]:
    """{file name: rows} of signal.csv, runs.csv, jumpboard.csv, covariance.csv and
    signal_beside_grad.csv, runs ordered by width then depth."""
    tables: dict[str, list[dict]] = {name: [] for name in (
        "signal.csv", "runs.csv", "jumpboard.csv", "covariance.csv", "signal_beside_grad.csv")}
    for name, p in sorted(probes.items(), key=lambda kv: (kv[1]["width"], kv[1]["depth"])):
        shape = {"run": name, "depth": p["depth"], "width": p["width"]}
        for key, file in (("signal", "signal.csv"), ("jumpboard", "jumpboard.csv"), ("covariance", "covariance.csv")):
            tables[file] += [{**shape, **r} for r in p[key]]
        tables["runs.csv"].append(_run_row(name, p, rundir.read_summary(runs / "depth_expansion" / name)))
        tables["signal_beside_grad.csv"] += [
            {"run": name, **r} for r in signal_beside_grad_norms(runs / "depth_expansion" / name, p)]
    return tables


def write_report(results: ExpansionResults, out: Path) -> None:
    """Tables and figures into the local directory `out` (run_study copies them to a remote OUT)."""
    out.mkdir(parents=True, exist_ok=True)
    tables, growth = results.tables, results.growth
    for file, rows in tables.items():
        _write_csv(rows, out / file)
    run_rows, beside = tables["runs.csv"], tables["signal_beside_grad.csv"]
    (out / "results.md").write_text(results_markdown(results))
    plot_signal(run_rows, out / "signal.png")
    plot_alignment(run_rows, tables["signal.csv"], out / "alignment.png")
    plot_covariance(run_rows, tables["covariance.csv"], out / "covariance.png")
    depths = sorted({r["depth"] for r in run_rows})
    deepest = [r for r in run_rows if r["depth"] == max(depths)]
    if deepest:
        plot_deepest_beside_grad(deepest, beside, out / "signal_beside_grad.png")
        plot_normalised_signal(run_rows, beside, out / "signal_over_grad.png")
    if growth:
        per_seed, curves, summary = growth
        _write_csv(per_seed, out / "growth.csv")
        _write_csv(curves, out / "growth_curves.csv")
        (out / "growth_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        plot_growth(per_seed, curves, out / "growth.png")


def _save(fig, path) -> None:
    """Laid out and saved without a timestamp."""
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    _pyplot().close(fig)


def plot_signal(run_rows: list[dict], path) -> None:
    """signal.png: the largest signal (with its interval) and the largest unbiased signal against
    depth per width."""
    fig, axes = _pyplot().subplots(1, 2, figsize=(10, 4))
    for w in sorted({r["width"] for r in run_rows}):
        rs = sorted((r for r in run_rows if r["width"] == w), key=lambda r: r["depth"])
        d = [r["depth"] for r in rs]
        y = np.array([r["max_signal_train"] for r in rs])
        err = np.array([[r["max_signal_train"] - r["max_signal_lo"] for r in rs],
                        [r["max_signal_hi"] - r["max_signal_train"] for r in rs]])
        axes[0].errorbar(d, y, yerr=np.clip(err, 0, None), marker="o", capsize=3, label=f"W={w}")
        axes[1].plot(d, [r["max_unbiased_signal"] for r in rs], "o-", label=f"W={w}")
    _save_depth_panels(fig, axes, ("max over k of ‖mean train gradient‖ (95% basic bootstrap)",
                                   "max over k of unbiased ‖μ‖ (batch noise removed)"), path)


def plot_alignment(run_rows: list[dict], signal_rows: list[dict], path) -> None:
    """alignment.png: the train/held-out gradient cosine against width per depth."""
    widths = sorted({r["width"] for r in run_rows})
    fig, ax = _pyplot().subplots(figsize=(5.5, 4))
    for d in sorted({r["depth"] for r in run_rows}):
        rs = sorted((r for r in signal_rows if r["depth"] == d), key=lambda r: r["width"])
        by_w = {w: [r["cosine"] for r in rs if r["width"] == w] for w in widths}
        ax.plot(widths, [np.mean(by_w[w]) if by_w[w] else np.nan for w in widths], "o-", label=f"D={d}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("width W")
    ax.set_ylabel("cos(train, held-out gradient), mean over k")
    ax.axhline(0, color="grey", lw=0.5)
    ax.legend()
    _save(fig, path)


def plot_covariance(run_rows: list[dict], cov_rows: list[dict], path) -> None:
    """covariance.png: the off-diagonal energy fraction per layer, each run beside its null."""
    fig, ax = _pyplot().subplots(figsize=(6, 4))
    for r in run_rows:
        rs = [c for c in cov_rows if c["run"] == r["run"]]
        ax.plot([c["layer"] for c in rs], [c["offdiag_fraction"] for c in rs], "o-", label=r["run"])
    ax.plot([], [], "k:", label="diagonal null (all runs)")
    for r in run_rows:
        rs = [c for c in cov_rows if c["run"] == r["run"]]
        ax.plot([c["layer"] for c in rs], [c["offdiag_fraction_null"] for c in rs], "k:", lw=0.8)
    ax.set_xlabel("layer l (stream after block l)")
    ax.set_ylabel("off-diagonal energy fraction")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=6, ncol=2)
    _save(fig, path)


def plot_deepest_beside_grad(deepest: list[dict], beside: list[dict], path) -> None:
    """signal_beside_grad.png: one panel per run of the deepest depth."""
    fig, axes = _pyplot().subplots(1, len(deepest), figsize=(4 * len(deepest), 3.5), squeeze=False)
    for ax, r in zip(axes[0], deepest):
        plot_signal_beside_grad(ax, [b for b in beside if b["run"] == r["run"]])
        ax.set_title(r["run"], fontsize=9)
        ax.legend(fontsize=7)
    _save(fig, path)


def plot_growth(per_seed: list[dict], curves: list[dict], path) -> None:
    """growth.png: training and validation loss of the grown and scratch arms per seed."""
    fig, axes = _pyplot().subplots(1, 2, figsize=(10, 4))
    for seed in sorted({c["seed"] for c in curves}):
        cs = [c for c in curves if c["seed"] == seed]
        for key, style, ax in (("grown_loss", "-", axes[0]), ("scratch_loss", "--", axes[0]),
                               ("grown_eval", "o-", axes[1]), ("scratch_eval", "s--", axes[1])):
            pts = [(c["step"], c[key]) for c in cs if c[key] != ""]
            if pts:
                ax.plot(*zip(*pts), style, label=f"{key.split('_')[0]} seed {seed}", alpha=0.8)
    switch = per_seed[0]["switch_step"] if per_seed else None
    for ax, title in zip(axes, ("training loss", "validation loss")):
        if switch:
            ax.axvline(switch, color="grey", lw=0.5)
        ax.set_xlabel("step (equal tokens per step)")
        ax.set_title(title)
        ax.legend(fontsize=7)
    axes[0].set_ylim(top=min(4.0, axes[0].get_ylim()[1]))
    _save(fig, path)


def _normalised_by_run(beside: list[dict]) -> dict[str, list[float]]:
    """Per run, `signal_over_grad` at each insertion point (runs without layer stats left out)."""
    by_run: dict = {}
    for r in beside:
        value = signal_over_grad(r)
        if value is not None:
            by_run.setdefault(r["run"], []).append(value)
    return by_run


def _shape(name: str) -> tuple[int, int]:
    """(depth, width) of a depth-grid run named dD_wW."""
    return int(name.split("_w")[0][1:]), int(name.split("_w")[1])


def plot_normalised_signal(run_rows: list[dict], beside: list[dict], path) -> None:
    """signal_over_grad.png: the largest signal against depth per width, in absolute units and
    in the model's own gradient units (max over l of signal after l / g_l)."""
    # here, not at the top: only a run that draws pays matplotlib's import (4 s measured), after Agg is chosen
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_run = _normalised_by_run(beside)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for w in sorted({r["width"] for r in run_rows}):
        rs = sorted((r for r in run_rows if r["width"] == w and r["run"] in by_run), key=lambda r: r["depth"])
        axes[0].plot([r["depth"] for r in rs], [r["max_signal_train"] for r in rs], "o-", label=f"W={w}")
        axes[1].plot([r["depth"] for r in rs], [max(by_run[r["run"]]) for r in rs], "o-", label=f"W={w}")
    _save_depth_panels(fig, axes, ("max over l of the signal after l (absolute)",
                                   "max over l of signal after l / g_l (own gradient units)"), path)


def normalised_signal_lines(beside: list[dict]) -> list[str]:
    """The signal in the model's own gradient units (`signal_over_grad`), max and mean over the
    insertion points per run."""
    by_run = _normalised_by_run(beside)
    if not by_run:
        return []
    shape = {name: _shape(name) for name in by_run}
    rows = [[name, *shape[name], f"{max(v):.3g}", f"{sum(v) / len(v):.3g}"]
            for name, v in sorted(by_run.items(), key=lambda kv: (shape[kv[0]][1], shape[kv[0]][0]))]
    return ["", "## The signal in the model's own gradient units", "",
            "signal after layer l / g_l (the weight-gradient norm of layer l at the last layer-stats "
            "step; column `signal_over_grad` of `signal_beside_grad.csv`, figure `signal_over_grad.png`): "
            "the largest and the mean over insertion points.", "",
            markdown_table(["run", "D", "W", "max signal/g_l", "mean signal/g_l"], rows, align="lrrrr")]


@dataclass(frozen=True)
class ExpansionResults:
    """The study's numbers: its tables {file name: rows} (:func:`probe_tables`, or read back from
    the committed files by :func:`rerender_probe_tables`), the probes, and the growth comparison
    (per seed, curves, summary; None without grown runs). The report only formats them."""

    tables: dict
    probes: dict
    growth: tuple | None


def measure(spec: ExpansionSpec, out, log: Callable[[str], None] = print) -> ExpansionResults:
    """Train what `spec.train` says (resumable), grow the growth parents, probe every finished
    depth-grid run (cached under OUT/probes) and compute the tables and the growth comparison."""
    runs_path = rundir.as_path(spec.runs)
    if spec.train == "all":
        train_grid(spec.depth_grid, runs_path / "depth_expansion", log)
    if spec.train in ("all", "growth"):
        train_grid(spec.growth_grid, runs_path / "depth_expansion_growth", log)
    has_growth = (runs_path / "depth_expansion_growth").exists()
    pairs = grow(runs_path, log, train_runs=spec.train != "none") if has_growth else []
    probes = probe_runs(runs_path, rundir.as_path(out) / "probes", spec.probe_batches, log)
    growth = growth_tables(runs_path, pairs) if pairs else None
    return ExpansionResults(probe_tables(runs_path, probes), probes, growth)


def sections(results: ExpansionResults) -> list[str]:
    """results.md's lines: the generated tables (the hand-written verdicts are in README.md)."""
    t = results.tables
    return [*runs_section(t["runs.csv"]), *jumpboard_section(t["jumpboard.csv"]),
            *insertion_section(results.probes), *normalised_signal_lines(t.get("signal_beside_grad.csv") or []),
            *growth_section(results.growth)]


def results_markdown(results: ExpansionResults) -> str:
    return "\n".join(sections(results)) + "\n"


def runs_section(run_rows: list[dict]) -> list[str]:
    return ["# Depth expansion: generated tables (`depthdelusion expansion-study`)", "",
            "Signal = ‖mean gradient‖ w.r.t. the inserted block's zero projections over the probe's "
            "training batches; [95% basic bootstrap over batches, on the log scale for norms and the "
            "Fisher-z scale for cosines]; unbiased = sqrt of the "
            "pairwise (i ≠ j) estimate of ‖μ‖², batch noise removed. cos = train/held-out cosine, "
            "mean over insertion points (lowest lower bound of its 95% intervals). Off-diag = "
            "off-diagonal energy fraction of the activation-gradient covariance, mean over layers "
            "(diagonal null in brackets).", "",
            markdown_table(
                ["run", "D", "W", "eval loss", "max signal [95%] (after k)", "max unbiased", "min signal",
                 "cos mean (min lo)", "largest η lowering held-out", "off-diag (null)", "train s", "probe s"],
                [[r["run"], r["depth"], r["width"], f"{r['eval_loss']:.3f}",
                  f"{r['max_signal_train']:.3g} [{r['max_signal_lo']:.3g}, {r['max_signal_hi']:.3g}] "
                  f"({r['argmax_after']})",
                  f"{r['max_unbiased_signal']:.3g}", f"{r['min_signal_train']:.3g}",
                  f"{r['mean_cosine']:.2f} ({r['min_cosine_lo']:.2f})", r["largest_eta_lowering_test"],
                  f"{r['mean_offdiag']:.2f} ({r['mean_offdiag_null']:.3f})", f"{r['train_wall_s']:.0f}",
                  f"{r['probe_wall_s']:.0f}"]
                 for r in sorted(run_rows, key=lambda r: (r["width"], r["depth"]))],
                align="lrrrlrrlrlrr")]


def jumpboard_section(jump_rows: list[dict]) -> list[str]:
    return ["", "## Jumpboard (strongest insertion point of each run)", "",
            markdown_table(["run", "after", "η", "ΔL train", "−η‖g‖", "ΔL held-out", "first order held-out"],
                           [[r["run"], r["after"], f"{r['eta']:g}", f"{r['delta_train']:.2e}",
                             f"{r['first_order_train']:.2e}", f"{r['delta_test']:.2e}", f"{r['first_order_test']:.2e}"]
                            for r in jump_rows],
                           align="lrrrrrr")]


def insertion_section(probes: dict) -> list[str]:
    return ["", "## Per insertion point", "",
            markdown_table(["run", "after", "signal train [95%]", "signal held-out [95%]", "cos [95%]"],
                           [[name, r["after"],
                             f"{r['signal_train']:.3g} [{r['signal_train_lo']:.3g}, {r['signal_train_hi']:.3g}]",
                             f"{r['signal_test']:.3g} [{r['signal_test_lo']:.3g}, {r['signal_test_hi']:.3g}]",
                             f"{r['cosine']:.2f} [{r['cosine_lo']:.2f}, {r['cosine_hi']:.2f}]"]
                            for name, p in sorted(probes.items(), key=lambda kv: (kv[1]["width"], kv[1]["depth"]))
                            for r in p["signal"]],
                           align="lrlll")]


def growth_section(growth) -> list[str]:
    if not growth:
        return []
    per_seed, _, summary = growth
    md = ["", "## Progressive growth", "",
          markdown_table(["seed", "grown eval", "scratch eval", "grown final train", "scratch final train",
                          "FLOPs grown / scratch", "wall s grown (parent + grown)", "wall s scratch"],
                         [[r["seed"], f"{r['grown_eval']:.4f}", f"{r['scratch_eval']:.4f}",
                           f"{r['grown_final_train']:.4f}", f"{r['scratch_final_train']:.4f}",
                           f"{r['grown_flops'] / r['scratch_flops']:.3f}", f"{r['grown_wall_s']:.0f}",
                           f"{r['scratch_wall_s']:.0f}"] for r in per_seed],
                         align="rrrrrrrr")]
    if "paired_diff_mean" in summary:
        lo, hi = summary["paired_diff_ci95"]
        root_n = math.sqrt(summary["seeds"])  # ± is the SD over seeds (analysis/README.md)
        md += ["", f"Validation loss at the last step, mean ± SD over {summary['seeds']} seeds: grown "
               f"{summary['grown_eval_mean']:.4f} ± {summary['grown_eval_se'] * root_n:.4f}, scratch "
               f"{summary['scratch_eval_mean']:.4f} ± {summary['scratch_eval_se'] * root_n:.4f}; paired difference "
               f"grown − scratch {summary['paired_diff_mean']:+.4f}, 95% t interval [{lo:+.4f}, {hi:+.4f}] "
               f"(seeds paired: same init seed, same data order). FLOPs of the grown arm: "
               f"{summary['flops_ratio']:.3f} of the scratch arm's."]
    return md


def probe_runs(runs: Path | epath.Path, cache_dir, probe_batches: int,
               log: Callable[[str], None]) -> dict[str, dict]:
    """{run: probe} of every depth-grid run under RUNS: its current cache in `cache_dir` where
    there is one, else probed now (finished runs only) and cached."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    probes = {}
    for run_dir in sorted((runs / "depth_expansion").iterdir()):
        cache = cache_dir / f"{run_dir.name}.json"
        cached = json.loads(cache.read_text()) if cache.exists() else None
        if cached is not None and is_current(cached):
            probes[run_dir.name] = cached
            continue
        if not run_dir.is_dir() or rundir.status(run_dir) != "finished":
            continue
        log(f"probing {run_dir.name}" + (" (its cached probe was made by an older version)" if cached else ""))
        result = probe_run(run_dir, n_batches=probe_batches)
        result["run"] = run_dir.name
        cache.write_text(json.dumps(result, indent=2) + "\n")
        probes[run_dir.name] = result
    return probes


def run_study(spec: ExpansionSpec, out: str, log: Callable[[str], None] = print) -> Path | epath.Path:
    """`measure` what `spec` says, then the tables, figures and results.md into OUT, and this
    invocation's wall time (study_wall_time.json)."""
    out_path = rundir.as_path(out)
    start = time.perf_counter()
    results = measure(spec, out_path, log)
    with rundir.local_dir(out_path) as local_out:  # a gs:// OUT: drawn here, then copied up
        write_report(results, local_out)
    (out_path / "study_wall_time.json").write_text(json.dumps(
        {"this_invocation_s": round(time.perf_counter() - start, 1)}, indent=2) + "\n")
    return out_path


def _save_depth_panels(fig, axes, titles, path) -> None:
    """Log–log panels against depth, titled, with legends; saved without a timestamp."""
    import matplotlib.pyplot as plt  # here: its callers drew with it already (Agg chosen)

    for ax, title in zip(axes, titles):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("depth D")
        ax.set_title(title, fontsize=9)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
