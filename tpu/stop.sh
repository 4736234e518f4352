#!/usr/bin/env bash
# Stop the run on every worker of a slice: SIGTERM (a training saves a checkpoint and exits 75;
# the same command resumes it), SIGKILL after DD_STOP_GRACE_SECONDS (180), then free the TPU.
#   tpu/stop.sh --name dd-v4 --zone us-central2-b [--project P]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
}

parse_common "$@"
require_name_zone
require_all_workers
[[ ${#DD_REST[@]} -eq 0 ]] || die "unexpected argument(s): ${DD_REST[*]}"
on_workers "$DD_NEED_SETUP$DD_WORKER_SH stop"
echo "stopped on every worker of $DD_TPU_NAME"
