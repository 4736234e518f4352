"""One training run, top to bottom: data -> mesh -> model and compiled step -> restore -> loop
-> records.

The loop never waits on the device except at logging and checkpoint points: step n+1 is
dispatched before the metrics of step n are fetched. A run directory is enough to resume:
`train(cfg, DIR)` on a directory with checkpoints continues from the newest readable one, with
the data iterator where it was, so the losses are those of an uninterrupted run.
"""
from __future__ import annotations

import contextlib
from typing import Any

import jax
from etils import epath

from depthdelusion import rundir
from depthdelusion.config import Config
from depthdelusion.data.pipeline import Batches, validation_batches
from depthdelusion.parallel.mesh import make_mesh
from depthdelusion.train.checkpoints import Checkpointer, SavePolicy
from depthdelusion.train.hardware import peak_flops_per_device
from depthdelusion.train.records import NonFiniteError, Recorder
from depthdelusion.train.step import build_trainer
from depthdelusion.train.watchdog import Watchdog, end_every_host


def _is_layer_stats_step(step: int, cfg: Config) -> bool:
    """Per-layer statistics after update 1 (the initial profile), every k, and the last."""
    k = cfg.train.layer_stats_every
    return step == 1 or step % k == 0 or step == cfg.train.steps


def _is_log_step(step: int, cfg: Config) -> bool:
    tc = cfg.train
    return (step % tc.log_every == 0 or step % tc.eval_every == 0 or step == tc.steps
            or _is_layer_stats_step(step, cfg))


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


def train(cfg: Config, out: epath.PathLike) -> dict[str, Any]:
    """Train (or resume) one model as configured; writes DIR/config.yaml, metrics.jsonl,
    summary.json, tensorboard/ (process 0) and DIR/checkpoints/ (every process). Returns the
    summary; its status is "finished", "preempted" (SIGTERM or a
    preemption notice: saved, resume later) or "failed".
    `out` may be local or remote (gs://…, through etils.epath). A finished run is returned as
    it is; a config that changes the numbers of the run in DIR, finished or not, raises
    rundir.ConfigChanged.

    On several processes an exception on any one host ends every host with status 1 (the
    others would wait in collectives: train/watchdog.py); a NonFiniteError is raised instead,
    since every host computes the same check at the same step. A step that does not advance
    for train.watchdog_minutes ends the run on any number of hosts."""
    cfg = cfg.validate()  # (a config built in code: its vocabulary is set here)
    out = epath.Path(out)
    rundir.check_same_numbers(out, cfg)
    if rundir.status(out) == "finished":
        return rundir.read_summary(out)  # nothing to do: a finished run is never trained again
    try:
        with Watchdog(cfg.train.watchdog_minutes * 60) as watchdog:
            return _train(cfg, out, watchdog)
    except NonFiniteError:
        raise
    except Exception as err:
        if jax.process_count() > 1:
            import traceback

            traceback.print_exc()
            end_every_host(f"{out.name}: {type(err).__name__}: {err}")
        raise


def _train(cfg: Config, out: epath.Path, watchdog: Watchdog) -> dict[str, Any]:
    primary, tc = jax.process_index() == 0, cfg.train
    shard = (jax.process_index(), jax.process_count())
    batches = Batches(cfg.data, cfg.model.seq_len, tc.batch_size, *shard)
    try:  # the iterator runs a prefetch thread: stop it if the run fails before the loop
        if primary:
            out.mkdir(parents=True, exist_ok=True)
            rundir.write_config(out, cfg)
        mesh = make_mesh(cfg.mesh)
        trainer = build_trainer(cfg, mesh)
        eval_set = validation_batches(cfg.data, cfg.model.seq_len, tc.batch_size, tc.eval_batches, *shard)
        eval_set = None if eval_set is None else [
            jax.make_array_from_process_local_data(trainer.batch_sharding, b) for b in eval_set]
        checkpointer = Checkpointer(out / "checkpoints", tc.checkpoint_every, tc.checkpoint_minutes,
                                    tc.keep_checkpoints)
        restored = checkpointer.restore_latest(trainer.abstract_state, trainer.state_sharding, batches.iterator)
        recorder = Recorder(cfg, out, batches, mesh, peak_flops_per_device(), primary)
    except BaseException:
        batches.close()
        raise
    state, start_step = (trainer.init(), 0) if restored is None else (restored[1], restored[0])
    if start_step:
        recorder.note(f"resuming {out} from the checkpoint at step {start_step}")

    step, pending = start_step, None  # pending: the logged step whose metrics are not fetched yet
    profiler = _StepProfiler(cfg, out, start_step + 1)
    try:
        with SavePolicy(checkpointer, tc.steps) as saves:
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
                    recorder.record(*pending)
                pending = (step, metrics) if _is_log_step(step, cfg) else None
                save, preempted = saves.due(step, log_step=_is_log_step(step, cfg))
                if save:  # the non-finite check comes before any save
                    if pending is not None:
                        recorder.record(*pending)
                        pending = None
                    elif tc.nonfinite == "stop" and int(jax.device_get(state.nonfinite)[0]):
                        recorder.record(step, {**metrics, "nonfinite": state.nonfinite})
                    recorder.flush()
                    checkpointer.save(step, state, batches.get_state())
                if preempted:
                    checkpointer.wait()
                    recorder.note(f"{saves.reason}: saved the checkpoint at step {step}; resume with the same command")
                    return recorder.summary("preempted", step)
            if pending is not None:
                recorder.record(*pending)
        checkpointer.wait()
        return recorder.summary("finished", step)
    except Exception as err:  # recorded for sweeps and humans; the last checkpoint stays
        recorder.summary("failed", step, f"{type(err).__name__}: {err}")
        raise
    finally:
        profiler.close()
        checkpointer.close()
        batches.close()
        recorder.close()
