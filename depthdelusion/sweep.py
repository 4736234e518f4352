"""Experiment grids and the idempotent sweep runner.

A grid file (format: experiments/README.md) expands to a list of named runs, each a full
Config. `run_sweep` trains every run that has not finished (one directory per run under OUT),
records failures without stopping, writes OUT/runs.csv and fits + writes OUT/report/.

Run directories may live on GCS (`gs://bucket/runs/...`): every path here goes through
etils.epath. This module imports no JAX at import time (expanding a grid needs none).
"""
from __future__ import annotations

import dataclasses
import fnmatch
import itertools
import math
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, NamedTuple

from etils import epath

from depthdelusion import rundir
from depthdelusion.analysis.fitting.options import SWEEP_BOOTSTRAP, FitOptions

#: the fits of the report that closes a sweep (the command line's --bootstrap sets the count)
SWEEP_FIT = FitOptions(bootstrap=SWEEP_BOOTSTRAP)
from depthdelusion.analysis.formats.table_text import write_csv
from depthdelusion.config import Config, from_dict, parse_override, read_yaml, set_field
from depthdelusion.progress import Stages

GRID_KEYS = ("name", "description", "topology", "fixed", "grid", "runs", "overrides",
             "tokens", "tokens_per_param", "name_format")
RUNS_CSV_COLUMNS = ("name", "status", "depth", "width", "params", "tokens", "final_loss",
                    "final_loss_se", "eval_loss", "wall_time_s", "error")


class Grid(NamedTuple):
    name: str
    description: str
    topology: str | None  # the TPU slice the grid is planned for (`depthdelusion plan`)
    runs: list[tuple[str, Config]]  # (run name, validated Config), in file order
    source: str


def _dotted(mapping: Any, where: str) -> dict[str, Any]:
    """A run point: either {section.field: value} or nested {section: {field: value}}."""
    if not isinstance(mapping, dict):
        raise ValueError(f"{where}: expected a mapping of section.field: value")
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            for sub, v in value.items():
                flat[f"{key}.{sub}"] = v
        else:
            flat[str(key)] = value
    return flat


def steps_for_budget(cfg: Config, tokens: float | None, tokens_per_param: float | None) -> int:
    """train.steps = ceil(tokens / (batch_size x seq_len)); tokens may be tokens_per_param x N
    with N the exact parameter count (embeddings included). `cfg` is validated (its vocabulary set)."""
    from depthdelusion.model_size import count_params

    if tokens_per_param is not None:
        tokens = tokens_per_param * count_params(cfg.model)
    return max(1, math.ceil(tokens / (cfg.train.batch_size * cfg.model.seq_len)))


def run_name(cfg: Config, name_format: str) -> str:
    fields = {**dataclasses.asdict(cfg.model), **{f"train_{k}": v for k, v in dataclasses.asdict(cfg.train).items()}}
    try:
        return name_format.format(**fields)
    except (KeyError, IndexError) as err:
        raise ValueError(f"name_format={name_format!r}: unknown field {err}; use model fields "
                         "(e.g. {depth}, {width}) or train fields as {train_lr}") from None


def _positive_budget(path, key: str, value):
    """A token budget (tokens or tokens_per_param) as a positive number; YAML reads 1e9 as text."""
    number = value
    if isinstance(number, str):
        try:
            number = float(number)
        except ValueError:
            pass
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not number > 0:
        raise ValueError(f"{path}: {key}={value!r} must be a positive number")
    return number


def _grid_points(path, raw: dict) -> list[dict]:
    """The grid's runs before names: every combination of the grid axes, then the runs list."""
    axes = raw.get("grid") or {}
    if not isinstance(axes, dict):
        raise ValueError(f"{path}: grid must be a mapping of section.field: [values]")
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"{path}: grid.{key} must be a non-empty list of values")
    points = [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())] if axes else []
    explicit = raw.get("runs") or []
    if not isinstance(explicit, list):
        raise ValueError(f"{path}: runs must be a list of mappings (section.field: value)")
    points += [_dotted(p, f"{path}: runs[{i}]") for i, p in enumerate(explicit)]
    if not points:
        raise ValueError(f"{path}: no runs: give grid axes and/or a runs list")
    return points


