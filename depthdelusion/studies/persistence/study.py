"""`depthdelusion persistence-study RUNS [RUNS ...] --out DIR`: the tables and figures of the
gradient-persistence study (runs trained by `depthdelusion sweep experiments/persistence_study.yaml`,
`persistence_width.yaml`, or any sweep that logs per-layer gradient norms, e.g. the depth-confound
study's; several run roots are read together, each root a study of its own recipe).

Rules (`analysis/science/persistence.py`, `docs/persistence.md`):
- per run, the windowed rate 1/ℓ over blocks 1 … D−1 (the primary fit) with a moving-block
  bootstrap over the window's logged steps; the all-block rate and the end blocks' ratios beside it;
- per cell (study, parametrization, D, W, lr, dtypes), the interval on the rate from the spread
  across seeds (t, n − 1 df) where there are ≥ 2 seeds; a verdict uses only cells with ≥ 3 seeds,
  or says that it rests on single runs;
- the paper's implied ℓ(W) = κ·ln W / ln(1/ε) and its ℓ ∝ W^p (both from analysis/reference) against
  the measured rates;
- controls: activation against weight gradients, sp against completep, the residual stream's
  dtype, and the bottom block left in — each "changes / does not change the verdict".
Also the rate at every logged step (when the shape appears), ℓ(W) over all runs, and loss
against depth with the paper's D_crit. The study's shape: its spec (:class:`PersistenceSpec`: the
run roots, the grid files, the step and window; from the command's flags by `spec.from_flags`);
:func:`measure` computes the numbers once into a frozen :class:`PersistenceResults` (the pooled
math is `analysis/science/persistence_cells.py`); `sections.sections` renders the
report from it; :func:`build` writes the files. JAX-free: reads run directories only. RUNS and
OUT may be local or gs:// (a gs:// OUT is written to a local directory and copied up). Every number in the
outputs is rounded and every bootstrap seeded from the run's name, so they are the same on any
machine.
"""
from __future__ import annotations

import dataclasses
import math
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from depthdelusion import rundir
from depthdelusion.analysis.formats.table_text import write_csv
from depthdelusion.analysis.report import plots
from depthdelusion.analysis.science import persistence_cells as pc
from depthdelusion.analysis.science.persistence import (
    DEFAULT_STEP,
    DEFAULT_WINDOW,
    PAPER_EPSILONS,
    block_ratios,
    window_bounds,
)
from depthdelusion.analysis.table.run_dirs import read_gradient_profile
from depthdelusion.config import bounded
from depthdelusion.studies.common import spec as study_spec
from depthdelusion.studies.persistence.options import PersistenceOptions
from depthdelusion.studies.persistence.sections import sections
from depthdelusion.sweep import load_grid

FLAGS = {"runs": "RUNS", "grids": "--grid"}  # the fields whose flag is not --field-name


@dataclass(frozen=True)
class PersistenceSpec:
    """What the study reads and where it measures: the run roots (each a study of its own), the
    grid files whose runs it expects (to say which have not finished), and the step and relative
    half-width of the window the rates are fitted over. Built from the command's flags by
    `spec.from_flags` (a bad one: a ValueError naming the flag)."""

    runs: list[str]  # sweep output directories, local or gs://
    grids: list[str] = dataclasses.field(default_factory=list)  # grid files (`depthdelusion sweep`'s YAML)
    step: int = bounded(DEFAULT_STEP, ge=0)
    window: float = bounded(DEFAULT_WINDOW, gt=0, note=" (0.2 at step 1000: steps 800-1200)")

    def validate(self) -> None:
        if not self.runs:
            raise study_spec.spec_error("runs", self.runs, "need at least one directory of runs")
        if not math.isfinite(self.window):
            raise study_spec.spec_error("window", self.window, "must be a finite number > 0, e.g. 0.2")

    def expected(self) -> list[str]:
        """The grids' run names; grids that share runs (the width grid repeats the depth grid's
        cells) list them once."""
        if not self.grids:
            return []
        return list(dict.fromkeys(name for g in self.grids for name, _ in load_grid(g).runs))


def _model_field(summary: dict, cfg: dict, field: str, default=None):
    return summary["model"].get(field, (cfg.get("model") or {}).get(field, default))


