"""One run as 2 local processes x 4 CPU devices (jax.distributed, gloo) = 1 process x 8 devices."""
import json
import os
import signal
import subprocess
import sys
import time

import portpicker
import pytest
import yaml

from depthdelusion.config import load_config
from depthdelusion.rundir import read_metrics
from depthdelusion.train.loop import train
from host_devices import FOUR_DEVICES

CONFIG = {
    "model": {"depth": 2, "width": 64, "head_dim": 16, "seq_len": 32},
    "data": {"builtin_documents": 2000},
    "train": {"steps": 6, "batch_size": 8, "lr": 3.0e-3, "warmup_steps": 2, "checkpoint_every": 3,
              "layer_stats_every": 3, "eval_every": 3, "eval_batches": 1},
}


def test_two_processes_match_one_process(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    single = tmp_path / "single"
    train(load_config(config), single)  # this pytest process has 8 simulated devices

    multi = tmp_path / "multi"
    port = portpicker.pick_unused_port()
    procs = start_two_processes(config, multi, port)
    outputs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-3000:]
    assert "run written" in outputs[0][0] and "run written" not in outputs[1][0]  # process 0 reports

    one = read_metrics(single)
    two = read_metrics(multi)
    assert [r["step"] for r in two] == list(range(1, 7))  # written once: only process 0 writes
    for a, b in zip(one, two):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
    summary = json.loads((multi / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["devices"] == 8
    assert summary["eval_loss"] == pytest.approx(json.loads((single / "summary.json").read_text())["eval_loss"], rel=1e-5)
    step_dir = multi / "checkpoints" / "6"
    assert {p.name for p in (step_dir / "data").glob("process_*.json")} == {"process_0-of-2.json", "process_1-of-2.json"}
    assert {p.name for p in (step_dir / "state").glob("ocdbt.process_*")} == {"ocdbt.process_0", "ocdbt.process_1"}


def start_two_processes(config, out, port, env_of=lambda i: {}, stderr_to=None):
    """Workers 0 and 1; `env_of(i)` adds to worker i's environment; their stderr goes to the
    files `stderr_to` (else a pipe)."""
    env = {**os.environ, "XLA_FLAGS": FOUR_DEVICES}
    return [
        subprocess.Popen(
            [sys.executable, "-m", "depthdelusion", "train", str(config), "--out", str(out),
             "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(i)],
            env={**env, **env_of(i)}, stdout=subprocess.PIPE if stderr_to is None else subprocess.DEVNULL,
            stderr=subprocess.PIPE if stderr_to is None else open(stderr_to[i], "w"), text=True)
        for i in range(2)
    ]


@pytest.mark.parametrize("notice", ["sigterm", "metadata"])
def test_a_notice_on_one_host_is_agreed_by_jax_and_every_host_saves_the_same_step(tmp_path, notice):
    """Spot preemption need not reach every worker at once. Worker 1 alone gets the notice once
    step 1 is on record: a SIGTERM, or the metadata server (a stand-in on 127.0.0.1 that worker 1
    alone is pointed at) turning instance/preempted TRUE. No log step or checkpoint comes before
    the last step, so only JAX's preemption sync point can stop the run early; both hosts save
    the same step and exit 75."""
    from test_checkpoints import MetadataServer

    steps = 400
    config = tmp_path / "config.yaml"
    long_run = {"model": {**CONFIG["model"], "depth": 1, "width": 32}, "data": CONFIG["data"],
                "train": {**CONFIG["train"], "steps": steps, "checkpoint_every": 1000, "log_every": 1000,
                          "layer_stats_every": 1000, "eval_every": 1000, "eval_batches": 0, "checkpoint_minutes": 0}}
    config.write_text(yaml.safe_dump(long_run))
    out = tmp_path / "run"

    def step_1_on_record():
        return (out / "metrics.jsonl").exists() and (out / "metrics.jsonl").read_text().endswith("\n")

    server = MetadataServer(lambda key: ("TRUE" if step_1_on_record() else "FALSE") if key == "instance/preempted" else "NONE")
    env_of = (lambda i: {"GCE_METADATA_HOST": server.host} if i == 1 else {}) if notice == "metadata" else (lambda i: {})
    logs = [tmp_path / f"process_{i}.err" for i in range(2)]
    procs = start_two_processes(config, out, portpicker.pick_unused_port(), env_of, logs)
    try:
        if notice == "sigterm":
            deadline = time.monotonic() + 900
            while not step_1_on_record():
                assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "step 1 never recorded"
                time.sleep(0.02)
            procs[1].send_signal(signal.SIGTERM)  # worker 1 only
        for p in procs:
            p.wait(timeout=900)  # a host left waiting would time out here
    finally:
        for p in procs:
            p.kill()
        server.close()
    errs = [log.read_text() for log in logs]
    assert [p.returncode for p in procs] == [75, 75], [err[-2000:] for err in errs]
    assert "SIGTERM caught" in errs[1] and "SIGTERM caught" not in errs[0]  # JAX's notifier, on worker 1
    assert "JAX's preemption sync point" in errs[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "preempted" and 1 < summary["steps"] < steps
    assert [p.name for p in (out / "checkpoints").iterdir()] == [str(summary["steps"])]  # the one save, whole
    step_dir = out / "checkpoints" / str(summary["steps"])
    assert {p.name for p in (step_dir / "data").glob("process_*.json")} == {"process_0-of-2.json", "process_1-of-2.json"}


def test_tpu_slice_detection_ignores_a_warning_left_in_the_hostnames(monkeypatch):
    from depthdelusion.parallel import distributed

    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "WARNING: could not determine TPU worker hostnames or "
                       "IP addresses, please set env var `TPU_WORKER_HOSTNAMES` manually")
    assert distributed._tpu_worker_count() == 0
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "t1v-n-0,t1v-n-1,t1v-n-2,t1v-n-3")
    assert distributed._tpu_worker_count() == 4
