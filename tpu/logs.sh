#!/usr/bin/env bash
# Stream the log of the command run.sh started (worker 0 by default; --worker all for every one):
# ~/depthdelusion/logs/worker-<id>.log on each worker (also copied to OUT/logs/ on the bucket).
#   tpu/logs.sh --name dd-v4 --zone us-central2-b [--worker 0|all] [--lines 100]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
}

DD_WORKER="${DD_WORKER_LOGS:-0}"
lines=100
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --lines) lines="${2:-}"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ "$lines" =~ ^[0-9]+$ ]] || die "--lines $lines: expected a number"
parse_common "${args[@]}"
require_name_zone
[[ ${#DD_REST[@]} -eq 0 ]] || die "unexpected argument(s): ${DD_REST[*]}"
if [[ "$DD_WORKER" == all ]]; then
  on_workers "tail -n $lines -F $DD_REMOTE_DIR/logs/worker-*.log"
else
  [[ "$DD_WORKER" =~ ^[0-9]+$ ]] || die "--worker $DD_WORKER: expected a worker number or all"
  on_workers "tail -n $lines -F $DD_REMOTE_DIR/logs/worker-$DD_WORKER.log"
fi
