"""train.profile_steps: a jax.profiler trace of exactly the asked steps, written by the real loop."""
from __future__ import annotations

import dataclasses

import jax
import pytest
from jax.profiler import ProfileData

from depthdelusion import rundir
from depthdelusion.config import Config, DataConfig, ModelConfig, TrainConfig
from depthdelusion.train import loop
from dispatch_counter import count_dispatches

STEPS = 5


def test_profile_steps_trace_steps_2_to_3_and_nothing_else(tmp_path, monkeypatch):
    # grad_accum_steps=2: the loop also trains through both step variants with microbatches.
    cfg = Config(model=ModelConfig(depth=2, width=64, head_dim=16, seq_len=32),
                 data=DataConfig(builtin_documents=200, prefetch=2),
                 train=TrainConfig(steps=STEPS, batch_size=16, warmup_steps=2, log_every=1, layer_stats_every=2,
                                   eval_every=1000, eval_batches=0, checkpoint_every=0, checkpoint_minutes=0,
                                   grad_accum_steps=2, profile_steps="2-3"))
    dispatched = count_dispatches(monkeypatch)
    calls: list[tuple[str, int]] = []
    start, stop = jax.profiler.start_trace, jax.profiler.stop_trace

    def counted_start(log_dir, *args, **kwargs):
        calls.append(("start", dispatched[0]))
        return start(log_dir, *args, **kwargs)

    def counted_stop():
        calls.append(("stop", dispatched[0]))
        return stop()

    monkeypatch.setattr(jax.profiler, "start_trace", counted_start)
    monkeypatch.setattr(jax.profiler, "stop_trace", counted_stop)
    summary = loop.train(cfg, tmp_path / "run")
    monkeypatch.undo()

    assert summary["status"] == "finished" and dispatched[0] == STEPS
    # Started before step 2 was dispatched, stopped right after step 3 (once its work was done).
    assert calls == [("start", 1), ("stop", 3)]
    traces = list((tmp_path / "run" / "profile").glob("plugins/profile/*/*.xplane.pb"))
    assert len(traces) == 1
    annotated = sorted(int(dict(event.stats)["step_num"])
                       for plane in ProfileData.from_file(str(traces[0])).planes
                       for line in plane.lines for event in line.events if event.name == "train")
    assert annotated == [2, 3]


def test_profile_steps_must_be_a_range_within_the_run():
    train = TrainConfig(steps=10)
    for bad in ("3", "5-2", "0-2", "2:4"):
        with pytest.raises(ValueError, match=r'train.profile_steps=.*expected "START-STOP"'):
            dataclasses.replace(train, profile_steps=bad).validate()
    with pytest.raises(ValueError, match="STOP must be <= train.steps=10"):
        dataclasses.replace(train, profile_steps="5-11").validate()
    assert dataclasses.replace(train, profile_steps="10-10").profile_range() == (10, 10)


def test_a_run_may_resume_with_profiling_turned_on():
    saved = Config(train=TrainConfig(steps=10))
    assert rundir.differs_in_numbers(
        saved, dataclasses.replace(saved, train=dataclasses.replace(saved.train, profile_steps="6-7"))) == []
