"""A run directory, and the one reader and writer of its three files.

DIR/config.yaml     the configuration the run trains, vocabulary resolved
DIR/metrics.jsonl   one JSON object per logged step, in step order, append-only
DIR/summary.json    the outcome: status, final loss with its standard error, size, tokens, FLOPs

Three rules, the same for the trainer, the sweep, the studies and the analysis:

- A metrics line is a record once its newline is written. A last line without one was cut
  short by a crash (or is being written now): readers skip it, and the writer removes it before
  it appends, so the file it leaves is valid JSON Lines. Any other line that is not a JSON
  object is an error naming the file and the line.
- A directory holds one run. Training it again with a configuration that changes the numbers
  (`differs_in_numbers`) is refused with the same `ConfigChanged` error whether the run finished
  or not; only the fields in `SAME_NUMBERS` (how a run is watched or executed) may change. A
  finished run given its own settings is returned as it is.
- summary.json and config.yaml are written whole: an object store (gs://) replaces an object at
  once; on a local disk the text goes to a temporary file renamed over the old one, so a crash
  never leaves half a summary.

Paths may be local or remote (gs://, through etils.epath). This module imports no JAX.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import yaml

from depthdelusion.config import Config, from_dict, read_yaml

if TYPE_CHECKING:
    from etils import epath

CONFIG, METRICS, SUMMARY = "config.yaml", "metrics.jsonl", "summary.json"

# Fields that may differ between a run's config.yaml and the one training it again: they change
# how a run is watched or executed, never its numbers (grad_accum_steps splits a batch into
# micro-batches whose gradients are summed: the same update up to float round-off).
SAME_NUMBERS = {
    "train": {"log_every", "layer_stats_every", "eval_every", "checkpoint_every", "checkpoint_minutes",
              "keep_checkpoints", "profile_steps", "grad_accum_steps", "watchdog_minutes", "trackers"},
    "data": {"workers", "prefetch"},
    "mesh": {"data", "fsdp", "tensor"},
}


class ConfigChanged(ValueError):
    """The configuration given for a run directory changes the numbers of the run it holds."""


def is_local(path: epath.PathLike) -> bool:
    return "://" not in str(path)


def as_path(path: epath.PathLike) -> Path | epath.Path:
    """A local path as a pathlib.Path, a remote one (gs://) as an etils.epath.Path: etils is
    imported only for remote paths, so the analysis reads local runs without the training stack."""
    if is_local(path):
        return Path(str(path))
    from etils import epath

    return epath.Path(path)


def copy_tree(src: Path, dst: epath.PathLike) -> None:
    """Every file under the local directory `src` to the same place under `dst` (local or
    remote): how outputs written by local-only writers (matplotlib, csv) reach gs://."""
    dst = as_path(dst)
    for path in sorted(src.rglob("*")):
        if path.is_file():
            target = dst / str(path.relative_to(src))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())


@contextlib.contextmanager
def local_dir(out: epath.PathLike | None) -> Iterator[Path | None]:
    """A local directory for writers of local files only (matplotlib, csv): OUT itself when it
    is local (or None), else a temporary directory whose files are copied to OUT (gs://) when
    the block ends without an error."""
    if out is None or is_local(out):
        yield None if out is None else Path(str(out))
        return
    with tempfile.TemporaryDirectory(prefix="depthdelusion-out-") as tmp:
        yield Path(tmp)
        copy_tree(Path(tmp), out)


