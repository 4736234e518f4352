"""One training run, top to bottom: data -> mesh -> model and compiled step -> restore -> loop
-> records.

The loop never waits on the device except at logging and checkpoint points: step n+1 is
dispatched before the metrics of step n are fetched. A run directory is enough to resume:
`train(cfg, DIR)` on a directory with checkpoints continues from the newest readable one, with
the data iterator where it was, so the losses are those of an uninterrupted run.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import sys
import time
from typing import Any

import jax
import numpy as np
from etils import epath

from depthdelusion.config import Config, dump_config, from_dict
from depthdelusion.data.pipeline import Batches, validation_batches
from depthdelusion.model import size
from depthdelusion.parallel.mesh import make_mesh
from depthdelusion.train.checkpoints import Checkpointer
from depthdelusion.train.hardware import peak_flops_per_device
from depthdelusion.train.records import MetricsWriter, TensorBoardWriter, final_loss, read_metrics, write_json
from depthdelusion.train.step import build_trainer
from depthdelusion.train.watchdog import Watchdog, end_every_host

# Fields that may differ between a run's saved config and the one resuming it: they change
# how a run is watched or executed, never its numbers.
RESUMABLE_CHANGES = {
    "train": {"log_every", "layer_stats_every", "eval_every", "checkpoint_every", "checkpoint_minutes",
              "keep_checkpoints", "profile_steps", "grad_accum_steps", "watchdog_minutes"},
    "data": {"workers", "prefetch"},
    "mesh": {"data", "fsdp", "tensor"},
}


class NonFiniteError(RuntimeError):
    pass


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

    def __init__(self, total: int, stream=sys.stderr, enabled: bool = True):
        self.total, self.stream, self.enabled = total, stream, enabled
        self.tty = stream.isatty()

    def update(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        step = record["step"]
        text = f"step {step}/{self.total} loss {record['loss']:.4f} lr {record['lr']:.2e}"
        if "eval_loss" in record:
            text += f" eval {record['eval_loss']:.4f}"
        if "tokens_per_s" in record:
            text += f" {record['tokens_per_s']:,.0f} tok/s"
            if record.get("mfu") is not None:
                text += f" MFU {100 * record['mfu']:.1f}%"
        if self.tty:
            filled = int(30 * step / self.total)
            self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {text}\033[K")
            if step == self.total:
                self.stream.write("\n")
        elif "per_layer_grad_norm" in record or "eval_loss" in record:
            self.stream.write(text + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        if self.enabled:
            self.stream.write(("\n" if self.tty else "") + text + "\n")
            self.stream.flush()


def check_resumable(saved: Config, cfg: Config, out: epath.Path) -> None:
    """A resumed run must compute the same numbers: only watching/execution fields may change."""
    a, b = saved.to_dict(), cfg.to_dict()
    changed = [f"{section}.{name}: {a[section][name]!r} -> {b[section][name]!r}"
               for section in a for name in a[section]
               if a[section][name] != b[section][name] and name not in RESUMABLE_CHANGES.get(section, ())]
    if changed:
        raise ValueError(
            f"{out} holds a run with a different configuration ({'; '.join(changed)}): resume it "
            "with its own config.yaml, or start a new --out directory"
        )


def _resolve_vocab(cfg: Config, tokenizer) -> Config:
    if cfg.model.vocab_size is None:
        return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, vocab_size=tokenizer.vocab_size))
    if cfg.model.vocab_size < tokenizer.vocab_size:
        raise ValueError(
            f"model.vocab_size={cfg.model.vocab_size} is smaller than the {tokenizer.name} "
            f"tokenizer's vocabulary ({tokenizer.vocab_size}): use >= {tokenizer.vocab_size} or null"
        )
    return cfg


def _any_process(*flags: bool) -> tuple[bool, ...]:
    """Each flag is true if it is on any process (a host collective: called at log steps only).
    SIGTERM and the checkpoint clock reach hosts at different steps; acting on them alone would
    leave one host saving or exiting while the others wait in the step's collectives. The
    all-gather queues behind the step just dispatched, so multi-host runs should log every few
    steps (the paper grids: 10), not every step."""
    from jax.experimental import multihost_utils

    gathered_PxF = multihost_utils.process_allgather(np.asarray(flags, np.int32))
    return tuple(bool(v) for v in np.asarray(gathered_PxF).reshape(-1, len(flags)).any(axis=0))


class _StepProfiler:
    """A jax.profiler trace of steps START..STOP (train.profile_steps) into OUT/profile/, each
    step annotated with its number. Tracing stops once step STOP's device work is done."""

    def __init__(self, cfg: Config, out: epath.Path, first_step: int):
        profile = cfg.train.profile_range()
        self.start, self.stop = (max(profile[0], first_step), profile[1]) if profile else (0, -1)
        self.log_dir = out / "profile"
        self.active = False

    def before(self, step: int) -> None:
        if step == self.start and step <= self.stop:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            jax.profiler.start_trace(str(self.log_dir))
            self.active = True

    def annotate(self, step: int):
        return jax.profiler.StepTraceAnnotation("train", step_num=step) if self.active else contextlib.nullcontext()

    def after(self, step: int, state) -> None:
        if self.active and step == self.stop:
            jax.block_until_ready(state)
            self.close()

    def close(self) -> None:
        if self.active:
            self.active = False
            jax.profiler.stop_trace()


