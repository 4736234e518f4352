"""The loop of a study whose runs are a pure function of its finished runs (depth confound,
depth vs size): read what finished under OUT/runs, plan, train a few of the planned runs through
the sweep runner (finished skipped, unfinished resumed, failed retried), plan again. A study
supplies its planner (finished losses -> runs, each with a `.name`) and its run -> Config map.
Also the studies' run names (`Run`, `make_run`: what a run is, in its name) and `train_runs`, the
one way a study trains named configs through the sweep runner.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NamedTuple

from depthdelusion import exit_codes, rundir
from depthdelusion.analysis.formats.table_text import Table
from depthdelusion.sweep import Grid, run_sweep

if TYPE_CHECKING:
    from depthdelusion.config import Config


def results(metric: str, runs_dir: Path) -> tuple[dict[str, float], dict[str, dict]]:
    """(`metric` per finished or diverged run: +inf for a diverged or non-finite one, its summary)."""
    losses: dict[str, float] = {}
    summaries: dict[str, dict] = {}
    if not runs_dir.is_dir():
        return losses, summaries
    for run_dir in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        try:
            summary = rundir.read_summary(run_dir)
        except ValueError:
            continue
        if not summary:
            continue
        status = summary.get("status")
        value = summary.get(metric)
        if status == "finished":
            losses[run_dir.name] = float(value) if isinstance(value, (int, float)) and math.isfinite(value) else math.inf
            summaries[run_dir.name] = summary
        elif status == "failed" and "non-finite" in str(summary.get("error", "")):
            losses[run_dir.name] = math.inf  # diverged: an lr too high, a result; other failures are retried
            summaries[run_dir.name] = summary
    return losses, summaries


def train_planned(plan: Callable[[dict], list], config: Callable, metric: str, source: str, out: Path, *,
                  max_runs: int | None = None, batch: int = 2, log=print, train_fn=None) -> tuple[int, bool]:
    """Plan, train up to `batch` unfinished runs, plan again, until nothing is left or
    `max_runs` were trained. A run that fails (other than by diverging) is tried once per
    invocation: the next invocation retries it, and the runs that do not wait on it go on.
    Returns (runs trained, preempted)."""
    runs_dir = out / "runs"
    trained = 0
    failed: set[str] = set()
    while max_runs is None or trained < max_runs:
        losses, _ = results(metric, runs_dir)
        todo = [r for r in plan(losses) if r.name not in losses and r.name not in failed]
        if not todo:
            return trained, False
        take = todo[:batch if max_runs is None else min(batch, max_runs - trained)]
        chosen = [(r.name, config(r)) for r in take]
        rows = train_runs(chosen, [], source, out, log, train_fn)
        trained += len(take)
        if any(r["status"] == "preempted" for r in rows):
            return trained, True
        failed |= {r["name"] for r in rows if r["status"] == "failed"}
    return trained, False


RESUME = "(more are planned as lr grids settle). Rerun the command to continue; it resumes."


def partial_lines(done: int, todo, resume: str = RESUME) -> list[str]:
    """A report's opening label while planned runs are missing (none: no line); `resume` says
    how the rest gets trained (default: a planned study's own command, which resumes)."""
    if not todo:
        return []
    return [f"**PARTIAL RESULT**: {done} of the {done + len(todo)} runs planned so far "
            f"{'has' if done == 1 else 'have'} finished "
            f"{resume}", ""]


def not_finished_lines(todo, shown: int = 40) -> list[str]:
    """A report's line naming the planned runs that have not finished (none: no line)."""
    if not todo:
        return []
    return [f"Planned, not finished ({len(todo)}): " + ", ".join(f"`{r.name}`" for r in todo[:shown])
            + (" …" if len(todo) > shown else ""), ""]


def write_outputs(out, text: str, tables: dict[str, list[dict]], draw: Callable[[Path], None],
                  cell: Callable = lambda v: v) -> Path:
    """A planned study's files in OUT (local or gs://): a CSV per non-empty table (each value
    through `cell`), loss_vs_depth.png drawn by `draw` (locally, then copied up) and report.md
    (`text`); returns the report's path."""
    out = rundir.as_path(out)
    for name, rows in tables.items():
        if rows:
            (out / f"{name}.csv").write_text(
                Table(name, "", list(rows[0]), [[cell(v) for v in x.values()] for x in rows]).csv())
    with rundir.local_dir(out) as local_out:
        draw(local_out / "loss_vs_depth.png")
    report = out / "report.md"
    report.write_text(text)
    return report


def command(spec, experiment: str, out: str, *, train: Callable, write_report: Callable,
            max_runs: int | None = None, report_only: bool = False) -> int:
    """A planned study's command: train what its plan still lacks (unless `report_only`), then
    write and print its report. `train(spec, experiment, out_dir, max_runs=, log=)` returns
    (runs, preempted); `write_report(spec, experiment, out_dir)` returns the report's path."""
    out_dir = rundir.as_path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not report_only:
        _, preempted = train(spec, experiment, out_dir, max_runs=max_runs, log=lambda t: print(t, flush=True))
        if preempted:
            print("preempted: run the same command again to resume", file=sys.stderr)
            return exit_codes.PREEMPTED
    report = write_report(spec, experiment, out_dir)
    print(report.read_text())
    print(f"report written to {report}")
    return exit_codes.OK


class Run(NamedTuple):
    name: str
    parametrization: str
    width: int
    depth: int
    lr: float
    seed: int
    steps: int | None  # None: the base recipe's steps (same tokens for every cell)


def run_name(p: str, width: int, depth: int, lr: float, seed: int, steps: int | None = None) -> str:
    return f"{p}_w{width}_d{depth}_lr{lr:g}_s{seed}" + (f"_n{steps}" if steps else "")


def make_run(p: str, width: int, depth: int, lr: float, seed: int, steps: int | None = None) -> Run:
    return Run(run_name(p, width, depth, lr, seed, steps), p, width, depth, lr, seed, steps)


def train_runs(runs: list[tuple[str, Config]], known: list[tuple[str, Config]], source: str,
               out: Path, log=print, train_fn=None) -> list[dict]:
    """Train `runs` under OUT/runs/NAME with the sweep's rules (finished runs are skipped,
    unfinished ones resumed, a failed run is recorded and tried again next time) and return the
    sweep's rows for them, in order. `known` are every run trained so far, so that
    OUT/runs/runs.csv lists them all."""
    names = [name for name, _ in runs]
    grid = Grid(name="lr_transfer", description="", topology=None, source=source,
                runs=list(dict(known + runs).items()))
    rows = {r["name"]: r for r in run_sweep(grid, out / "runs", only=",".join(names), report=False,
                                            train_fn=train_fn, log=log)}
    return [rows[name] for name in names if name in rows]
