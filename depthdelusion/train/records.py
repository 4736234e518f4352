"""What a training run records as it goes: the `Recorder` turns each logged step's metrics into
a line of metrics.jsonl, the scalars of the configured trackers (TensorBoard, W&B, MLflow:
train/trackers.py) and the progress line (with tokens/s and MFU), applies the non-finite
policy, and writes summary.json at the end (files: depthdelusion/rundir.py)."""
from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import Any

import jax
import numpy as np
from etils import epath
from tqdm import tqdm

from depthdelusion import rundir
from depthdelusion.progress import on_terminal
from depthdelusion.config import Config
from depthdelusion import model_size as size
from depthdelusion.train.trackers import open_trackers
from depthdelusion.version import code_version


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


class Progress:
    """A tqdm bar on a terminal (the metrics as its postfix); plain log lines (at layer-stats and
    eval steps) otherwise, since a log file would fill with the bar's redraws."""

    def __init__(self, total: int, stream=None, enabled: bool = True):
        # sys.stderr when called, not when this module was imported (a test runner may have
        # replaced it meanwhile with a capture stream it has since closed)
        stream = sys.stderr if stream is None else stream
        self.total, self.stream, self.enabled = total, stream, enabled
        self.tty = on_terminal(stream)  # the one terminal-or-log decision (progress.py)
        self.bar = None  # opened at the first update: a resumed run's bar starts at its step

    def update(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        step = record["step"]
        text = f"loss {record['loss']:.4f} lr {record['lr']:.2e}"
        if "eval_loss" in record:
            text += f" eval {record['eval_loss']:.4f}"
        if "tokens_per_s" in record:
            text += f" {record['tokens_per_s']:,.0f} tok/s"
            if record.get("mfu") is not None:
                text += f" MFU {100 * record['mfu']:.1f}%"
        if self.tty:
            if self.bar is None:
                self.bar = tqdm(total=self.total, initial=step - 1, file=self.stream, unit="step",
                                dynamic_ncols=True)
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(step - self.bar.n)
            if step == self.total:
                self.close()
        elif "per_layer_grad_norm" in record or "eval_loss" in record:
            self.stream.write(f"step {step}/{self.total} {text}\n")
            self.stream.flush()

    def note(self, text: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(text, file=self.stream)  # above the bar, which is drawn again below
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class NonFiniteError(RuntimeError):
    """A non-finite loss or gradient with train.nonfinite=stop (the update was not applied)."""


class Recorder:
    """The records of one run from where it resumes. Process 0 writes metrics.jsonl (after the
    steps already on file: the file is append-only), the trackers and the progress line, and
    summary.json; every process runs the non-finite check, which gives the same answer on each.
    Tokens/s and MFU are measured between layer-stats steps (the steps that fetch the most)."""

    def __init__(self, cfg: Config, out: epath.Path, batches, mesh, peak_flops_per_device: float | None,
                 primary: bool):
        self.cfg, self.out, self.batches, self.mesh, self.primary = cfg, out, batches, mesh, primary
        previous = rundir.read_metrics(out)
        self.already_logged = max((r["step"] for r in previous), default=0)
        self.losses = {r["step"]: r["loss"] for r in previous if "loss" in r}
        self.eval_loss = next((r["eval_loss"] for r in reversed(previous) if "eval_loss" in r), None)
        self.tokens_per_step = cfg.train.batch_size * cfg.model.seq_len
        self.flops_per_token = size.flops_per_token(cfg.model)
        self.peak_total = peak_flops_per_device * mesh.size if peak_flops_per_device else None
        self.metrics = rundir.MetricsWriter(out) if primary else None
        self.trackers = open_trackers(cfg.train.trackers, out, self.metadata()) if primary else None
        self.status = "failed"  # until summary() says otherwise
        self.progress = Progress(cfg.train.steps, enabled=primary)
        self.start = time.perf_counter()
        self.last_stats: tuple[int, float] | None = None  # (step, time) of the previous layer-stats fetch

    def record(self, step: int, metrics: dict[str, Any]) -> None:
        """Fetch step `step`'s metrics (step+1 is already queued), write them, and raise
        NonFiniteError if the step was not finite and train.nonfinite is "stop"."""
        values = jax.device_get(metrics)
        now = time.perf_counter()
        nonfinite = values.pop("nonfinite")  # (count, first bad step, first bad block)
        rec: dict[str, Any] = {"step": step, "tokens": step * self.tokens_per_step}
        rec.update({name: np.asarray(value).tolist() for name, value in values.items()})
        rec["elapsed_s"] = round(now - self.start, 3)
        if nonfinite[0]:
            rec["nonfinite_steps"] = int(nonfinite[0])
        if "eval_loss" in rec:
            self.eval_loss = rec["eval_loss"]
        if "per_layer_grad_norm" in rec:
            rec["data_skipped"] = self.batches.skipped()
            rec.update(self._throughput(step, now))
        if step > self.already_logged:
            self.losses[step] = float(rec["loss"])
            if self.primary:
                self.metrics.write(rec)
                self.trackers.log(rec)
        self.progress.update(rec)
        if nonfinite[0] and self.cfg.train.nonfinite == "stop":
            layer = int(nonfinite[2])
            where = f"first non-finite gradient norm in block {layer}" if layer >= 0 else (
                "the blocks' gradients were finite: the loss, embedding or head gradient was not")
            raise NonFiniteError(
                f"non-finite loss or gradient at step {int(nonfinite[1])} ({where}); the update was "
                "not applied and the last checkpoint is good. Lower train.lr or raise train.warmup_steps, "
                "or set train.nonfinite=skip to drop such steps and go on")

    def _throughput(self, step: int, now: float) -> dict[str, Any]:
        previous, self.last_stats = self.last_stats, (step, now)
        if previous is None or step <= previous[0]:
            return {}
        tokens_per_s = (step - previous[0]) * self.tokens_per_step / (now - previous[1])
        flops_per_s = tokens_per_s * self.flops_per_token
        return {"tokens_per_s": tokens_per_s, "flops_per_s": flops_per_s,
                "mfu": flops_per_s / self.peak_total if self.peak_total else None}

    def flush(self) -> None:
        """Before a checkpoint: the records up to it reach a remote run directory first."""
        if self.primary:
            self.metrics.flush()
            self.trackers.flush()

    def note(self, text: str) -> None:
        self.progress.note(text)

    def hardware(self) -> dict[str, Any]:
        mesh = self.mesh
        return {"device_kind": jax.devices()[0].device_kind, "devices": mesh.size,
                "processes": jax.process_count(), "mesh": dict(mesh.shape)}

    def metadata(self) -> dict[str, Any]:
        """What every tracker gets once: the resolved config, the code version, the hardware."""
        return {"config": self.cfg.to_dict(), "code_version": code_version(), "hardware": self.hardware()}

    def summary(self, status: str, step: int, error: str | None = None) -> dict[str, Any]:
        """summary.json (written by process 0) for a run that ended at `step` with `status`."""
        cfg = self.cfg
        steps = sorted(self.losses)
        loss, loss_se, n_tail = (final_loss(steps, [self.losses[s] for s in steps], cfg.train.steps)
                                 if steps else (None, None, 0))
        tokens = step * self.tokens_per_step
        result = {
            "name": self.out.name, "status": status, "model": dataclasses.asdict(cfg.model),
            "params": size.count_params(cfg.model), "params_non_embedding": size.non_embedding_params(cfg.model),
            "tokens": tokens, "flops": self.flops_per_token * tokens,
            "final_loss": loss, "final_loss_se": loss_se, "final_loss_steps": n_tail, "eval_loss": self.eval_loss,
            "data": {"dataset": self.batches.name, "tokenizer": self.batches.tokenizer.name,
                     "skipped": self.batches.skipped()},
            "steps": step, "wall_time_s": round(time.perf_counter() - self.start, 3),
            **self.hardware(), "code_version": code_version(),
        }
        if error:
            result["error"] = error
        self.status = status
        if self.primary:
            rundir.write_summary(self.out, result)
            self.trackers.log_summary(result)
        return result

    def close(self) -> None:
        self.progress.close()
        if self.primary:
            self.metrics.close()
            self.trackers.finish(self.status)
