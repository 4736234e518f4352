"""What a run leaves behind: config.yaml, metrics.jsonl (one JSON object per logged step),
summary.json (final loss with its standard error, size, tokens, FLOPs, wall time)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np


class MetricsWriter:
    """Appends one JSON line per logged step, flushed so a crash loses nothing logged."""

    def __init__(self, path: Path):
        self.file = open(path, "a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self.file.write(json.dumps(record, allow_nan=True) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def final_loss(steps: list[int], losses: list[float], total_steps: int) -> tuple[float, float, int]:
    """Mean loss over the last 10% of training tokens and its standard error.

    Every step trains the same number of tokens, so this is the mean of the logged per-step
    losses with step > 0.9 · total_steps. The standard error treats those steps as independent
    samples (std / sqrt(n)); with log_every > 1 only logged steps count. Returns (mean, se, n).
    """
    tail = [loss for step, loss in zip(steps, losses) if step > 0.9 * total_steps]
    if not tail:  # fewer logged steps than 10 %: fall back to the last one
        tail = losses[-1:]
    values = np.asarray(tail, np.float64)
    se = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else float("nan")
    return float(values.mean()), se, len(values)


def write_json(path: Path, record: dict[str, Any]) -> None:
    path.write_text(json.dumps(record, indent=2) + "\n")
