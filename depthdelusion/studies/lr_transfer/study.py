"""Learning-rate transfer: a learning-rate sweep at every width × depth under each
parameterization, then a depth sweep at fixed width with the lr tuned at the base shape.

The experiment file (e.g. experiments/lr_transfer.yaml) has `base` (a run config: sections
model, data, train), `parametrizations`, `widths`, `depths`, `lrs`, and `depth_sweep` (`width`,
`depths`), and optionally `skip` (run names not trained, e.g. for CPU time; the report lists
them and judges each shape's optimum on the lrs it has). The runs are two grids trained by
`depthdelusion.sweep.run_sweep` into DIR/runs/NAME, with its rules: a finished run is skipped, an
unfinished one resumed from its checkpoint, a failed one recorded (runs/runs.csv, error.txt) and
trained again by the next invocation. Writes DIR/lr_sweep.csv, lr_transfer.png,
depth_sweep.csv, depth_sweep.png and report.md. DIR may be local or gs:// (the runs trained there
by the sweep runner; the figures drawn locally and copied up).

The study's shape: its spec (`LrTransferSpec`, read by `spec.load_spec`), `measure` from the
sweeps' rows to a frozen `LrTransferResults`, `sections` to report.md.
"""
from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from depthdelusion import exit_codes, rundir
from depthdelusion.analysis.formats.table_text import markdown_table, write_csv
from depthdelusion.analysis.science.depth_penalty import is_u_shaped
from depthdelusion.config import Config, Parametrization, from_dict
from depthdelusion.studies.common.planned_runs import train_runs
from depthdelusion.studies.common.spec import check_run_config, load_spec, required


@dataclasses.dataclass(frozen=True)
class DepthSweepSpec:
    """The U-curve check: every depth at one width, each parametrization at its base-shape lr."""

    width: int = required(ge=1)
    depths: list[int]


@dataclasses.dataclass(frozen=True)
class LrTransferSpec:
    """experiments/lr_transfer.yaml (read by `spec.load_spec`)."""

    base: dict  # a run config (sections model, data, train); width, depth, lr, parametrization vary
    parametrizations: list[Parametrization]
    widths: list[int]
    depths: list[int]
    lrs: list[float]
    depth_sweep: DepthSweepSpec
    skip: list[str] = dataclasses.field(default_factory=list)  # run names not trained (CPU time)

    def validate(self) -> None:
        check_run_config(self.base)  # fail before the first run
        names = {run_name(p, w, d, lr) for p in self.parametrizations for w in self.widths
                 for d in self.depths for lr in self.lrs}
        unknown = sorted(set(self.skip) - names)
        if unknown:
            raise ValueError(f"skip names runs not in the lr grid: {', '.join(unknown)}")


def run_config(exp: LrTransferSpec, parametrization: str, width: int, depth: int, lr: float) -> Config:
    raw = json.loads(json.dumps(exp.base))  # deep copy
    raw.setdefault("model", {}).update(width=width, depth=depth, parametrization=parametrization)
    raw.setdefault("train", {})["lr"] = lr
    return from_dict(raw, "lr_transfer run").validate()


def run_name(parametrization: str, width: int, depth: int, lr: float) -> str:
    return f"{parametrization}_w{width}_d{depth}_lr{lr:g}"


