"""tpu/babysit.sh against the fake cloud (tests/fake_tpu.py): a spot slice preempted twice is
deleted, re-created, set up and the same command re-run until it finishes; retries are bounded."""
import os
import subprocess
from pathlib import Path

from fake_tpu import calls, make_fake_cloud, run_calls, worker_home

TPU = Path(__file__).resolve().parents[1] / "tpu"
COMMAND = ["--", "sweep", "experiments/paper_large.yaml", "--out", "gs://bkt/runs/large",
           "--set", "data.path=gs://bkt/sp"]


def babysit(tmp_path, *args, **env):
    root = tmp_path / "cloud"
    full_env = {**make_fake_cloud(root, os.environ), "FAKE_EXEC": "1", "DD_POLL_SECONDS": "0.2", **env}
    proc = subprocess.run(["bash", str(TPU / "babysit.sh"), "--name", "dd-v6", "--zone", "us-east5-b",
                           "--type", "v6e-64", "--log", str(tmp_path / "babysit.log"), *args, *COMMAND],
                          env=full_env, capture_output=True, text=True, timeout=240)
    return proc, root, (tmp_path / "babysit.log").read_text()


def test_two_preemptions_then_the_sweep_finishes(tmp_path):
    # The first slice is preempted once the training reached step 5, the second at step 15;
    # the third lives to step 40.
    proc, root, log = babysit(tmp_path, "--max-retries", "3", FAKE_PREEMPT="5,15", FAKE_STEPS="40",
                              FAKE_STEP_SECONDS="0.1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = [line.split(": ", 1)[1] for line in log.splitlines()]
    assert events[0].startswith("start: sweep experiments/paper_large.yaml")
    assert events.count("no queued resource: creating a spot v6e-64") == 3
    assert events.count("setting up every worker") == 3
    assert events.count("queued resource is SUSPENDED: the slice was preempted") == 2
    assert events.count("queued resource is SUSPENDED: deleting it") == 2
    assert "restart 2 of 3: re-running the same command (it resumes)" in events
    assert events[-1] == "finished: every worker exited 0"
    recorded = calls(root)
    creates = [c for c in recorded if c[3:4] == ["create"]]
    assert len(creates) == 3 and all("--spot" in c and "--runtime-version=v2-alpha-tpuv6e" in c for c in creates)
    assert sum(c[3:4] == ["delete"] for c in recorded) == 2
    # The same command each time; the last slice's workers ran it once, resuming, to the end.
    starts = [c[-1] for c in recorded if c[3:4] == ["ssh"] and " run gs://bkt/runs/large" in c[-1]]
    assert len(starts) == 3 and len(set(starts)) == 1
    for w in (0, 1):
        (last,) = run_calls(root, w)
        assert last["argv"] == "-m depthdelusion " + " ".join(COMMAND[1:])
        assert (root / "gcs" / f"progress-{w}").read_text().strip() == "40"
        worker_log = (worker_home(root, w) / "depthdelusion" / "logs" / f"worker-{w}.log").read_text()
        resumed_at = int(worker_log.split("resuming at step ")[1].split()[0])
        assert resumed_at >= 15 and "exit status 0" in worker_log
        assert (root / "gcs" / "bkt" / "runs" / "large" / "logs" / f"worker-{w}.status").read_text().strip() == "0"


def test_retries_are_bounded(tmp_path):
    proc, root, log = babysit(tmp_path, "--max-retries", "1", FAKE_STEPS="2", FAKE_EXIT="1")
    assert proc.returncode == 1
    events = [line.split(": ", 1)[1] for line in log.splitlines()]
    assert events.count("attempt ended: failed 1 1") == 2
    assert events[-1].startswith("giving up after 1 restarts")
    assert events.count("no queued resource: creating a spot v6e-64") == 1  # a failed run is re-run in place
    assert len(run_calls(root, 0)) == 2