def _write_whole(path: epath.Path, text: str) -> None:
    if not is_local(path):
        path.write_text(text)  # an object is replaced at once
        return
    local = Path(str(path))
    fd, tmp = tempfile.mkstemp(dir=local.parent, prefix=f".{local.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, local)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- config.yaml ------------------------------------------------------------------------------

def _read_yaml(path):
    """The parsed YAML at ``path``, or None when the file is absent."""
    return read_yaml(path) if path.exists() else None


def read_config(run_dir: epath.PathLike) -> Config | None:
    """The run's configuration; None when the directory has no config.yaml."""
    path = as_path(run_dir) / CONFIG
    raw = _read_yaml(path)
    return None if raw is None and not path.exists() else from_dict(raw, str(path))


def read_config_dict(run_dir: epath.PathLike) -> dict[str, Any] | None:
    """config.yaml as plain sections (for readers of runs written by other versions, whose
    fields this Config may not know); None when absent or not a mapping."""
    raw = _read_yaml(as_path(run_dir) / CONFIG)
    return raw if isinstance(raw, dict) else None


def write_config(run_dir: epath.PathLike, cfg: Config) -> None:
    _write_whole(as_path(run_dir) / CONFIG, yaml.safe_dump(cfg.to_dict(), sort_keys=False))


def differs_in_numbers(saved: Config, cfg: Config) -> list[str]:
    """`section.field: old -> new` for every field that differs and is not in SAME_NUMBERS."""
    a, b = saved.to_dict(), cfg.to_dict()
    return [f"{section}.{name}: {a[section][name]!r} -> {b[section][name]!r}"
            for section in a for name in a[section]
            if a[section][name] != b[section][name] and name not in SAME_NUMBERS.get(section, ())]


def check_same_numbers(run_dir: epath.PathLike, cfg: Config) -> None:
    """Raise ConfigChanged if RUN_DIR holds a run (finished or not) whose config.yaml differs
    from `cfg` (validated: its vocabulary set) in a field that changes the numbers."""
    saved = read_config(run_dir)
    if saved is None:
        return
    changed = differs_in_numbers(saved, cfg)
    if changed:
        finished = status(run_dir) == "finished"
        raise ConfigChanged(
            f"{run_dir} holds a {'finished' if finished else 'started'} run with a different configuration "
            f"({'; '.join(changed)}); nothing was trained. To train these settings give a new --out "
            f"directory; to {'see' if finished else 'resume'} that run use its own config.yaml "
            "(drop the CONFIG argument and the --set options that change it)")


# --- summary.json -----------------------------------------------------------------------------

def read_json_object(path: epath.PathLike) -> dict[str, Any] | None:
    """A JSON file holding one object; None when absent. Anything else is an error naming it."""
    path = as_path(path)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


def read_summary(run_dir: epath.PathLike) -> dict[str, Any] | None:
    """summary.json; None when absent. A file that is not a JSON object is an error naming it."""
    return read_json_object(as_path(run_dir) / SUMMARY)


def write_summary(run_dir: epath.PathLike, summary: dict[str, Any]) -> None:
    _write_whole(as_path(run_dir) / SUMMARY, json.dumps(summary, indent=2) + "\n")


def status(run_dir: epath.PathLike) -> str:
    """'finished' (summary.json says so), 'unfinished' (something is there) or 'new'."""
    run_dir = as_path(run_dir)
    try:
        summary = read_summary(run_dir)
    except ValueError:  # an unreadable summary is rewritten when the run is trained again
        summary = None
    if summary is not None and summary.get("status") == "finished":
        return "finished"
    if run_dir.exists() and any(run_dir.iterdir()):
        return "unfinished"
    return "new"


def find_runs(root: epath.PathLike) -> list[epath.Path]:
    """Every run directory (one holding summary.json) at or below ROOT, sorted. A run directory
    is not searched further (its checkpoints would cost one listing each on an object store)."""
    found, todo = [], [as_path(root)]
    while todo:
        directory = todo.pop()
        if (directory / SUMMARY).exists():
            found.append(directory)
        elif directory.is_dir():
            todo += [p for p in directory.iterdir() if p.is_dir()]
    return sorted(found, key=str)


def files_below(root: epath.PathLike, relative: str) -> list[Path | epath.Path]:
    """Every ROOT/.../RELATIVE that exists (e.g. "spectrum/tail.csv"), sorted. Locally a
    recursive glob; on an object store (gs://) RELATIVE under each run directory (`find_runs`),
    since a recursive listing there would list every checkpoint object."""
    root = as_path(root)
    if is_local(root):
        return sorted(root.rglob(relative))
    return [run / relative for run in find_runs(root) if (run / relative).exists()]


# --- metrics.jsonl ----------------------------------------------------------------------------

def _records(text: str, where: str) -> Iterator[dict[str, Any]]:
    lines = text.split("\n")  # the last item is "" or a line whose newline was never written
    for lineno, line in enumerate(lines[:-1], 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{where} line {lineno}: not valid JSON ({err}); only a last line "
                             "without its newline (cut by a crash) is skipped") from None
        if not isinstance(record, dict):
            raise ValueError(f"{where} line {lineno}: expected a JSON object")
        yield record


def read_metrics(run_dir: epath.PathLike) -> list[dict[str, Any]]:
    """The records of metrics.jsonl ([] when absent); a cut last line is skipped."""
    path = as_path(run_dir) / METRICS
    if not path.exists():
        return []
    return list(_records(path.read_text(encoding="utf-8"), str(path)))


class MetricsWriter:
    """Appends one JSON line per logged step to RUN_DIR/metrics.jsonl, after removing a cut last
    line. Locally each line is flushed at once, so a crash loses at most the line being written.
    Object stores (gs://) cannot append, so there the lines are appended to a local copy
    (fetched once at open) and the file is copied up at `flush()` (the loop's checkpoint
    steps) and at close: uploads scale with the number of checkpoints, not with how often the
    loop logs."""

    def __init__(self, run_dir: epath.PathLike):
        self.path = as_path(run_dir) / METRICS
        self.staging = None
        if not is_local(self.path):
            self.staging = Path(tempfile.mkdtemp(prefix="depthdelusion-metrics-")) / METRICS
            if self.path.exists():
                self.staging.write_bytes(self.path.read_bytes())
        local = self.staging or Path(str(self.path))
        self.dirty = False
        if local.exists():
            data = local.read_bytes()
            whole = data[:data.rfind(b"\n") + 1]
            if len(whole) != len(data):  # a line cut by a crash: no reader counted it
                with open(local, "r+b") as fh:
                    fh.truncate(len(whole))
                self.dirty = True
        self.file = open(local, "a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self.file.write(json.dumps(record, allow_nan=True) + "\n")
        self.file.flush()
        self.dirty = True

    def flush(self) -> None:
        """Before a checkpoint: a resumed run appends after the last step on file, so every
        step up to the checkpoint must be there (locally it always is)."""
        if self.staging is not None and self.dirty:
            self.path.write_bytes(self.staging.read_bytes())
            self.dirty = False

    def close(self) -> None:
        self.file.close()
        self.flush()
        if self.staging is not None:
            shutil.rmtree(self.staging.parent, ignore_errors=True)