def _finite(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else float("nan")


def lr_grid(exp: LrTransferSpec) -> list[tuple[str, Config]]:
    """The lr sweep's runs, shape-major (an interrupted sweep has every parametrization of the
    shapes it reached), without the `skip` names."""
    skip = set(exp.skip)
    return [(run_name(p, w, d, lr), run_config(exp, p, w, d, lr))
            for d in exp.depths for w in exp.widths for p in exp.parametrizations
            for lr in exp.lrs if run_name(p, w, d, lr) not in skip]


def depth_grid(exp: LrTransferSpec, rows: list[dict]) -> list[tuple[str, Config]]:
    """The depth sweep's runs: every depth at the sweep's width, each parametrization at the lr
    that was best at the base shape (widths[0] x depths[0]) of the lr sweep."""
    sweep = exp.depth_sweep
    runs = []
    for p in exp.parametrizations:
        lr, _ = best_lr(rows, p, exp.widths[0], exp.depths[0])
        runs += [(run_name(p, sweep.width, d, lr), run_config(exp, p, sweep.width, d, lr))
                 for d in sweep.depths]
    return runs


def _table_row(row: dict, cfg: Config) -> dict[str, Any]:
    return {"parametrization": cfg.model.parametrization, "width": cfg.model.width,
            "depth": cfg.model.depth, "lr": cfg.train.lr,
            **{key: _finite(row.get(key)) for key in ("eval_loss", "final_loss")}}


def best_lr(rows: list[dict], parametrization: str, width: int, depth: int,
            metric: str = "eval_loss") -> tuple[float, float]:
    """(lr, loss) of the lowest finite `metric` (validation loss by default) on the grid for one shape."""
    candidates = [(r[metric], r["lr"]) for r in rows if (r["parametrization"], r["width"],
                  r["depth"]) == (parametrization, width, depth) and math.isfinite(r[metric])]
    if not candidates:
        raise ValueError(f"{parametrization} W={width} D={depth}: no run of this shape has a finite "
                         f"{metric} (failed or diverged: see runs/runs.csv and runs/<run>/error.txt)")
    loss, lr = min(candidates)
    return lr, loss


class Outcome(NamedTuple):
    """What `run_experiment` did: the report (None when it stopped early), the runs that failed
    (their losses are nan in the tables) and whether a run was preempted (nothing written)."""

    report: Path | None
    failed: list[str]
    preempted: bool


def run_experiment(path: str | Path, out: str | Path, log=print, train_fn=None) -> Outcome:
    """Train what is not finished and write the tables, figures and report. `train_fn(cfg,
    run_dir)` trains one run (default: the training loop, as the sweep does)."""
    exp = load_spec(LrTransferSpec, path)
    out = rundir.as_path(out)
    out.mkdir(parents=True, exist_ok=True)
    grid = lr_grid(exp)
    sweep_rows = train_runs(grid, [], str(path), out, log, train_fn)
    if len(sweep_rows) < len(grid) or any(r["status"] == "preempted" for r in sweep_rows):
        return Outcome(None, [], True)
    rows = [_table_row(r, cfg) for r, (_, cfg) in zip(sweep_rows, grid)]
    write_csv(out / "lr_sweep.csv", rows[0], rows)

    depth_runs = depth_grid(exp, rows)
    depth_sweep_rows = train_runs(depth_runs, grid, str(path), out, log, train_fn)
    if len(depth_sweep_rows) < len(depth_runs) or any(r["status"] == "preempted" for r in depth_sweep_rows):
        return Outcome(None, [], True)
    depth_rows = [_table_row(r, cfg) for r, (_, cfg) in zip(depth_sweep_rows, depth_runs)]
    write_csv(out / "depth_sweep.csv", depth_rows[0], depth_rows)
    failed = list(dict.fromkeys(r["name"] for r in sweep_rows + depth_sweep_rows if r["status"] == "failed"))
    with rundir.local_dir(out) as local_out:  # a gs:// OUT: drawn here, then copied up
        plot_lr_curves(rows, exp, local_out / "lr_transfer.png")
        plot_depth_sweep(depth_rows, rows, local_out / "depth_sweep.png")
    report = out / "report.md"
    report.write_text(sections(measure(exp, str(Path(path)), rows, depth_rows, failed)))
    return Outcome(report, failed, False)


def run_command(*, experiment: str, out: str) -> int:
    """`depthdelusion lr-transfer` (the parser is `depthdelusion.cli`)."""
    outcome = run_experiment(experiment, out, log=lambda text: print(text, flush=True))
    if outcome.preempted:
        print("preempted: run the same command again to resume", file=sys.stderr)
        return exit_codes.PREEMPTED
    print(outcome.report.read_text())
    print(f"report written to {outcome.report}")
    if outcome.failed:
        print(f"failed: {', '.join(outcome.failed)} (errors in {rundir.as_path(out) / 'runs'}/<run>/error.txt; "
              "run the same command again to retry them)", file=sys.stderr)
        return exit_codes.FAILED
    return exit_codes.OK


def optimum_label(lr: float, lrs: list[float]) -> str:
    """The optimum as a statement about the grid: at an edge it is a bound, not a number."""
    if len(lrs) > 1 and lr == min(lrs):
        return f"≤ {lr:g}"
    if len(lrs) > 1 and lr == max(lrs):
        return f"≥ {lr:g}"
    return f"{lr:g}"


def shape_lrs(rows: list[dict], parametrization: str, width: int, depth: int) -> list[float]:
    """The lrs trained for one shape (a diverged run still bounds the optimum)."""
    return sorted(r["lr"] for r in rows if (r["parametrization"], r["width"], r["depth"])
                  == (parametrization, width, depth))


@dataclasses.dataclass(frozen=True)
class ShapeOptimum:
    """One shape's best lr on the lrs it was trained at: its loss, the runner-up's margin
    (None: no other finite lr) and whether it sits at an edge of that grid (a bound)."""

    lr: float
    loss: float
    margin: float | None
    label: str  # `optimum_label`: "≤ lr" / "≥ lr" at an edge, else the lr


@dataclasses.dataclass(frozen=True)
class TransferSummary:
    """One parametrization over every shape: how far its optimum moves and what the base
    shape's lr costs elsewhere."""

    parametrization: str
    spread: float  # max / min of the shapes' optimal lrs
    grid_steps: int  # the spread in steps of the lr grid
    base_lr: float  # the optimum at the base shape (widths[0] x depths[0])
    costs: tuple  # (loss at base_lr − the shape's optimum, width, depth) where base_lr was trained


@dataclasses.dataclass(frozen=True)
class LrTransferResults:
    """What the two sweeps measured, numbers only (rendered by `sections`)."""

    spec: LrTransferSpec
    source: str  # the experiment file, as given
    recipe: Config  # the run config of the first shape (its eval batches, batch, seq, steps)
    rows: tuple  # the lr sweep's table rows (lr_sweep.csv)
    depth_rows: tuple  # the depth sweep's (depth_sweep.csv)
    optima: dict  # (parametrization, width, depth) -> ShapeOptimum
    summaries: tuple  # TransferSummary per parametrization
    u_shaped: dict  # parametrization -> the depth sweep's curve is U-shaped (tolerance 0.01)
    failed: tuple  # runs that failed (their losses nan)


def shape_optimum(rows: list[dict], p: str, width: int, depth: int) -> ShapeOptimum:
    lr, loss = best_lr(rows, p, width, depth)
    others = [r["eval_loss"] for r in rows if (r["parametrization"], r["width"], r["depth"])
              == (p, width, depth) and r["lr"] != lr and math.isfinite(r["eval_loss"])]
    return ShapeOptimum(lr, loss, min(others) - loss if others else None,
                        optimum_label(lr, shape_lrs(rows, p, width, depth)))


def transfer_summary(rows: list[dict], exp: LrTransferSpec, p: str, optima: dict) -> TransferSummary:
    shapes = [(w, d) for d in exp.depths for w in exp.widths]
    best = [optima[p, w, d].lr for w, d in shapes]
    lrs = exp.lrs
    steps = round(math.log(max(best) / min(best)) / math.log(lrs[1] / lrs[0])) if len(lrs) > 1 else 0
    base_lr = best_lr(rows, p, exp.widths[0], exp.depths[0])[0]
    at_base = {(r["width"], r["depth"]): r["eval_loss"] for r in rows
               if r["parametrization"] == p and r["lr"] == base_lr}
    costs = tuple((at_base[w, d] - best_lr(rows, p, w, d)[1], w, d) for w, d in shapes if (w, d) in at_base)
    return TransferSummary(p, max(best) / min(best), steps, base_lr, costs)


def measure(exp: LrTransferSpec, source: str, rows: list[dict], depth_rows: list[dict],
            failed: list[str] = ()) -> LrTransferResults:
    """The optima, the transfer summaries and the depth sweep's shape from the two sweeps' rows."""
    names = exp.parametrizations
    optima = {(p, w, d): shape_optimum(rows, p, w, d) for p in names for d in exp.depths for w in exp.widths}
    u_shaped = {p: is_u_shaped([r["eval_loss"] for r in depth_rows if r["parametrization"] == p], 0.01)
                for p in names}
    return LrTransferResults(exp, source, run_config(exp, names[0], exp.widths[0], exp.depths[0], exp.lrs[0]),
                             tuple(rows), tuple(depth_rows), optima,
                             tuple(transfer_summary(rows, exp, p, optima) for p in names), u_shaped, tuple(failed))


def _head_lines(r: LrTransferResults) -> list[str]:
    """The title, the experiment, the metric and how to read a margin."""
    tc, seq, lrs = r.recipe.train, r.recipe.model.seq_len, r.spec.lrs
    return [
        "# Learning-rate transfer: SP vs CompleteP (generated by `depthdelusion lr-transfer`)", "",
        f"Experiment: `{r.source}`. Base config: `{json.dumps(r.spec.base)}`.", "",
        f"**Metric: validation loss** (`summary.json` eval_loss): the mean loss (nats/byte) over "
        f"{tc.eval_batches} fixed validation batches × {tc.batch_size} sequences × {seq} tokens "
        f"({tc.eval_batches * tc.batch_size * seq} tokens of the built-in corpus's held-out split, the same "
        "tokens for every run), measured once at the end of training. The optimal lr is the argmin of it. "
        "Secondary column: final_loss, the training loss of the last logged step(s) "
        f"(log_every {tc.log_every}, {tc.steps} steps: one batch, so noisier). One seed per run, same "
        "training batches for every run: the differences between runs are paired, but the seed-to-seed "
        "noise was not measured, so the margin to the runner-up lr is given for each optimum; a margin of "
        "a few hundredths of a nat should be read as a tie.", "",
        f"## Optimal learning rate per shape (grid {', '.join(f'{lr:g}' for lr in lrs)})", ""]


def _optima_table(r: LrTransferResults) -> list[list]:
    """Per parametrization and depth, the cells "lr (loss, + margin)" over widths."""
    table = []
    for name in r.spec.parametrizations:
        for depth in r.spec.depths:
            cells = []
            for width in r.spec.widths:
                o = r.optima[name, width, depth]
                margin = "" if o.margin is None else f", +{o.margin:.3f}"
                edge = "" if o.label == f"{o.lr:g}" else " (edge)"
                cells.append(f"{o.label}{edge} ({o.loss:.3f}{margin})")
            table.append([name, depth, *cells])
    return table


def sections(r: LrTransferResults) -> str:
    """report.md: the optimum per shape, what was not trained or failed, the transfer summary
    and the depth sweep."""
    exp = r.spec
    names, shapes = exp.parametrizations, len(exp.widths) * len(exp.depths)
    lines = _head_lines(r)
    lines.append(markdown_table(["parametrization", "depth", *(f"W={w}" for w in exp.widths)], _optima_table(r)))
    lines += ["", "Cell: optimal lr (its validation loss, + margin of the runner-up lr). An optimum on the "
              "edge of the lrs trained for that shape is a bound (≤ lowest / ≥ highest lr), not an optimum. "
              "Full grid with final_loss: `lr_sweep.csv`; curves: `lr_transfer.png`.", ""]
    if exp.skip:
        lines += [f"Not trained ({len(exp.skip)} of {len(names) * shapes * len(exp.lrs)} grid cells, CPU time): "
                  + ", ".join(f"`{n}`" for n in exp.skip) + ". A skipped lr that lies beyond a trained "
                  "neighbour that is already worse than the shape's optimum cannot hold the argmin of a "
                  "unimodal lr curve; where a skipped lr is next to the optimum, the optimum above is "
                  "reported as a bound.", ""]
    if r.failed:
        lines += [f"**Failed ({len(r.failed)}; not finished, their losses are blank (nan) above and they are "
                  "trained again by the next invocation):** " + ", ".join(f"`{n}`" for n in r.failed)
                  + " (errors in `runs/<run>/error.txt`).", ""]
    lines += ["## Transfer summary", ""]
    lines += [_summary_line(r, s) for s in r.summaries]
    lines += _depth_sweep_section(r)
    return "\n".join(lines)


def _summary_line(r: LrTransferResults, s: TransferSummary) -> str:
    exp = r.spec
    shapes = [(w, d) for d in exp.depths for w in exp.widths]
    labels = [r.optima[s.parametrization, w, d].label for w, d in shapes]
    interior = sum(o.label == f"{o.lr:g}" for o in (r.optima[s.parametrization, w, d] for w, d in shapes))
    labels = sorted(set(labels), key=lambda x: float(x.split()[-1]))
    worst = max(s.costs)
    return (f"- **{s.parametrization}**: {len(labels)} distinct optima over {len(shapes)} shapes ({', '.join(labels)}); "
            f"{interior} of {len(shapes)} interior to the grid. Spread of the optimal lr across shapes: "
            f"{s.spread:.3g}× ({s.grid_steps} grid step{'s' if s.grid_steps != 1 else ''})"
            + (" — a lower bound, since some optima sit at an edge" if interior < len(shapes) else "")
            + f". Using the base shape's ({exp.widths[0]}×{exp.depths[0]}) lr {s.base_lr:g} everywhere costs at most "
            f"{worst[0]:.3f} nats of validation loss against each shape's own optimum (at W={worst[1]} D={worst[2]}); "
            f"mean {sum(c[0] for c in s.costs) / len(s.costs):.3f}"
            + ("" if len(s.costs) == len(shapes) else
               f" (over the {len(s.costs)} shapes where lr {s.base_lr:g} was trained)") + ".")


def _depth_sweep_section(r: LrTransferResults) -> list[str]:
    exp, sweep = r.spec, r.spec.depth_sweep
    lines = ["", f"## Depth sweep at width {sweep.width}, lr tuned at the base shape "
             f"({exp.widths[0]}×{exp.depths[0]}), validation loss", ""]
    table = []
    for name in exp.parametrizations:
        sel = [x for x in r.depth_rows if x["parametrization"] == name]
        table.append([name, f"{sel[0]['lr']:g}", *(f"{x['eval_loss']:.3f}" for x in sel),
                      "yes" if r.u_shaped[name] else "no"])
    lines.append(markdown_table(["parametrization", "lr", *(f"D={d}" for d in sweep.depths), "U-shaped?"],
                                table))
    lines += ["", "U-shaped: the minimum over depth is interior and beats both ends by > 0.01 nats "
              "(validation loss; final_loss in `depth_sweep.csv`). The lr is fixed per parameterization, "
              "tuned at the base shape only, and every depth trains the same number of steps.", ""]
    return lines


def plot_lr_curves(rows: list[dict], exp: LrTransferSpec, path: Path) -> None:
    # here, not at the top: only a run that draws pays matplotlib's import (4 s measured), after Agg is chosen
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = exp.parametrizations
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False, sharey=True)
    shapes = [(w, d) for d in exp.depths for w in exp.widths]
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(exp.widths)))
    styles = ["-", "--", ":", "-."]
    for ax, name in zip(axes[0], names):
        for w, d in shapes:
            sel = sorted((r["lr"], r["eval_loss"]) for r in rows
                         if (r["parametrization"], r["width"], r["depth"]) == (name, w, d))
            ax.plot([s[0] for s in sel], [s[1] for s in sel], marker="o",
                    color=colors[exp.widths.index(w)], linestyle=styles[exp.depths.index(d) % 4],
                    label=f"W={w} D={d}")
            lr, loss = best_lr(rows, name, w, d)
            ax.plot([lr], [loss], "*", color=colors[exp.widths.index(w)], markersize=12)
        ax.set_xscale("log")
        ax.set_xlabel("base learning rate")
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].set_ylabel("validation loss (nats/byte)")
    finite = [r["eval_loss"] for r in rows if math.isfinite(r["eval_loss"])]
    axes[0, 0].set_ylim(min(finite) - 0.05, min(max(finite), min(finite) + 1.5))
    axes[0, -1].legend(fontsize=7, ncol=1)
    fig.suptitle("Validation loss vs lr per shape (colour = width, line style = depth, ★ = optimum on the grid)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_depth_sweep(depth_rows: list[dict], rows: list[dict], path: Path) -> None:
    # here, not at the top: only a run that draws pays matplotlib's import (4 s measured), after Agg is chosen
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4))
    for name in dict.fromkeys(r["parametrization"] for r in depth_rows):
        sel = [r for r in depth_rows if r["parametrization"] == name]
        ax.plot([r["depth"] for r in sel], [r["eval_loss"] for r in sel], "o-",
                label=f"{name} (lr {sel[0]['lr']:g})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("depth")
    ax.set_ylabel("validation loss (nats/byte)")
    ax.set_title(f"Depth sweep at width {depth_rows[0]['width']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