def load_study_runs(roots) -> tuple[list[dict], list[str]]:
    """Finished runs under each root (a path or a list of paths) with their study (the root's
    directory name; with its parent's when two roots share a name), shape, parametrization, lr, dtypes, seed, loss and profile; and the names of
    the run directories that are not finished. A name met again under another root is prefixed
    with its study."""
    roots = [rundir.as_path(r) for r in (roots if isinstance(roots, (list, tuple)) else [roots])]
    names = [r.name for r in roots]
    # two sweeps' `runs/` directories are two studies, not one: then the parent names them too
    labels = [f"{r.parent.name}/{r.name}" if names.count(r.name) > 1 else r.name for r in roots]
    if len(set(labels)) < len(labels):
        raise ValueError(f"run roots {', '.join(map(str, roots))}: two roots with the same name; "
                         "give each study's runs a directory of its own name")
    runs, unfinished, seen = [], [], set()
    for root, label in zip(roots, labels):
        if not root.is_dir():
            raise ValueError(f"{root}: not a directory of runs (a sweep's --out directory)")
        for run in sorted(root.iterdir()):
            summary = rundir.read_summary(run) if run.is_dir() and run.name != "report" else None
            if summary is None or summary.get("status") != "finished":
                unfinished += [run.name] if run.is_dir() and run.name != "report" else []
                continue
            cfg = rundir.read_config_dict(run) or {}
            model = summary["model"]
            train = cfg.get("train") or {}
            name = run.name if run.name not in seen else f"{label}/{run.name}"
            seen.add(name)
            dtypes = "/".join(str(_model_field(summary, cfg, f, "-")) for f in ("compute_dtype", "residual_dtype"))
            runs.append({"name": name, "study": label,
                         "parametrization": model.get("parametrization", "sp"),
                         "depth": int(model["depth"]), "width": int(model["width"]),
                         "lr": train.get("lr"), "dtypes": dtypes,
                         "seed": int(train.get("seed", 0)), "data_seed": int((cfg.get("data") or {}).get("seed", 0)),
                         "loss": float(summary["final_loss"]), "loss_se": float(summary["final_loss_se"]),
                         "eval_loss": summary.get("eval_loss"), "params": int(summary["params"]),
                         "steps": int(summary["steps"]), "wall_time_s": float(summary["wall_time_s"]),
                         "profile": read_gradient_profile(run, int(model["depth"]))})
    return runs, unfinished


@dataclass(frozen=True)
class PersistenceResults:
    """Everything the study's report states, computed once by :func:`measure`; the report,
    tables and figures only format it. Cell keys: :func:`~depthdelusion.analysis.science.
    persistence_cells.cell_key`."""

    runs: tuple              # load_study_runs' finished runs (dicts, with their gradient profiles)
    unfinished: tuple        # names of the run directories not finished
    expected: tuple          # the grids' run names (empty: no grid given)
    missing: tuple           # of ``expected``, the runs not finished
    step: int                # the requested step and relative half-width of the window
    window: float
    fits: dict               # (name, kind) -> PersistenceFit, blocks 1 … D−1 (the primary fit)
    all_blocks: dict         # (name, kind) -> PersistenceFit, the bottom block left in
    ratios: dict             # name -> block_ratios of the window's weight-gradient norms
    intervals: dict          # kind -> {cell: SeedInterval} of the primary fits
    intervals_all: dict      # kind -> {cell: SeedInterval} of the all-block fits
    members: dict            # cell -> its runs' primary weight fits
    counts: dict             # "blocks 1 … D−1" / "all blocks" -> {status: runs}, weight gradients
    critical: pc.CriticalDepth | None
    early_late: pc.EarlyAgainstLate
    verdict: str             # weight gradients, blocks 1 … D−1
    controls: tuple          # pc.Control
    trends: tuple            # pc.DepthTrend
    paper_cells: tuple       # pc.PaperCell
    paper_widths: tuple      # pc.PaperWidth
    power_tests: tuple       # pc.WidthPowerTest
    timeline: tuple          # pc.timeline_table
    scalings: dict           # (parametrization, kind) -> PersistenceScaling, or why not fitted
    losses: tuple            # pc.LossRow
    loss_points: tuple       # the loss-vs-depth figure's points
    profiles: dict           # parametrization -> {width: [(depth, profile, fit)]} of the main seed
    bottom: tuple            # (parametrization, depth, width, g_0/g_1) of the first study's runs
    warm_steps: tuple = ()   # WarmStep: each logged step of the warm-up window fitted alone
    step_ratios: tuple = ()  # StepRatio: g_0/g_{D−1} over the runs at every logged step
    fit_r2: dict = dataclasses.field(default_factory=dict)  # parametrization -> sorted R² of the primary weight fits

    @property
    def studies(self) -> list[str]:
        return sorted({r["study"] for r in self.runs})

    @property
    def multi(self) -> bool:
        return len(self.studies) > 1

    @property
    def params(self) -> list[str]:
        return sorted({r["parametrization"] for r in self.runs})

    @property
    def bounds(self) -> tuple[int, int]:
        return window_bounds(self.step, self.window)

    def fitted(self, pz: str) -> bool:
        """Whether ℓ(W) of ``pz``'s weight gradients was fitted."""
        return not isinstance(self.scalings.get((pz, "weight"), ""), str)

    @property
    def figures(self) -> list[str]:
        """The figures the study draws, in the report's order."""
        names = []
        for pz in self.params:
            names += [f"gradient_profiles_{pz}.png"] if self.profiles[pz] else []
            names += [f"persistence_scaling_{pz}.png"] if self.fitted(pz) else []
        names += ["bottom_block.png"] if self.bottom else []
        return names + (["loss_vs_depth.png"] if self.loss_points else [])


