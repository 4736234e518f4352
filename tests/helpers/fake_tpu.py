"""A fake `gcloud` for the tpu/ scripts that records every call and, in exec mode, plays the
slice: `tpu-vm ssh --command STR` runs STR for real with bash on each worker, in its own home
directory under ROOT/workers/<id>/ (with a fake metadata `curl` on PATH); `tpu-vm scp` copies
there; `storage cp/cat/ls` read and write ROOT/gcs/<bucket>/<key>; queued resources go through
PROVISIONING to ACTIVE and are preempted (SIGTERM to every worker's run, then the VMs and their
disks vanish, state SUSPENDED): the k-th slice at the first describe after worker 0's training
reached FAKE_PREEMPT's k-th step count, where its trainer waits for it. Scripted failures:
FAKE_NO_CAPACITY=N (the first N queued resources go FAILED for capacity, or with
FAKE_FAILED_MESSAGE), FAKE_FLAKY=VERB:FIRST:COUNT (the FIRST-th call of VERB and the COUNT-1
after it fail with a 503; COUNT * = all from FIRST on).

The wheelhouse (tpu/wheelhouse.sh) is built from tiny real wheels (`jax`, `ddtiny-dep`) by the
real pip with PIP_NO_INDEX and PIP_FIND_LINKS, and installed on the workers by the real pip
with --no-index; the "CPython build" is the interpreter running the tests, whose virtual
environments run the stand-in trainer below for `-m depthdelusion`."""
from __future__ import annotations

import base64
import hashlib
import json
import stat
import sys
import tarfile
import zipfile
from pathlib import Path