def load_grid(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Grid:
    """Read and expand a grid file. `overrides` (`section.field=value`) apply to every run,
    after the grid's fixed fields and before its axes."""
    path = epath.Path(path)
    if not path.exists():
        raise FileNotFoundError(f"experiment file not found: {path}")
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping with keys {', '.join(GRID_KEYS)}")
    unknown = sorted(set(raw) - set(GRID_KEYS))
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(unknown)}; valid keys are {', '.join(GRID_KEYS)}")
    if ("tokens" in raw) and ("tokens_per_param" in raw):
        raise ValueError(f"{path}: give either tokens or tokens_per_param, not both")
    for key in ("tokens", "tokens_per_param"):
        if key in raw:
            raw[key] = _positive_budget(path, key, raw[key])
    _refuse_steps_under_budget(path, raw, overrides)
    points = _grid_points(path, raw)
    per_run = raw.get("overrides") or {}
    if not isinstance(per_run, dict):
        raise ValueError(f"{path}: overrides must map a run name to section.field: value")
    name_format = raw.get("name_format", "d{depth}_w{width}")
    _refuse_sets_the_grid_overrides(path, overrides, points, per_run)

    runs: list[tuple[str, Config]] = []
    seen: set[str] = set()
    for point in points:
        try:
            cfg = from_dict(raw.get("fixed") or {}, f"{path}: fixed")
        except ValueError as err:
            raise ValueError(err if str(path) in str(err) else f"{path}: fixed: {err}") from None
        for text in overrides:
            key, value = parse_override(text)
            set_field(cfg, key, value)  # --set errors name the flag, not the file
        try:
            for key, value in point.items():
                set_field(cfg, key, value)
        except ValueError as err:
            raise ValueError(f"{path}: grid / runs: {err}") from None
        name = run_name(cfg, name_format)
        if name in seen:
            raise ValueError(f"{path}: two runs are both named {name!r}: change name_format or the grid")
        seen.add(name)
        try:
            for key, value in _dotted(per_run.get(name) or {}, f"{path}: overrides.{name}").items():
                set_field(cfg, key, value)
        except ValueError as err:
            raise ValueError(err if str(path) in str(err) else f"{path}: overrides.{name}: {err}") from None
        try:
            cfg.validate()  # (sets the vocabulary, which the parameter count needs)
            if "tokens" in raw or "tokens_per_param" in raw:
                cfg.train.steps = steps_for_budget(cfg, raw.get("tokens"), raw.get("tokens_per_param"))
                cfg.validate()
        except ValueError as err:
            raise ValueError(f"{path}: run {name}: {err}") from None
        runs.append((name, cfg))
    missing = sorted(set(per_run) - seen)
    if missing:
        raise ValueError(f"{path}: overrides for unknown run(s) {', '.join(missing)}; runs are {', '.join(sorted(seen))}")
    return Grid(str(raw.get("name") or path.stem), str(raw.get("description") or ""),
                raw.get("topology"), runs, str(path))


def _refuse_steps_under_budget(path, raw: dict, overrides) -> None:
    """--set train.steps on a grid with a token budget would be overwritten by the budget's
    steps without a word: refused, saying what sets the steps."""
    budget = next((key for key in ("tokens", "tokens_per_param") if key in raw), None)
    for text in overrides if budget else ():
        if parse_override(text)[0] == "train.steps":
            raise ValueError(f"--set {text}: train.steps is set by the grid's token budget "
                             f"({budget}: {raw[budget]:g} in {path}): change the grid's {budget} "
                             "instead")


