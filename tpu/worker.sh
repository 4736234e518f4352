#!/usr/bin/env bash
# Runs ON each TPU worker: setup.sh ships it to ~/depthdelusion/tpu/, and setup.sh, run.sh,
# stop.sh, logs.sh and babysit.sh call it there over `gcloud compute tpus tpu-vm ssh --worker=all`.
#   worker.sh setup                                  Python 3.11 env (uv) with tpu/constraints.txt
#   worker.sh run OUT [KEY=VALUE ...] -- ARGS ...    stop what runs, start `depthdelusion ARGS`
#   worker.sh stop                                   stop the run (SIGTERM: it saves, exits 75)
#   worker.sh status                                 "worker <id> <running|exit status|lost|none>"
# Each worker logs to ~/depthdelusion/logs/worker-<id>.log, writes the exit status beside it
# (worker-<id>.status) and copies both to OUT/logs/ (every DD_LOG_COPY_SECONDS and at the end).
set -euo pipefail

DD_HOME="$(cd "$(dirname "$0")/.." && pwd)"
LOGS="$DD_HOME/logs"
PIDFILE="$LOGS/run.pid"
UV_VERSION=0.13.9
PYTHON_VERSION=3.11.18 # the TPU images ship Python 3.10; jax 0.10, flax 0.12 and grain need 3.11
LIBTPU_LOCKFILE="${DD_LIBTPU_LOCKFILE:-/tmp/libtpu_lockfile}"
STOP_GRACE_SECONDS="${DD_STOP_GRACE_SECONDS:-180}" # time to save a checkpoint before SIGKILL

die() {
  echo "worker.sh: error: $*" >&2
  exit 2
}

# This worker's index in the slice, from the tpu-env metadata attribute (as MaxText's
# multihost_job reads WORKER_ID).
worker_id() {
  local id
  id="$(curl -sf -H 'Metadata-Flavor: Google' \
    'http://metadata.google.internal/computeMetadata/v1/instance/attributes/tpu-env' \
    | sed -n "s/^WORKER_ID: '\([0-9][0-9]*\)'.*/\1/p")" || true
  [[ -n "$id" ]] || die "could not read WORKER_ID from the TPU metadata server (is this a TPU VM?)"
  echo "$id"
}

# Levanter's setup-tpu-vm.sh installs with uv; here uv also brings a standalone CPython 3.11,
# and every package is pinned by tpu/constraints.txt, so every worker and every re-created
# slice runs the same versions (checkpoint and data-iterator formats included).
cmd_setup() {
  cd "$DD_HOME"
  python3 -m pip install --user --quiet "uv==$UV_VERSION"
  export PATH="$HOME/.local/bin:$PATH"
  uv venv --quiet --allow-existing --python "$PYTHON_VERSION" .venv
  uv pip install --quiet --python .venv/bin/python -c tpu/constraints.txt -e ".[tpu]"
  .venv/bin/python -c 'import platform, jax, libtpu, depthdelusion; print(f"python {platform.python_version()}, jax {jax.__version__}")'
}

