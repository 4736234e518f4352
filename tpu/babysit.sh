#!/usr/bin/env bash
# Run a train or sweep command on a spot slice (a queued resource) to completion: create the
# slice if needed, set it up, start the command, and watch both the queued resource and the
# run. When the slice is preempted (the queued resource leaves ACTIVE: SUSPENDED, FAILED, gone)
# it is deleted, re-created and set up again and the same command re-run, which skips finished
# runs and resumes unfinished ones from their checkpoints; a run that fails is re-run on the
# same slice. At most --max-retries (20) restarts in a row without progress (the run's records
# on the bucket did not grow); no capacity (quota, stockout) is waited out with backoff, at most
# --max-capacity-waits (100) times in a row. At the end, whatever the end (done, given up,
# Ctrl-C), the queued resource and its slice are deleted unless --keep (which prints the delete
# command). Every event goes to stderr and --log.
#   tpu/babysit.sh --name dd-v6 --zone us-east5-b --type v6e-64 [--max-retries 20] [--log FILE]
#       [--keep] [--max-capacity-waits 100] [-e KEY[=VALUE] ...] [--env-file FILE]
#       [--wheelhouse gs://BUCKET/wheelhouse (default: the --out bucket's)]
#       -- sweep experiments/paper_large.yaml --out gs://BUCKET/runs/large --set data.path=gs://BUCKET/sp
# Polls every DD_POLL_SECONDS (60). The loop follows Levanter's infra/launch.py (retries around
# create-if-missing, setup, run) and babysit-tpu-vm.sh (delete a VM that is not READY).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
}

here="$(cd "$(dirname "$0")" && pwd)"
max_retries=20
max_capacity_waits=100
logfile=""
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --max-retries) max_retries="${2:-}"; shift 2 ;;
    --max-capacity-waits) max_capacity_waits="${2:-}"; shift 2 ;;
    --log) logfile="${2:-}"; shift 2 ;;
    --delete-when-done) shift ;; # the default now; kept so older command lines still work
    --) args+=("$@"); break ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ "$max_retries" =~ ^[0-9]+$ ]] || die "--max-retries $max_retries: expected a number"
