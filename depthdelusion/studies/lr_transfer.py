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
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, NamedTuple

from depthdelusion import rundir
from depthdelusion.analysis.formats.table_text import markdown_table, write_csv
from depthdelusion.config import PARAMETRIZATIONS, Config, from_dict
from depthdelusion.studies import experiment_file

SWEEP_KEYS = ("base", "parametrizations", "widths", "depths", "lrs", "depth_sweep")


def load_experiment(path: str | Path) -> dict[str, Any]:
    """The experiment, validated (every error one line naming the key): the study files' one
    reader (`experiment_file.read_experiment`), then this study's own checks."""
    path = Path(path)
    raw = experiment_file.read_experiment(path, SWEEP_KEYS, ("skip",))
    bad = [p for p in raw["parametrizations"] if p not in PARAMETRIZATIONS]
    if bad:
        raise ValueError(f"{path}: parametrizations {bad}: valid values are {', '.join(PARAMETRIZATIONS)}")
    from_dict(raw["base"], f"{path}: base").validate()  # fail before the first run
    names = {run_name(p, w, d, lr) for p in raw["parametrizations"] for w in raw["widths"]
             for d in raw["depths"] for lr in raw["lrs"]}
    unknown = sorted(set(raw.get("skip") or []) - names)
    if unknown:
        raise ValueError(f"{path}: skip names runs not in the lr grid: {', '.join(unknown)}")
    return raw


def run_config(exp: dict, parametrization: str, width: int, depth: int, lr: float) -> Config:
    raw = json.loads(json.dumps(exp["base"]))  # deep copy
    raw.setdefault("model", {}).update(width=width, depth=depth, parametrization=parametrization)
    raw.setdefault("train", {})["lr"] = lr
    return from_dict(raw, "lr_transfer run").validate()


def run_name(parametrization: str, width: int, depth: int, lr: float) -> str:
    return f"{parametrization}_w{width}_d{depth}_lr{lr:g}"


