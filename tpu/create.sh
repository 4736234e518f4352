#!/usr/bin/env bash
# Create a TPU VM or pod slice: on-demand (tpu-vm create), or spot through a queued resource
# (queued-resources create --spot), waiting until it is ACTIVE.
#   tpu/create.sh --name dd-v4 --zone us-central2-b --type v4-32 [--spot] [--version IMAGE] [--project P] [--keep]
# If it does not come up (the queued resource FAILED: its message is printed; a gcloud error that
# persists; Ctrl-C) what was created is deleted, unless --keep, which prints the delete command.
# Exit status 3: the queued resource FAILED (the message says why: quota, stockout, a bad flag).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
}

parse_common "$@"
require_name_zone
require_type
[[ ${#DD_REST[@]} -eq 0 ]] || die "unexpected argument(s): ${DD_REST[*]}"
location_flags
version="$(default_version)"
forward_flags
queued=()
if [[ "$DD_SPOT" -eq 1 ]]; then
  queued=(--queued)
fi

# Nothing left billing: whatever this script created goes, unless --keep.
cleanup() {
  trap - INT TERM EXIT
  if [[ "$DD_KEEP" -eq 1 ]]; then
    echo "create.sh: --keep: $DD_TPU_NAME is left as it is; delete it with: $(delete_command "${queued[@]}")" >&2
  else
    echo "create.sh: deleting $DD_TPU_NAME (--keep would leave it)" >&2
    "$(dirname "$0")/delete.sh" "${DD_FORWARD[@]}" "${queued[@]}" >&2 \
      || echo "create.sh: the delete failed; run: $(delete_command "${queued[@]}")" >&2
  fi
}
on_signal() {
  echo "create.sh: interrupted" >&2
  cleanup
  exit 130
}
trap on_signal INT TERM

if [[ "$DD_SPOT" -eq 1 ]]; then
  rc=0
  gcloud_retry compute tpus queued-resources create "$DD_TPU_NAME" "${DD_LOCATION[@]}" \
    --node-id="$DD_TPU_NAME" --accelerator-type="$DD_TYPE" --runtime-version="$version" --spot || rc=$?
  if [[ "$rc" -eq 5 ]]; then
    echo "queued resource $DD_TPU_NAME exists already (an earlier try's create went through): waiting for it"
  elif [[ "$rc" -ne 0 ]]; then
    cleanup
    exit 1
  fi
  poll="${DD_POLL_SECONDS:-30}"
  echo "waiting for queued resource $DD_TPU_NAME to become ACTIVE (polling every ${poll}s) ..."
  while true; do
    if ! described="$(qr_describe)"; then
      cleanup
      exit 1
    fi
    IFS=$'\t' read -r state message <<<"$described"
    case "$state" in
      ACTIVE) break ;;
      FAILED|SUSPENDED|NOT_FOUND)
        echo "create.sh: queued resource $DD_TPU_NAME is $state: ${message:-no failure message}" >&2
        cleanup
        exit 3 ;;
      *) echo "  state: ${state:-unknown}"; sleep "$poll" ;;
    esac
  done
else
  if ! gcloud compute tpus tpu-vm create "$DD_TPU_NAME" "${DD_LOCATION[@]}" \
    --accelerator-type="$DD_TYPE" --version="$version"; then
    cleanup
    exit 1
  fi
fi
trap - INT TERM
echo "TPU $DD_TPU_NAME ($DD_TYPE) is ready; next: tpu/setup.sh --name $DD_TPU_NAME --zone $DD_ZONE"
