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


def start_two_processes(config, out, port):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    return [
        subprocess.Popen(
            [sys.executable, "-m", "depthdelusion", "train", str(config), "--out", str(out),
             "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(i)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(2)
    ]


def test_sigterm_on_one_host_saves_and_stops_every_host_at_the_same_step(tmp_path):
    """Spot preemption need not reach every worker at once: the hosts agree on the step."""
    config = tmp_path / "config.yaml"
    long_run = {**CONFIG, "train": {**CONFIG["train"], "steps": 400, "checkpoint_every": 1000}}
    config.write_text(yaml.safe_dump(long_run))
    out = tmp_path / "run"
    procs = start_two_processes(config, out, portpicker.pick_unused_port())
    try:
        deadline = time.monotonic() + 240
        while not ((out / "metrics.jsonl").exists() and len((out / "metrics.jsonl").read_text().splitlines()) >= 4):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
            time.sleep(0.05)
        procs[1].send_signal(signal.SIGTERM)  # worker 1 only
        outputs = [p.communicate(timeout=120) for p in procs]  # a host left waiting would time out here
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [75, 75], [err[-2000:] for _, err in outputs]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "preempted" and summary["steps"] < 400
    step_dir = out / "checkpoints" / str(summary["steps"])
    assert {p.name for p in (step_dir / "data").glob("process_*.json")} == {"process_0-of-2.json", "process_1-of-2.json"}


def test_tpu_slice_detection_ignores_a_warning_left_in_the_hostnames(monkeypatch):
    from depthdelusion.parallel import distributed

    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "WARNING: could not determine TPU worker hostnames or "
                       "IP addresses, please set env var `TPU_WORKER_HOSTNAMES` manually")
    assert distributed._tpu_worker_count() == 0
    monkeypatch.setenv("TPU_WORKER_HOSTNAMES", "t1v-n-0,t1v-n-1,t1v-n-2,t1v-n-3")
    assert distributed._tpu_worker_count() == 4
