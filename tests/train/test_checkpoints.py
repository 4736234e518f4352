"""Preemption safety: exact resume after SIGKILL / SIGTERM, bad checkpoints, resharding,
the non-finite guard, append-only records."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest
import yaml

from depthdelusion.config import Config, MeshConfig, ModelConfig, TrainConfig, load_config
from depthdelusion.parallel.mesh import make_mesh
from depthdelusion.rundir import read_metrics
from depthdelusion.train.checkpoints import Checkpointer
from depthdelusion.train.loop import NonFiniteError, train
from depthdelusion.train.step import build_trainer
from depthdelusion.train.watchdog import Watchdog

TINY = {
    "model": {"depth": 2, "width": 64, "head_dim": 16, "seq_len": 64},
    "data": {"builtin_documents": 3000},
    "train": {"steps": 24, "batch_size": 8, "lr": 3.0e-3, "warmup_steps": 5, "checkpoint_every": 4,
              "checkpoint_minutes": 0, "layer_stats_every": 8, "eval_every": 12, "eval_batches": 2},
}
# The same config, devices and data give bit-identical float32 arithmetic on CPU; allow for
# nothing more than printing round-off.
LOSS_RTOL = 1e-6


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


@pytest.fixture(scope="module")
def finished_run(config_file, tmp_path_factory):
    """An uninterrupted run, trained once for the module: its directory (tests that write to it
    take a copy) and the summary train() returned."""
    out = tmp_path_factory.mktemp("ref") / "run"
    return out, train(load_config(config_file), out)


@pytest.fixture(scope="module")
def reference(finished_run):
    """The uninterrupted run's {step: loss}."""
    return {r["step"]: r["loss"] for r in read_metrics(finished_run[0])}


def cli(*args):
    return [sys.executable, "-m", "depthdelusion", "train", *map(str, args)]


# `python -m depthdelusion ARGS` whose loop waits before step HOLD (after it wrote MARKER) until a
# SIGTERM reaches the run's own handler (or a SIGKILL ends it): the test's signal lands at a step,
# not after a time, whatever the machine's speed.
HELD = """
import signal, sys, time
from pathlib import Path
from depthdelusion.cli import main
from depthdelusion.train.watchdog import Watchdog
hold, marker = int(sys.argv[1]), Path(sys.argv[2])
beat = Watchdog.beat
def held_beat(self, step):
    if step == hold:
        policy = signal.getsignal(signal.SIGTERM).__self__  # the loop's SavePolicy
        marker.write_text(str(step))
        while not policy.sigterm:
            time.sleep(0.01)
    beat(self, step)
Watchdog.beat = held_beat
sys.exit(main(sys.argv[3:]))
"""


def held_run(config_file, out: Path, hold: int, **popen):
    """A run of the CLI, held before step `hold`; returns once it waits there."""
    marker = out.parent / f"{out.name}.held"
    proc = subprocess.Popen([sys.executable, "-c", HELD, str(hold), str(marker), *cli(config_file, "--out", out)[3:]],
                            **popen)
    deadline = time.monotonic() + 600  # a bound on a hung start only: the hold is at a step
    while not marker.exists():
        assert proc.poll() is None, "the run ended before it reached the step where it waits"
        assert time.monotonic() < deadline, f"the run did not reach step {hold}"
        time.sleep(0.05)
    return proc


def assert_same_losses(out: Path, reference: dict) -> None:
    records = read_metrics(out)
    steps = [r["step"] for r in records]
    assert steps == sorted(set(steps)) == list(range(1, 25)), "a step is missing or repeated"
    for r in records:
        assert r["loss"] == pytest.approx(reference[r["step"]], rel=LOSS_RTOL), r["step"]


def test_sigkill_then_resume_gives_the_uninterrupted_losses(config_file, reference, tmp_path):
    out = tmp_path / "run"
    proc = held_run(config_file, out, hold=12, stderr=subprocess.DEVNULL)  # killed after step 11
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "summary.json").exists()
    done = subprocess.run(cli("--out", out), capture_output=True, text=True)  # resumes
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stderr
    assert json.loads((out / "summary.json").read_text())["status"] == "finished"
    assert_same_losses(out, reference)
    kept = sorted(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())
    assert kept == [16, 20, 24]  # every 4 steps, the newest keep_checkpoints = 3


