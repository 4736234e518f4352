#!/usr/bin/env bash
# Run a train or sweep command on a spot slice (a queued resource) to completion: create the
# slice if needed, set it up, start the command, and watch both the queued resource and the
# run. When the slice is preempted (the queued resource leaves ACTIVE: SUSPENDED, FAILED, gone)
# it is deleted, re-created and set up again and the same command re-run, which skips finished
# runs and resumes unfinished ones from their checkpoints; a run that fails is re-run on the
# same slice. At most --max-retries (default 20) restarts. Every event goes to stdout and --log.
#   tpu/babysit.sh --name dd-v6 --zone us-east5-b --type v6e-64 [--max-retries 20] [--log FILE]
#       [--delete-when-done] [-e KEY=VALUE ...] -- sweep experiments/paper_large.yaml --out gs://BUCKET/runs/large --set data.path=gs://BUCKET/sp
# Polls every DD_POLL_SECONDS (60). The loop follows Levanter's infra/launch.py (retries around
# create-if-missing, setup, run) and babysit-tpu-vm.sh (delete a VM that is not READY).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
}

here="$(cd "$(dirname "$0")" && pwd)"
max_retries=20
logfile=""
delete_when_done=0
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --max-retries) max_retries="${2:-}"; shift 2 ;;
    --log) logfile="${2:-}"; shift 2 ;;
    --delete-when-done) delete_when_done=1; shift ;;
    --) args+=("$@"); break ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ "$max_retries" =~ ^[0-9]+$ ]] || die "--max-retries $max_retries: expected a number"
parse_common "${args[@]}"
require_name_zone
require_type
require_all_workers
[[ ${#DD_REST[@]} -ge 1 ]] || die "give the command to run after --, e.g. -- sweep experiments/smoke.yaml --out gs://BUCKET/runs/smoke"
[[ "$DD_SPOT" -eq 0 ]] || die "--spot: babysit.sh always uses a spot queued resource"
logfile="${logfile:-babysit-$DD_TPU_NAME.log}"
poll="${DD_POLL_SECONDS:-60}"
location_flags
forward_flags
run_flags=("${DD_FORWARD[@]}")
for kv in "${DD_ENV[@]}"; do
  run_flags+=(-e "$kv")
done
create_flags=("${DD_FORWARD[@]}" --type "$DD_TYPE" --spot)
if [[ -n "$DD_VERSION" ]]; then
  create_flags+=(--version "$DD_VERSION")
fi

log() {
  local line
  line="$(date -u +%Y-%m-%dT%H:%M:%SZ) babysit $DD_TPU_NAME: $*"
  echo "$line" >&2
  echo "$line" >>"$logfile"
}

# The queued resource's state; NOT_FOUND when three describes in a row fail (one failed API
# call must not pass for a preemption).
qr_state() {
  local try
  for try in 1 2 3; do
    if gcloud compute tpus queued-resources describe "$DD_TPU_NAME" "${DD_LOCATION[@]}" \
      --format='value(state.state)' 2>/dev/null; then
      return 0
    fi
    [[ "$try" -eq 3 ]] || sleep "$poll"
  done
  echo NOT_FOUND
}

# Until the queued resource is ACTIVE and set up; returns 1 if a step failed.
set_up=0
ensure_slice() {
  local state
  while true; do
    state="$(qr_state)"
    case "$state" in
      ACTIVE) break ;;
      NOT_FOUND)
        log "no queued resource: creating a spot $DD_TYPE"
        "$here/create.sh" "${create_flags[@]}" || { log "create failed"; return 1; }
        set_up=0 ;;
      FAILED|SUSPENDED|SUSPENDING)
        log "queued resource is $state: deleting it"
        "$here/delete.sh" "${DD_FORWARD[@]}" --queued || log "delete failed"
        set_up=0 ;;
      *)
        log "queued resource is $state: waiting"
        sleep "$poll" ;;
    esac
  done
  if [[ "$set_up" -eq 0 ]]; then
    log "setting up every worker"
    "$here/setup.sh" "${DD_FORWARD[@]}" || { log "setup failed"; return 1; }
    set_up=1
  fi
}

# Watch the slice and the run until one of them ends; prints finished | preempted | failed STATUS.
watch_run() {
  local state statuses values last="" unreachable=0
  while true; do
    sleep "$poll"
    state="$(qr_state)"
    if [[ "$state" != ACTIVE ]]; then
      log "queued resource is $state: the slice was preempted"
      echo preempted
      return
    fi
    if ! statuses="$(on_workers "$DD_NEED_SETUP$DD_WORKER_SH status" 2>/dev/null)"; then
      unreachable=$((unreachable + 1))
      log "could not reach every worker ($unreachable in a row)"
      if [[ "$unreachable" -ge 10 ]]; then echo "failed unreachable"; return; fi
      continue
    fi
    unreachable=0
    values="$(grep -E '^worker [0-9]+ ' <<<"$statuses" | sort -n -k2 | awk '{print $3}' | tr '\n' ' ')"
    values="${values% }"
    if [[ "$values" != "$last" ]]; then
      log "worker states: ${values:-none reported}"
      last="$values"
    fi
    if [[ -z "$values" || " $values " == *" running "* ]]; then
      continue
    fi
    if [[ -z "$(tr -d ' 0' <<<"$values")" ]]; then
      echo finished
    else
      echo "failed $values"
    fi
    return
  done
}

log "start: ${DD_REST[*]} (at most $max_retries restarts; log $logfile)"
restarts=0
while true; do
  if ensure_slice; then
    log "starting the run on every worker"
    if "$here/run.sh" "${run_flags[@]}" -- "${DD_REST[@]}"; then
      result="$(watch_run)"
    else
      result="failed start"
    fi
  else
    result="failed slice"
  fi
  case "$result" in
    finished)
      log "finished: every worker exited 0"
      if [[ "$delete_when_done" -eq 1 ]]; then
        log "deleting the slice (--delete-when-done)"
        "$here/delete.sh" "${DD_FORWARD[@]}" --queued
      fi
      exit 0 ;;
    preempted) set_up=0 ;; # ensure_slice deletes and re-creates it
    *) log "attempt ended: $result" ;;
  esac
  restarts=$((restarts + 1))
  if [[ "$restarts" -gt "$max_retries" ]]; then
    log "giving up after $max_retries restarts (last: $result); the slice is left as it is"
    exit 1
  fi
  log "restart $restarts of $max_retries: re-running the same command (it resumes)"
done