@dataclass(frozen=True)
class WarmStep:
    """One logged step of the warm-up window fitted alone (weight gradients, blocks 1 … D−1):
    the runs of the cells with ≥ MIN_SEEDS seeds whose rate is > 0, and the cells' verdict."""

    step: int
    positive: int
    runs: int
    verdict: str

    @property
    def share(self) -> float:
        return self.positive / self.runs if self.runs else math.nan


@dataclass(frozen=True)
class StepRatio:
    """The headline ratio g_0/g_{D−1} over every run that logged ``step``: its smallest value,
    its median and the runs at or below ``pc.CRITICAL_EPS``."""

    step: int
    runs: int
    smallest: float
    median: float
    reached: int


def warm_steps(runs: list[dict], early_late: pc.EarlyAgainstLate) -> tuple[WarmStep, ...]:
    """Each logged step of the warm-up window on its own: what the window's mean hides."""
    lo, hi = early_late.warm_bounds
    keys = [c.key for c in early_late.cells]
    steps = sorted({s for r in runs if r["profile"] is not None
                    for s in r["profile"].by_kind("weight") if lo <= s <= hi})
    out = []
    for step in steps:
        fits = pc.windowed_fits(runs, step, 0.0)
        signs = [pc.run_signs(runs, fits, key) for key in keys]
        out.append(WarmStep(step, sum(p for p, _ in signs), sum(n for _, n in signs),
                            pc.verdict_of(pc.cells(runs, fits))[0]))
    return tuple(out)


def step_ratios(runs: list[dict]) -> tuple[StepRatio, ...]:
    """g_0/g_{D−1} of every run at every logged step (no window)."""
    by_step: dict = {}
    for r in runs:
        if r["profile"] is None:
            continue
        for step, g in r["profile"].by_kind("weight").items():
            by_step.setdefault(step, []).append(block_ratios(g)["ends"])
    return tuple(StepRatio(step, len(v), min(v), float(np.median(v)), sum(x <= pc.CRITICAL_EPS for x in v))
                 for step, v in sorted(by_step.items()))


def fit_r2(runs: list[dict], fits: dict) -> dict:
    """{parametrization: sorted R² of its runs' primary weight-gradient fits}."""
    out: dict = {}
    for r in runs:
        f = fits.get((r["name"], "weight"))
        if f is not None and np.isfinite(f.r2):
            out.setdefault(r["parametrization"], []).append(float(f.r2))
    return {pz: tuple(sorted(v)) for pz, v in sorted(out.items())}


