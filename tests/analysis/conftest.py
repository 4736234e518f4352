"""Synthetic run directories in the trainer's format (summary.json + metrics.jsonl)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

V = 50257


def params_of(depth: int, width: int) -> int:
    return int(depth * (12 * width ** 2 + 12 * width) + 2 * V * width + 516 * width + V)


def write_run(root: Path, name: str, depth: int, width: int, loss: float, *, status="finished",
              tokens=6.4e9, ell=None, act_ell=None, steps=(0, 500, 1000, 1500), noise=0.02,
              seed=0, tokenizer=None) -> Path:
    """One run directory; per-layer norms follow exp(−(D − l)/ℓ) with multiplicative noise.
    ``tokenizer`` (bytes, gpt2) is recorded as the trainer does, under ``data``."""
    run = root / name
    run.mkdir(parents=True)
    n = params_of(depth, width)
    summary = {"name": name, "status": status,
               "model": {"depth": depth, "width": width, "head_dim": 64, "ffn": "gelu",
                         "norm": "layernorm", "positions": "rope", "vocab_size": V, "seq_len": 1024,
                         "use_bias": True},
               "params": n, "params_non_embedding": 12 * depth * width ** 2, "tokens": tokens,
               "flops": 6.0 * n * tokens, "final_loss": loss, "final_loss_se": 0.005,
               "steps": max(steps), "wall_time_s": 10.0}
    if tokenizer is not None:
        summary["data"] = {"dataset": "builtin", "tokenizer": tokenizer, "skipped": 0}
        summary["model"]["vocab_size"] = {"bytes": 257, "gpt2": V}[tokenizer]
    (run / "summary.json").write_text(json.dumps(summary))
    rng = np.random.default_rng(seed)
    layers = np.arange(1, depth + 1)
    with open(run / "metrics.jsonl", "w") as fh:
        for step in steps:
            entry = {"step": step, "loss": loss + 1.0 / (1 + step), "lr": 3e-4, "grad_norm": 1.0}
            if ell is not None:
                g = np.exp(-(depth - layers) / ell) * np.exp(noise * rng.standard_normal(depth))
                entry["per_layer_grad_norm"] = (0.5 * g).tolist()
            if act_ell is not None:
                g = np.exp(-(depth - layers) / act_ell) * np.exp(noise * rng.standard_normal(depth))
                entry["per_layer_act_grad_norm"] = g.tolist()
            fh.write(json.dumps(entry) + "\n")
            fh.write(json.dumps({"step": step + 1, "loss": loss, "lr": 3e-4, "grad_norm": 1.0}) + "\n")
    return run


@pytest.fixture
def run_factory(tmp_path):
    def make(*args, **kwargs):
        return write_run(tmp_path / "runs", *args, **kwargs)
    return make