FAKE_GCLOUD = r'''#!PYTHON
import json, os, shutil, signal, subprocess, sys, time
from pathlib import Path

argv = sys.argv[1:]
with open(os.environ["GCLOUD_LOG"], "a") as fh:
    fh.write(json.dumps(argv) + "\n")
root = Path(os.environ["FAKE_ROOT"])
state_file = root / "state.json"
state = json.loads(state_file.read_text()) if state_file.exists() else {"qr": None, "incarnation": 0}
def save():
    tmp = state_file.with_suffix(f".{os.getpid()}")
    tmp.write_text(json.dumps(state))
    tmp.replace(state_file)
def flag(name, default=None):
    for a in argv:
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
    return default
def workers_dir():
    return root / "workers"
def gcs(path):
    assert path.startswith("gs://"), path
    return root / "gcs" / path[len("gs://"):]

def describe_line(st, message=""):
    fmt = flag("format", "")
    return f"{st}\t{message}" if "failedData" in fmt else st

def verb_of(args):
    return args[3] if args[:2] == ["compute", "tpus"] and len(args) > 3 else (args[1] if len(args) > 1 else "")

verb = verb_of(argv)
def calls_of_verb():  # this one included: every call is in the log (appended above)
    with open(os.environ["GCLOUD_LOG"]) as fh:
        return sum(verb_of(json.loads(line)) == verb for line in fh)
if os.environ.get("FAKE_FLAKY"):
    flaky_verb, first, count = os.environ["FAKE_FLAKY"].split(":")
    n = calls_of_verb()
    if verb == flaky_verb and n >= int(first) and (count == "*" or n < int(first) + int(count)):
        print(f"ERROR: (gcloud.{verb}) UNAVAILABLE: 503 The service is currently unavailable.", file=sys.stderr)
        sys.exit(1)

if "queued-resources" in argv and "describe" in argv and os.environ.get("FAKE_STATES"):
    states = os.environ["FAKE_STATES"].split(",")  # a fixed sequence, for create.sh alone: STATE[|MESSAGE]
    n = calls_of_verb()
    print(describe_line(*states[min(n, len(states)) - 1].split("|", 1)))
    sys.exit(0)

def stop_workers():
    """Preemption: SIGTERM to each worker's run (it saves and exits 75), then the disks go."""
    for pidfile in workers_dir().glob("*/depthdelusion/logs/run.pid"):
        try:
            os.killpg(int(pidfile.read_text()), signal.SIGTERM)
        except (ProcessLookupError, ValueError):
            continue
        deadline = time.time() + 60
        while pidfile.exists() and time.time() < deadline:
            time.sleep(0.05)
    shutil.rmtree(workers_dir(), ignore_errors=True)

def vm_up():
    return state["qr"] is not None and state["qr"]["state"] == "ACTIVE"

if argv[:3] == ["compute", "tpus", "queued-resources"]:
    if verb == "create":
        if state["qr"] is not None:
            print("ERROR: (gcloud.compute.tpus.queued-resources.create) ALREADY_EXISTS", file=sys.stderr)
            sys.exit(1)
        state["incarnation"] += 1
        state["qr"] = {"state": "PROVISIONING", "describes": 0, "message": ""}
        if state["incarnation"] <= int(os.environ.get("FAKE_NO_CAPACITY", "0")):
            state["qr"]["fail_with"] = os.environ.get("FAKE_FAILED_MESSAGE", (
                'There is no more capacity in the zone "us-east5-b"; you can try in another zone '
                'where Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions)'))
        save()
    elif verb == "describe":
        qr = state["qr"]
        if qr is None:
            print("ERROR: (gcloud.compute.tpus.queued-resources.describe) NOT_FOUND: Resource was not found",
                  file=sys.stderr)
            sys.exit(1)
        if qr["state"] == "PROVISIONING":
            print(describe_line(qr["state"]))
            if qr.get("fail_with"):
                qr["state"], qr["message"] = "FAILED", qr["fail_with"]
            else:
                qr["state"] = "ACTIVE"
        elif qr["state"] == "ACTIVE":
            qr["describes"] += 1
            plan = [int(x) for x in os.environ.get("FAKE_PREEMPT", "").split(",") if x]
            k = state["incarnation"] - 1
            progress = root / "gcs" / "progress-0"
            done = int(progress.read_text()) if progress.exists() else 0  # written whole (rename)
            if k < len(plan) and done >= plan[k]:
                stop_workers()
                qr["state"] = "SUSPENDED"
            print(describe_line(qr["state"]))
        else:
            print(describe_line(qr["state"], qr["message"]))
        save()
    elif verb == "delete":
        if state["qr"] is None:
            print("ERROR: (gcloud.compute.tpus.queued-resources.delete) NOT_FOUND", file=sys.stderr)
            sys.exit(1)
        stop_workers()
        state["qr"] = None
        save()
    sys.exit(0)

def local(path):
    return gcs(path) if path.startswith("gs://") else Path(path)

if argv[:2] == ["storage", "cp"]:
    src, dst = [a for a in argv[2:] if not a.startswith("--")]
    if "*" in src:  # a wildcard: every match into the directory dst
        parent, pattern = src.rsplit("/", 1)
        matches = sorted(local(parent).glob(pattern))
        if not matches:
            print("ERROR: (gcloud.storage.cp) The following URLs matched no objects or files", file=sys.stderr)
            sys.exit(1)
        local(dst).mkdir(parents=True, exist_ok=True)
        for m in matches:
            shutil.copyfile(m, local(dst) / m.name)
        sys.exit(0)
    dst = local(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(local(src), dst)
    sys.exit(0)
if argv[:2] == ["storage", "ls"]:
    (url,) = [a for a in argv[2:] if not a.startswith("-")]
    bucket_root = root / "gcs"
    matches = sorted(p for p in bucket_root.glob(url[len("gs://"):]) if p.is_file())
    if not matches:
        print("ERROR: (gcloud.storage.ls) One or more URLs matched no objects.", file=sys.stderr)
        sys.exit(1)
    for m in matches:
        name = "gs://" + str(m.relative_to(bucket_root))
        print(f"{m.stat().st_size:>10}  2026-11-25T12:00:00Z  {name}" if "-l" in argv else name)
    if "-l" in argv:
        print(f"TOTAL: {len(matches)} objects, {sum(m.stat().st_size for m in matches)} bytes")
    sys.exit(0)
if argv[:2] == ["storage", "cat"]:
    path = gcs(argv[2])
    if not path.exists():
        sys.exit(1)
    sys.stdout.write(path.read_text())
    sys.exit(0)

if argv[:3] == ["compute", "tpus", "tpu-vm"] and argv[3] in ("ssh", "scp") and os.environ.get("FAKE_EXEC"):
    if state["qr"] is not None and not vm_up():
        print("ssh: connect to host: Connection refused", file=sys.stderr)
        sys.exit(255)
    n = int(os.environ.get("FAKE_WORKERS", "2"))
    worker = flag("worker", "0")
    ids = range(n) if worker == "all" else [int(worker)]
    homes = [workers_dir() / str(i) for i in ids]
    if argv[3] == "scp":
        src, dst = argv[4], argv[5].split(":", 1)[1]
        for home in homes:
            home.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, home / dst)
        sys.exit(0)
    command = flag("command")
    rc = 0
    for i, home in zip(ids, homes):
        home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HOME": str(home), "FAKE_WORKER_ID": str(i),
               "PATH": os.environ["FAKE_WORKER_PATH"], "DD_LIBTPU_LOCKFILE": str(home / "libtpu_lockfile")}
        proc = subprocess.Popen(["bash", "-c", command], cwd=home, env=env, start_new_session=True)
        try:
            rc = max(rc, proc.wait(timeout=float(os.environ.get("FAKE_SSH_TIMEOUT", "60"))))
        except subprocess.TimeoutExpired:  # `tail -F` never ends: cut it, as Ctrl-C would
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = max(rc, 124)
    sys.exit(rc)
'''