[[ "$max_capacity_waits" =~ ^[0-9]+$ ]] || die "--max-capacity-waits $max_capacity_waits: expected a number"
parse_common "${args[@]}"
require_name_zone
require_type
require_all_workers
[[ ${#DD_REST[@]} -ge 1 ]] || die "give the command to run after --, e.g. -- sweep experiments/smoke.yaml --out gs://BUCKET/runs/smoke"
[[ "$DD_SPOT" -eq 0 ]] || die "--spot: babysit.sh always uses a spot queued resource"
out="$(gs_out_of_command)" || exit 2
out="${out%/}"
if [[ -z "$DD_WHEELHOUSE" ]]; then
  bucket="${out#gs://}"
  DD_WHEELHOUSE="gs://${bucket%%/*}/wheelhouse" # the run's bucket
fi
logfile="${logfile:-babysit-$DD_TPU_NAME.log}"
poll="${DD_POLL_SECONDS:-60}"
location_flags
forward_flags
run_flags=("${DD_FORWARD[@]}")
env_file=""
if [[ ${#DD_ENV[@]} -gt 0 ]]; then
  # Written once (mode 600) and handed to every run.sh: no value on any command line.
  env_file="$(write_env_file)"
  run_flags+=(--env-file "$env_file")
fi
trap 'rm -f "$env_file"' EXIT
create_flags=("${DD_FORWARD[@]}" --type "$DD_TYPE" --spot --keep) # this script deletes what it gives up
if [[ -n "$DD_VERSION" ]]; then
  create_flags+=(--version "$DD_VERSION")
fi

log() {
  local line
  line="$(date -u +%Y-%m-%dT%H:%M:%SZ) babysit $DD_TPU_NAME: $*"
  echo "$line" >&2
  echo "$line" >>"$logfile"
}

delete_slice() {
  "$here/delete.sh" "${DD_FORWARD[@]}" --queued >&2 \
    || log "the delete failed: the slice may still be billing; run: $(delete_command --queued)"
}

# Nothing left billing: at every end the queued resource and its slice go, unless --keep.
release_slice() {
  if [[ "$DD_KEEP" -eq 1 ]]; then
    log "--keep: the queued resource and its slice are left as they are; delete them with: $(delete_command --queued)"
  else
    log "deleting the queued resource and its slice (--keep would leave them)"
    delete_slice
  fi
}

give_up() { # REASON STATUS
  trap '' INT TERM # a second Ctrl-C must not cut the delete short
  log "giving up: $1"
  release_slice
  log "counts: $preemptions preemptions, $failures failed attempts, $capacity_total waits for capacity"
  exit "$2"
}
trap 'give_up "interrupted" 130' INT TERM

# The run's progress as saved on the bucket: the bytes of its metrics.jsonl objects (one per run
# of a sweep). A gs:// run appends its records locally and copies the file up at every checkpoint
# and at the end, so it grows exactly when steps beyond the last saved ones were saved.
read_progress() {
  local listing total=0 pattern size
  for pattern in "$out/metrics.jsonl" "$out/*/metrics.jsonl"; do
    listing="$(gcloud_retry storage ls -l "$pattern" 2>/dev/null)" || continue
    size="$(awk '$1 ~ /^[0-9]+$/ && $NF ~ /metrics\.jsonl$/ { s += $1 } END { print s + 0 }' <<<"$listing")"
    total=$((total + size))
  done
  echo "$total"
}

# Until the queued resource is ACTIVE and set up; returns 1 if a step failed (counted against
# --max-retries). No capacity is waited out here, counted apart.
set_up=0
capacity_waits=0
capacity_total=0
ensure_slice() {
  local described state message rc wait
  while true; do
    described="$(qr_describe)" || give_up "gcloud keeps failing (above): cannot tell the slice's state" 1
    IFS=$'\t' read -r state message <<<"$described"
    case "$state" in
      ACTIVE) break ;;
      NOT_FOUND)
        log "no queued resource: creating a spot $DD_TYPE"
        rc=0
        "$here/create.sh" "${create_flags[@]}" || rc=$?
        set_up=0
        # 3: it FAILED (or vanished): the next describe tells why
        if [[ "$rc" -ne 0 && "$rc" -ne 3 ]]; then log "create failed"; return 1; fi ;;
      FAILED)
        log "queued resource FAILED: ${message:-no failure message}"
        if is_capacity_message "$message"; then
          capacity_waits=$((capacity_waits + 1))
          capacity_total=$((capacity_total + 1))
          if [[ "$capacity_waits" -gt "$max_capacity_waits" ]]; then
            give_up "no capacity $max_capacity_waits times in a row (last: $message)" 1
          fi
          wait="$(backoff_seconds "$capacity_waits")"
          log "no capacity (quota or stockout; wait $capacity_waits of $max_capacity_waits, not a preemption): deleting it, trying again in ${wait}s"
          delete_slice
          sleep "$wait"
        else
          log "not a capacity failure: deleting it"
          delete_slice
          return 1
        fi ;;
      SUSPENDED|SUSPENDING)
        log "queued resource is $state${message:+ ($message)}: deleting it"
        delete_slice
        set_up=0 ;;
      *)
        log "queued resource is ${state:-in no state}: waiting"
        sleep "$poll" ;;
    esac
  done
  capacity_waits=0
  if [[ "$set_up" -eq 0 ]]; then
    log "setting up every worker"
    "$here/setup.sh" "${DD_FORWARD[@]}" --wheelhouse "$DD_WHEELHOUSE" || { log "setup failed"; return 1; }
    set_up=1
  fi
}

# Watch the slice and the run until one of them ends; sets result: finished | preempted | failed STATUS.
watch_run() {
  local described state message statuses values last="" unreachable=0
  while true; do
    sleep "$poll"
    described="$(qr_describe)" || give_up "gcloud keeps failing (above): cannot tell the slice's state" 1
    IFS=$'\t' read -r state message <<<"$described"
    if [[ "$state" != ACTIVE ]]; then
      log "queued resource is $state${message:+ ($message)}: the slice was preempted"
      result=preempted
      return
    fi
    if ! statuses="$(on_workers "$DD_NEED_SETUP$DD_WORKER_SH status" 2>/dev/null)"; then
      unreachable=$((unreachable + 1))
      log "could not reach every worker ($unreachable in a row)"
      if [[ "$unreachable" -ge 10 ]]; then result="failed unreachable"; return; fi
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
      result=finished
    else
      result="failed $values"
    fi
    return
  done
}

log "start: ${DD_REST[*]} (at most $max_retries restarts in a row without progress; log $logfile)"
restarts=0
preemptions=0
failures=0
progress="$(read_progress)"
while true; do
  result=""
  if ensure_slice; then
    log "starting the run on every worker"
    if "$here/run.sh" "${run_flags[@]}" -- "${DD_REST[@]}"; then
      watch_run
    else
      result="failed start"
    fi
  else
    result="failed slice"
  fi
  case "$result" in
    finished)
      log "finished: every worker exited 0"
      trap '' INT TERM
      release_slice
      log "counts: $preemptions preemptions, $failures failed attempts, $capacity_total waits for capacity"
      exit 0 ;;
    preempted)
      preemptions=$((preemptions + 1))
      log "preemption $preemptions"
      set_up=0 ;; # ensure_slice deletes and re-creates it
    *)
      failures=$((failures + 1))
      log "attempt ended: $result" ;;
  esac
  now="$(read_progress)"
  if [[ "$now" -gt "$progress" ]]; then
    log "progress saved on the bucket (metrics.jsonl $progress -> $now bytes): the restart budget starts again"
    progress="$now"
    restarts=0
  fi
  restarts=$((restarts + 1))
  if [[ "$restarts" -gt "$max_retries" ]]; then
    give_up "$max_retries restarts in a row without progress (last: $result)" 1
  fi
  log "restart $restarts of $max_retries: re-running the same command (it resumes)"
done
