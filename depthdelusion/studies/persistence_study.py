"""`depthdelusion persistence-study RUNS --out DIR`: the tables and figures of the gradient-
persistence study (runs trained by `depthdelusion sweep experiments/persistence_study.yaml`).

Per run: the windowed rate 1/ℓ around the requested step (`analysis/persistence.py`) for
weight and activation gradients, and the rate at every logged step (when the decay appears).
Per parametrization: ℓ(W) over all runs (power law vs log form), the loss-optimal depth per
width against the paper's D_crit ≈ κ·ln W, and seed-to-seed spreads where seeds repeat.
JAX-free: reads run directories only.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from depthdelusion import rundir
from depthdelusion.analysis.persistence import (DEFAULT_STEP, DEFAULT_WINDOW, persistence_length,
                                                persistence_scaling, window_bounds, windowed_fit)
from depthdelusion.analysis.reference import PAPER_KAPPA
from depthdelusion.analysis.runs import read_gradient_profile
from depthdelusion.analysis.tables import markdown_table, write_csv

TIMELINE = (1, 25, 50, 100, 200, 400, 600, 800, 1000)  # steps at which the rate is tabulated


def load_study_runs(root: Path) -> tuple[list[dict], list[str]]:
    """Finished runs under ``root`` with their shape, parametrization, seed, loss and profile;
    and the names of the run directories that are not finished."""
    runs, unfinished = [], []
    for run in sorted(Path(root).iterdir()) if Path(root).is_dir() else ():
        summary = rundir.read_summary(run) if run.is_dir() and run.name != "report" else None
        if summary is None or summary.get("status") != "finished":
            unfinished += [run.name] if run.is_dir() and run.name != "report" else []
            continue
        cfg = rundir.read_config_dict(run)
        model = summary["model"]
        profile = read_gradient_profile(run, int(model["depth"]))
        runs.append({"name": run.name, "parametrization": model.get("parametrization", "sp"),
                     "depth": int(model["depth"]), "width": int(model["width"]),
                     "seed": int(cfg["train"]["seed"]), "data_seed": int(cfg["data"]["seed"]),
                     "loss": float(summary["final_loss"]), "loss_se": float(summary["final_loss_se"]),
                     "eval_loss": summary.get("eval_loss"), "params": int(summary["params"]),
                     "steps": int(summary["steps"]), "wall_time_s": float(summary["wall_time_s"]),
                     "profile": profile})
    return runs, unfinished


def windowed_fits(runs: list[dict], step: int, window: float, skip_bottom: int = 0) -> dict:
    """{(name, kind): PersistenceFit} with the windowed protocol; ``skip_bottom`` drops that many
    blocks nearest the input (a robustness check: is the profile set by the bottom block alone?)."""
    out = {}
    for i, r in enumerate(runs):
        for kind in ("weight", "activation"):
            if r["profile"] is None or not r["profile"].steps(kind):
                continue
            out[(r["name"], kind)] = windowed_fit(r["profile"], step=step, window=window, kind=kind,
                                                  name=r["name"], width=r["width"], seed=i,
                                                  skip_bottom=skip_bottom)
    return out


def timeline(runs: list[dict], kind: str = "weight") -> list[dict]:
    """The rate at each step of TIMELINE (the nearest logged step) for every run with D ≥ 8."""
    rows = []
    for r in runs:
        if r["profile"] is None or r["depth"] < 8:
            continue
        for t in TIMELINE:
            used, g = r["profile"].nearest(t, kind)
            f = persistence_length(g, name=r["name"], width=r["width"], kind=kind, step=used)
            rows.append({"name": r["name"], "parametrization": r["parametrization"], "depth": r["depth"],
                         "width": r["width"], "step": used, "rate": f.rate, "status": f.status})
    return rows


def _seed_groups(runs):
    groups: dict = {}
    for r in runs:
        groups.setdefault((r["parametrization"], r["depth"], r["width"]), []).append(r)
    return groups


def _mean_se(values):
    v = np.asarray(values, float)
    return float(v.mean()), (float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan)


def build(root: Path, out: Path, *, step: int = DEFAULT_STEP, window: float = DEFAULT_WINDOW,
          expected: list[str] | None = None, command: str = "") -> list[Path]:
    from depthdelusion.analysis import plots

    start = time.perf_counter()
    runs, unfinished = load_study_runs(root)
    if not runs:
        raise ValueError(f"{root}: no finished runs to analyse")
    out.mkdir(parents=True, exist_ok=True)
    fits = windowed_fits(runs, step, window)
    above = windowed_fits(runs, step, window, skip_bottom=1)
    files = []
    done = {r["name"] for r in runs}
    missing = [n for n in (expected or []) if n not in done]
    partial = bool(missing)
    lo, hi = window_bounds(step, window)

    md = [f"# Gradient-persistence study{' — PARTIAL' if partial else ''}", "",
          f"Generated by `{command}`." if command else "", ""]
    if partial:
        md += [f"**PARTIAL**: {len(done)} of {len(expected)} runs finished; missing: "
               f"{', '.join(missing)}. Re-run the sweep (it resumes) and then this command.", ""]
    md += [f"Windowed protocol: ln g averaged over the logged steps in [{lo}, {hi}] (requested step "
           f"{step}, window ±{window:.0%}); rate = 1/ℓ per layer fitted to ln ḡ_l = b − rate·(D − l); "
           "95% CI = percentile bootstrap over the window's steps. rate > 0: decay towards the input "
           "(the paper's Proposition 3.1); rate < 0: growth towards the input.", ""]

    # --- per-run table ------------------------------------------------------------------------
    header = ["run", "param.", "D", "W", "seed", "loss ± SE", "weight: status", "rate 1/ℓ [95% CI]",
              "ℓ", "activation: status", "rate 1/ℓ [95% CI]", "weight, bottom block left out",
              "g_0/g_D", "wall s"]
    md += ["## Per run", ""]
    table, csv_rows = [], []
    for r in sorted(runs, key=lambda r: (r["parametrization"], r["width"], r["depth"], r["seed"])):
        fw, fa = fits.get((r["name"], "weight")), fits.get((r["name"], "activation"))
        g = r["profile"].nearest(step, "weight")[1] if r["profile"] else None
        cells = [r["name"], r["parametrization"], r["depth"], r["width"], r["seed"],
                 f"{r['loss']:.4f} ± {r['loss_se']:.4f}"]
        for f in (fw, fa):
            if f is None or not np.isfinite(f.rate):
                cells += ["—", "—"] + (["—"] if f is fw else [])
                continue
            cells += [f.status, f"{f.rate:+.4f} [{f.rate_ci[0]:+.4f}, {f.rate_ci[1]:+.4f}]"]
            if f is fw:
                cells.append("—" if f.length is None else f"{f.length:+.3g}")
        fb = above.get((r["name"], "weight"))
        cells.append("—" if fb is None or not np.isfinite(fb.rate) else
                     f"{fb.status} {fb.rate:+.4f} [{fb.rate_ci[0]:+.4f}, {fb.rate_ci[1]:+.4f}]")
        cells += ["—" if g is None else f"{g[0] / g[-1]:.3g}", f"{r['wall_time_s']:.0f}"]
        table.append(cells)
        for kind, f in (("weight", fw), ("activation", fa)):
            if f is not None:
                csv_rows.append({"name": r["name"], "parametrization": r["parametrization"],
                                 "depth": r["depth"], "width": r["width"], "seed": r["seed"],
                                 "loss": f"{r['loss']:.5f}", "loss_se": f"{r['loss_se']:.5f}", "kind": kind,
                                 "steps_used": f"{f.steps[0]}-{f.steps[-1]} ({len(f.steps)})",
                                 "status": f.status, "rate": f"{f.rate:.5f}", "rate_lo": f"{f.rate_ci[0]:.5f}",
                                 "rate_hi": f"{f.rate_ci[1]:.5f}", "wall_time_s": f"{r['wall_time_s']:.0f}"})
    md += [markdown_table(header, table), ""]
    counts = {name: {st: sum(f.status == st for f in fs.values() if f.kind == "weight")
                     for st in ("decay", "flat", "growth")} for name, fs in (("all blocks", fits),
                                                                            ("bottom block left out", above))}
    md += ["Weight-gradient profiles, windowed: " + "; ".join(
        f"{name}: {c['decay']} decay, {c['flat']} flat, {c['growth']} growth" for name, c in counts.items()) + ".", ""]
    warnings = sorted({f.warning for f in fits.values() if f.warning})
    if warnings:
        md += ["Warnings:", *[f"- {w}" for w in warnings], ""]
    if csv_rows:
        files.append(write_csv(out / "persistence.csv", csv_rows[0], csv_rows))

    params = sorted({r["parametrization"] for r in runs})
    # --- when does the profile take its shape ---------------------------------------------------
    tl = timeline(runs)
    if tl:
        md += ["## Rate 1/ℓ over training (weight gradients, D ≥ 8, single logged steps)", "",
               "Median rate over the runs of each parametrization and width; in brackets the number "
               "of runs with decay / flat / growth.", ""]
        table = []
        for pz in params:
            for w in sorted({r["width"] for r in tl if r["parametrization"] == pz}):
                cells = []
                for t in TIMELINE:
                    sel = [r for r in tl if r["parametrization"] == pz and r["width"] == w
                           and abs(r["step"] - t) <= max(1, t // 10)]
                    if not sel:
                        cells.append("—")
                        continue
                    n = [sum(r["status"] == s for r in sel) for s in ("decay", "flat", "growth")]
                    cells.append(f"{np.median([r['rate'] for r in sel]):+.3f} ({n[0]}/{n[1]}/{n[2]})")
                table.append([pz, w, *cells])
        md += [markdown_table(["param.", "W", *(f"step {t}" for t in TIMELINE)], table), ""]

    # --- ℓ(W) per parametrization -----------------------------------------------------------------
    scalings = {}
    md += ["## ℓ(W), fitted over all runs (no selection on decay)", ""]
    for pz in params:
        for kind in ("weight", "activation"):
            sel = [f for (name, k), f in fits.items() if k == kind and
                   next(r for r in runs if r["name"] == name)["parametrization"] == pz]
            try:
                sc = persistence_scaling(sel)
                scalings[(pz, kind)] = sc
                md += [f"{pz}, {kind} gradients:", "```", sc.summary(), "```", ""]
            except ValueError as err:
                md += [f"- {pz}, {kind} gradients: not fitted: {err}", ""]

    # --- loss vs depth, optimal depth ------------------------------------------------------------
    groups = _seed_groups(runs)
    loss_rows = []
    md += ["## Loss against depth and the loss-optimal depth", "",
           "Final loss = mean over the last 10% of tokens (nats/byte). Error bars: the run's SE, or "
           "the SE over seeds where the shape was repeated.", ""]
    depths, table = sorted({r["depth"] for r in runs}), []
    for pz in params:
        for w in sorted({r["width"] for r in runs if r["parametrization"] == pz}):
            cells, best = [], None
            for d in depths:
                rs = groups.get((pz, d, w))
                if not rs:
                    cells.append("—")
                    continue
                if len(rs) > 1:
                    m, se = _mean_se([r["loss"] for r in rs])
                    cells.append(f"{m:.4f} ± {se:.4f} ({len(rs)} seeds)")
                else:
                    m, se = rs[0]["loss"], rs[0]["loss_se"]
                    cells.append(f"{m:.4f} ± {se:.4f}")
                loss_rows.append({"label": pz, "width": w, "depth": d, "loss": m, "se": se})
                if best is None or m < best[1]:
                    best = (d, m)
            table.append([pz, w, *cells, best[0] if best else "—", f"{PAPER_KAPPA * math.log(w):.1f}"])
    md += [markdown_table(["param.", "W", *(f"D={d}" for d in depths), "best D",
                           f"paper D_crit = {PAPER_KAPPA}·ln W"], table), ""]

    # --- seeds -------------------------------------------------------------------------------------
    repeated = {k: v for k, v in groups.items() if len(v) > 1}
    if repeated:
        md += ["## Seed-to-seed spread (init and data order)", ""]
        table = []
        for (pz, d, w), rs in sorted(repeated.items()):
            lm, ls = _mean_se([r["loss"] for r in rs])
            rates = [fits[(r["name"], "weight")].rate for r in rs if (r["name"], "weight") in fits]
            rm, rse = _mean_se(rates) if rates else (math.nan, math.nan)
            st = ", ".join(fits[(r["name"], "weight")].status for r in rs if (r["name"], "weight") in fits)
            table.append([pz, d, w, ", ".join(str(r["seed"]) for r in rs), f"{lm:.4f} ± {ls:.4f}",
                          f"{rm:+.4f} ± {rse:.4f}", st])
        md += [markdown_table(["param.", "D", "W", "seeds", "loss mean ± SE", "weight rate mean ± SE",
                               "statuses"], table), ""]

    # --- wall time -----------------------------------------------------------------------------------
    total = sum(r["wall_time_s"] for r in runs)
    md += ["## Wall time", "", f"{len(runs)} finished runs, {total / 60:.0f} min of training in all "
           f"(per run in the table above; 2-core CPU shared with other jobs, so times vary with load).", ""]
    if unfinished:
        md += [f"Not finished (started or not started): {', '.join(sorted(set(unfinished)))}.", ""]

    # --- figures ---------------------------------------------------------------------------------------
    figs = []
    for pz in params:
        by_width: dict = {}
        for r in runs:
            f = fits.get((r["name"], "weight"))
            if r["parametrization"] != pz or f is None or r["seed"] != _main_seed(runs):
                continue
            table = r["profile"].weight
            g = np.exp(np.mean([np.log(table[s]) for s in f.steps], axis=0))
            by_width.setdefault(r["width"], []).append((r["depth"], g, f))
        if by_width:
            name = f"gradient_profiles_{pz}.png"
            files.append(plots.gradient_profile_panels(
                by_width, out / name, title=f"{pz}: weight-gradient profiles, ln g averaged over steps {lo}–{hi}"))
            figs.append(name)
        if (pz, "weight") in scalings:
            name = f"persistence_scaling_{pz}.png"
            files.append(plots.persistence_scaling(scalings[(pz, "weight")], out / name))
            figs.append(name)
    if loss_rows:
        files.append(plots.loss_vs_depth_errorbars(loss_rows, out / "loss_vs_depth.png",
                                                   title="Final loss vs depth per width (sp: solid, completep: dashed)"))
        figs.append("loss_vs_depth.png")
    md += ["## Figures", "", *[f"![{f}]({f})" for f in figs], ""]
    md += [f"(Analysis took {time.perf_counter() - start:.0f} s.)", ""]
    (out / "report.md").write_text("\n".join(md) + "\n")
    files.append(out / "report.md")
    return files


def _main_seed(runs) -> int:
    """The seed every shape was run with (the most common one)."""
    seeds = [r["seed"] for r in runs]
    return max(set(seeds), key=seeds.count)


def run_command(*, runs: str, out: str, step: int = DEFAULT_STEP, window: float = DEFAULT_WINDOW,
                grid: str | None = None) -> int:
    """`depthdelusion persistence-study` (the parser is `depthdelusion.cli`)."""
    import shlex
    import sys

    expected = None
    if grid:
        from depthdelusion.sweep import load_grid

        expected = [name for name, _ in load_grid(grid).runs]
    files = build(Path(runs), Path(out), step=step, window=window, expected=expected,
                  command="depthdelusion " + shlex.join(sys.argv[1:]))
    print(f"wrote {len(files)} files to {out}")
    return 0