class _Preemption:
    """SIGTERM (how a spot TPU VM is preempted) sets a flag; the loop saves and exits cleanly."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        try:
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        except ValueError:  # not the main thread: leave signals alone
            self._previous = None
        return self

    def _handle(self, signum, frame):
        self.requested = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


def train(cfg: Config, out: epath.PathLike) -> dict[str, Any]:
    """Train (or resume) one model as configured; writes DIR/config.yaml, metrics.jsonl,
    summary.json, tensorboard/ (process 0) and DIR/checkpoints/ (every process). Returns the
    summary; its status is "finished", "preempted" (SIGTERM: saved, resume later) or "failed".
    `out` may be local or remote (gs://…, through etils.epath).

    On several processes an exception on any one host ends every host with status 1 (the
    others would wait in collectives: train/watchdog.py); a NonFiniteError is raised instead,
    since every host computes the same check at the same step. A step that does not advance
    for train.watchdog_minutes ends the run on any number of hosts."""
    try:
        with Watchdog(cfg.train.watchdog_minutes * 60) as watchdog:
            return _train(cfg, epath.Path(out), watchdog)
    except NonFiniteError:
        raise
    except Exception as err:
        if jax.process_count() > 1:
            import traceback

            traceback.print_exc()
            end_every_host(f"{epath.Path(out).name}: {type(err).__name__}: {err}")
        raise


def _train(cfg: Config, out: epath.Path, watchdog: Watchdog) -> dict[str, Any]:
    primary = jax.process_index() == 0
    if (out / "summary.json").exists():
        summary = json.loads((out / "summary.json").read_text())
        if summary.get("status") == "finished":
            return summary  # nothing to do: a finished run is never trained again
    tc = cfg.train
    shard = (jax.process_index(), jax.process_count())
    batches = Batches(cfg.data, cfg.model.seq_len, tc.batch_size, *shard)
    try:  # the iterator runs a prefetch thread: stop it if the run fails before the loop
        tokenizer = batches.tokenizer
        cfg = _resolve_vocab(cfg, tokenizer).validate()
        if (out / "config.yaml").exists():
            import yaml

            check_resumable(from_dict(yaml.safe_load((out / "config.yaml").read_text()), str(out / "config.yaml")), cfg, out)
        if primary:
            out.mkdir(parents=True, exist_ok=True)
            dump_config(cfg, out / "config.yaml")

        mesh = make_mesh(cfg.mesh)
        trainer = build_trainer(cfg, mesh)
        eval_set = validation_batches(cfg.data, cfg.model.seq_len, tc.batch_size, tc.eval_batches, *shard)
        eval_set = None if eval_set is None else [
            jax.make_array_from_process_local_data(trainer.batch_sharding, b) for b in eval_set]
        tokens_per_step = tc.batch_size * cfg.model.seq_len
        flops_per_step = size.flops_per_token(cfg.model) * tokens_per_step
        peak = peak_flops_per_device()
        peak_total = peak * mesh.size if peak else None

        checkpointer = Checkpointer(out / "checkpoints", tc.checkpoint_every, tc.checkpoint_minutes,
                                    tc.keep_checkpoints)
        restored = checkpointer.restore_latest(trainer.abstract_state, trainer.state_sharding, batches.iterator)
    except BaseException:
        batches.close()
        raise
    state, start_step = (trainer.init(), 0) if restored is None else (restored[1], restored[0])
    previous = read_metrics(out / "metrics.jsonl")
    already_logged = max((r["step"] for r in previous), default=0)  # metrics.jsonl is append-only
    logged = {r["step"]: r["loss"] for r in previous if "loss" in r}
    eval_loss = next((r["eval_loss"] for r in reversed(previous) if "eval_loss" in r), None)

    writer = MetricsWriter(out / "metrics.jsonl") if primary else None
    board = TensorBoardWriter(out / "tensorboard") if primary else None
    progress = Progress(tc.steps, enabled=primary)
    if start_step:
        progress.note(f"resuming {out} from the checkpoint at step {start_step}")
    start = time.perf_counter()
    last_stats = None  # (step, time) of the previous layer-stats fetch, for tokens/s

    def record(step: int, metrics) -> None:
        nonlocal last_stats, eval_loss
        values = jax.device_get(metrics)  # waits for step `step` only; step+1 is already queued
        now = time.perf_counter()
        nonfinite = values.pop("nonfinite")
        rec: dict[str, Any] = {"step": step, "tokens": step * tokens_per_step}
        rec.update({name: np.asarray(value).tolist() for name, value in values.items()})
        rec["elapsed_s"] = round(now - start, 3)
        if nonfinite[0]:
            rec["nonfinite_steps"] = int(nonfinite[0])
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
        if step > already_logged:
            logged[step] = float(rec["loss"])
            if writer is not None:
                writer.write(rec)
                board.write(rec)
        progress.update(rec)
        if nonfinite[0] and tc.nonfinite == "stop":
            layer = int(nonfinite[2])
            where = f"first non-finite gradient norm in block {layer}" if layer >= 0 else (
                "the blocks' gradients were finite: the loss, embedding or head gradient was not")
            raise NonFiniteError(
                f"non-finite loss or gradient at step {int(nonfinite[1])} ({where}); the update was "
                "not applied and the last checkpoint is good. Lower train.lr or raise train.warmup_steps, "
                "or set train.nonfinite=skip to drop such steps and go on")

    def summary(status: str, step: int, error: str | None = None) -> dict[str, Any]:
        steps = sorted(logged)
        loss, loss_se, n_tail = final_loss(steps, [logged[s] for s in steps], tc.steps) if steps else (None, None, 0)
        tokens = step * tokens_per_step
        result = {
            "name": out.name, "status": status, "model": dataclasses.asdict(cfg.model),
            "params": size.count_params(cfg.model), "params_non_embedding": size.non_embedding_params(cfg.model),
            "tokens": tokens, "flops": size.flops_per_token(cfg.model) * tokens,
            "final_loss": loss, "final_loss_se": loss_se, "final_loss_steps": n_tail, "eval_loss": eval_loss,
            "data": {"dataset": batches.name, "tokenizer": tokenizer.name, "skipped": batches.skipped()},
            "steps": step, "wall_time_s": round(time.perf_counter() - start, 3),
            "devices": mesh.size, "processes": jax.process_count(),
            "device_kind": jax.devices()[0].device_kind, "mesh": dict(mesh.shape),
        }
        if error:
            result["error"] = error
        if primary:
            write_json(out / "summary.json", result)
        return result

    def save(step: int) -> None:
        if writer is not None:  # records up to the checkpoint reach remote run directories first
            writer.flush()
            board.flush()
        checkpointer.save(step, state, batches.get_state())

    step = start_step
    pending = None
    profiler = _StepProfiler(cfg, out, start_step + 1)
    try:
        with _Preemption() as preemption:
            for step in range(start_step + 1, tc.steps + 1):
                watchdog.beat(step)
                profiler.before(step)
                tokens = jax.make_array_from_process_local_data(trainer.batch_sharding, next(batches))
                step_fn = trainer.step_with_layer_stats if _is_layer_stats_step(step, cfg) else trainer.step
                with profiler.annotate(step):
                    state, metrics = step_fn(state, tokens)
                profiler.after(step, state)
                if eval_set is not None and (step % tc.eval_every == 0 or step == tc.steps):
                    metrics = {**metrics, "eval_loss": sum(trainer.eval_loss(state, b) for b in eval_set) / len(eval_set)}
                if pending is not None:
                    record(*pending)
                pending = (step, metrics) if _is_log_step(step, cfg) else None
                by_time, preempted = checkpointer.due_by_time(), preemption.requested
                if jax.process_count() > 1:  # every host must save (and stop) at the same step
                    by_time, preempted = _any_process(by_time, preempted) if _is_log_step(step, cfg) else (False, False)
                if checkpointer.due_by_steps(step) or by_time or preempted or step == tc.steps:
                    if pending is not None:  # the non-finite check comes before any save
                        record(*pending)
                        pending = None
                    elif tc.nonfinite == "stop" and int(jax.device_get(state.nonfinite)[0]):
                        record(step, {**metrics, "nonfinite": state.nonfinite})
                    save(step)
                if preempted:
                    checkpointer.wait()
                    progress.note(f"SIGTERM: saved the checkpoint at step {step}; resume with the same command")
                    return summary("preempted", step)
            if pending is not None:
                record(*pending)
        checkpointer.wait()
        return summary("finished", step)
    except Exception as err:  # recorded for sweeps and humans; the last checkpoint stays
        summary("failed", step, f"{type(err).__name__}: {err}")
        raise
    finally:
        profiler.close()
        checkpointer.close()
        batches.close()
        if writer is not None:
            writer.close()
            board.close()
