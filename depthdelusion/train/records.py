"""What a run leaves behind: config.yaml, metrics.jsonl (one JSON object per logged step),
summary.json (final loss with its standard error, size, tokens, FLOPs, wall time)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np


class MetricsWriter:
    """Appends one JSON line per logged step, flushed so a crash loses nothing logged. The file
    is append-only: a resumed run adds the steps after the last one already there."""

    def __init__(self, path: Path):
        ends_mid_line = path.exists() and path.stat().st_size and not path.read_bytes().endswith(b"\n")
        self.file = open(path, "a", encoding="utf-8")
        if ends_mid_line:  # a crash cut the last line: end it, read_metrics skips it
            self.file.write("\n")

    def write(self, record: dict[str, Any]) -> None:
        self.file.write(json.dumps(record, allow_nan=True) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


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


def write_json(path: Path, record: dict[str, Any]) -> None:
    path.write_text(json.dumps(record, indent=2) + "\n")


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The records of metrics.jsonl; a line cut short by a crash is skipped."""
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
    per-layer norms as `per_layer_grad_norm/layer_00`, ... (00 = the bottom block)."""

    def __init__(self, logdir: Path):
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(str(logdir), flush_secs=30)

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

    def close(self) -> None:
        self.writer.close()
