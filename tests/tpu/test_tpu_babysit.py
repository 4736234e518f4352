"""tpu/babysit.sh against the fake cloud (tests/helpers/fake_tpu.py), its real control flow with the poll
and backoff times cut to fractions of a second: a spot slice preempted twice is deleted,
re-created, set up and the same command re-run until it finishes; the restart budget counts
restarts without progress; no capacity is waited out apart from it; a transient gcloud error is
retried, a persistent one ends it; at every end (done, given up, Ctrl-C) nothing is left billing
unless --keep; no secret reaches a command line."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from fake_tpu import calls, make_fake_cloud, run_calls

TPU = Path(__file__).resolve().parents[2] / "tpu"
COMMAND = ["--", "sweep", "experiments/paper_large.yaml", "--out", "gs://bkt/runs/large",
           "--set", "data.path=gs://bkt/sp"]
STOCKOUT = 'There is no more capacity in the zone "us-east5-b"'


def babysit_cmd(tmp_path, *args, **env):
    root = tmp_path / "cloud"
    # one worker a slice unless a test asks for more: each setup installs with the real pip
    full_env = {**make_fake_cloud(root, os.environ), "FAKE_EXEC": "1", "DD_POLL_SECONDS": "0.2",
                "FAKE_WORKERS": "1", **env}
    # `env --default-signal=INT`: Ctrl-C reaches babysit as it would from a terminal even when the
    # suite itself was started with SIGINT ignored (nohup, `&` in a script), which bash could
    # not trap: the interrupt tests would wait out their hang guard instead.
    cmd = ["env", "--default-signal=INT", "bash", str(TPU / "babysit.sh"), "--name", "dd-v6",
           "--zone", "us-east5-b", "--type", "v6e-64", "--log", str(tmp_path / "babysit.log"), *args, *COMMAND]
    return cmd, full_env, root


def babysit(tmp_path, *args, **env):
    cmd, full_env, root = babysit_cmd(tmp_path, *args, **env)
    proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=400)
    return proc, root, events(tmp_path)


def events(tmp_path):
    return [line.split(": ", 1)[1] for line in (tmp_path / "babysit.log").read_text().splitlines()]


def queued_resource(root):
    return json.loads((root / "state.json").read_text())["qr"]


def test_two_preemptions_then_the_sweep_finishes(tmp_path):
    # The first slice is preempted once the training reached step 5, the second at step 15;
    # the third lives to step 40.
    proc, root, log = babysit(tmp_path, "--max-retries", "3", "-e", "WANDB_API_KEY=s3cret-babysit",
                              FAKE_PREEMPT="5,15", FAKE_STEPS="40", FAKE_STEP_SECONDS="0.1", FAKE_WORKERS="2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert log[0].startswith("start: sweep experiments/paper_large.yaml")
    assert log.count("no queued resource: creating a spot v6e-64") == 3
    assert log.count("setting up every worker") == 3
    assert log.count("queued resource is SUSPENDED: the slice was preempted") == 2
    assert log.count("queued resource is SUSPENDED: deleting it") == 2
    assert "preemption 2" in log
    assert log[-3:] == ["finished: every worker exited 0",
                        "deleting the queued resource and its slice (--keep would leave them)",
                        "counts: 2 preemptions, 0 failed attempts, 0 waits for capacity"]
    recorded = calls(root)
    creates = [c for c in recorded if c[3:4] == ["create"]]
    assert len(creates) == 3 and all("--spot" in c and "--runtime-version=v2-alpha-tpuv6e" in c for c in creates)
    assert sum(c[3:4] == ["delete"] for c in recorded) == 3 and queued_resource(root) is None
    # The wheelhouse is built once, on the --out bucket, and every slice installs from it.
    assert sum(c[:2] == ["storage", "cp"] and c[-1].endswith("/SHA256SUMS") for c in recorded) == 1
    assert all(c[-1].startswith("gs://bkt/wheelhouse/") for c in recorded if c[:2] == ["storage", "ls"]
               and "SHA256SUMS" in c[-1])
    # The same command each time; the last slice's workers ran it once, resuming, to the end.
    starts = [c[-1] for c in recorded if c[3:4] == ["ssh"] and " run gs://bkt/runs/large" in c[-1]]
    assert len(starts) == 3 and len(set(starts)) == 1
    assert not any("s3cret-babysit" in arg for c in recorded for arg in c)
    for w in (0, 1):
        every = run_calls(root, w, every_slice=True)
        assert len(every) == 3 and all(c["argv"] == "-m depthdelusion " + " ".join(COMMAND[1:]) for c in every)
        assert all(c["env"]["secret"] == "s3cret-babysit" for c in every)
        assert (root / "gcs" / f"progress-{w}").read_text().strip() == "40"
        # the last slice's log, copied to the bucket at exit (the slice itself is deleted)
        worker_log = (root / "gcs" / "bkt" / "runs" / "large" / "logs" / f"worker-{w}.log").read_text()
        resumed_at = int(worker_log.split("resuming at step ")[1].split()[0])
        assert resumed_at >= 15 and "exit status 0" in worker_log
        assert (root / "gcs" / "bkt" / "runs" / "large" / "logs" / f"worker-{w}.status").read_text().strip() == "0"


def test_the_restart_budget_starts_again_after_a_restart_that_made_progress(tmp_path):
    # Two preemptions, each after steps were saved: one restart allowed in a row is enough.
    proc, root, log = babysit(tmp_path, "--max-retries", "1", FAKE_PREEMPT="4,8", FAKE_STEPS="12",
                              FAKE_STEP_SECONDS="0.1")
    assert proc.returncode == 0, log
    resets = [e for e in log if e.startswith("progress saved on the bucket (metrics.jsonl")]
    # 12 bytes a record ({"step": N} and a newline): the preemptions came at steps 4 and 8
    assert resets == [f"progress saved on the bucket (metrics.jsonl {a} -> {b} bytes): the restart budget "
                      "starts again" for a, b in ((0, 48), (48, 96))]
    assert log.count("restart 1 of 1: re-running the same command (it resumes)") == 2


def test_retries_without_progress_are_bounded_and_the_slice_is_deleted(tmp_path):
    proc, root, log = babysit(tmp_path, "--max-retries", "1", FAKE_STEPS="2", FAKE_EXIT="1")
    assert proc.returncode == 1
    assert log.count("attempt ended: failed 1") == 2  # the first made progress (2 steps), the second none
    assert log.count("progress saved on the bucket (metrics.jsonl 0 -> 24 bytes): the restart budget starts again") == 1
    assert "giving up: 1 restarts in a row without progress (last: failed 1)" in log
    assert log.count("no queued resource: creating a spot v6e-64") == 1  # a failed run is re-run in place
    assert len(run_calls(root, 0, every_slice=True)) == 2
    assert log[-2:] == ["deleting the queued resource and its slice (--keep would leave them)",
                        "counts: 0 preemptions, 2 failed attempts, 0 waits for capacity"]
    assert queued_resource(root) is None


def test_no_capacity_is_waited_out_with_its_message_apart_from_the_restart_budget(tmp_path):
    proc, root, log = babysit(tmp_path, "--max-retries", "0", FAKE_NO_CAPACITY="2", FAKE_STEPS="3")
    assert proc.returncode == 0, log
    assert log.count(f"queued resource FAILED: {STOCKOUT}; you can try in another zone where Cloud TPU "
                     "Nodes are offered (see https://cloud.google.com/tpu/docs/regions)") == 2
    waits = [e for e in log if e.startswith("no capacity (quota or stockout; wait")]
    assert [w.split(";")[1].split(")")[0] for w in waits] == [" wait 1 of 100, not a preemption",
                                                              " wait 2 of 100, not a preemption"]
    assert "trying again in 0.01s" in waits[0] and "trying again in 0.02s" in waits[1]  # backoff doubles
    assert log[-1] == "counts: 0 preemptions, 0 failed attempts, 2 waits for capacity"
    assert log.count("no queued resource: creating a spot v6e-64") == 3


def test_capacity_waits_are_bounded_too(tmp_path):
    proc, root, log = babysit(tmp_path, "--max-capacity-waits", "1", FAKE_NO_CAPACITY="5")
    assert proc.returncode == 1
    assert any(e.startswith(f"giving up: no capacity 1 times in a row (last: {STOCKOUT}") for e in log)
    assert queued_resource(root) is None


def test_a_failure_that_is_not_capacity_counts_against_the_budget(tmp_path):
    proc, root, log = babysit(tmp_path, "--max-retries", "1", FAKE_NO_CAPACITY="9",
                              FAKE_FAILED_MESSAGE="Invalid value for field 'runtime_version'")
    assert proc.returncode == 1
    assert log.count("queued resource FAILED: Invalid value for field 'runtime_version'") == 2
    assert log.count("attempt ended: failed slice") == 2
    assert not any(e.startswith("no capacity") for e in log)
    assert queued_resource(root) is None


def test_a_transient_describe_error_is_retried(tmp_path):
    # describes 5 and 6 (while the run goes) answer 503
    proc, root, log = babysit(tmp_path, FAKE_FLAKY="describe:5:2", FAKE_STEPS="10", FAKE_STEP_SECONDS="0.1")
    assert proc.returncode == 0, log
    assert proc.stderr.count("UNAVAILABLE: 503") == 2
    assert not any(e.startswith("preemption") for e in log) and "counts: 0 preemptions, 0 failed attempts" in log[-1]


def test_a_persistent_gcloud_error_gives_up_and_deletes_the_slice(tmp_path):
    proc, root, log = babysit(tmp_path, DD_GCLOUD_TRIES="3", FAKE_FLAKY="describe:5:*", FAKE_STEPS="100000")
    assert proc.returncode == 1
    assert "failed 3 times in a row (persistent)" in proc.stderr
    assert "giving up: gcloud keeps failing (above): cannot tell the slice's state" in log
    assert "deleting the queued resource and its slice (--keep would leave them)" in log
    assert queued_resource(root) is None
    assert not (root / "workers").exists()  # the slice's VMs went with it


def wait_for(predicate, timeout=120):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.1)


def interrupt_mid_run(tmp_path, *args):
    """Ctrl-C (SIGINT to babysit's process group, as a terminal sends it) once the run trains."""
    cmd, env, root = babysit_cmd(tmp_path, *args, FAKE_STEPS="100000")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        wait_for(lambda: (root / "gcs" / "progress-0").exists())
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=600)  # a hang guard, not a speed limit: a loaded CI machine took over 120 s
    finally:
        proc.kill()
        kill_processes_under(tmp_path)
    return proc.returncode, err, root, events(tmp_path)


def kill_processes_under(path) -> None:
    """End every process whose command line names `path`: the fake workers' trainers of a slice
    left running (--keep) or deleted by a fake cloud that does not stop its processes."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmdline:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                pass


def test_ctrl_c_deletes_the_queued_resource_and_its_slice(tmp_path):
    rc, _, root, log = interrupt_mid_run(tmp_path)
    assert rc == 130
    assert "giving up: interrupted" in log
    assert "deleting the queued resource and its slice (--keep would leave them)" in log
    assert queued_resource(root) is None and not (root / "workers").exists()


def test_ctrl_c_with_keep_leaves_it_and_prints_the_delete_command(tmp_path):
    rc, err, root, log = interrupt_mid_run(tmp_path, "--keep")
    assert rc == 130
    assert ("--keep: the queued resource and its slice are left as they are; delete them with: "
            "tpu/delete.sh --name dd-v6 --zone us-east5-b --queued") in log
    assert queued_resource(root)["state"] == "ACTIVE"
    assert not any(c[3:4] == ["delete"] for c in calls(root))
