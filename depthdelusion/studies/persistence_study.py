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
against depth with the paper's D_crit. JAX-free: reads run directories only. RUNS and OUT may be
local or gs:// (a gs:// OUT is written to a local directory and copied up). Every number in the
outputs is rounded and every bootstrap seeded from the run's name, so they are the same on any
machine.
"""
from __future__ import annotations

import math
import zlib
from pathlib import Path

import numpy as np

from depthdelusion import rundir
from depthdelusion.analysis.formats.table_text import markdown_table, write_csv
from depthdelusion.analysis.reference import PAPER_KAPPA, PAPER_PERSISTENCE_EXPONENT
from depthdelusion.analysis.science.persistence import (
    DEFAULT_STEP,
    DEFAULT_WINDOW,
    MIN_SEEDS,
    PAPER_EPSILONS,
    PRIMARY_SKIP_BOTTOM,
    block_ratios,
    compare_with_paper,
    length_statement,
    paper_implied_length,
    persistence_length,
    persistence_scaling,
    power_law_test,
    seed_interval,
    window_bounds,
    windowed_fit,
    windowed_norms,
)
from depthdelusion.analysis.table.runs import read_gradient_profile

TIMELINE = (1, 25, 50, 100, 200, 400, 600, 800, 1000)  # steps at which the rate is tabulated
KINDS = ("weight", "activation")


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


def _seed_of(name: str) -> int:
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
                                                  name=r["name"], width=r["width"], seed=_seed_of(r["name"]),
                                                  skip_bottom=skip_bottom)
    return out


def cell_key(r: dict) -> tuple:
    """Runs that differ only by seed: same study, parametrization, shape, lr and dtypes."""
    return (r["study"], r["parametrization"], r["depth"], r["width"], r["lr"], r["dtypes"])


def cells(runs: list[dict], fits: dict, kind: str = "weight") -> dict:
    """{cell key: SeedInterval over its seeds' rates} for the runs with a ``kind`` fit."""
    groups: dict = {}
    for r in runs:
        if (r["name"], kind) in fits:
            groups.setdefault(cell_key(r), []).append(fits[(r["name"], kind)])
    return {k: seed_interval(v) for k, v in sorted(groups.items(), key=lambda kv: _sort_key(kv[0]))}


def _sort_key(key):
    # an lr missing from a run's config sorts first instead of failing to compare with a float
    return tuple((v is not None, v if v is not None else 0) for v in key)


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


def _verdict_class(sentence: str) -> str:
    return sentence.split(" (")[0]


def _fmt_rate(v: float) -> str:
    return f"{v:+.4f}" if np.isfinite(v) else "—"


def _cell_label(key) -> str:
    study, pz, d, w, lr, dt = key
    return f"{pz} {d}L×{w}"


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


def _mean_se(values):
    v = np.asarray(values, float)
    return float(v.mean()), (float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan)


def _trend(cells_by_depth: list[tuple[int, object]]) -> str:
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


WARMUP_STEP, WARMUP_WINDOW = 50, 0.5  # steps 25–75: early in training, where the paper measures
CRITICAL_EPS = 0.1  # g_0/g_{D−1} at or below this: the gradient has faded to ε (the paper's largest ε)


def _run_signs(runs: list[dict], fits: dict, key) -> str:
    """'k of n runs positive' over the runs of one cell (weight gradients)."""
    rates = [fits[(r["name"], "weight")].rate for r in runs
             if cell_key(r) == key and (r["name"], "weight") in fits]
    return f"{sum(x > 0 for x in rates)} of {len(rates)}"


def warmup_lines(runs: list[dict], end_fits: dict, step: int, window: float) -> list[str]:
    """The warm-up window (steps 25–75) beside the end-of-training window, per cell with its t
    interval over seeds and the sign of every run's rate; the two verdicts."""
    warm = windowed_fits(runs, WARMUP_STEP, WARMUP_WINDOW)
    iv_end, iv_warm = cells(runs, end_fits), cells(runs, warm)
    (lo_w, hi_w), (lo_e, hi_e) = window_bounds(WARMUP_STEP, WARMUP_WINDOW), window_bounds(step, window)
    rows = []
    for key, e in iv_end.items():
        w = iv_warm.get(key)
        if w is None or not e.enough_seeds:
            continue
        rows.append([_cell_label(key), e.n,
                     f"{_fmt_rate(w.mean)} [{w.lo:+.4f}, {w.hi:+.4f}] {w.status}", _run_signs(runs, warm, key),
                     f"{_fmt_rate(e.mean)} [{e.lo:+.4f}, {e.hi:+.4f}] {e.status}", _run_signs(runs, end_fits, key)])
    return ["## Early against late: the warm-up window beside the end of training", "",
            f"The paper measures early in training; the verdict below is at the end of the cosine "
            f"decay. The same fit (weight gradients, blocks 1 … D−1) over the logged steps "
            f"{lo_w}–{hi_w} (the logged steps in it: 25, 50, 75 where per-layer norms are logged "
            f"every 25 steps) and {lo_e}–{hi_e}; t intervals over seeds; "
            "'runs positive': runs whose own rate is > 0 (decay towards the input).", "",
            markdown_table(["cell", "seeds", f"rate, steps {lo_w}–{hi_w} [95% t]", "runs positive",
                            f"rate, steps {lo_e}–{hi_e} [95% t]", "runs positive"], rows), "",
            f"- Steps {lo_w}–{hi_w}: {verdict_of(iv_warm)[0]}.",
            f"- Steps {lo_e}–{hi_e}: {verdict_of(iv_end)[0]}.", ""]


def _warmup_ratios(runs: list[dict]) -> dict:
    return {r["name"]: block_ratios(windowed_norms(r["profile"], WARMUP_STEP, WARMUP_WINDOW, "weight")[1])
            for r in runs if r["profile"] is not None and r["profile"].steps("weight")}


def critical_depth_lines(runs: list[dict], ratios: dict) -> list[str]:
    """The headline test of "a critical depth is reached": the bottom-to-top weight-gradient
    ratio g_0/g_{D−1} of every run, and per cell its geometric mean over seeds with the t
    interval of ln(ratio). Reached when the ratio is at or below :data:`CRITICAL_EPS`."""
    from depthdelusion.analysis.fitting.seed_intervals import mean_interval

    ends = {r["name"]: ratios[r["name"]]["ends"] for r in runs if r["name"] in ratios}
    if not ends:
        return []
    vals = sorted(ends.values())
    early = sorted(v["ends"] for v in _warmup_ratios(runs).values())
    groups: dict = {}
    for r in runs:
        if r["name"] in ends:
            groups.setdefault(cell_key(r), []).append(math.log(ends[r["name"]]))
    rows, reached = [], 0
    for key in sorted(groups, key=_sort_key):
        logs = groups[key]
        if len(logs) < MIN_SEEDS:
            continue
        iv = mean_interval(logs)
        reached += math.exp(iv.hi) <= CRITICAL_EPS
        rows.append([_cell_label(key), len(logs), f"{math.exp(iv.estimate):.3g}",
                     f"[{math.exp(iv.lo):.3g}, {math.exp(iv.hi):.3g}]"])
    return ["## Is a critical depth reached? The bottom-to-top gradient ratio (headline test)", "",
            "The paper's critical depth is where the gradient reaching the bottom block has faded to "
            f"ε of the top block's: g_0/g_{{D−1}} ≤ ε (ε = {CRITICAL_EPS:g} is its most lenient threshold). "
            "Measured directly from the weight-gradient norms of the end-of-training window, bottom "
            "block included (no fit): "
            f"**{len(vals)} runs, g_0/g_{{D−1}} from {vals[0]:.2g} to {vals[-1]:.2g} (median "
            f"{float(np.median(vals)):.1f}); {sum(v <= CRITICAL_EPS for v in vals)} runs at or below "
            f"{CRITICAL_EPS:g}, {sum(v < 1 for v in vals)} below 1.** In the warm-up window (steps "
            f"{'–'.join(map(str, window_bounds(WARMUP_STEP, WARMUP_WINDOW)))}): from {early[0]:.2g} to "
            f"{early[-1]:.2g} (median {float(np.median(early)):.1f}), "
            f"{sum(v <= CRITICAL_EPS for v in early)} runs at or below {CRITICAL_EPS:g}. "
            f"Per cell with ≥ {MIN_SEEDS} seeds, the geometric mean over seeds and the Student-t 95% "
            f"interval of ln(ratio) (n − 1 df), exponentiated: {reached} of {len(rows)} cells reach ε.", "",
            markdown_table(["cell", "seeds", "g_0/g_{D−1} (geometric mean)", "95% t interval"], rows), ""]


def build(roots, out: Path, *, step: int = DEFAULT_STEP, window: float = DEFAULT_WINDOW,
          expected: list[str] | None = None, command: str = "") -> list[Path]:
    """Write report.md, persistence.csv, cells.csv and the figures for the runs under ``roots``
    (a path or a list of paths)."""
    from depthdelusion.analysis.report import plots

    runs, unfinished = load_study_runs(roots)
    if not runs:
        raise ValueError(f"{', '.join(map(str, roots if isinstance(roots, (list, tuple)) else [roots]))}: "
                         "no finished runs to analyse")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fits = windowed_fits(runs, step, window)  # primary: blocks 1 … D−1
    allb = windowed_fits(runs, step, window, skip_bottom=0)
    by_name = {r["name"]: r for r in runs}
    ratios = {}
    for r in runs:
        if r["profile"] is not None and r["profile"].steps("weight"):
            ratios[r["name"]] = block_ratios(windowed_norms(r["profile"], step, window, "weight")[1])
    files = []
    done = {r["name"] for r in runs}
    missing = [n for n in (expected or []) if n not in done]
    lo, hi = window_bounds(step, window)
    studies = sorted({r["study"] for r in runs})
    multi = len(studies) > 1

    md = [f"# Gradient-persistence study{' — PARTIAL' if missing else ''}", "",
          f"Generated by `{command}`." if command else "", ""]
    if missing:
        md += [f"**PARTIAL**: {len(expected) - len(missing)} of {len(expected)} runs of the grid finished; "
               f"missing: {', '.join(missing)}. Re-run the sweep (it resumes) and then this command.", ""]
    md += [f"Run roots (studies): {', '.join(studies)}; {len(runs)} finished runs.", "",
           f"Windowed protocol: ln g averaged over the logged steps in [{lo}, {hi}] (requested step "
           f"{step}, window ±{window:.0%}); rate = 1/ℓ per layer fitted to ln ḡ_l = b − rate·(D − l) over "
           "**blocks 1 … D−1** (the primary fit: the bottom block, which reads the embedding stream, is "
           "set apart; its ratio g_0/g_1 and the all-block fit are reported beside). rate > 0: decay "
           "towards the input (the paper's Proposition 3.1); rate < 0: growth towards the input. "
           "Per run: 95% CI = moving-block bootstrap over the window's logged steps (blocks of "
           "⌈S^(1/3)⌉ consecutive steps, 400 resamples seeded by the run's name). Per cell (runs that "
           f"differ only by seed): mean over seeds ± t₀.₉₇₅,ₙ₋₁·SD/√n. Verdicts use only cells with ≥ {MIN_SEEDS} "
           "seeds, or say that they rest on single runs.", ""]

    md += critical_depth_lines(runs, ratios)
    md += warmup_lines(runs, fits, step, window)

    # --- per-run table ------------------------------------------------------------------------
    header = (["study"] if multi else []) + [
        "run", "param.", "D", "W", "seed", "loss ± SE", "weight 1…D−1: status", "rate [95% CI]", "ℓ",
        "all blocks: status", "rate [95% CI]", "g_0/g_1", "g_{D−1}/g_{D−2}", "g_1/g_{D−1}",
        "activation 1…D−1: status", "rate [95% CI]", "wall s"]
    md += ["## Per run", ""]
    table, csv_rows = [], []

    def _rate_cells(f, with_length=False):
        if f is None or not np.isfinite(f.rate):
            return ["—", "—"] + (["—"] if with_length else [])
        c = [f.status, f"{f.rate:+.4f} [{f.rate_ci[0]:+.4f}, {f.rate_ci[1]:+.4f}]"]
        return c + ([("—" if f.length is None else f"{f.length:+.3g}")] if with_length else [])

    ordered = sorted(runs, key=lambda r: (r["study"], r["parametrization"], r["width"], r["depth"], r["seed"]))
    for r in ordered:
        fw, fa, fb = (d.get((r["name"], k)) for d, k in ((fits, "weight"), (fits, "activation"), (allb, "weight")))
        rt = ratios.get(r["name"])
        cells_ = ([r["study"]] if multi else []) + [r["name"], r["parametrization"], r["depth"], r["width"],
                                                     r["seed"], f"{r['loss']:.4f} ± {r['loss_se']:.4f}"]
        cells_ += _rate_cells(fw, True) + _rate_cells(fb)
        cells_ += ["—"] * 3 if rt is None else [f"{rt['bottom']:.3g}", f"{rt['top']:.3g}", f"{rt['inner']:.3g}"]
        cells_ += _rate_cells(fa) + [f"{r['wall_time_s']:.0f}"]
        table.append(cells_)
        for kind, f, fall in (("weight", fw, fb), ("activation", fa, allb.get((r["name"], "activation")))):
            if f is None:
                continue
            csv_rows.append({"study": r["study"], "name": r["name"], "parametrization": r["parametrization"],
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
    md += [markdown_table(header, table), ""]
    counts = {name: {st: sum(f.status == st for f in fs.values() if f.kind == "weight")
                     for st in ("decay", "flat", "growth")} for name, fs in (("blocks 1 … D−1", fits),
                                                                            ("all blocks", allb))}
    md += ["Weight-gradient profiles per run, windowed: " + "; ".join(
        f"{name}: {c['decay']} decay, {c['flat']} flat, {c['growth']} growth" for name, c in counts.items())
        + " (single runs; the verdict is per cell, below).", ""]
    warnings = sorted({f.warning for f in fits.values() if f.warning})
    if warnings:
        md += ["Warnings:", *[f"- {w}" for w in warnings], ""]
    if csv_rows:
        files.append(write_csv(out / "persistence.csv", csv_rows[0], csv_rows))

    # --- per-cell table: the interval from the seeds ---------------------------------------------
    iv = {kind: cells(runs, fits, kind) for kind in KINDS}
    iv_all = {kind: cells(runs, allb, kind) for kind in KINDS}
    members: dict = {}
    for r in runs:
        if (r["name"], "weight") in fits:
            members.setdefault(cell_key(r), []).append(fits[(r["name"], "weight")])
    md += ["## Per cell: the rate over seeds", "",
           "Cell = runs that differ only by seed. Weight gradients, blocks 1 … D−1. With ≥ 2 seeds the "
           "95% CI is mean ± t·SD/√n (n − 1 df); with one seed it is the run's moving-block bootstrap "
           f"interval. Cells with fewer than {MIN_SEEDS} seeds are marked and not used by the verdict.", ""]
    table, cell_rows = [], []
    several_lr = len({k[4] for k in iv["weight"]}) > 1  # cells that differ only by lr: say which
    for key, v in iv["weight"].items():
        study, pz, d, w, lr, dt = key
        a, va = iv_all["weight"].get(key), iv["activation"].get(key)
        label = "" if v.enough_seeds else f"< {MIN_SEEDS} seeds"
        table.append(([study] if multi else []) + [
            pz, d, w] + ([f"{lr:.3g}" if lr is not None else "—"] if several_lr else []) + [v.n, _fmt_rate(v.mean), "—" if not np.isfinite(v.sd) else f"{v.sd:.4f}",
            f"{v.half_width:.4f}", f"[{v.lo:+.4f}, {v.hi:+.4f}]", v.status,
            "—" if a is None else f"{a.mean:+.4f} [{a.lo:+.4f}, {a.hi:+.4f}] {a.status}",
            "—" if va is None else f"{va.mean:+.4f} [{va.lo:+.4f}, {va.hi:+.4f}] {va.status}", label])
        cell_rows.append({"study": study, "parametrization": pz, "depth": d, "width": w, "lr": lr, "dtypes": dt,
                          "seeds": v.n, "rate_mean": f"{v.mean:.5f}",
                          "rate_sd": "" if not np.isfinite(v.sd) else f"{v.sd:.5f}",
                          "half_width": f"{v.half_width:.5f}", "rate_lo": f"{v.lo:.5f}", "rate_hi": f"{v.hi:.5f}",
                          "status": v.status, "method": v.method,
                          "all_blocks_mean": "" if a is None else f"{a.mean:.5f}",
                          "all_blocks_status": "" if a is None else a.status,
                          "activation_mean": "" if va is None else f"{va.mean:.5f}",
                          "activation_status": "" if va is None else va.status})
    md += [markdown_table(([ "study"] if multi else []) + [
        "param.", "D", "W"] + (["lr"] if several_lr else []) + ["seeds", "rate mean", "seed SD", "± half-width", "95% CI", "status",
        "all blocks: mean [CI] status", "activation: mean [CI] status", "note"], table), ""]
    if cell_rows:
        files.append(write_csv(out / "cells.csv", list(cell_rows[0]), cell_rows))

    # --- the verdict and its controls -----------------------------------------------------------------
    main, single = verdict_of(iv["weight"])
    md += ["## Verdict (generated) and controls", "",
           f"- **Verdict** (weight gradients, blocks 1 … D−1): {main}.", ""]
    controls = [("activation gradients instead of weight gradients", verdict_of(iv["activation"])[0]),
                ("all blocks (the bottom block left in)", verdict_of(iv_all["weight"])[0])]
    pzs = sorted({k[1] for k in iv["weight"]})
    if len(pzs) > 1:
        for pz in pzs:
            controls.append((f"{pz} only", verdict_of({k: v for k, v in iv["weight"].items() if k[1] == pz})[0]))
    dtype_pairs = _dtype_pairs(iv["weight"])
    for key_a, key_b in dtype_pairs:
        controls.append((f"{_cell_label(key_b)}, dtypes {key_b[5]} instead of {key_a[5]}",
                         f"{iv['weight'][key_a].status} → {iv['weight'][key_b].status}"))
    for name, sentence in controls:
        if "→" in sentence:
            a_, b_ = sentence.split(" → ")
            change = "changes" if a_ != b_ else "does not change"
            md += [f"- Control, {name}: the cell's status {sentence}: {change} the verdict."]
            continue
        change = "does not change" if _verdict_class(sentence) == _verdict_class(main) else "changes"
        md += [f"- Control, {name}: {sentence}: **{change} the verdict**."]
    if not dtype_pairs:
        md += ["- Control, residual-stream dtype: no cells here differ only in compute/residual dtype "
               "(the bfloat16 against float32 measurement is in `docs/persistence.md`, numerics)."]
    # trend statements with and without the bottom block
    md += ["", "Trends of the rate with depth at fixed width (the cells' mean rates strictly monotone "
           "over ≥ 3 depths and the deepest cell's 95% interval clear of the shallowest's), with the "
           "bottom block left out and left in; a trend that does not survive leaving the bottom block "
           "out is withdrawn:", ""]
    table = []
    for study in studies:
        for pz in pzs:
            for w in sorted({k[3] for k in iv["weight"] if k[0] == study and k[1] == pz}):
                sel = [(k, v) for k, v in iv["weight"].items() if k[0] == study and k[1] == pz and k[3] == w]
                lrs = {k[4] for k, _ in sel}
                if len(lrs) > 1:
                    continue  # several lrs at one width: depth is confounded with lr here
                t1 = _trend([(k[2], v) for k, v in sel])
                t0 = _trend([(k[2], iv_all["weight"][k]) for k, _ in sel if k in iv_all["weight"]])
                kept = ("withdrawn (set by the bottom block)" if t0 in ("rises", "falls") and t1 != t0 else
                        "survives" if t0 == t1 and t0 in ("rises", "falls") else
                        "new without the bottom block" if t1 in ("rises", "falls") else "no trend")
                table.append(([study] if multi else []) + [pz, w, t1, t0, kept,
                                                            min(v.n for _, v in sel)])
    if table:
        md += [markdown_table(([ "study"] if multi else []) + [
            "param.", "W", "rate vs D, blocks 1…D−1", "rate vs D, all blocks", "trend", "min seeds"], table), ""]

    # --- the quantitative test against the paper's κ ------------------------------------------------
    md += ["## The quantitative test: the paper's ℓ(W) against the measured one", "",
           f"The paper's D_crit = κ·ln W (κ = {PAPER_KAPPA}) with D_crit = ℓ·ln(1/ε) (the depth at which "
           "g_0/g_D has fallen to ε) implies ℓ(W) = κ·ln W / ln(1/ε). Below: that ℓ for "
           + ", ".join(f"ε = {e:g}" for e in PAPER_EPSILONS) + " beside what the cell's 95% interval on the "
           "rate says about ℓ; 'consistent' when the implied rate 1/ℓ lies inside the interval for at "
           "least one ε.", ""]
    table, per_width = [], {}
    for key, v in iv["weight"].items():
        study, pz, d, w, lr, dt = key
        if not np.isfinite(v.mean):
            continue
        cmp = compare_with_paper(w, v.lo, v.hi)
        ok = any(c for _, c in cmp.values())
        per_width.setdefault((study, w), []).append((key, v, ok))
        table.append(([study] if multi else []) + [pz, d, w, v.n,
                                                    *(f"{cmp[e][0]:.2f}" for e in PAPER_EPSILONS),
                                                    f"[{v.lo:+.4f}, {v.hi:+.4f}]", length_statement(v.lo, v.hi),
                                                    "consistent" if ok else "not consistent"])
    md += [markdown_table(([ "study"] if multi else []) + [
        "param.", "D", "W", "seeds", *(f"paper ℓ, ε={e:g}" for e in PAPER_EPSILONS), "measured rate 95% CI",
        "what it says about ℓ", "vs paper"], table), ""]
    md += ["Per width (one line each):", ""]
    for (study, w), entries in sorted(per_width.items()):
        strong = [e for e in entries if e[1].enough_seeds]
        use, note = (strong, f"{len(strong)} cell(s) with ≥ {MIN_SEEDS} seeds") if strong else (
            entries, f"rests on single runs ({len(entries)} cell(s) with < {MIN_SEEDS} seeds)")
        n_ok = sum(ok for *_, ok in use)
        verdict = ("consistent" if n_ok == len(use) else "not consistent" if n_ok == 0 else
                   f"mixed ({n_ok} of {len(use)} consistent)")
        implied = ", ".join(f"{paper_implied_length(w, e):.2f}" for e in PAPER_EPSILONS)
        md += [f"- {study + ', ' if multi else ''}W = {w}: paper ℓ = {implied} layers (ε = "
               f"{', '.join(f'{e:g}' for e in PAPER_EPSILONS)}); measured: "
               + "; ".join(f"{_cell_label(k)}: {length_statement(v.lo, v.hi)}" for k, v, _ in use)
               + f" — **{verdict}** ({note})."]
    md += ["", f"ℓ ∝ W^{PAPER_PERSISTENCE_EXPONENT} across widths (rate = k·W^−{PAPER_PERSISTENCE_EXPONENT}, "
           "k > 0 for a decay; least squares on the seed rows, k's t interval; the lack-of-fit F of the "
           "width means against the seed scatter, calibrated at 3 seeds; consistent when k's interval is "
           f"above 0 and p ≥ 0.05), per study, parametrization and depth with ≥ 2 widths of ≥ {MIN_SEEDS} seeds:", ""]
    n_tests = 0
    for study in studies:
        for pz in pzs:
            for d in sorted({k[2] for k in iv["weight"] if k[0] == study and k[1] == pz}):
                sel = [(k, v) for k, v in iv["weight"].items() if k[0] == study and k[1] == pz and k[2] == d
                       and np.isfinite(v.mean)]
                use = [(k, v) for k, v in sel if v.enough_seeds]
                if len({k[4] for k, _ in sel}) > 1 or len({k[3] for k, _ in sel}) < 2:
                    continue
                if len({k[3] for k, _ in use}) < 2:
                    md += [f"- {study + ', ' if multi else ''}{pz} D = {d}: not tested (fewer than 2 widths "
                           f"with ≥ {MIN_SEEDS} seeds; a single run's bootstrap is no yardstick for seed scatter)."]
                    continue
                t = power_law_test([k[3] for k, _ in use], [[f.rate for f in members[k]] for k, _ in use])
                n_tests += 1
                basis = f"cells with ≥ {MIN_SEEDS} seeds"
                md += [f"- {study + ', ' if multi else ''}{pz} D = {d} ({basis}): {t.summary()}."]
    if not n_tests:
        md += ["- No study, parametrization and depth has rates at two or more widths."]
    md += [""]

    params = sorted({r["parametrization"] for r in runs})
    # --- when does the profile take its shape ---------------------------------------------------
    tl = timeline(runs)
    if tl:
        md += ["## Rate 1/ℓ over training (weight gradients, blocks 1 … D−1, D ≥ 8, single logged steps)", "",
               "Median rate over the runs of each parametrization and width; in brackets the number "
               "of runs with decay / flat / growth (a single step's t-interval).", ""]
        table = []
        for pz in params:
            for w in sorted({r["width"] for r in tl if r["parametrization"] == pz}):
                cells_ = []
                for t in TIMELINE:
                    sel = [r for r in tl if r["parametrization"] == pz and r["width"] == w
                           and abs(r["step"] - t) <= max(1, t // 10)]
                    if not sel:
                        cells_.append("—")
                        continue
                    n = [sum(r["status"] == s for r in sel) for s in ("decay", "flat", "growth")]
                    cells_.append(f"{np.median([r['rate'] for r in sel]):+.3f} ({n[0]}/{n[1]}/{n[2]})")
                table.append([pz, w, *cells_])
        md += [markdown_table(["param.", "W", *(f"step {t}" for t in TIMELINE)], table), ""]

    # --- ℓ(W) per parametrization -----------------------------------------------------------------
    scalings = {}
    md += ["## ℓ(W), fitted over all runs (blocks 1 … D−1, no selection on decay)", "",
           "Run-level rates weighted by their bootstrap variances; it pools depths and studies, so it "
           "is a summary, not the paper's depth-independent ℓ.", ""]
    for pz in params:
        for kind in KINDS:
            sel = [f for (name, k), f in fits.items() if k == kind and by_name[name]["parametrization"] == pz]
            try:
                sc = persistence_scaling(sel)
                scalings[(pz, kind)] = sc
                md += [f"{pz}, {kind} gradients:", "```", sc.summary(), "```", ""]
            except ValueError as err:
                md += [f"- {pz}, {kind} gradients: not fitted: {err}", ""]

    # --- loss vs depth, optimal depth ------------------------------------------------------------
    groups: dict = {}
    for r in runs:
        groups.setdefault(cell_key(r), []).append(r)
    loss_rows = []
    md += ["## Loss against depth and the loss-optimal depth", "",
           "Final loss = mean over the last 10% of tokens (nats/byte). Table: mean ± SD over seeds where "
           "the shape was repeated, else the run's ± SE over its evaluation; figure error bars: the run's "
           "SE, or the SE over seeds.", ""]
    table = []
    for (study, pz, lr, dt) in sorted({(k[0], k[1], k[4], k[5]) for k in groups}, key=_sort_key):
        depths = sorted({k[2] for k in groups if (k[0], k[1], k[4], k[5]) == (study, pz, lr, dt)})
        for w in sorted({k[3] for k in groups if (k[0], k[1], k[4], k[5]) == (study, pz, lr, dt)}):
            cells_, best = [], None
            for d in depths:
                rs = groups.get((study, pz, d, w, lr, dt))
                if not rs:
                    cells_.append(f"D={d}: —")
                    continue
                if len(rs) > 1:
                    m, se = _mean_se([r["loss"] for r in rs])
                    cells_.append(f"D={d}: {m:.4f} ± {se * math.sqrt(len(rs)):.4f} SD ({len(rs)} seeds)")
                else:
                    m, se = rs[0]["loss"], rs[0]["loss_se"]
                    cells_.append(f"D={d}: {m:.4f} ± {rs[0]['loss_se']:.4f}")
                if study == studies[0] and len({(k[4], k[5]) for k in groups if k[0] == study}) == 1:
                    loss_rows.append({"label": pz, "width": w, "depth": d, "loss": m, "se": se})
                if best is None or m < best[1]:
                    best = (d, m)
            table.append(([study] if multi else []) + [pz, w, "; ".join(cells_), best[0] if best else "—",
                                                        f"{PAPER_KAPPA * math.log(w):.1f}"])
    md += [markdown_table(([ "study"] if multi else []) + [
        "param.", "W", "loss per depth", "best D", f"paper D_crit = {PAPER_KAPPA}·ln W"], table), ""]

    # --- wall time -----------------------------------------------------------------------------------
    total = sum(r["wall_time_s"] for r in runs)
    md += ["## Wall time", "", f"{len(runs)} finished runs, {total / 60:.0f} min of training in all "
           f"(per run in the table above; times vary with the machine's load).", ""]
    if unfinished:
        md += [f"Not finished (started or not started): {', '.join(sorted(set(unfinished)))}.", ""]

    # --- figures ---------------------------------------------------------------------------------------
    figs = []
    main_seed = _main_seed(runs)
    for pz in params:
        by_width: dict = {}
        for r in runs:
            f = fits.get((r["name"], "weight"))
            if r["parametrization"] != pz or f is None or r["seed"] != main_seed or r["study"] != studies[0]:
                continue
            table = r["profile"].weight
            g = np.exp(np.mean([np.log(table[s]) for s in f.steps], axis=0))
            by_width.setdefault(r["width"], []).append((r["depth"], g, f))
        if by_width:
            name = f"gradient_profiles_{pz}.png"
            files.append(plots.gradient_profile_panels(
                by_width, out / name, title=f"{pz}: weight-gradient profiles (all blocks drawn; the fit "
                f"uses 1 … D−1), ln g averaged over steps {lo}–{hi}"))
            figs.append(name)
        if (pz, "weight") in scalings:
            name = f"persistence_scaling_{pz}.png"
            files.append(plots.persistence_scaling(scalings[(pz, "weight")], out / name))
            figs.append(name)
    bottom = [(r["parametrization"], r["depth"], r["width"], ratios[r["name"]]["bottom"])
              for r in runs if r["name"] in ratios and r["study"] == studies[0]]
    if bottom:
        files.append(bottom_block_figure(bottom, out / "bottom_block.png"))
        figs.append("bottom_block.png")
        md += ["## The bottom block", "",
               "Under pre-LN every block's LayerNorm divides the gradient it passes down by the norm "
               "of its input stream; the stream entering the bottom blocks is the token embedding "
               "alone, far smaller than the stream after blocks have added to it, so the bottom "
               "block's gradient stands out from the rest of the stack (`bottom_block.png`: "
               "g_0/g_1 per run, geometric means over seeds). A fit that includes it reports that one "
               "step, divided by D − 1 layers, as 'growth'.", ""]
    if loss_rows:
        files.append(plots.loss_vs_depth_errorbars(loss_rows, out / "loss_vs_depth.png",
                                                   title="Final loss vs depth per width (sp: solid, completep: dashed)"))
        figs.append("loss_vs_depth.png")
    md += ["## Figures", "", *[f"![{f}]({f})" for f in figs], ""]
    (out / "report.md").write_text("\n".join(md) + "\n")
    files.append(out / "report.md")
    return files


def _dtype_pairs(intervals: dict) -> list[tuple]:
    """Pairs of cells that differ only in their compute/residual dtypes."""
    keys = sorted(intervals, key=_sort_key)
    return [(a, b) for i, a in enumerate(keys) for b in keys[i + 1:] if a[:5] == b[:5] and a[5] != b[5]]


def bottom_block_figure(rows: list, path: Path) -> Path:
    """g_0/g_1 against depth, one line per (parametrization, width); geometric mean over seeds."""
    from depthdelusion.analysis.report import plots

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


def _main_seed(runs) -> int:
    """The seed every shape was run with (the most common one)."""
    seeds = [r["seed"] for r in runs]
    return max(set(seeds), key=seeds.count)


def run_command(*, runs: list[str] | str, out: str, step: int = DEFAULT_STEP, window: float = DEFAULT_WINDOW,
                grid: list[str] | str | None = None) -> int:
    """`depthdelusion persistence-study` (the parser is `depthdelusion.cli`)."""
    import shlex
    import sys

    expected = None
    if grid:
        from depthdelusion.sweep import load_grid

        # grids that share runs (the width grid repeats the depth grid's cells) list them once
        expected = list(dict.fromkeys(name for g in ([grid] if isinstance(grid, str) else grid)
                                      for name, _ in load_grid(g).runs))
    roots = [runs] if isinstance(runs, str) else list(runs)
    with rundir.local_dir(out) as local_out:  # a gs:// OUT: drawn here, then copied up
        files = build(roots, local_out, step=step, window=window, expected=expected,
                      command="depthdelusion " + shlex.join(sys.argv[1:]))
    print(f"wrote {len(files)} files to {out}")
    return 0