def measure(spec: PersistenceSpec) -> PersistenceResults:
    """The study's numbers for the runs under ``spec.runs``; the runs of ``spec.grids`` that are
    not finished are listed as missing."""
    runs, unfinished = load_study_runs(spec.runs)
    if not runs:
        raise ValueError(f"{', '.join(map(str, spec.runs))}: no finished runs to analyse")
    step, window, expected = spec.step, spec.window, spec.expected()
    fits = pc.windowed_fits(runs, step, window)  # primary: blocks 1 … D−1
    allb = pc.windowed_fits(runs, step, window, skip_bottom=0)
    ratios = pc.window_ratios(runs, step, window)
    done = {r["name"] for r in runs}
    studies = sorted({r["study"] for r in runs})
    params = sorted({r["parametrization"] for r in runs})
    iv = {kind: pc.cells(runs, fits, kind) for kind in pc.KINDS}
    iv_all = {kind: pc.cells(runs, allb, kind) for kind in pc.KINDS}
    members = pc.cell_members(runs, fits)
    verdict = pc.verdict_of(iv["weight"])[0]
    paper = pc.paper_cells(iv["weight"])
    losses, points = pc.loss_by_depth(runs, studies)
    early_late = pc.early_against_late(runs, fits, step, window)
    return PersistenceResults(
        runs=tuple(runs), unfinished=tuple(unfinished), expected=tuple(expected),
        missing=tuple(n for n in expected if n not in done), step=step, window=window,
        fits=fits, all_blocks=allb, ratios=ratios, intervals=iv, intervals_all=iv_all, members=members,
        counts={"blocks 1 … D−1": pc.status_counts(fits), "all blocks": pc.status_counts(allb)},
        critical=pc.critical_depth(runs, ratios), early_late=early_late,
        verdict=verdict, controls=pc.controls(verdict, iv, iv_all),
        trends=pc.depth_trends(studies, iv["weight"], iv_all["weight"]),
        paper_cells=paper, paper_widths=pc.paper_widths(paper, PAPER_EPSILONS),
        power_tests=pc.width_power_tests(studies, iv["weight"], members),
        timeline=pc.timeline_table(pc.timeline(runs), params), scalings=pc.width_scalings(runs, fits, params),
        losses=losses, loss_points=points, profiles=_profiles(runs, fits, params, studies[0]),
        bottom=tuple((r["parametrization"], r["depth"], r["width"], ratios[r["name"]]["bottom"])
                     for r in runs if r["name"] in ratios and r["study"] == studies[0]),
        warm_steps=warm_steps(runs, early_late), step_ratios=step_ratios(runs), fit_r2=fit_r2(runs, fits))


def _profiles(runs: list[dict], fits: dict, params, study: str) -> dict:
    """Per parametrization, {width: [(depth, window profile, fit)]} of the main seed's runs of
    ``study`` (the figures' profiles)."""
    seed = pc.main_seed(runs)
    out = {}
    for pz in params:
        by_width: dict = {}
        for r in runs:
            f = fits.get((r["name"], "weight"))
            if r["parametrization"] != pz or f is None or r["seed"] != seed or r["study"] != study:
                continue
            by_width.setdefault(r["width"], []).append((r["depth"], pc.window_profile(r["profile"], f), f))
        out[pz] = by_width
    return out


def write_figures(results: PersistenceResults, out: Path) -> list[Path]:
    """The figures of ``results.figures``, drawn into ``out``."""
    files = []
    lo, hi = results.bounds
    for pz in results.params:
        if results.profiles[pz]:
            files.append(plots.gradient_profile_panels(
                results.profiles[pz], out / f"gradient_profiles_{pz}.png", title=f"{pz}: weight-gradient "
                f"profiles (all blocks drawn; the fit uses 1 … D−1), ln g averaged over steps {lo}–{hi}"))
        if results.fitted(pz):
            files.append(plots.persistence_scaling(results.scalings[(pz, "weight")],
                                                   out / f"persistence_scaling_{pz}.png"))
    if results.bottom:
        files.append(bottom_block_figure(list(results.bottom), out / "bottom_block.png"))
    if results.loss_points:
        files.append(plots.loss_vs_depth_errorbars(list(results.loss_points), out / "loss_vs_depth.png",
                                                   title="Final loss vs depth per width (sp: solid, completep: dashed)"))
    return files


