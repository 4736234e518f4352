#!/usr/bin/env bash
# Delete a TPU VM / slice (--queued: a spot slice created through a queued resource, which is
# deleted with its node).
#   tpu/delete.sh --name dd-v4 --zone us-central2-b [--queued] [--project P]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
}

parse_common "$@"
require_name_zone
[[ ${#DD_REST[@]} -eq 0 ]] || die "unexpected argument(s): ${DD_REST[*]}"
location_flags
# Retried (a transient error must not leave the slice billing); NOT_FOUND: nothing to delete.
rc=0
if [[ "$DD_QUEUED" -eq 1 || "$DD_SPOT" -eq 1 ]]; then
  gcloud_retry compute tpus queued-resources delete "$DD_TPU_NAME" "${DD_LOCATION[@]}" --force --quiet || rc=$?
else
  gcloud_retry compute tpus tpu-vm delete "$DD_TPU_NAME" "${DD_LOCATION[@]}" --quiet || rc=$?
fi
case "$rc" in
  0) echo "deleted $DD_TPU_NAME" ;;
  4) echo "$DD_TPU_NAME does not exist (nothing to delete)" ;;
  *) die "could not delete $DD_TPU_NAME: it may still be billing; run this again" ;;
esac