def test_checkpoint_clock_counts_minutes_since_the_last_save(tmp_path, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr("depthdelusion.train.checkpoints.time.monotonic", lambda: now[0])
    by_time = Checkpointer(tmp_path / "ckpt", every_steps=0, every_minutes=2)
    assert not by_time.due_by_time() and not by_time.due_by_steps(4)
    now[0] += 119
    assert not by_time.due_by_time()
    now[0] += 1
    assert by_time.due_by_time()
    by_steps = Checkpointer(tmp_path / "ckpt2", every_steps=4, every_minutes=0)
    now[0] += 1e6
    assert not by_steps.due_by_time() and by_steps.due_by_steps(8) and not by_steps.due_by_steps(6)
    by_time.close(), by_steps.close()


def test_sigterm_saves_then_resume_finishes(config_file, reference, tmp_path):
    out = tmp_path / "run"
    proc = held_run(config_file, out, hold=7, stderr=subprocess.PIPE, text=True)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 75, err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "preempted" and summary["steps"] == 7  # the step it was in
    assert (out / "checkpoints" / "7").is_dir()  # saved at the step it stopped
    assert subprocess.run(cli("--out", out), capture_output=True).returncode == 0
    assert_same_losses(out, reference)


def corrupt(step_dir: Path) -> None:
    for f in (step_dir / "state").rglob("*"):
        if f.is_file() and f.stat().st_size > 0:
            f.write_bytes(b"\0garbage" * 4)


class _Stopped(BaseException):
    """Ends a run between two steps the way a kill does: no handler of the loop's catches it,
    so no summary is written (only the loop's `finally` runs)."""


def stopped_run(config_file, out: Path, before_step: int) -> None:
    """A run (in this process) ended before `before_step`: at a step, not after a time, so
    any machine's speed leaves the same run directory."""
    beat = Watchdog.beat

    def stop(self, step):
        if step == before_step:
            raise _Stopped
        beat(self, step)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Watchdog, "beat", stop)
        with pytest.raises(_Stopped):
            train(load_config(config_file), out)


def test_bad_checkpoints_are_detected_and_the_previous_one_is_used(config_file, reference, tmp_path):
    out = tmp_path / "run"
    stopped_run(config_file, out, before_step=15)
    assert not (out / "summary.json").exists()
    steps = sorted(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())
    assert steps == [4, 8, 12]
    corrupt(out / "checkpoints" / str(steps[-1]))
    half = out / "checkpoints" / f"{steps[-1] + 4}.orbax-checkpoint-tmp-1234567"  # killed mid-save
    (half / "state").mkdir(parents=True)
    with pytest.warns(UserWarning) as warned:
        train(load_config(out / "config.yaml"), out)
    messages = " | ".join(str(w.message) for w in warned)
    assert f"checkpoint at step {steps[-1]}" in messages and "unreadable" in messages
    assert "incomplete save" in messages and half.name in messages
    assert half.exists() and (out / "checkpoints" / f"{steps[-1]}.unreadable").exists()  # nothing deleted
    assert_same_losses(out, reference)