FAKE_CURL = r'''#!/usr/bin/env bash
# The TPU metadata server: this worker's tpu-env.
for a in "$@"; do
  if [[ "$a" == *computeMetadata/v1/instance/attributes/tpu-env ]]; then
    printf "ACCELERATOR_TYPE: 'v4-16'\nWORKER_ID: '%s'\nZONE: 'us-central2-b'\n" "$FAKE_WORKER_ID"
    exit 0
  fi
done
exit 22
'''

# The CPython build in the wheelhouse (python/bin/python3): the interpreter running the tests.
# A virtual environment it makes runs the stand-in trainer for `python -m depthdelusion`, and
# the real interpreter (pip included) for everything else.
FAKE_PYTHON_BUILD = r'''#!/usr/bin/env bash
if [[ "$1 $2" == "-m venv" ]]; then
  REAL_PYTHON "$@" || exit
  venv="${*: -1}"
  rm -f "$venv/bin/python"
  cat > "$venv/bin/python" <<'WRAPPER'
#!/usr/bin/env bash
if [[ "$1 $2" == "-m depthdelusion" ]]; then exec bash "$FAKE_TRAINER" "$@"; fi
exec "$(dirname "$0")/python3" "$@"
WRAPPER
  chmod +x "$venv/bin/python"
  exit 0
fi
exec REAL_PYTHON "$@"
'''

# `python -m depthdelusion ...`: records its command line and environment, then "trains" until
# FAKE_STEPS steps are done (progress kept in the bucket, like checkpoints), resuming where the
# previous run stopped; SIGTERM saves and exits 75, as train() does.
FAKE_TRAINER = r'''#!/usr/bin/env bash
env_json="{\"cache\": \"${JAX_COMPILATION_CACHE_DIR:-}\", \"distributed\": \"${DEPTHDELUSION_DISTRIBUTED:-}\", \"xla\": \"${XLA_FLAGS:-}\", \"wandb\": \"${WANDB_PROJECT:-}\", \"secret\": \"${WANDB_API_KEY:-}\"}"
echo "{\"argv\": \"$*\", \"cwd\": \"$PWD\", \"env\": $env_json}" >> "$HOME/run.calls"
echo "{\"argv\": \"$*\", \"cwd\": \"$PWD\", \"env\": $env_json}" >> "$FAKE_ROOT/run.calls-$FAKE_WORKER_ID"  # outlives the slice
progress="$FAKE_ROOT/gcs/progress-$FAKE_WORKER_ID"
mkdir -p "$FAKE_ROOT/gcs"
out=""
prev=""
for a in "$@"; do [[ "$prev" == --out ]] && out="$a"; prev="$a"; done
# what the bucket holds of the run's records: a line per saved step (worker 0 writes them)
metrics="$FAKE_ROOT/gcs/${out#gs://}/fake-run/metrics.jsonl"
step=$(cat "$progress" 2>/dev/null || echo 0)
echo "resuming at step $step"
trap 'echo "SIGTERM: saved the checkpoint at step $step"; exit 75' TERM
# This slice's preemption step: the first of FAKE_PREEMPT beyond the step it resumed from. The
# run holds there until the fake cloud preempts it, so a slice never trains past it (into the
# next slice's share) however late a loaded machine's poll comes.
hold=""
for s in ${FAKE_PREEMPT//,/ }; do
  if [[ "$s" -gt "$step" ]]; then hold="$s"; break; fi
done
while [[ "$step" -lt "${FAKE_STEPS:-20}" ]]; do
  sleep "${FAKE_STEP_SECONDS:-0.05}"
  step=$((step + 1))
  if [[ "$FAKE_WORKER_ID" == 0 && -n "$out" ]]; then
    mkdir -p "$(dirname "$metrics")"
    echo "{\"step\": $step}" >> "$metrics"
  fi
  # temp file + rename: whoever reads it (the fake cloud, the next slice) sees a whole number
  echo "$step" > "$progress.$$"
  mv -f "$progress.$$" "$progress"
  echo "step $step"
  while [[ "$step" == "$hold" ]]; do sleep 0.05; done
done
echo "run written"
exit "${FAKE_EXIT:-0}"
'''


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return path


