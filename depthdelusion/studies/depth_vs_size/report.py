"""The depth-vs-size study's report and command: `sections` renders what `depth_vs_size.measure`
found (report.md): per level and arm, the loss of every shape over the test seeds with its
Student-t interval, Welch and paired-t intervals on the differences between neighbouring shapes
(in depth order; description, no verdict), the pre-specified tests and the series, κ fixed and
the depth-free law in both N conventions (worded by `tests_text`), the laws with the calibrated
kink-vs-smooth test (`common/laws.py`), the lr grids; `write_report` writes it with points.csv,
lr_curves.csv, laws.csv, tests.csv and loss_vs_depth.png. A partial study is labelled partial
(only cells with every test seed finished are compared or tested). `run_command` is
`depthdelusion depth-vs-size`. Nothing here computes a number the report states; it formats them."""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

from depthdelusion.analysis.formats.table_text import markdown_table
from depthdelusion.analysis.reference import PAPER_KAPPA
from depthdelusion.studies.common import laws, planned_runs
from depthdelusion.studies.common.command import PlannedRunOptions
from depthdelusion.studies.common.spec import load_spec
from depthdelusion.studies.depth_vs_size import study as dvs
from depthdelusion.studies.depth_vs_size import tests_text
from depthdelusion.studies.depth_vs_size.study import DepthVsSizeResults, arms

matplotlib.use("Agg")  # before pyplot: the figure is written to a file, never shown
import matplotlib.pyplot as plt  # noqa: E402

COMMAND = "python -m depthdelusion depth-vs-size {source} --out {out}"
METHOD_NAMES = {"welch": "Welch", "paired": "paired t"}
MIN_EVAL_BATCHES = 64  # the eval set issue 60 asks of every new run


def _ci(m, digits: int = 4) -> str:
    if m is None or not math.isfinite(m.estimate):
        return "–"
    if not math.isfinite(m.lo):
        return f"{m.estimate:.{digits}f}"
    return f"{m.estimate:.{digits}f} [{m.lo:.{digits}f}, {m.hi:.{digits}f}]"


def _cell_text(row: dict, n_seeds: int) -> str:
    c = row.cell
    diverged = sum(1 for x in c.losses if not math.isfinite(x))
    text = (f"diverged at {diverged} of {len(c.losses)} seeds" if diverged else
            f"{len(c.losses)} of {n_seeds} seeds so far" if row.mean is None and c.lr else _ci(row.mean))
    return text + (f" (lr {c.lr:g})" if c.lr else "")


def point_rows(r: DepthVsSizeResults) -> list[dict]:
    """points.csv: one row per level × arm × shape."""
    out = []
    for (level, arm), group in r.groups.items():
        for row in group.rows:
            c, m, d, q = row
            s = c.shape
            out.append({"level": level, "arm": arm, "width": s["width"], "depth": s["depth"],
                        "aspect_w_over_d": f"{s['width'] / s['depth']:.3g}", "params_nonemb": s["params"],
                        "steps": s["steps"], "tokens": s["tokens"], "lr": "" if c.lr is None else f"{c.lr:g}",
                        "seeds": len(c.losses), "of": len(r.spec.seeds),
                        "losses": " ".join(f"{x:.4f}" for x in c.losses),
                        "mean": f"{m.estimate:.4f}" if m else "", "t95_lo": f"{m.lo:.4f}" if m else "",
                        "t95_hi": f"{m.hi:.4f}" if m else "",
                        "minus_next_deeper": f"{d.estimate:.4f}" if d else "",
                        "welch95_lo": f"{d.lo:.4f}" if d else "", "welch95_hi": f"{d.hi:.4f}" if d else "",
                        "paired95_lo": f"{q.lo:.4f}" if q else "", "paired95_hi": f"{q.hi:.4f}" if q else ""})
    return out


def curve_rows(r: DepthVsSizeResults) -> list[dict]:
    """lr_curves.csv: a shape's grid as text (lrs %g, losses 4 decimals)."""
    return [{**c, "lrs": " ".join(f"{lr:g}" for lr in c["lrs"]), "losses": " ".join(f"{y:.4f}" for y in c["losses"])}
            for c in r.curves]