def test_resuming_past_damaged_array_data_prints_no_tracebacks(config_file, reference, tmp_path):
    # Damaged array chunks (the metadata intact) fail inside orbax's concurrent reads; the reads
    # still in flight must end quietly, not as "Event loop is closed" tracebacks from
    # TensorStore's thread or "Task exception was never retrieved". Whether reads are still in
    # flight when the first fails is a race (about one resume in three here): this end-to-end
    # resume shows the whole path; the deterministic test of the mechanism is
    # test_a_failed_restore_run_cancels_and_awaits_its_other_reads_before_its_loop_closes.
    out = tmp_path / "run"
    stopped_run(config_file, out, before_step=11)
    for chunk in (out / "checkpoints" / "8" / "state").glob("ocdbt.process_*/d/*"):
        chunk.write_bytes(b"\0garbage" * 2)
    proc = subprocess.run(cli(out / "config.yaml", "--out", out), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "checkpoint at step 8" in proc.stderr and "from the checkpoint at step 4" in proc.stderr
    assert "Event loop is closed" not in proc.stderr, proc.stderr[:3000]
    assert "never retrieved" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[:3000]
    assert_same_losses(out, reference)


def test_no_usable_checkpoint_is_a_clear_error_and_nothing_is_deleted(config_file, tmp_path):
    out = tmp_path / "run"
    stopped_run(config_file, out, before_step=7)
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    for step_dir in (out / "checkpoints").iterdir():
        corrupt(step_dir)
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="no usable checkpoint in .*Nothing was deleted"):
        train(load_config(out / "config.yaml"), out)
    after = {str(p.relative_to(out)).replace(".unreadable", "") for p in out.rglob("*") if p.is_file()}
    assert set(before) <= after
    # Running the command again must not start over from step 0 in the same directory.
    metrics = (out / "metrics.jsonl").read_text()
    with warnings.catch_warnings():  # an incomplete save, if the kill left one, is reported again
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(ValueError, match=r"no usable checkpoint in .*\.unreadable were found unreadable earlier"):
            train(load_config(out / "config.yaml"), out)
    assert (out / "metrics.jsonl").read_text() == metrics and not (out / "checkpoints" / "4").exists()


def test_a_different_config_cannot_resume_a_run(config_file, tmp_path):
    out = tmp_path / "run"
    stopped_run(config_file, out, before_step=3)
    with pytest.raises(ValueError, match="different configuration \\(model.width: 64 -> 128"):
        train(load_config(config_file, ["model.width=128"]), out)


def test_finished_run_is_not_trained_again(config_file, finished_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(finished_run[0], out)
    first = finished_run[1]
    lines = (out / "metrics.jsonl").read_text()
    assert train(load_config(config_file), out) == first
    assert (out / "metrics.jsonl").read_text() == lines


@pytest.mark.parametrize("target, parametrization", [((8, 1, 1), "sp"), ((1, 2, 2), "completep")],
                         ids=["8x1x1-sp", "4-devices-1x2x2-completep"])
def test_checkpoint_restores_onto_another_mesh(tmp_path, target, parametrization):
    """CompleteP's per-group optimizer state (optax.partition) restores like SP's."""
    cfg = Config(model=ModelConfig(depth=2, width=64, head_dim=16, vocab_size=257, seq_len=32,
                                   parametrization=parametrization),
                 train=TrainConfig(batch_size=8, lr=1e-2, warmup_steps=1))
    batch = np.random.default_rng(0).integers(0, 257, (8, 33), dtype=np.int32)
    source = build_trainer(cfg, make_mesh(MeshConfig(2, 2, 2)))
    state = source.init()
    state, _ = source.step(state, jax.device_put(batch, source.batch_sharding))
    ckpt = Checkpointer(tmp_path / "ckpt", every_steps=1)
    ckpt.save(1, state, {"position": 7})
    ckpt.close()
    n = int(np.prod(target))
    mesh = make_mesh(MeshConfig(*target), devices=jax.devices()[:n])
    dest = build_trainer(cfg, mesh)

    class Recorder:  # stands in for the data iterator: records what it is given
        def set_state(self, s):
            self.state = s

        def start_prefetch(self):
            pass

    step, restored = Checkpointer(tmp_path / "ckpt").restore_latest(dest.abstract_state, dest.state_sharding, Recorder())
    assert step == 1
    for a, b in zip(jax.tree.leaves(jax.device_get(state)), jax.tree.leaves(jax.device_get(restored))):
        np.testing.assert_array_equal(a, b)
    leaf = restored.params["blocks"]["params"]["up_kernel"][...]
    assert leaf.sharding.mesh.devices.size == n
    _, m_src = source.step(state, jax.device_put(batch, source.batch_sharding))
    _, m_dst = dest.step(restored, jax.device_put(batch, dest.batch_sharding))
    assert float(m_dst["loss"]) == pytest.approx(float(m_src["loss"]), rel=1e-5)


def test_nonfinite_step_is_never_applied_and_names_the_first_bad_block():
    cfg = Config(model=ModelConfig(depth=3, width=32, head_dim=8, vocab_size=50, seq_len=16,
                                   compute_dtype="float32"), train=TrainConfig(batch_size=8, warmup_steps=1))
    trainer = build_trainer(cfg, make_mesh(MeshConfig(8, 1, 1)))
    state = trainer.init()
    kernel = state.params["blocks"]["params"]["up_kernel"]
    kernel[...] = kernel[...].at[1, 0, 0].set(np.inf)  # block 1 is broken
    before = jax.device_get(state.params)
    batch = jax.device_put(np.ones((8, 17), np.int32), trainer.batch_sharding)
    state, metrics = trainer.step_with_layer_stats(state, batch)
    count, first_step, first_layer = jax.device_get(metrics["nonfinite"]).tolist()
    assert (count, first_step) == (1, 1)
    norms = np.asarray(metrics["per_layer_grad_norm"])
    assert first_layer == int(np.argmax(~np.isfinite(norms)))  # the lowest non-finite block
    for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(jax.device_get(state.params))):
        np.testing.assert_array_equal(a, b)  # the update was dropped


