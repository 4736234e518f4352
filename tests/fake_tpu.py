"""A fake `gcloud` for the tpu/ scripts that records every call and, in exec mode, plays the
slice: `tpu-vm ssh --command STR` runs STR for real with bash on each worker, in its own home
directory under ROOT/workers/<id>/ (with a fake metadata `curl`, `python3` and `uv` on PATH, and
the `python` that uv puts in the environment standing in for training); `tpu-vm scp` copies
there; `storage cp/cat` reads and writes ROOT/gcs/<bucket>/<key>; queued resources go through
PROVISIONING to ACTIVE and are preempted (SIGTERM to every worker's run, then the VMs and their
disks vanish, state SUSPENDED): the k-th slice at the first describe after worker 0's training
reached FAKE_PREEMPT's k-th step count."""
from __future__ import annotations

import json
import stat
import sys
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

if "queued-resources" in argv and "describe" in argv and os.environ.get("FAKE_STATES"):
    states = os.environ["FAKE_STATES"].split(",")  # a fixed sequence, for create.sh alone
    n = sum(1 for line in open(os.environ["GCLOUD_LOG"]) if '"describe"' in line)
    print(states[min(n, len(states)) - 1])
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
    verb = argv[3]
    if verb == "create":
        if state["qr"] is not None:
            print("ERROR: already exists", file=sys.stderr)
            sys.exit(1)
        state["incarnation"] += 1
        state["qr"] = {"state": "PROVISIONING", "describes": 0}
        save()
    elif verb == "describe":
        qr = state["qr"]
        if qr is None:
            print("ERROR: NOT_FOUND", file=sys.stderr)
            sys.exit(1)
        if qr["state"] == "PROVISIONING":
            print(qr["state"])
            qr["state"] = "ACTIVE"
        elif qr["state"] == "ACTIVE":
            qr["describes"] += 1
            plan = [int(x) for x in os.environ.get("FAKE_PREEMPT", "").split(",") if x]
            k = state["incarnation"] - 1
            progress = root / "gcs" / "progress-0"
            done = int(progress.read_text().strip() or 0) if progress.exists() else 0  # may be mid-write
            if k < len(plan) and done >= plan[k]:
                stop_workers()
                qr["state"] = "SUSPENDED"
            print(qr["state"])
        else:
            print(qr["state"])
        save()
    elif verb == "delete":
        if state["qr"] is None:  # NOT_FOUND (when playing a slice)
            sys.exit(1 if os.environ.get("FAKE_EXEC") else 0)
        stop_workers()
        state["qr"] = None
        save()
    sys.exit(0)

if argv[:2] == ["storage", "cp"]:
    src, dst = [a for a in argv[2:] if not a.startswith("--")]
    src = gcs(src) if src.startswith("gs://") else Path(src)
    dst = gcs(dst) if dst.startswith("gs://") else Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
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

# The image's Python 3.10: only `python3 -m pip install --user uv==...` is expected of it.
FAKE_PYTHON3 = r'''#!/usr/bin/env bash
echo "python3 $*" >> "$HOME/calls.log"
[[ "$1 $2 $3" == "-m pip install" ]] || { echo "fake python3: unexpected $*" >&2; exit 1; }
'''

# uv: `uv venv ... .venv` makes the environment, whose python is the training stand-in below.
FAKE_UV = r'''#!/usr/bin/env bash
echo "uv $* (in $PWD)" >> "$HOME/calls.log"
if [[ "$1" == venv ]]; then
  mkdir -p "${@: -1}/bin"
  cp "$FAKE_TRAINER" "${@: -1}/bin/python"
elif [[ "$1 $2" == "pip install" ]]; then
  while [[ $# -gt 0 ]]; do
    if [[ "$1" == -c ]]; then [[ -f "$2" ]] || { echo "uv: constraints file $2 not found in $PWD" >&2; exit 2; }; fi
    shift
  done
fi
'''

# `python -m depthdelusion ...`: records its command line and environment, then "trains" until
# FAKE_STEPS steps are done (progress kept in the bucket, like checkpoints), resuming where the
# previous run stopped; SIGTERM saves and exits 75, as train() does.
FAKE_TRAINER = r'''#!/usr/bin/env bash
if [[ "$1" == -c ]]; then echo "python 3.11.18, jax 0.10.2"; exit 0; fi
env_json="{\"cache\": \"${JAX_COMPILATION_CACHE_DIR:-}\", \"distributed\": \"${DEPTHDELUSION_DISTRIBUTED:-}\", \"xla\": \"${XLA_FLAGS:-}\", \"wandb\": \"${WANDB_PROJECT:-}\"}"
echo "{\"argv\": \"$*\", \"cwd\": \"$PWD\", \"env\": $env_json}" >> "$HOME/run.calls"
progress="$FAKE_ROOT/gcs/progress-$FAKE_WORKER_ID"
mkdir -p "$FAKE_ROOT/gcs"
step=$(cat "$progress" 2>/dev/null || echo 0)
echo "resuming at step $step"
trap 'echo "SIGTERM: saved the checkpoint at step $step"; exit 75' TERM
while [[ "$step" -lt "${FAKE_STEPS:-20}" ]]; do
  sleep "${FAKE_STEP_SECONDS:-0.05}"
  step=$((step + 1))
  echo "$step" > "$progress"
  echo "step $step"
done
echo "run written"
exit "${FAKE_EXIT:-0}"
'''


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return path


def make_fake_cloud(root: Path, base_env: dict[str, str]) -> dict[str, str]:
    """Writes the fakes under ROOT and returns the environment for the tpu/ scripts."""
    bin_dir, worker_bin = root / "bin", root / "worker-bin"
    bin_dir.mkdir(parents=True)
    worker_bin.mkdir()
    gcloud = FAKE_GCLOUD.replace("PYTHON", sys.executable, 1)  # workers' python3 is a fake
    _script(bin_dir / "gcloud", gcloud)
    _script(worker_bin / "gcloud", gcloud)
    _script(worker_bin / "curl", FAKE_CURL)
    _script(worker_bin / "python3", FAKE_PYTHON3)
    _script(worker_bin / "uv", FAKE_UV)
    trainer = _script(root / "fake_trainer", FAKE_TRAINER)
    system = "/usr/bin:/bin"
    return {**{k: v for k, v in base_env.items() if not k.startswith(("DD_", "FAKE_"))},
            "PATH": f"{bin_dir}:{base_env['PATH']}", "GCLOUD_LOG": str(root / "gcloud.jsonl"),
            "FAKE_ROOT": str(root), "FAKE_WORKER_PATH": f"{worker_bin}:{system}",
            # stop.sh returns as soon as a run has exited; the grace only bounds a run that hangs,
            # and must outlast the supervisor's log copies on a loaded machine (5 s did not).
            "FAKE_TRAINER": str(trainer), "DD_POLL_SECONDS": "0", "DD_STOP_GRACE_SECONDS": "60"}


def calls(root: Path) -> list[list[str]]:
    log = root / "gcloud.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def worker_home(root: Path, worker: int) -> Path:
    return root / "workers" / str(worker)


def run_calls(root: Path, worker: int) -> list[dict]:
    path = worker_home(root, worker) / "run.calls"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

