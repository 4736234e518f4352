"""One training run, top to bottom: data -> mesh -> model and compiled step -> loop -> records.

The loop never waits on the device except at logging points: step n+1 is dispatched before the
metrics of step n are fetched.
"""
from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from depthdelusion.config import Config, dump_config
from depthdelusion.data.pipeline import Batches, validation_batches
from depthdelusion.model import size
from depthdelusion.parallel.mesh import make_mesh
from depthdelusion.train.hardware import peak_flops_per_device
from depthdelusion.train.records import MetricsWriter, final_loss, write_json
from depthdelusion.train.step import build_trainer


def _is_layer_stats_step(step: int, cfg: Config) -> bool:
    """Per-layer statistics after update 1 (the initial profile), every k, and the last."""
    k = cfg.train.layer_stats_every
    return step == 1 or step % k == 0 or step == cfg.train.steps


def _is_log_step(step: int, cfg: Config) -> bool:
    tc = cfg.train
    return (step % tc.log_every == 0 or step % tc.eval_every == 0 or step == tc.steps
            or _is_layer_stats_step(step, cfg))


class Progress:
    """A one-line progress bar on a terminal; plain log lines (at layer-stats steps) otherwise."""

    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.stream = total, stream
        self.tty = stream.isatty()

    def update(self, record: dict[str, Any]) -> None:
        step = record["step"]
        text = f"step {step}/{self.total} loss {record['loss']:.4f} lr {record['lr']:.2e}"
        if "tokens_per_s" in record:
            text += f" {record['tokens_per_s']:,.0f} tok/s"
            if record.get("mfu") is not None:
                text += f" MFU {100 * record['mfu']:.1f}%"
        if self.tty:
            filled = int(30 * step / self.total)
            self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {text}\033[K")
            if step == self.total:
                self.stream.write("\n")
        elif "per_layer_grad_norm" in record:
            self.stream.write(text + "\n")
        self.stream.flush()


def prepare_run_dir(out: Path) -> None:
    if (out / "metrics.jsonl").exists() or (out / "summary.json").exists():
        raise ValueError(
            f"{out} already holds a run (metrics.jsonl / summary.json): choose a new --out directory"
        )
    out.mkdir(parents=True, exist_ok=True)


def train(cfg: Config, out: str | Path) -> dict[str, Any]:
    """Train one model as configured; write DIR/config.yaml, metrics.jsonl, summary.json.
    Returns the summary."""
    out = Path(out)
    prepare_run_dir(out)
    tc = cfg.train
    shard = (jax.process_index(), jax.process_count())
    batches = Batches(cfg.data, cfg.model.seq_len, tc.batch_size, *shard)
    tokenizer = batches.tokenizer
    if cfg.model.vocab_size is None:
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, vocab_size=tokenizer.vocab_size))
    elif cfg.model.vocab_size < tokenizer.vocab_size:
        raise ValueError(
            f"model.vocab_size={cfg.model.vocab_size} is smaller than the {tokenizer.name} "
            f"tokenizer's vocabulary ({tokenizer.vocab_size}): use >= {tokenizer.vocab_size} or null"
        )
    cfg.validate()
    dump_config(cfg, out / "config.yaml")

    mesh = make_mesh(cfg.mesh)
    trainer = build_trainer(cfg, mesh)
    eval_set = validation_batches(cfg.data, cfg.model.seq_len, tc.batch_size, tc.eval_batches, *shard)
    eval_set = None if eval_set is None else [
        jax.make_array_from_process_local_data(trainer.batch_sharding, b) for b in eval_set]
    eval_loss = None  # latest validation loss
    tokens_per_step = tc.batch_size * cfg.model.seq_len
    flops_per_step = size.flops_per_token(cfg.model) * tokens_per_step
    peak = peak_flops_per_device()
    peak_total = peak * mesh.size if peak else None

    writer = MetricsWriter(out / "metrics.jsonl")
    progress = Progress(tc.steps)
    logged_steps: list[int] = []
    logged_losses: list[float] = []
    start = time.perf_counter()
    last_stats = None  # (step, time) of the previous layer-stats fetch, for tokens/s

    def record(step: int, metrics) -> None:
        nonlocal last_stats, eval_loss
        values = jax.device_get(metrics)  # waits for step `step` only; step+1 is already queued
        now = time.perf_counter()
        rec: dict[str, Any] = {"step": step, "tokens": step * tokens_per_step}
        for name, value in values.items():
            rec[name] = np.asarray(value).tolist()
        rec["elapsed_s"] = round(now - start, 3)
        if "eval_loss" in rec:
            eval_loss = rec["eval_loss"]
        if "per_layer_grad_norm" in rec:
            rec["data_skipped"] = batches.skipped()
            if last_stats is not None and step > last_stats[0]:
                tokens_per_s = (step - last_stats[0]) * tokens_per_step / (now - last_stats[1])
                rec["tokens_per_s"] = tokens_per_s
                rec["flops_per_s"] = tokens_per_s * flops_per_step / tokens_per_step
                rec["mfu"] = rec["flops_per_s"] / peak_total if peak_total else None
            last_stats = (step, now)
        logged_steps.append(step)
        logged_losses.append(float(rec["loss"]))
        writer.write(rec)
        progress.update(rec)

    state = trainer.init()
    pending = None
    try:
        for step in range(1, tc.steps + 1):
            tokens = jax.make_array_from_process_local_data(trainer.batch_sharding, next(batches))
            step_fn = trainer.step_with_layer_stats if _is_layer_stats_step(step, cfg) else trainer.step
            state, metrics = step_fn(state, tokens)
            if eval_set is not None and (step % tc.eval_every == 0 or step == tc.steps):
                metrics = {**metrics, "eval_loss": sum(trainer.eval_loss(state, b) for b in eval_set) / len(eval_set)}
            if pending is not None:
                record(*pending)
            pending = (step, metrics) if _is_log_step(step, cfg) else None
        if pending is not None:
            record(*pending)
    finally:
        writer.close()
        batches.close()
    wall = time.perf_counter() - start

    loss, loss_se, n_tail = final_loss(logged_steps, logged_losses, tc.steps)
    tokens = tc.steps * tokens_per_step
    summary = {
        "name": out.name,
        "status": "finished",
        "model": dataclasses.asdict(cfg.model),
        "params": size.count_params(cfg.model),
        "params_non_embedding": size.non_embedding_params(cfg.model),
        "tokens": tokens,
        "flops": size.flops_per_token(cfg.model) * tokens,
        "final_loss": loss,
        "final_loss_se": loss_se,
        "final_loss_steps": n_tail,
        "eval_loss": eval_loss,
        "data": {"dataset": batches.name, "tokenizer": tokenizer.name, "skipped": batches.skipped()},
        "steps": tc.steps,
        "wall_time_s": round(wall, 3),
        "devices": mesh.size,
        "device_kind": jax.devices()[0].device_kind,
        "mesh": dict(mesh.shape),
    }
    write_json(out / "summary.json", summary)
    return summary