def test_divergence_stops_the_run_and_keeps_a_good_checkpoint(config_file, tmp_path):
    out = tmp_path / "run"
    overrides = ["train.lr=1e6", "train.grad_clip=0", "train.warmup_steps=0", "train.steps=200",
                 "train.checkpoint_every=1", "train.eps=1e-30"]
    with pytest.raises(NonFiniteError, match=r"non-finite loss or gradient at step \d+ \((first non-finite "
                       r"gradient norm in block \d+|the blocks' gradients were finite)"):
        train(load_config(config_file, overrides), out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and "non-finite" in summary["error"]
    bad_step = int(summary["error"].split("at step ")[1].split()[0])
    saved = sorted(int(p.name) for p in (out / "checkpoints").iterdir() if p.name.isdigit())
    assert saved and max(saved) < bad_step
    cfg = load_config(out / "config.yaml")
    trainer = build_trainer(cfg, make_mesh(cfg.mesh))

    class Sink:
        def set_state(self, s):
            pass

        def start_prefetch(self):
            pass

    _, state = Checkpointer(out / "checkpoints").restore_latest(trainer.abstract_state, trainer.state_sharding, Sink())
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(jax.device_get(state.params)))
    skip = tmp_path / "skip"
    # non-finite from step 3 on at this lr: 12 steps skip some and finish
    result = train(load_config(config_file, overrides[:-2] + ["train.steps=12", "train.nonfinite=skip"]), skip)
    assert result["status"] == "finished"
    assert max(r.get("nonfinite_steps", 0) for r in read_metrics(skip)) > 0


def read_events(logdir: Path) -> dict[str, dict[int, float]]:
    """Scalars of TensorBoard event files, parsed from their TFRecord framing
    (u64 length, u32 crc, payload, u32 crc) with tensorboardX's Event protobuf."""
    import struct

    from tensorboardX.proto.event_pb2 import Event

    scalars: dict[str, dict[int, float]] = {}
    for path in logdir.glob("events.out.tfevents.*"):
        data, pos = path.read_bytes(), 0
        while pos < len(data):
            (length,) = struct.unpack("<Q", data[pos:pos + 8])
            event = Event.FromString(data[pos + 12:pos + 12 + length])
            pos += 12 + length + 4
            for value in event.summary.value:
                scalars.setdefault(value.tag, {})[event.step] = value.simple_value
    return scalars


def test_tensorboard_has_the_same_scalars(config_file, tmp_path):
    out = tmp_path / "run"
    train(load_config(config_file, ["train.steps=8"]), out)
    scalars = read_events(out / "tensorboard")
    assert {"loss", "lr", "grad_norm", "per_layer_grad_norm/layer_00", "per_layer_act_grad_norm/layer_01"} <= set(scalars)
    losses = scalars["loss"]
    for r in read_metrics(out):
        assert losses[r["step"]] == pytest.approx(r["loss"], rel=1e-6)