def _finite(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else float("nan")


def lr_grid(exp: dict) -> list[tuple[str, Config]]:
    """The lr sweep's runs, shape-major (an interrupted sweep has every parametrization of the
    shapes it reached), without the `skip` names."""
    skip = set(exp.get("skip") or [])
    return [(run_name(p, w, d, lr), run_config(exp, p, w, d, lr))
            for d in exp["depths"] for w in exp["widths"] for p in exp["parametrizations"]
            for lr in exp["lrs"] if run_name(p, w, d, lr) not in skip]


def depth_grid(exp: dict, rows: list[dict]) -> list[tuple[str, Config]]:
    """The depth sweep's runs: every depth at the sweep's width, each parametrization at the lr
    that was best at the base shape (widths[0] x depths[0]) of the lr sweep."""
    sweep = exp["depth_sweep"]
    runs = []
    for p in exp["parametrizations"]:
        lr, _ = best_lr(rows, p, exp["widths"][0], exp["depths"][0])
        runs += [(run_name(p, sweep["width"], d, lr), run_config(exp, p, sweep["width"], d, lr))
                 for d in sweep["depths"]]
    return runs


def train_runs(runs: list[tuple[str, Config]], known: list[tuple[str, Config]], source: str,
               out: Path, log=print, train_fn=None) -> list[dict]:
    """Train `runs` under OUT/runs/NAME with the sweep's rules (finished runs are skipped,
    unfinished ones resumed, a failed run is recorded and tried again next time) and return the
    sweep's rows for them, in order. `known` are every run trained so far, so that
    OUT/runs/runs.csv lists them all."""
    from depthdelusion.sweep import Grid, run_sweep

    names = [name for name, _ in runs]
    grid = Grid(name="lr_transfer", description="", topology=None, source=source,
                runs=list(dict(known + runs).items()))
    rows = {r["name"]: r for r in run_sweep(grid, out / "runs", only=",".join(names), report=False,
                                            train_fn=train_fn, log=log)}
    return [rows[name] for name in names if name in rows]


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
    exp = load_experiment(path)
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
    report.write_text(markdown(rows, depth_rows, exp, Path(path), failed=failed))
    return Outcome(report, failed, False)


def run_command(*, experiment: str, out: str) -> int:
    """`depthdelusion lr-transfer` (the parser is `depthdelusion.cli`)."""
    from depthdelusion import exit_codes

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


def is_u_shaped(losses: list[float], tolerance: float) -> bool:
    """Strictly interior minimum that beats both ends by more than `tolerance` nats."""
    i = min(range(len(losses)), key=losses.__getitem__)
    return 0 < i < len(losses) - 1 and min(losses[0], losses[-1]) - losses[i] > tolerance


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


def markdown(rows: list[dict], depth_rows: list[dict], exp: dict, path: Path,
             failed: list[str] = ()) -> str:
    names, lrs, widths, depths = exp["parametrizations"], exp["lrs"], exp["widths"], exp["depths"]
    base = exp["base"]
    tc = run_config(exp, names[0], widths[0], depths[0], lrs[0]).train
    seq = run_config(exp, names[0], widths[0], depths[0], lrs[0]).model.seq_len
    shapes = [(w, d) for d in depths for w in widths]
    lines = [
        "# Learning-rate transfer: SP vs CompleteP (generated by `depthdelusion lr-transfer`)", "",
        f"Experiment: `{path}`. Base config: `{json.dumps(base)}`.", "",
        f"**Metric: validation loss** (`summary.json` eval_loss): the mean loss (nats/byte) over "
        f"{tc.eval_batches} fixed validation batches × {tc.batch_size} sequences × {seq} tokens "
        f"({tc.eval_batches * tc.batch_size * seq} tokens of the built-in corpus's held-out split, the same "
        "tokens for every run), measured once at the end of training. The optimal lr is the argmin of it. "
        "Secondary column: final_loss, the training loss of the last logged step(s) "
        f"(log_every {tc.log_every}, {tc.steps} steps: one batch, so noisier). One seed per run, same "
        "training batches for every run: the differences between runs are paired, but the seed-to-seed "
        "noise was not measured, so the margin to the runner-up lr is given for each optimum; a margin of "
        "a few hundredths of a nat should be read as a tie.", "",
        f"## Optimal learning rate per shape (grid {', '.join(f'{lr:g}' for lr in lrs)})", "",
    ]
    optima, table = _optima(rows, exp)
    lines.append(markdown_table(["parametrization", "depth", *(f"W={w}" for w in widths)], table))
    lines += ["", "Cell: optimal lr (its validation loss, + margin of the runner-up lr). An optimum on the "
              "edge of the lrs trained for that shape is a bound (≤ lowest / ≥ highest lr), not an optimum. "
              "Full grid with final_loss: `lr_sweep.csv`; curves: `lr_transfer.png`.", ""]
    skipped = exp.get("skip") or []
    if skipped:
        lines += [f"Not trained ({len(skipped)} of {len(names) * len(shapes) * len(lrs)} grid cells, CPU time): "
                  + ", ".join(f"`{n}`" for n in skipped) + ". A skipped lr that lies beyond a trained "
                  "neighbour that is already worse than the shape's optimum cannot hold the argmin of a "
                  "unimodal lr curve; where a skipped lr is next to the optimum, the optimum above is "
                  "reported as a bound.", ""]
    if failed:
        lines += [f"**Failed ({len(failed)}; not finished, their losses are blank (nan) above and they are "
                  "trained again by the next invocation):** " + ", ".join(f"`{n}`" for n in failed)
                  + " (errors in `runs/<run>/error.txt`).", ""]
    lines += ["## Transfer summary", ""]
    lines += _transfer_summary(rows, exp, optima)
    lines += _depth_sweep_section(depth_rows, exp)
    return "\n".join(lines)


def _optima(rows: list[dict], exp: dict) -> tuple[dict, list[list]]:
    """Per shape: the optimal lr's label, and the table row of cells "lr (loss, + margin)"."""
    names, widths, depths = exp["parametrizations"], exp["widths"], exp["depths"]
    optima, table = {}, []
    for name in names:
        for depth in depths:
            cells = []
            for width in widths:
                lr, loss = best_lr(rows, name, width, depth)
                others = [r["eval_loss"] for r in rows if (r["parametrization"], r["width"], r["depth"])
                          == (name, width, depth) and r["lr"] != lr and math.isfinite(r["eval_loss"])]
                margin = f", +{min(others) - loss:.3f}" if others else ""
                grid = shape_lrs(rows, name, width, depth)
                optima[name, width, depth] = optimum_label(lr, grid)
                edge = "" if optimum_label(lr, grid) == f"{lr:g}" else " (edge)"
                cells.append(f"{optimum_label(lr, grid)}{edge} ({loss:.3f}{margin})")
            table.append([name, depth, *cells])
    return optima, table


def _transfer_summary(rows: list[dict], exp: dict, optima: dict) -> list[str]:
    names, lrs, widths, depths = exp["parametrizations"], exp["lrs"], exp["widths"], exp["depths"]
    shapes = [(w, d) for d in depths for w in widths]
    lines = []
    base_w, base_d = widths[0], depths[0]
    for name in names:
        labels = [optima[name, w, d] for w, d in shapes]
        best = [float(x.split()[-1]) for x in labels]
        interior = sum(x == f"{lr:g}" for x, lr in zip(labels, best))
        labels = sorted(set(labels), key=lambda x: float(x.split()[-1]))
        steps = round(math.log(max(best) / min(best)) / math.log(lrs[1] / lrs[0])) if len(lrs) > 1 else 0
        base_lr = best_lr(rows, name, base_w, base_d)[0]
        at_base = {(r["width"], r["depth"]): r["eval_loss"] for r in rows
                   if r["parametrization"] == name and r["lr"] == base_lr}
        penalty = [(at_base[w, d] - best_lr(rows, name, w, d)[1], w, d) for w, d in shapes if (w, d) in at_base]
        worst = max(penalty)
        lines.append(
            f"- **{name}**: {len(labels)} distinct optima over {len(shapes)} shapes ({', '.join(labels)}); "
            f"{interior} of {len(shapes)} interior to the grid. Spread of the optimal lr across shapes: "
            f"{max(best) / min(best):.3g}× ({steps} grid step{'s' if steps != 1 else ''})"
            + (" — a lower bound, since some optima sit at an edge" if interior < len(shapes) else "")
            + f". Using the base shape's ({base_w}×{base_d}) lr {base_lr:g} everywhere costs at most "
            f"{worst[0]:.3f} nats of validation loss against each shape's own optimum (at W={worst[1]} D={worst[2]}); "
            f"mean {sum(p[0] for p in penalty) / len(penalty):.3f}"
            + ("" if len(penalty) == len(shapes) else
               f" (over the {len(penalty)} shapes where lr {base_lr:g} was trained)") + ".")
    return lines


def _depth_sweep_section(depth_rows: list[dict], exp: dict) -> list[str]:
    names, base_w, base_d = exp["parametrizations"], exp["widths"][0], exp["depths"][0]
    lines: list[str] = []
    sweep = exp["depth_sweep"]
    lines += ["", f"## Depth sweep at width {sweep['width']}, lr tuned at the base shape "
              f"({base_w}×{base_d}), validation loss", ""]
    table = []
    for name in names:
        sel = [r for r in depth_rows if r["parametrization"] == name]
        losses = [r["eval_loss"] for r in sel]
        table.append([name, f"{sel[0]['lr']:g}", *(f"{x:.3f}" for x in losses),
                      "yes" if is_u_shaped(losses, 0.01) else "no"])
    lines.append(markdown_table(["parametrization", "lr", *(f"D={d}" for d in sweep["depths"]), "U-shaped?"],
                                table))
    lines += ["", "U-shaped: the minimum over depth is interior and beats both ends by > 0.01 nats "
              "(validation loss; final_loss in `depth_sweep.csv`). The lr is fixed per parameterization, "
              "tuned at the base shape only, and every depth trains the same number of steps.", ""]
    return lines


def plot_lr_curves(rows: list[dict], exp: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = exp["parametrizations"]
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False, sharey=True)
    shapes = [(w, d) for d in exp["depths"] for w in exp["widths"]]
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(exp["widths"])))
    styles = ["-", "--", ":", "-."]
    for ax, name in zip(axes[0], names):
        for w, d in shapes:
            sel = sorted((r["lr"], r["eval_loss"]) for r in rows
                         if (r["parametrization"], r["width"], r["depth"]) == (name, w, d))
            ax.plot([s[0] for s in sel], [s[1] for s in sel], marker="o",
                    color=colors[exp["widths"].index(w)], linestyle=styles[exp["depths"].index(d) % 4],
                    label=f"W={w} D={d}")
            lr, loss = best_lr(rows, name, w, d)
            ax.plot([lr], [loss], "*", color=colors[exp["widths"].index(w)], markersize=12)
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