def level_lines(exp: dvs.DepthVsSizeSpec, groups: dict) -> list[str]:
    """Per level: a table of every arm's loss against depth with the neighbouring differences
    (description: no verdict is drawn from them)."""
    lines = []
    for i, level in enumerate(exp.resolved_levels):
        shapes = level["shapes"]
        mid = sorted(s["params"] for s in shapes)[len(shapes) // 2]
        lines += [f"### Level {i + 1}: N ≈ {mid:,} non-embedding parameters, T ≈ {exp.tokens_per_param:g} N", ""]
        header = ["arm"] + [_shape_name(s) for s in shapes]
        table = [["N (non-emb.) / steps / tokens"] + [f"{s['params']:,} / {s['steps']} / {s['tokens']:,}" for s in shapes]]
        for arm, _, _ in arms(exp):
            rows = groups[(i + 1, arm)].rows
            table.append([f"{arm}: loss [t 95%]"] + [_cell_text(r, len(exp.seeds)) for r in rows])
            for key, name in METHOD_NAMES.items():
                table.append([f"{arm}: this − next deeper [{name} 95%]"] + [_ci(getattr(r, key)) for r in rows])
        lines += [markdown_table(header, table), ""]
        waiting = [f"- {arm}: fewer than 2 shapes with every test seed finished: not compared yet."
                   for arm, _, _ in arms(exp) if sum(1 for r in groups[(i + 1, arm)].rows if r.mean is not None) < 2]
        lines += waiting + ([""] if waiting else []) + tests_text.unmatched_lines(exp, i)
    return lines


def _shape_name(s: dict) -> str:
    return f"{s['width']}×{s['depth']}" + (f" (F {s['ffn']})" if "ffn" in s else "")


def sections(r: DepthVsSizeResults) -> str:
    """report.md: what ran, the loss against depth per level with the neighbour verdicts, the
    laws, the lr grids and what has not finished."""
    exp = r.spec
    lines = _head_lines(r)
    lines += ["## Loss against depth at fixed N and T", "",
              f"Mean over the test seeds {exp.seeds} with its Student-t 95% interval (n − 1 dof). The "
              "difference to the next deeper shape twice: Welch's 95% interval (unequal variances, "
              "unpaired) and the paired t interval of the seed-by-seed differences (n − 1 dof). A seed "
              f"draws {tests_text.seed_draws(exp)}, which may move every shape at that seed alike: "
              "the paired interval removes such a shared effect, Welch's counts it as noise. These "
              "differences are description only: uncorrected, their method not chosen in advance, and no "
              "verdict is drawn from them; the tests are the pre-specified ones of the next section.", ""]
    lines += level_lines(exp, r.groups)
    lines += tests_text.trend_lines(r)
    lines += tests_text.series_lines(r)
    lines += laws.report_lines([a.laws for a in r.laws], setting=(
        "rows are seed-centred: each loss minus its seed's mean over the level's complete cells plus the "
        f"level's mean, which removes a seed's shared effect ({tests_text.seed_draws(exp)}), if any, and "
        "leaves n − 1 free values per seed and level (a slight negative correlation the bootstrap "
        "ignores); N = non-embedding parameters (the study's design variable); T = "
        f"{exp.tokens_per_param:g} N at every cell, so the capacity term carries the data term"))
    lines += tests_text.kappa_lines(r, PAPER_KAPPA)
    lines += tests_text.depth_free_lines(r)
    lines += lr_lines(r)
    lines += planned_runs.not_finished_lines(list(r.todo))
    return "\n".join(lines)


def write_report(r: DepthVsSizeResults, out) -> Path:
    """report.md, points.csv, lr_curves.csv, laws.csv and loss_vs_depth.png into OUT (local or
    gs://: the figure drawn locally and copied up)."""
    tables = {"points": point_rows(r), "lr_curves": curve_rows(r), "laws": laws.csv_rows([a.laws for a in r.laws]),
              "tests": tests_text.test_rows(r)}
    return planned_runs.write_outputs(out, sections(r), tables, lambda path: plot(r, path),
                                      cell=lambda v: f"{v:.5g}" if isinstance(v, float) else v)


def _head_lines(r: DepthVsSizeResults) -> list[str]:
    """The title, what ran, how to reproduce it and the arms."""
    exp, t = r.spec, r.spec.base["train"]
    lines = ["# Depth against size: loss at fixed non-embedding parameters and tokens "
             "(generated by `depthdelusion depth-vs-size`)", ""]
    lines += planned_runs.partial_lines(r.done, list(r.todo))
    lines += [f"Experiment: `{r.source}`; reproduce with `{COMMAND.format(source=r.source, out=r.runs_dir.parent)}`. "
              f"{len(exp.levels)} level{'s' if len(exp.levels) > 1 else ''}; tokens = {exp.tokens_per_param:g} × non-embedding N "
              f"(steps of {t['batch_size']} × {exp.base['model']['seq_len']} tokens), warmup "
              f"{exp.warmup_fraction:g} of the steps. Test seeds {exp.seeds} (each draws "
              f"{tests_text.seed_draws(exp)}); {tests_text.tuning_text(exp)} "
              f"Metric: `{exp.metric}` (validation loss, nats/byte, {tests_text.eval_set_text(exp)}). "
              f"Training wall time{' so far' if r.todo else ''}: {r.wall_s / 3600:.2f} h "
              f"({r.runs} run{'s' if r.runs != 1 else ''}{_where_trained(r.devices)}).", "",
              "Arms: " + "; ".join(f"**{a}** {tests_text.arm_text(exp, a, text)}" for a, _, text in arms(exp))
              + ".", ""]
    return lines + tests_text.eval_set_lines(r, MIN_EVAL_BATCHES)


def _where_trained(devices: tuple) -> str:
    """Where the runs trained, from their summaries' (device_kind, devices): accelerators by name
    and count a run; CPU runs keep the words the own-run studies were written with (every one of
    them trained niced on the project's shared 2-core sandbox; the summary records no more)."""
    parts = ["niced on a shared 2-core CPU" if kind == "cpu" else
             f"each on {'one' if n == 1 else n} {kind}" + ("" if n == 1 else "s") for kind, n in devices]
    return ", " + " and ".join(parts) if parts else ""


def lr_lines(r: DepthVsSizeResults) -> list[str]:
    if not r.curves:
        return []  # every level's SP lrs are fixed: no grid ran
    sigma, dof = r.sigma, r.dof
    lines = [f"## SP learning-rate grids (tuning seed {r.spec.tuning_seed})", "",
             "The chosen lr is the grid point nearest the optimum of the quadratic in ln lr through the "
             "grid's best point and its two neighbours (`lr_grid`); lr* with Fieller's 95% interval, the "
             "noise σ " + (f"= {sigma:.4f} from the test seeds (median-based; {dof} dof)." if sigma else
                           "not yet measured (no test seeds finished): no interval yet."), ""]
    rows = [[c["level"], f"{c['width']}×{c['depth']}", c["lrs"], c["losses"],
             "–" if c["chosen_lr"] is None else f"{c['chosen_lr']:g}",
             f"{c['fit_lr']:.3g} [{c['fit_lr_lo']:.3g}, {c['fit_lr_hi']:.3g}]" if math.isfinite(c["fit_lr"]) else "–",
             c["note"]] for c in curve_rows(r)]
    return lines + [markdown_table(["level", "W×D", "lrs", "losses", "chosen lr", "lr* [95%]", "note"], rows), ""]


def _x_axis(shapes: list[dict]) -> tuple:
    """(x of a shape, its axis label): depth, or D/W where two shapes of the level share a depth
    (a width series), which would otherwise be drawn on top of each other."""
    if len({s["depth"] for s in shapes}) == len(shapes):
        return (lambda s: s["depth"]), "depth D (width W)"
    return (lambda s: s["depth"] / s["width"]), "D/W (width × depth)"


def plot(r: DepthVsSizeResults, path: Path) -> None:
    exp = r.spec
    n = len(exp.resolved_levels)
    fig, axes = plt.subplots(1, n, figsize=(4.4 * n, 3.6), squeeze=False)
    for i, ax in enumerate(axes[0]):
        shapes = exp.resolved_levels[i]["shapes"]
        x_of, label = _x_axis(shapes)
        for (arm, _, _), color, shift in zip(arms(exp), ("tab:blue", "tab:green"), (0.97, 1.03)):
            rows = [row for row in r.groups[(i + 1, arm)].rows if row.mean is not None]
            if not rows:
                continue
            xs = [x_of(row.cell.shape) * shift for row in rows]  # offset so the bars do not overlap
            ys = [row.mean.estimate for row in rows]
            err = [[y - row.mean.lo for y, row in zip(ys, rows)], [row.mean.hi - y for y, row in zip(ys, rows)]]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, color=color, label=arm, linestyle="none"
                        if label.startswith("D/W") else "-")  # a line through two series would mean nothing
        ax.set_xscale("log", base=2)
        ticks = [f"{s['depth']}\n(W {s['width']})" if label.startswith("depth") else f"{s['width']}×{s['depth']}"
                 for s in shapes]
        ax.set_xticks([x_of(s) for s in shapes], ticks, fontsize=7, rotation=0 if label.startswith("depth") else 45)
        mid = sorted(s["params"] for s in shapes)[len(shapes) // 2]
        ax.set_title(f"level {i + 1}: N ≈ {mid:,}, T ≈ {exp.tokens_per_param:g} N", fontsize=9)
        ax.set_xlabel(label)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    axes[0][0].set_ylabel(f"{exp.metric} (nats/byte)\nmean, t 95% over test seeds", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_command(*, experiment: str, out: str, options: PlannedRunOptions = PlannedRunOptions()) -> int:
    """`depthdelusion depth-vs-size` (the parser is `depthdelusion.cli`)."""
    return planned_runs.command(
        load_spec(dvs.DepthVsSizeSpec, experiment), experiment, out, train=dvs.train, max_runs=options.max_runs,
        write_report=lambda exp, source, out_dir: write_report(dvs.measure(exp, source, out_dir / "runs"), out_dir),
        report_only=options.report_only)


run_command.option_groups = {"options": PlannedRunOptions}
