"""The depth-vs-size study's report: per level and arm, the loss of every shape over the test
seeds with its Student-t interval, Welch and paired-t intervals on the differences between
neighbouring shapes (in depth order), which shapes are worse than a neighbour beyond the seed noise, the
laws with the calibrated kink-vs-smooth test (`depth_confound_laws`), the lr grids, and a figure.
Works on a partial study (labelled partial): only cells with every test seed finished are
compared. Also the `depth-vs-size` command (train, then report)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

from depthdelusion.studies import depth_vs_size as dvs
from depthdelusion.studies import planned_runs
from depthdelusion.studies.spec import load_spec

ARMS = (("SP", "sp", "SP, lr tuned per shape on the tuning seed"),
        ("CompleteP", "completep", "CompleteP, lr tuned at the level's base shape and transferred"))
COMMAND = "python -m depthdelusion depth-vs-size {source} --out {out}"


class Cell(NamedTuple):
    level: int
    arm: str
    shape: dict  # width, depth, params (non-embedding), steps, tokens
    lr: float | None
    losses: tuple[float, ...]  # finished test seeds (inf: diverged)

    @property
    def complete(self) -> bool:
        return self.lr is not None and len(self.losses) > 0 and all(math.isfinite(x) for x in self.losses)


def cells(exp: dvs.DepthVsSizeSpec, losses: dict[str, float]) -> list[Cell]:
    out = []
    for i, level in enumerate(exp.resolved_levels):
        for arm, p, _ in ARMS:
            for s in level["shapes"]:
                w, d = s["width"], s["depth"]
                lr = dvs.tuned_lr(exp, losses, p, w, d)
                got = () if lr is None else tuple(
                    losses[n] for n in (dvs.run(exp, p, w, d, lr, seed).name for seed in exp.seeds) if n in losses)
                out.append(Cell(i + 1, arm, s, lr, got))
    return out


def neighbour_rows(group: list[Cell], n_seeds: int) -> list[dict]:
    """One row per cell of a level's arm (depth order): mean with its t interval, and the
    difference to the next deeper shape by Welch's interval ("welch") and by the paired t over
    seeds ("paired": a seed draws the corpus and the held-out batches, which may move every
    shape alike); only cells with all `n_seeds` finished are compared."""
    from depthdelusion.analysis.fitting.seed_intervals import (
        mean_interval,
        paired_interval,
        welch_interval,
    )

    full = [c.complete and len(c.losses) == n_seeds for c in group]
    rows = []
    for k, c in enumerate(group):
        both = full[k] and k + 1 < len(group) and full[k + 1]
        nxt = group[k + 1].losses if both else None
        rows.append({"cell": c, "mean": mean_interval(c.losses) if full[k] else None,
                     "welch": welch_interval(c.losses, nxt) if both else None,
                     "paired": paired_interval(c.losses, nxt) if both else None})
    return rows


METHODS = (("welch", "Welch"), ("paired", "paired t"))


def worse_than_neighbours(rows: list[dict], key: str = "welch") -> list[str]:
    """Sentences: each shape whose loss exceeds a neighbour's beyond the seed noise (the 95%
    interval of the difference by `key`, "welch" or "paired", excludes 0), and whether it
    exceeds both of its neighbours."""
    out = []
    for k, r in enumerate(rows):
        c = r["cell"]
        sides = []
        if k > 0 and rows[k - 1][key] is not None:
            d = rows[k - 1][key]  # (shallower − this)
            sides.append(("shallower", -d.estimate, -d.hi, -d.lo))
        if r[key] is not None:
            d = r[key]
            sides.append(("deeper", d.estimate, d.lo, d.hi))
        worse = [s for s in sides if s[2] > 0]
        if worse:
            whom = " and ".join(f"its {s[0]} neighbour by {s[1]:.4f} [{s[2]:.4f}, {s[3]:.4f}]" for s in worse)
            every = len(worse) == len(sides) and len(sides) == 2
            out.append(f"{c.shape['width']}×{c.shape['depth']} is worse than {whom}"
                       + (" — worse than both neighbours: a bump no bowl in the aspect ratio makes" if every else ""))
    return out


def law_results(exp: dvs.DepthVsSizeSpec, all_cells: list[Cell], *, seed: int = 0) -> list:
    """Per arm, the laws of `depth_confound_laws` fitted to every test seed of every complete
    cell over all levels, N = non-embedding parameters. T = tokens_per_param · N at every cell,
    so the capacity term A·N^−α carries the data term too (no separate T term). Each seed's
    shared effect on a level (its corpus and held-out batches may move every shape alike) is
    removed first:
    a row is its loss minus its seed's mean over the level's complete cells plus the level's
    mean (`seed_centred`)."""
    from depthdelusion.studies import depth_confound_laws as laws

    replicates = exp.law_replicates
    out = []
    for arm, _, _ in ARMS:
        got = [c for c in all_cells if c.arm == arm and c.complete and len(c.losses) == len(exp.seeds)]
        records = [{"name": f"{arm}_w{c.shape['width']}_d{c.shape['depth']}_s{k}", "depth": c.shape["depth"],
                    "width": c.shape["width"], "params": c.shape["params"], "loss": x}
                   for c, xs in seed_centred(got) for k, x in enumerate(xs)]
        out.append(laws.fit_arm(arm, records, 0, replicates=replicates, seed=seed))
    return out


def seed_centred(got: list[Cell]) -> list[tuple[Cell, list[float]]]:
    """(cell, its losses with each seed's level effect removed): x − mean over the level's cells
    at that seed + the level's grand mean. Cells hold their seeds in one order (complete cells)."""
    out = []
    for level in sorted({c.level for c in got}):
        cells_ = [c for c in got if c.level == level]
        n = len(cells_[0].losses)
        seed_mean = [sum(c.losses[k] for c in cells_) / len(cells_) for k in range(n)]
        grand = sum(seed_mean) / n
        out += [(c, [x - seed_mean[k] + grand for k, x in enumerate(c.losses)]) for c in cells_]
    return out


def lr_rows(exp: dvs.DepthVsSizeSpec, losses: dict[str, float], sigma: float | None, dof: int | None) -> list[dict]:
    """Per shape, SP's grid on the tuning seed, the lr chosen and the fitted optimum (Fieller's
    95% interval with the seed noise σ of the test seeds)."""
    from depthdelusion.studies.lr_grid import fit_lr_curve

    rows = []
    for i, level in enumerate(exp.resolved_levels):
        for s in level["shapes"]:
            w, d = s["width"], s["depth"]
            lrs, settled = dvs.grid(exp, losses, w, d)
            names = [dvs.run(exp, "sp", w, d, lr, exp.tuning_seed).name for lr in lrs]
            curve = [(lr, losses[n]) for lr, n in zip(lrs, names) if n in losses]
            if not curve:
                continue
            fit = fit_lr_curve(curve, sigma, dof)
            rows.append({"level": i + 1, "width": w, "depth": d, "settled": settled,
                         "lrs": " ".join(f"{lr:g}" for lr, _ in curve),
                         "losses": " ".join(f"{y:.4f}" for _, y in curve),
                         "chosen_lr": dvs.tuned_lr(exp, losses, "sp", w, d),
                         "fit_lr": math.exp(fit.log_lr) if fit.identified else math.nan,
                         "fit_lr_lo": math.exp(fit.log_lr_ci[0]) if fit.identified else math.nan,
                         "fit_lr_hi": math.exp(fit.log_lr_ci[1]) if fit.identified else math.nan,
                         "note": fit.note if settled else "grid not settled yet"})
    return rows


def _ci(m, digits: int = 4) -> str:
    if m is None or not math.isfinite(m.estimate):
        return "–"
    if not math.isfinite(m.lo):
        return f"{m.estimate:.{digits}f}"
    return f"{m.estimate:.{digits}f} [{m.lo:.{digits}f}, {m.hi:.{digits}f}]"


def _cell_text(row: dict) -> str:
    c = row["cell"]
    diverged = sum(1 for x in c.losses if not math.isfinite(x))
    text = f"diverged at {diverged} of {len(c.losses)} seeds" if diverged else _ci(row["mean"])
    return text + (f" (lr {c.lr:g})" if c.lr else "")


def point_rows(groups: dict, n_seeds: int) -> list[dict]:
    """points.csv: one row per level × arm × shape."""
    out = []
    for (level, arm), rows in groups.items():
        for r in rows:
            c, m, d, q = r["cell"], r["mean"], r["welch"], r["paired"]
            s = c.shape
            out.append({"level": level, "arm": arm, "width": s["width"], "depth": s["depth"],
                        "aspect_w_over_d": f"{s['width'] / s['depth']:.3g}", "params_nonemb": s["params"],
                        "steps": s["steps"], "tokens": s["tokens"], "lr": "" if c.lr is None else f"{c.lr:g}",
                        "seeds": len(c.losses), "of": n_seeds,
                        "losses": " ".join(f"{x:.4f}" for x in c.losses),
                        "mean": f"{m.estimate:.4f}" if m else "", "t95_lo": f"{m.lo:.4f}" if m else "",
                        "t95_hi": f"{m.hi:.4f}" if m else "",
                        "minus_next_deeper": f"{d.estimate:.4f}" if d else "",
                        "welch95_lo": f"{d.lo:.4f}" if d else "", "welch95_hi": f"{d.hi:.4f}" if d else "",
                        "paired95_lo": f"{q.lo:.4f}" if q else "", "paired95_hi": f"{q.hi:.4f}" if q else ""})
    return out


def level_lines(exp: dvs.DepthVsSizeSpec, groups: dict) -> list[str]:
    """Per level: a table of every arm's loss against depth and the neighbour verdicts."""
    from depthdelusion.analysis.formats.table_text import markdown_table

    lines = []
    for i, level in enumerate(exp.resolved_levels):
        shapes = level["shapes"]
        mid = sorted(s["params"] for s in shapes)[len(shapes) // 2]
        lines += [f"### Level {i + 1}: N ≈ {mid:,} non-embedding parameters, T ≈ {exp.tokens_per_param:g} N", ""]
        header = ["arm"] + [f"{s['width']}×{s['depth']}" for s in shapes]
        table = [["N (non-emb.) / steps / tokens"] + [f"{s['params']:,} / {s['steps']} / {s['tokens']:,}" for s in shapes]]
        for arm, _, _ in ARMS:
            rows = groups[(i + 1, arm)]
            table.append([f"{arm}: loss [t 95%]"] + [_cell_text(r) for r in rows])
            for key, name in METHODS:
                table.append([f"{arm}: this − next deeper [{name} 95%]"] + [_ci(r[key]) for r in rows])
        lines += [markdown_table(header, table), ""]
        for arm, _, _ in ARMS:
            rows = groups[(i + 1, arm)]
            compared = sum(1 for r in rows if r["mean"] is not None)
            if compared < 2:
                lines += [f"- {arm}: fewer than 2 shapes with every test seed finished: not compared yet.", ""]
                continue
            for key, name in METHODS:
                found = worse_than_neighbours(rows, key)
                lines += [f"- {arm}, {name} ({compared} of {len(rows)} shapes complete): "
                          + ("; ".join(found) + "." if found else
                             f"no shape is worse than a neighbour beyond the seed noise (every {name} 95% "
                             "interval of a neighbouring difference includes 0 or favours the shape).")]
            lines += [""]
    return lines


def write_report(exp: dvs.DepthVsSizeSpec, source: str, out: Path, seed: int = 0) -> Path:
    """report.md, points.csv, lr_curves.csv, laws.csv and loss_vs_depth.png from the finished
    runs in OUT/runs (OUT local or gs://; the figure drawn locally)."""
    from depthdelusion import rundir
    from depthdelusion.analysis.formats.table_text import Table
    from depthdelusion.studies import depth_confound as dc
    from depthdelusion.studies import depth_confound_laws as laws

    out = rundir.as_path(out)
    losses, summaries = planned_runs.results(exp.metric, out / "runs")
    got = cells(exp, losses)
    n_seeds = len(exp.seeds)
    groups = {(i + 1, arm): neighbour_rows([c for c in got if c.level == i + 1 and c.arm == arm], n_seeds)
              for i in range(len(exp.resolved_levels)) for arm, _, _ in ARMS}
    sigma, dof = dc.seed_noise([dc.Point(c.arm, c.shape["width"], c.shape["depth"], None, c.lr, c.losses)
                                for c in got if c.arm == "SP"])
    curves = lr_rows(exp, losses, sigma, dof)
    fitted = law_results(exp, got, seed=seed)
    todo = [r for r in dvs.plan(exp, losses) if r.name not in losses]
    done = sum(1 for r in dvs.plan(exp, losses) if r.name in losses)
    wall = sum(float(s.get("wall_time_s") or 0) for s in summaries.values())

    def csv(name: str, rows: list[dict]) -> None:
        if rows:
            (out / f"{name}.csv").write_text(Table(name, "", list(rows[0]), [
                [f"{v:.5g}" if isinstance(v, float) else v for v in r.values()] for r in rows]).csv())
    csv("points", point_rows(groups, n_seeds))
    csv("lr_curves", curves)
    csv("laws", laws.csv_rows(fitted))
    with rundir.local_dir(out) as local_out:
        plot(exp, groups, local_out / "loss_vs_depth.png")
    lines = header_lines(exp, source, out, done, todo, wall, len(summaries))
    lines += ["## Loss against depth at fixed N and T", "",
              f"Mean over the test seeds {exp.seeds} with its Student-t 95% interval (n − 1 dof). The "
              "difference to the next deeper shape twice: Welch's 95% interval (unequal variances, "
              "unpaired) and the paired t interval of the seed-by-seed differences (n − 1 dof). A seed "
              "draws the corpus and the held-out batches, which may move every shape at that seed alike: "
              "the paired interval removes such a shared effect, Welch's counts it as noise. A shape "
              "is 'worse than a neighbour beyond the seed noise' when the interval excludes 0; the "
              "comparisons are not corrected for multiplicity.", ""]
    lines += level_lines(exp, groups)
    lines += laws.report_lines(fitted, setting=(
        "rows are seed-centred: each loss minus its seed's mean over the level's complete cells plus the "
        "level's mean, which removes a seed's shared effect (its corpus and held-out batches), if any, and "
        "leaves n − 1 free values per seed and level (a slight negative correlation the bootstrap "
        "ignores); N = non-embedding parameters (the study's design variable); T = "
        f"{exp.tokens_per_param:g} N at every cell, so the capacity term carries the data term"))
    lines += lr_lines(exp, curves, sigma, dof)
    lines += planned_runs.not_finished_lines(todo)
    report = out / "report.md"
    report.write_text("\n".join(lines))
    return report


def header_lines(exp: dvs.DepthVsSizeSpec, source: str, out: Path, done: int, todo: list, wall: float, runs: int) -> list[str]:
    t = exp.base["train"]
    lines = ["# Depth against size: loss at fixed non-embedding parameters and tokens "
             "(generated by `depthdelusion depth-vs-size`)", ""]
    lines += planned_runs.partial_lines(done, todo)
    lines += [f"Experiment: `{source}`; reproduce with `{COMMAND.format(source=source, out=out)}`. "
              f"{len(exp.levels)} levels; tokens = {exp.tokens_per_param:g} × non-embedding N "
              f"(steps of {t['batch_size']} × {exp.base['model']['seq_len']} tokens), warmup "
              f"{exp.warmup_fraction:g} of the steps. Test seeds {exp.seeds} (init, data order and "
              f"the built-in corpus drawn with that seed); lr grids on tuning seed {exp.tuning_seed} only. "
              f"Metric: `{exp.metric}` (validation loss, nats/byte, {t['eval_batches']} fixed held-out "
              f"batches). Training wall time{' so far' if todo else ''}: {wall / 3600:.2f} h "
              f"({runs} runs, niced on a shared 2-core CPU).", "",
              "Arms: " + "; ".join(f"**{a}** {text}" for a, _, text in ARMS) + ".", ""]
    return lines


def lr_lines(exp: dvs.DepthVsSizeSpec, curves: list[dict], sigma: float | None, dof: int | None) -> list[str]:
    from depthdelusion.analysis.formats.table_text import markdown_table

    lines = [f"## SP learning-rate grids (tuning seed {exp.tuning_seed})", "",
             "The chosen lr is the grid point nearest the optimum of the quadratic in ln lr through the "
             "grid's best point and its two neighbours (`lr_grid`); lr* with Fieller's 95% interval, the "
             "noise σ " + (f"= {sigma:.4f} from the test seeds (median-based; {dof} dof)." if sigma else
                           "not yet measured (no test seeds finished): no interval yet."), ""]
    rows = [[c["level"], f"{c['width']}×{c['depth']}", c["lrs"], c["losses"],
             "–" if c["chosen_lr"] is None else f"{c['chosen_lr']:g}",
             f"{c['fit_lr']:.3g} [{c['fit_lr_lo']:.3g}, {c['fit_lr_hi']:.3g}]" if math.isfinite(c["fit_lr"]) else "–",
             c["note"]] for c in curves]
    return lines + [markdown_table(["level", "W×D", "lrs", "losses", "chosen lr", "lr* [95%]", "note"], rows), ""]


def plot(exp: dvs.DepthVsSizeSpec, groups: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(exp.resolved_levels)
    fig, axes = plt.subplots(1, n, figsize=(4.4 * n, 3.6), squeeze=False)
    for i, ax in enumerate(axes[0]):
        for (arm, _, _), color, shift in zip(ARMS, ("tab:blue", "tab:green"), (0.97, 1.03)):
            rows = [r for r in groups[(i + 1, arm)] if r["mean"] is not None]
            if not rows:
                continue
            xs = [r["cell"].shape["depth"] * shift for r in rows]  # offset so the bars do not overlap
            ys = [r["mean"].estimate for r in rows]
            err = [[y - r["mean"].lo for y, r in zip(ys, rows)], [r["mean"].hi - y for y, r in zip(ys, rows)]]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, color=color, label=arm)
        shapes = exp.resolved_levels[i]["shapes"]
        ax.set_xscale("log", base=2)
        ax.set_xticks([s["depth"] for s in shapes], [f"{s['depth']}\n(W {s['width']})" for s in shapes], fontsize=7)
        mid = sorted(s["params"] for s in shapes)[len(shapes) // 2]
        ax.set_title(f"level {i + 1}: N ≈ {mid:,}, T ≈ {exp.tokens_per_param:g} N", fontsize=9)
        ax.set_xlabel("depth D (width W)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    axes[0][0].set_ylabel(f"{exp.metric} (nats/byte)\nmean, t 95% over test seeds", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_command(*, experiment: str, out: str, max_runs: int | None = None, report_only: bool = False) -> int:
    """`depthdelusion depth-vs-size` (the parser is `depthdelusion.cli`)."""
    return planned_runs.command(load_spec(dvs.DepthVsSizeSpec, experiment), experiment, out, train=dvs.train,
                                write_report=write_report, max_runs=max_runs, report_only=report_only)
