"""What a run leaves behind: config.yaml, metrics.jsonl (one JSON object per logged step),
summary.json (final loss with its standard error, size, tokens, FLOPs, wall time)."""
from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from etils import epath


def is_local(path: epath.Path) -> bool:
    return "://" not in str(path)


class MetricsWriter:
    """One JSON line per logged step. The file is append-only: a resumed run adds the steps
    after the last one already there. Locally each line is flushed at once, so a crash loses
    nothing logged. Object stores (gs://) cannot append, so there the lines are appended to a
    local copy (fetched once at open) and the file is copied up at `flush()` — the loop's
    checkpoint steps — and at close: uploads scale with the number of checkpoints, not with
    how often the loop logs."""

    def __init__(self, path: epath.PathLike):
        self.path = epath.Path(path)
        self.staging = None
        if not is_local(self.path):
            self.staging = Path(tempfile.mkdtemp(prefix="depthdelusion-metrics-")) / self.path.name
            if self.path.exists():
                self.staging.write_bytes(self.path.read_bytes())
        local = self.staging or Path(self.path)
        ends_mid_line = local.exists() and local.stat().st_size and not local.read_bytes().endswith(b"\n")
        self.file = open(local, "a", encoding="utf-8")
        if ends_mid_line:  # a crash cut the last line: end it, read_metrics skips it
            self.file.write("\n")
        self.dirty = False

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


def final_loss(steps: list[int], losses: list[float], total_steps: int) -> tuple[float, float | None, int]:
    """Mean loss over the last 10% of training tokens and its standard error.

    Every step trains the same number of tokens, so this is the mean of the logged per-step
    losses with step > 0.9 · total_steps. The standard error treats those steps as independent
    samples (std / sqrt(n)); with log_every > 1 only logged steps count. Returns (mean, se, n).
    """
    tail = [loss for step, loss in zip(steps, losses) if step > 0.9 * total_steps]
    if not tail:  # fewer logged steps than 10 %: fall back to the last one
        tail = losses[-1:]
    values = np.asarray(tail, np.float64)
    se = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else None
    return float(values.mean()), se, len(values)


def write_json(path: epath.PathLike, record: dict[str, Any]) -> None:
    epath.Path(path).write_text(json.dumps(record, indent=2) + "\n")


def read_metrics(path: epath.PathLike) -> list[dict[str, Any]]:
    """The records of metrics.jsonl; a line cut short by a crash is skipped."""
    path = epath.Path(path)
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


class TensorBoardWriter:
    """The same scalars as metrics.jsonl as TensorBoard events (no TensorFlow needed);
    per-layer norms as `per_layer_grad_norm/layer_00`, ... (00 = the bottom block). For gs://
    run directories the events are written to a local folder and copied up whole (object stores
    cannot append) at every `flush()` — the loop's checkpoint steps — and at close."""

    def __init__(self, logdir: epath.PathLike):
        self.logdir = epath.Path(logdir)
        self.staging = None if is_local(self.logdir) else tempfile.mkdtemp(prefix="depthdelusion-tb-")
        self.files, self.uploaded = 0, set()
        self.writer = self._open()

    def _open(self):
        from tensorboardX import SummaryWriter

        self.files += 1  # a distinct name even within one second (names carry the time in s)
        return SummaryWriter(self.staging or str(self.logdir), flush_secs=30, filename_suffix=f".{self.files}")

    def write(self, record: dict[str, Any]) -> None:
        step = record["step"]
        for name, value in record.items():
            if name == "step":
                continue
            if isinstance(value, list):
                for layer, v in enumerate(value):
                    self.writer.add_scalar(f"{name}/layer_{layer:02d}", v, step)
            elif isinstance(value, (int, float)) and value is not None:
                self.writer.add_scalar(name, value, step)
            elif isinstance(value, dict):
                for key, v in value.items():
                    self.writer.add_scalar(f"{name}/{key}", v, step)

    def flush(self) -> None:
        if self.staging is None:
            self.writer.flush()
            return
        self.writer.close()  # only a closed writer is sure to have written every event
        self._upload()
        self.writer = self._open()  # the next events go to a new file; TensorBoard reads all

    def _upload(self) -> None:
        """Copies the files closed since the last upload (a closed event file never changes)."""
        self.logdir.mkdir(parents=True, exist_ok=True)
        for event_file in sorted(Path(self.staging).iterdir()):
            if event_file.name not in self.uploaded:
                (self.logdir / event_file.name).write_bytes(event_file.read_bytes())
                self.uploaded.add(event_file.name)

    def close(self) -> None:
        self.writer.close()
        if self.staging is not None:
            self._upload()