def _refuse_sets_the_grid_overrides(path, overrides, points: list[dict], per_run: dict) -> None:
    """--set of a field that the grid's axes, its runs list or its per-run overrides set would
    be overwritten for those runs without a word: refused, saying where the grid sets it."""
    by_grid = {key for point in points for key in point}
    by_overrides = {key for name, fields in per_run.items()
                    for key in _dotted(fields or {}, f"{path}: overrides.{name}")}
    for text in overrides:
        key = parse_override(text)[0]
        where = ("its grid axes or runs list" if key in by_grid
                 else "its per-run overrides" if key in by_overrides else None)
        if where:
            raise ValueError(f"--set {text}: {key} is set by {where} in {path}, which would win "
                             "over --set: change it there")


def select(runs: list[tuple[str, Config]], only: str | None) -> list[tuple[str, Config]]:
    """Runs whose name matches the glob PATTERN (comma-separated alternatives allowed)."""
    if not only:
        return runs
    patterns = [p.strip() for p in only.split(",") if p.strip()]
    chosen = [(n, c) for n, c in runs if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    if not chosen:
        raise ValueError(f"--only {only!r} matches no run; runs are {', '.join(n for n, _ in runs)}")
    return chosen


def _summary(run_dir: epath.Path) -> dict[str, Any] | None:
    """The run's summary; None when absent or unreadable (training the run rewrites it)."""
    try:
        return rundir.read_summary(run_dir)
    except ValueError:
        return None


def _row(name: str, cfg: Config, status: str, summary: dict | None, error: str = "") -> dict[str, Any]:
    from depthdelusion.model_size import count_params

    summary = summary or {}
    model = cfg.model
    return {
        "name": name, "status": status, "depth": cfg.model.depth, "width": cfg.model.width,
        "params": summary.get("params", count_params(model)),
        "tokens": summary.get("tokens", cfg.train.steps * cfg.train.batch_size * cfg.model.seq_len),
        "final_loss": summary.get("final_loss", ""), "final_loss_se": summary.get("final_loss_se", ""),
        "eval_loss": summary.get("eval_loss", ""), "wall_time_s": summary.get("wall_time_s", ""),
        "error": error,
    }


def grid_rows(runs: list[tuple[str, Config]], out: epath.Path, current: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """runs.csv: every run of the grid, in grid order; this sweep's rows where it has one, the
    others from their directories. Two slices sharing OUT (each with its own --only) then both
    write the whole table and neither drops the other's runs: the run directories are the
    record, runs.csv a view of them."""
    mine = {row["name"]: row for row in current}
    rows = []
    for name, cfg in runs:
        if name in mine:
            rows.append(mine[name])
            continue
        summary = _summary(out / name)
        status = (summary or {}).get("status") or {"unfinished": "unfinished", "new": "not started"}.get(
            rundir.status(out / name), "unfinished")
        rows.append(_row(name, cfg, status, summary, (summary or {}).get("error", "")))
    return rows


def write_runs_csv(rows: list[dict[str, Any]], path: epath.Path) -> None:
    write_csv(path, RUNS_CSV_COLUMNS, [[row.get(k) for k in RUNS_CSV_COLUMNS] for row in rows])


def _default_train(cfg: Config, run_dir: epath.Path) -> dict[str, Any]:
    from depthdelusion.train.loop import train

    return train(cfg, run_dir)


def write_sweep_report(out: epath.Path, rows: list[dict[str, Any]], *, fit: FitOptions = SWEEP_FIT,
                       figures: bool = True, workers: int | None = 1) -> str:
    """Fit the laws to the finished runs and write OUT/report/ (``workers``: as
    ``ReportOptions.workers``; None, from `sweep`'s command line: the CPUs where that pays).
    Returns the report's answer,
    its "In short" paragraph (the verdict where there is none); with too few finished runs (or
    a fit that cannot be made), writes report.md saying so and returns "no fit: <why>"."""
    from depthdelusion.analysis.report.build import DEFAULT_LAWS, write_report
    from depthdelusion.analysis.report.options import ReportOptions

    report_dir = out / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    finished = [r for r in rows if r["status"] == "finished"]
    try:
        if len(finished) < 2:
            raise ValueError(f"only {len(finished)} finished run(s); a fit needs several")
        with tempfile.TemporaryDirectory() as tmp:  # the report is made locally, then copied
            # Fit every default law that has fewer free parameters than there are runs.
            laws, dropped = list(DEFAULT_LAWS), []
            while True:
                try:  # from the run directories (local or remote): gradient profiles included
                    with Stages("report") as progress:  # on stderr
                        options = ReportOptions(fit=fit, laws=tuple(laws), runs_label=str(out), workers=workers)
                        report = write_report(str(out), Path(tmp) / "report", options, figures=figures,
                                              progress=progress)
                    break
                except ValueError as err:
                    match = re.match(r"law '([\w]+)' has \d+ free parameters", str(err))
                    if not match or match.group(1) not in laws or len(laws) == 1:
                        raise
                    laws.remove(match.group(1))
                    dropped.append(str(err))
            if dropped:
                md = Path(tmp) / "report" / "report.md"
                md.write_text(md.read_text() + "\n## Laws not fitted\n\n"
                              + "".join(f"- {d}\n" for d in dropped))
            rundir.copy_tree(Path(tmp) / "report", report_dir)
        return ((report.in_short or report.verdict)
                + (f" (Not fitted, too few runs: {len(dropped)} law(s).)" if dropped else ""))
    except (ValueError, RuntimeError, FloatingPointError, ArithmeticError) as err:
        text = ("# Scaling-law analysis report\n\n"
                f"No fit was made: {err}. Runs finished: {len(finished)} of {len(rows)} "
                "(see ../runs.csv).\n")
        (report_dir / "report.md").write_text(text)
        return f"no fit: {err}"


def run_sweep(grid: Grid, out: str | Path, *, only: str | None = None, dry_run: bool = False,
              train_fn: Callable[[Config, epath.Path], dict] | None = None,
              report: bool = True, fit: FitOptions = SWEEP_FIT, report_workers: int | None = 1,
              log=print) -> list[dict[str, Any]]:
    """Train every selected run of `grid` under OUT/<name>/ and return the runs.csv rows.

    finished (summary.json status "finished") -> skipped; anything else -> train(cfg, run_dir),
    which starts a fresh run or resumes an unfinished one. A run directory whose config.yaml
    differs from the grid's run in a field that changes the numbers raises rundir.ConfigChanged
    before anything is trained. A run that raises is recorded
    (status "failed", the error) and the sweep goes on. Runs in-process: one JAX runtime,
    no re-import per run; an exception is caught like any other (a hard crash of the process,
    e.g. out of host memory, ends the sweep, and re-running it skips what finished).

    On several processes (a pod slice) only a divergence (raised on every host at the same
    step) is recorded and passed over; any other error ends every host at once with status 1
    (train/watchdog.py), and a re-run (tpu/babysit.sh) resumes. A grid planned for a slice
    (its `topology`) refuses to run there on the built-in toy corpus (data.path unset).

    ``report``: end with the report of every finished run (``write_sweep_report``), fitted as
    ``fit`` says, in ``report_workers`` processes (1 here: a script needs no ``__main__`` guard).
    """
    out = epath.Path(out)
    runs = select(grid.runs, only)
    train_fn = train_fn or _default_train
    for name, cfg in runs:  # before anything is trained: OUT holds these runs or none of them
        rundir.check_same_numbers(out / name, cfg)
    if dry_run:
        rows = []
        for name, cfg in runs:
            state = rundir.status(out / name)
            row = _row(name, cfg, "planned" if state != "finished" else "finished", _summary(out / name))
            rows.append(row)
            log(f"{name}: {state}; depth {cfg.model.depth} width {cfg.model.width} "
                f"params {row['params']:,} steps {cfg.train.steps} tokens {row['tokens']:,}")
        return rows
    # Multi-host (tpu/run.sh): every worker trains every run together; one writes the tables.
    jax = sys.modules.get("jax")
    multihost = jax is not None and jax.process_count() > 1
    if multihost and grid.topology:
        unset = [name for name, cfg in runs if not cfg.data.path]
        if unset:
            raise ValueError(
                f"{grid.source}: planned for {grid.topology} but data.path is unset for "
                f"{', '.join(unset[:3])}{' ...' if len(unset) > 3 else ''}: on a pod that would train on the "
                "built-in toy corpus; pass --set data.path=gs://BUCKET/prepared-data")
    if not multihost:
        return _run_all(grid, out, runs, train_fn, report, fit, report_workers, log, primary=True)
    try:  # an error outside train() (a runs.csv write on process 0) must not strand the others
        return _run_all(grid, out, runs, train_fn, report, fit, report_workers, log,
                        primary=jax.process_index() == 0)
    except Exception as err:
        from depthdelusion.train.watchdog import end_every_host

        traceback.print_exc()
        end_every_host(f"sweep {grid.name}: {type(err).__name__}: {err}")


def _agreed_by_every_host(err: Exception) -> bool:
    """Single process: always. Several: only a divergence, which every host detects at the same
    step; another error may be one host's alone while the others wait in a collective."""
    jax = sys.modules.get("jax")
    if jax is None or jax.process_count() < 2:
        return True
    from depthdelusion.train.loop import NonFiniteError

    return isinstance(err, NonFiniteError)


def _run_all(grid: Grid, out: epath.Path, runs: list[tuple[str, Config]], train_fn, report: bool,
             fit: FitOptions, report_workers: int | None, log, primary: bool) -> list[dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (name, cfg) in enumerate(runs, 1):
        run_dir = out / name
        state = rundir.status(run_dir)
        if state == "finished":
            log(f"[{i}/{len(runs)}] {name}: finished already, skipped")
            rows.append(_row(name, cfg, "finished", _summary(run_dir)))
            continue
        log(f"[{i}/{len(runs)}] {name}: {'resuming' if state == 'unfinished' else 'starting'}")
        start = time.perf_counter()
        try:
            summary = train_fn(cfg, run_dir)
            if summary.get("status") == "preempted":  # SIGTERM: the machine is going away
                rows.append(_row(name, cfg, "preempted", summary))
                log(f"[{i}/{len(runs)}] {name}: preempted at step {summary.get('steps')}; "
                    "run the sweep again to resume")
                if primary:
                    write_runs_csv(grid_rows(grid.runs, out, rows), out / "runs.csv")
                return rows
            rows.append(_row(name, cfg, "finished", summary))
            log(f"[{i}/{len(runs)}] {name}: finished in {time.perf_counter() - start:.0f} s, "
                f"loss {summary.get('final_loss', float('nan')):.4f}")
        except Exception as err:  # noqa: BLE001 - a failed run must not stop the sweep
            if not _agreed_by_every_host(err):
                raise
            message = f"{type(err).__name__}: {err}".replace("\n", " ")
            rows.append(_row(name, cfg, "failed", None, message))
            if primary:
                run_dir.mkdir(parents=True, exist_ok=True)
                (run_dir / "error.txt").write_text(traceback.format_exc())
            log(f"[{i}/{len(runs)}] {name}: FAILED: {message}")
        if primary:  # kept current, so a killed sweep leaves a table
            write_runs_csv(grid_rows(grid.runs, out, rows), out / "runs.csv")
    table = grid_rows(grid.runs, out, rows)
    if primary:
        write_runs_csv(table, out / "runs.csv")
    done = sum(r["status"] == "finished" for r in rows)
    log(f"{done} of {len(rows)} run(s) finished; table: {out / 'runs.csv'}")
    if report and primary:  # every finished run of the grid, whichever slice trained it
        # the sweep ends with its answer: the report's "In short", then where the report is
        answer = write_sweep_report(out, table, fit=fit, workers=report_workers)
        log(answer)
        log(f"report: {out / 'report' / 'report.md'}")
    return rows