# Stop this worker's previous run (its whole process group: SIGTERM, so a training saves a
# checkpoint, then SIGKILL after the grace time), then anything else holding the TPU and the
# libtpu lock file, as MaxText's multihost_runner does (kill_existing_processes) before a run.
cmd_stop() {
  if [[ -f "$PIDFILE" ]]; then
    local pid
    pid="$(cat "$PIDFILE")"
    if kill -0 "$pid" 2>/dev/null; then
      echo "worker $(worker_id): stopping the run (process group $pid; up to ${STOP_GRACE_SECONDS}s to save)"
      kill -TERM -- "-$pid" 2>/dev/null || true
      local waited=0
      while kill -0 "$pid" 2>/dev/null && [[ "$waited" -lt "$STOP_GRACE_SECONDS" ]]; do
        sleep 1
        waited=$((waited + 1))
      done
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    rm -f "$PIDFILE"
  fi
  local devices=() pids
  shopt -s nullglob
  devices=(/dev/accel* /dev/vfio/[0-9]*)
  shopt -u nullglob
  if [[ ${#devices[@]} -gt 0 ]]; then
    pids="$(sudo lsof -t "${devices[@]}" 2>/dev/null | sort -u || true)"
    for pid in $pids; do
      echo "killing process $pid, which holds the TPU"
      sudo kill -9 "$pid" || true
    done
  fi
  rm -f "$LIBTPU_LOCKFILE" 2>/dev/null || sudo rm -f "$LIBTPU_LOCKFILE"
}

cmd_run() {
  [[ $# -ge 1 ]] || die "run OUT [KEY=VALUE ...] -- ARGS ..."
  local out="$1" id
  shift
  id="$(worker_id)"
  [[ -x "$DD_HOME/.venv/bin/python" ]] || die "worker $id: no environment at $DD_HOME/.venv: run tpu/setup.sh first"
  cmd_stop
  mkdir -p "$LOGS"
  echo running >"$LOGS/worker-$id.status"
  # setsid: the run is its own process group (stop.sh ends all of it) and outlives this ssh.
  setsid nohup bash "$0" _supervise "$id" "$out" "$@" >/dev/null 2>&1 </dev/null &
  echo "$!" >"$PIDFILE"
  echo "worker $id: started; log $LOGS/worker-$id.log, copied to $out/logs/"
}

cmd_supervise() {
  local id="$1" out="$2"
  shift 2
  export DEPTHDELUSION_DISTRIBUTED=1
  # A persistent compilation cache on the bucket: a re-created slice does not recompile.
  export JAX_COMPILATION_CACHE_DIR="$out/jax_cache"
  while [[ $# -gt 0 && "$1" != "--" ]]; do
    export "${1?}"
    shift
  done
  shift
  local log="$LOGS/worker-$id.log" status="$LOGS/worker-$id.status" child copier rc=0
  copy_logs() { # $1: the status file to copy
    gcloud storage cp --quiet "$log" "$out/logs/worker-$id.log" >/dev/null 2>&1 \
      && gcloud storage cp --quiet "$1" "$out/logs/worker-$id.status" >/dev/null 2>&1
  }
  cd "$DD_HOME" # relative paths in the command (experiments/...) are the checkout's
  echo "=== worker $id, $(date -u +%Y-%m-%dT%H:%M:%SZ): depthdelusion $*" >>"$log"
  # A preempted VM takes its disk along: its log survives up to the last copy.
  (while sleep "${DD_LOG_COPY_SECONDS:-300}"; do copy_logs "$status" || true; done) &
  copier=$!
  "$DD_HOME/.venv/bin/python" -m depthdelusion "$@" >>"$log" 2>&1 </dev/null &
  child=$!
  trap 'kill -TERM "$child" 2>/dev/null || true' TERM INT
  # Poll, then wait once the child is gone: a `wait` interrupted by the trap and called again
  # loses the child's status in bash 5.2 now and then ($? = -1; 1 in 150 in a loop test).
  while kill -0 "$child" 2>/dev/null; do sleep 1 || true; done
  if wait "$child"; then rc=0; else rc=$?; fi
  kill "$copier" 2>/dev/null || true
  echo "=== worker $id, $(date -u +%Y-%m-%dT%H:%M:%SZ): exit status $rc" >>"$log"
  # The bucket first, then the local status: whoever sees it (babysit.sh) finds the log copied.
  echo "$rc" >"$status.final"
  copy_logs "$status.final" || echo "worker $id: could not copy the log to $out/logs/" >>"$log"
  mv "$status.final" "$status"
  rm -f "$PIDFILE"
}

cmd_status() {
  local id state=none
  id="$(worker_id)"
  if [[ -f "$LOGS/worker-$id.status" ]]; then
    state="$(cat "$LOGS/worker-$id.status")"
    if [[ "$state" == running ]] && ! { [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }; then
      state=lost # says running, but no process: the VM restarted under it
    fi
  fi
  echo "worker $id $state"
}

case "${1:-}" in
  setup) cmd_setup ;;
  run) shift; cmd_run "$@" ;;
  _supervise) shift; cmd_supervise "$@" ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) die "usage: worker.sh setup | run OUT [KEY=VALUE ...] -- ARGS ... | stop | status" ;;
esac
