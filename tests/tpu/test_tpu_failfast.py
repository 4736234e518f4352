"""Fail fast across hosts: an error on one host of two ends both at once with status 1; the
watchdog ends a run whose step stops advancing."""
import os
import signal
import subprocess
import sys
import threading
import time
import types

import portpicker
import yaml

from depthdelusion.train import watchdog as watchdog_module
from host_devices import FOUR_DEVICES

GRID = {
    "name": "failfast", "topology": None,
    "fixed": {"model": {"depth": 1, "width": 32, "head_dim": 16, "seq_len": 32},
              "data": {"builtin_documents": 1000},
              "train": {"steps": 40, "batch_size": 8, "warmup_steps": 2, "log_every": 5,
                        "layer_stats_every": 20, "eval_batches": 0, "checkpoint_every": 0}},
    "runs": [{"model.depth": 1}, {"model.depth": 2}],
}

# One host's data read fails at its 6th batch (a GCS 503 reaches one worker only).
FLAKY_MAIN = """
import os, sys
from depthdelusion.data import pipeline
if os.environ.get("FAIL_AT_BATCH"):
    original, calls = pipeline.Batches.__next__, [0]
    def flaky(self):
        calls[0] += 1
        if calls[0] == int(os.environ["FAIL_AT_BATCH"]):
            raise OSError("503 Service Unavailable (injected on this host only)")
        return original(self)
    pipeline.Batches.__next__ = flaky
from depthdelusion.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_an_error_on_one_host_ends_every_host(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text(yaml.safe_dump(GRID))
    main = tmp_path / "flaky_main.py"
    main.write_text(FLAKY_MAIN)
    out = tmp_path / "sweep"
    port = portpicker.pick_unused_port()
    procs = []
    for i in range(2):
        env = {**os.environ, "XLA_FLAGS": FOUR_DEVICES,
               "DEPTHDELUSION_COORDINATOR": f"127.0.0.1:{port}", "DEPTHDELUSION_NUM_PROCESSES": "2",
               "DEPTHDELUSION_PROCESS_ID": str(i)}
        if i == 1:
            env["FAIL_AT_BATCH"] = "6"
        procs.append(subprocess.Popen([sys.executable, str(main), "sweep", str(grid), "--out", str(out),
                                       "--no-report"], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    try:
        outputs = [p.communicate(timeout=240) for p in procs]  # before: 300 s in shutdown, then more
    finally:
        for p in procs:
            p.kill()
    errs = [err for _, err in outputs]
    assert procs[1].returncode == 1, errs[1][-2000:]
    assert "process 1 of 2 failed, ending every host" in errs[1] and "503" in errs[1]
    # Host 0 ends through its watchdog (exit 1, naming host 1's failure) — or, when its
    # collective sees host 1's sockets close before the watchdog's next poll, the runtime aborts
    # it (SIGABRT: an uncaught gloo::EnforceNotMet, seen in 1 of 3 CI runs on a 2-core machine).
    # Either way it ends at once rather than waiting out the shutdown barrier; no other exit is
    # accepted.
    assert procs[0].returncode in (1, -signal.SIGABRT), (procs[0].returncode, errs[0][-2000:])
    if procs[0].returncode == 1:
        assert "process 1 failed" in errs[0] and "ending this host too" in errs[0]
    assert not (out / "d2_w32").exists()  # neither host went on to the next run


def _watched(monkeypatch):
    """(the exit messages, an event set at the first, the clock [seconds]): the watchdog's exit is
    recorded (os._exit would end pytest; its thread goes on until the block ends) and its clock
    is the test's, so a busy machine that stalls this thread between two beats does not look
    like a stalled step."""
    ended, done, now = [], threading.Event(), [1000.0]

    def fake_exit(text):
        ended.append(text)
        done.set()

    monkeypatch.setattr(watchdog_module, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(watchdog_module, "_exit", fake_exit)
    return ended, done, now


def test_watchdog_ends_a_run_whose_step_stops(monkeypatch):
    ended, done, now = _watched(monkeypatch)
    with watchdog_module.Watchdog(stall_s=1.0, poll_s=0.01) as dog:
        for step in range(1, 16):  # advancing: no alarm, however many polls come in between
            dog.beat(step)
            now[0] += 0.5
            time.sleep(0.02)
        now[0] += 0.4  # 0.9 s since the last beat: still no alarm
        time.sleep(0.1)
        assert not ended
        now[0] += 0.2  # 1.1 s: the next poll ends the run
        assert done.wait(60)
    assert "has not advanced past 15" in ended[0] and "train.watchdog_minutes" in ended[0]


def test_time_suspended_is_not_a_stall(monkeypatch):
    """A process stopped (SIGSTOP, a sleeping laptop) for longer than the stall limit resumes its
    run: the watchdog's own polls were as late as the steps, so the gap is not idle time. A step
    that then stops advancing still ends the run."""
    ended, done, now = _watched(monkeypatch)
    with watchdog_module.Watchdog(stall_s=1.0, poll_s=0.01) as dog:
        dog.beat(7)
        time.sleep(0.05)
        now[0] += 0.5  # half a second of work
        time.sleep(0.1)
        now[0] += 3600  # then an hour stopped, between two polls
        time.sleep(0.1)
        assert not ended, ended
        now[0] += 0.4  # 0.9 s of running time since the beat: still no alarm
        time.sleep(0.1)
        assert not ended, ended
        now[0] += 0.2  # 1.1 s: the next poll ends the run
        assert done.wait(60)
    assert "has not advanced past 7" in ended[0]