def make_wheel(directory: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A real (tiny, pure Python) wheel: FILES, METADATA, WHEEL and a RECORD with hashes."""
    dist = f"{name.replace('-', '_')}-{version}"
    meta = {f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
            f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: fake_tpu\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    entries = {**files, **meta}
    record = []
    for path, text in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}.dist-info/RECORD,,")
    wheel = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in entries.items():
            zf.writestr(path, text)
        zf.writestr(f"{dist}.dist-info/RECORD", "\n".join(record) + "\n")
    return wheel


def make_wheel_sources(root: Path) -> dict[str, str]:
    """What tpu/wheelhouse.sh needs, offline: tiny wheels pip finds with PIP_FIND_LINKS, their
    requirements file (DD_REQUIREMENTS) and a Python build tarball (DD_PYTHON_BUILD)."""
    wheels = root / "pypi"
    wheels.mkdir(parents=True)
    make_wheel(wheels, "jax", "0.10.2", {"jax/__init__.py": "__version__ = '0.10.2'\n"})
    make_wheel(wheels, "ddtiny-dep", "1.0", {"ddtiny_dep.py": "VALUE = 42\n"})
    requirements = root / "requirements.txt"
    requirements.write_text("# pinned, as tpu/constraints.txt\njax==0.10.2   # via depthdelusion\nddtiny-dep==1.0\n")
    build = root / "python-build"
    (build / "python" / "bin").mkdir(parents=True)
    _script(build / "python" / "bin" / "python3", FAKE_PYTHON_BUILD.replace("REAL_PYTHON", sys.executable))
    tarball = root / "python.tar.gz"
    with tarfile.open(tarball, "w:gz") as tf:
        tf.add(build / "python", arcname="python")
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "DD_REQUIREMENTS": str(requirements),
            "DD_PYTHON_BUILD": str(tarball), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def make_fake_cloud(root: Path, base_env: dict[str, str]) -> dict[str, str]:
    """Writes the fakes under ROOT and returns the environment for the tpu/ scripts."""
    bin_dir, worker_bin = root / "bin", root / "worker-bin"
    bin_dir.mkdir(parents=True)
    worker_bin.mkdir()
    gcloud = FAKE_GCLOUD.replace("PYTHON", sys.executable, 1)
    _script(bin_dir / "gcloud", gcloud)
    _script(worker_bin / "gcloud", gcloud)
    _script(worker_bin / "curl", FAKE_CURL)
    trainer = _script(root / "fake_trainer", FAKE_TRAINER)
    system = "/usr/bin:/bin"  # no python3 there is used: the workers' Python is the wheelhouse's
    return {**{k: v for k, v in base_env.items() if not k.startswith(("DD_", "FAKE_", "PIP_"))},
            **make_wheel_sources(root / "sources"),
            "PATH": f"{bin_dir}:{base_env['PATH']}", "GCLOUD_LOG": str(root / "gcloud.jsonl"),
            "FAKE_ROOT": str(root), "FAKE_WORKER_PATH": f"{worker_bin}:{system}",
            # stop.sh returns as soon as a run has exited; the grace only bounds a run that hangs,
            # and must outlast the supervisor's log copies on a loaded machine (5 s did not).
            "FAKE_TRAINER": str(trainer), "DD_POLL_SECONDS": "0", "DD_STOP_GRACE_SECONDS": "60",
            "DD_BACKOFF_SECONDS": "0.01", "DD_BACKOFF_MAX_SECONDS": "0.05"}


def calls(root: Path) -> list[list[str]]:
    log = root / "gcloud.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def worker_home(root: Path, worker: int) -> Path:
    return root / "workers" / str(worker)


def run_calls(root: Path, worker: int, every_slice: bool = False) -> list[dict]:
    """The stand-in trainer's records on the worker (or, every_slice, on every slice so far)."""
    path = root / f"run.calls-{worker}" if every_slice else worker_home(root, worker) / "run.calls"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