class MetadataServer:
    """A stand-in for the GCE metadata server on 127.0.0.1 (it plays the cloud): answers
    instance/preempted and instance/maintenance-event, only with the Metadata-Flavor header;
    `values` may be changed while it runs."""

    def __init__(self, values: dict[str, str]):
        import http.server
        import threading

        self.values, self.requests = values, []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                key = self.path.split("?")[0].removeprefix("/computeMetadata/v1/")
                server.requests.append(key)
                value = server.values(key) if callable(server.values) else server.values.get(key)
                status = 403 if self.headers.get("Metadata-Flavor") != "Google" else 200 if value else 404
                body = (value or "").encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_metadata_watcher_reads_the_preemption_and_maintenance_notices(monkeypatch):
    from depthdelusion.train.checkpoints import MetadataWatcher

    server = MetadataServer({"instance/preempted": "FALSE", "instance/maintenance-event": "NONE"})
    try:
        watcher = MetadataWatcher(host=server.host)
        assert watcher.check() is None
        server.values["instance/maintenance-event"] = "MIGRATE_ON_HOST_MAINTENANCE"  # GCE live migration: no stop
        assert watcher.check() is None
        server.values["instance/maintenance-event"] = "TERMINATE_ON_HOST_MAINTENANCE"
        assert watcher.check() == "instance/maintenance-event=TERMINATE_ON_HOST_MAINTENANCE"
        watcher = MetadataWatcher(host=server.host)
        server.values.update({"instance/preempted": "TRUE", "instance/maintenance-event": "NONE"})
        assert watcher.check() == "instance/preempted=TRUE"
    finally:
        server.close()
    assert set(server.requests) == {"instance/preempted", "instance/maintenance-event"}


def test_metadata_watcher_is_off_away_from_gce(monkeypatch):
    from depthdelusion.train import checkpoints

    monkeypatch.delenv("GCE_METADATA_HOST", raising=False)
    if checkpoints.on_gce():
        pytest.skip("this machine is a GCE VM")
    asked = []
    monkeypatch.setattr(checkpoints.urllib.request, "urlopen", lambda *a, **k: asked.append(a))
    watcher = checkpoints.MetadataWatcher(interval_s=0.01).start()
    time.sleep(0.1)
    watcher.stop()
    assert watcher._thread is None and asked == []


def test_a_metadata_preemption_notice_saves_and_exits_75(config_file, tmp_path):
    """The stand-in says FALSE to the first polls, then TRUE, mid-run (the run is far from its
    last step): the run saves where it is and exits 75, as for SIGTERM."""
    out = tmp_path / "run"
    polls = []

    def values(key):
        if key == "instance/maintenance-event":
            return "NONE"
        polls.append(key)
        return "TRUE" if len(polls) > 2 else "FALSE"

    server = MetadataServer(values)
    try:
        env = {**os.environ, "GCE_METADATA_HOST": server.host}
        proc = subprocess.run(cli(config_file, "--out", out, "--set", "train.steps=100000", "--set", "train.log_every=50"),
                              env=env, capture_output=True, text=True, timeout=600)
    finally:
        server.close()
    assert proc.returncode == 75, proc.stderr[-3000:]
    assert "preemption notice (instance/preempted=TRUE): saved the checkpoint at step" in proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "preempted" and 0 < summary["steps"] < 100000
    assert (out / "checkpoints" / str(summary["steps"])).is_dir()


def test_a_failed_restore_run_cancels_and_awaits_its_other_reads_before_its_loop_closes():
    """Deterministic form of the race behind "Event loop is closed": the first read fails while
    a sibling read is still pending. Orbax's own runner closes the loop with the sibling never
    finished; within the restore's block the sibling is cancelled and awaited, and the first
    read's error is the one raised."""
    import asyncio

    from orbax.checkpoint._src import asyncio_utils

    from depthdelusion.train.checkpoints import _reads_settled_on_error

    def run_failing_restore() -> list[str]:
        seen = []

        async def sibling_read():
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                seen.append("cancelled and awaited")
                raise

        async def restore():
            asyncio.ensure_future(sibling_read())
            await asyncio.sleep(0)  # the sibling starts, then the first read fails
            raise OSError("damaged array data")

        with pytest.raises(OSError, match="damaged array data"):
            asyncio_utils._run_sync_via_new_loop(restore())
        return seen

    with _reads_settled_on_error():
        assert run_failing_restore() == ["cancelled and awaited"]
    with warnings.catch_warnings():  # orbax's runner: the sibling is destroyed while pending
        warnings.simplefilter("ignore")
        assert run_failing_restore() == []