def run_rows(results: PersistenceResults) -> list[dict]:
    """persistence.csv: one row per run and gradient kind."""
    rows = []
    for r in sorted(results.runs, key=lambda r: (r["study"], r["parametrization"], r["width"], r["depth"], r["seed"])):
        rt = results.ratios.get(r["name"])
        for kind in pc.KINDS:
            f, fall = results.fits.get((r["name"], kind)), results.all_blocks.get((r["name"], kind))
            if f is None:
                continue
            rows.append({"study": r["study"], "name": r["name"], "parametrization": r["parametrization"],
                         "depth": r["depth"], "width": r["width"], "lr": r["lr"], "dtypes": r["dtypes"],
                         "seed": r["seed"], "loss": f"{r['loss']:.5f}", "loss_se": f"{r['loss_se']:.5f}",
                         "kind": kind, "steps_used": f"{f.steps[0]}-{f.steps[-1]} ({len(f.steps)})",
                         "blocks": f"{f.skip_bottom}-{f.depth - 1}", "status": f.status,
                         "rate": f"{f.rate:.5f}", "rate_lo": f"{f.rate_ci[0]:.5f}",
                         "rate_hi": f"{f.rate_ci[1]:.5f}", "ci_method": f.ci_method,
                         "all_blocks_status": fall.status if fall else "",
                         "all_blocks_rate": f"{fall.rate:.5f}" if fall else "",
                         "bottom_ratio": f"{rt['bottom']:.4g}" if rt and kind == "weight" else "",
                         "top_ratio": f"{rt['top']:.4g}" if rt and kind == "weight" else "",
                         "wall_time_s": f"{r['wall_time_s']:.0f}"})
    return rows


def cell_rows(results: PersistenceResults) -> list[dict]:
    """cells.csv: one row per cell (weight gradients, blocks 1 … D−1)."""
    rows = []
    for key, v in results.intervals["weight"].items():
        study, pz, d, w, lr, dt = key
        a, va = results.intervals_all["weight"].get(key), results.intervals["activation"].get(key)
        rows.append({"study": study, "parametrization": pz, "depth": d, "width": w, "lr": lr, "dtypes": dt,
                     "seeds": v.n, "rate_mean": f"{v.mean:.5f}",
                     "rate_sd": "" if not np.isfinite(v.sd) else f"{v.sd:.5f}",
                     "half_width": f"{v.half_width:.5f}", "rate_lo": f"{v.lo:.5f}", "rate_hi": f"{v.hi:.5f}",
                     "status": v.status, "method": v.method,
                     "all_blocks_mean": "" if a is None else f"{a.mean:.5f}",
                     "all_blocks_status": "" if a is None else a.status,
                     "activation_mean": "" if va is None else f"{va.mean:.5f}",
                     "activation_status": "" if va is None else va.status})
    return rows


def build(spec: PersistenceSpec, out: Path, *, command: str = "") -> list[Path]:
    """Write report.md, persistence.csv, cells.csv and the figures of the study ``spec``."""
    results = measure(spec)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for name, rows in (("persistence.csv", run_rows(results)), ("cells.csv", cell_rows(results))):
        if rows:
            files.append(write_csv(out / name, list(rows[0]), rows))
    files += write_figures(results, out)
    (out / "report.md").write_text("\n".join(sections(results, command)) + "\n")
    return files + [out / "report.md"]


def bottom_block_figure(rows: list, path: Path) -> Path:
    """g_0/g_1 against depth, one line per (parametrization, width); geometric mean over seeds."""
    plt = plots.plt
    groups: dict = {}
    for pz, d, w, ratio in rows:
        groups.setdefault((pz, w), {}).setdefault(d, []).append(ratio)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for (pz, w), color in zip(sorted(groups), plots.colors(len(groups))):
        ds = sorted(groups[(pz, w)])
        ax.plot(ds, [float(np.exp(np.mean(np.log(groups[(pz, w)][d])))) for d in ds],
                "o-" if pz == "sp" else "s--", color=color, ms=4, label=f"{pz} W = {w}")
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("depth D")
    ax.set_ylabel("g_0 / g_1  (bottom block against block 1)")
    ax.set_title("The bottom block's weight gradient against its neighbour's (steps of the window)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return plots.save_figure(fig, path)


def run_command(*, runs: list[str] | str, out: str, options: PersistenceOptions = PersistenceOptions()) -> int:
    """`depthdelusion persistence-study` (the parser is `depthdelusion.cli`, from `PersistenceOptions`)."""
    grid = options.grid
    spec = study_spec.from_flags(PersistenceSpec, {
        "runs": [runs] if isinstance(runs, str) else list(runs),
        "grids": [grid] if isinstance(grid, str) else list(grid or []), "step": options.step,
        "window": options.window}, FLAGS)
    with rundir.local_dir(out) as local_out:  # a gs:// OUT: drawn here, then copied up
        files = build(spec, local_out, command="depthdelusion " + shlex.join(sys.argv[1:]))
    print(f"wrote {len(files)} files to {out}")
    return 0


run_command.option_groups = {"options": PersistenceOptions}
