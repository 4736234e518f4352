#!/usr/bin/env bash
# Runs ON each TPU worker: setup.sh ships it to ~/depthdelusion/tpu/, and setup.sh, run.sh,
# stop.sh, logs.sh and babysit.sh call it there over `gcloud compute tpus tpu-vm ssh --worker=all`.
#   worker.sh setup WHEELHOUSE                       Python env from the wheelhouse (gs://), offline
#   worker.sh run OUT [--env-file F] -- ARGS ...     stop what runs, start `depthdelusion ARGS`
#   worker.sh stop                                   stop the run (SIGTERM: it saves, exits 75)
#   worker.sh status                                 "worker <id> <running|exit status|lost|none>"
# Each worker logs to ~/depthdelusion/logs/worker-<id>.log, writes the exit status beside it
# (worker-<id>.status) and copies both to OUT/logs/ (every DD_LOG_COPY_SECONDS and at the end).
set -euo pipefail

DD_HOME="$(cd "$(dirname "$0")/.." && pwd)"
LOGS="$DD_HOME/logs"
PIDFILE="$LOGS/run.pid"
WHEELHOUSE_TRIES="${DD_WHEELHOUSE_TRIES:-3}"
WHEELHOUSE_BACKOFF_SECONDS="${DD_BACKOFF_SECONDS:-10}"
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

# Offline: everything comes from the wheelhouse tpu/wheelhouse.sh built once and put on the
# bucket (every wheel of the lock, pinned, and a CPython 3.11 build: the TPU images ship 3.10),
# so a worker needs no internet (no external IP) and 16 workers do not download 0.5 GB from PyPI
# 16 times. The copy is checked against SHA256SUMS and fetched again if it does not match.
cmd_setup() {
  [[ $# -eq 1 && "$1" == gs://* ]] || die "setup WHEELHOUSE (a gs:// directory made by tpu/wheelhouse.sh)"
  local url="${1%/}" wh="$DD_HOME/wheelhouse" try=1 wait
  cd "$DD_HOME"
  while true; do
    rm -rf "$wh"
    mkdir -p "$wh"
    if gcloud storage cp --quiet "$url/*" "$wh/" && (cd "$wh" && sha256sum --quiet --strict -c SHA256SUMS); then
      break
    fi
    [[ "$try" -lt "$WHEELHOUSE_TRIES" ]] || die "could not fetch an intact wheelhouse from $url ($try tries)"
    wait="$(awk -v b="$WHEELHOUSE_BACKOFF_SECONDS" -v n="$try" 'BEGIN { print b * n }')"
    echo "worker.sh: the wheelhouse copy failed or did not match SHA256SUMS (try $try of $WHEELHOUSE_TRIES); again in ${wait}s" >&2
    sleep "$wait"
    try=$((try + 1))
  done
  rm -rf python .venv
  tar -xzf "$wh/python.tar.gz"
  # The build's own pip installs into the environment (pip --python): nothing fetched for pip either.
  python/bin/python3 -m venv --without-pip .venv
  python/bin/python3 -m pip --python .venv/bin/python install --quiet --disable-pip-version-check \
    --no-index --find-links "$wh" --no-deps -r "$wh/requirements.txt"
  # The checkout itself on the path (what an editable install writes, without building anything).
  .venv/bin/python -c 'import site, sys; open(site.getsitepackages()[0] + "/depthdelusion.pth", "w").write(sys.argv[1] + "\n")' "$DD_HOME"
  .venv/bin/python -c 'import platform, jax, depthdelusion; print(f"python {platform.python_version()}, jax {jax.__version__}")'
  rm -rf "$wh" # installed: its 0.5 GB of the boot disk are better left to logs and caches
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
  [[ $# -ge 1 ]] || die "run OUT [--env-file F] -- ARGS ..."
  local out="$1" id
  shift
  if [[ "${1:-}" == --env-file ]]; then
    [[ -f "${2:-}" ]] || die "--env-file ${2:-}: no such file"
    chmod 600 "$2" # its values are secrets; its directory is 700 already (setup.sh)
    set -- --env-file "$(cd "$(dirname "$2")" && pwd)/$(basename "$2")" "${@:3}"
  fi
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
  local line
  if [[ "$1" == --env-file ]]; then # KEY=VALUE lines, exported as they are: never evaluated
    while IFS= read -r line || [[ -n "$line" ]]; do
      [[ "$line" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] && export "${line?}"
    done <"$2"
    shift 2
  fi
  [[ "${1:-}" == -- ]] || die "run OUT [--env-file F] -- ARGS ..."
  shift
  local log="$LOGS/worker-$id.log" status="$LOGS/worker-$id.status" child copier rc=0
  copy_logs() { # $1: the status file to copy
    gcloud storage cp --quiet "$log" "$out/logs/worker-$id.log" >/dev/null 2>&1 \
      && gcloud storage cp --quiet "$1" "$out/logs/worker-$id.status" >/dev/null 2>&1
  }
  cd "$DD_HOME" # relative paths in the command (experiments/...) are the checkout's
  echo "=== worker $id, $(date -u +%Y-%m-%dT%H:%M:%SZ): depthdelusion $*" >>"$log"
  # A preempted VM takes its disk along: its log survives up to the last copy.
  # The sleep runs as the copier's own child, so its TERM trap can end it: killing the subshell
  # alone would leave the sleep running for up to its full period.
  (nap=""; trap '[[ -n "$nap" ]] && kill "$nap" 2>/dev/null; exit 0' TERM
   while :; do sleep "${DD_LOG_COPY_SECONDS:-300}" & nap=$!; wait "$nap"; copy_logs "$status" || true; done) &
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
      # read again: a run that ended between the two reads has its exit status there by now
      # (the supervisor writes it before it removes the pid file and exits)
      state="$(cat "$LOGS/worker-$id.status")"
      [[ "$state" != running ]] || state=lost # says running, but no process: the VM restarted under it
    fi
  fi
  echo "worker $id $state"
}

case "${1:-}" in
  setup) shift; cmd_setup "$@" ;;
  run) shift; cmd_run "$@" ;;
  _supervise) shift; cmd_supervise "$@" ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *) die "usage: worker.sh setup WHEELHOUSE | run OUT [--env-file F] -- ARGS ... | stop | status" ;;
esac
