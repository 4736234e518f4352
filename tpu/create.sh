#!/usr/bin/env bash
# Create a TPU VM or pod slice: on-demand (tpu-vm create), or spot through a queued resource
# (queued-resources create --spot), waiting until it is ACTIVE.
#   tpu/create.sh --name dd-v4 --zone us-central2-b --type v4-32 [--spot] [--version IMAGE] [--project P]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
}

parse_common "$@"
require_name_zone
require_type
[[ ${#DD_REST[@]} -eq 0 ]] || die "unexpected argument(s): ${DD_REST[*]}"
location_flags
version="$(default_version)"

if [[ "$DD_SPOT" -eq 1 ]]; then
  gcloud compute tpus queued-resources create "$DD_TPU_NAME" "${DD_LOCATION[@]}" \
    --node-id="$DD_TPU_NAME" --accelerator-type="$DD_TYPE" --runtime-version="$version" --spot
  poll="${DD_POLL_SECONDS:-30}"
  echo "waiting for queued resource $DD_TPU_NAME to become ACTIVE (polling every ${poll}s) ..."
  while true; do
    state="$(gcloud compute tpus queued-resources describe "$DD_TPU_NAME" "${DD_LOCATION[@]}" \
      --format='value(state.state)')"
    case "$state" in
      ACTIVE) break ;;
      FAILED|SUSPENDED) die "queued resource $DD_TPU_NAME is $state; delete it: tpu/delete.sh --queued --name $DD_TPU_NAME --zone $DD_ZONE" ;;
      *) echo "  state: ${state:-unknown}"; sleep "$poll" ;;
    esac
  done
else
  gcloud compute tpus tpu-vm create "$DD_TPU_NAME" "${DD_LOCATION[@]}" \
    --accelerator-type="$DD_TYPE" --version="$version"
fi
echo "TPU $DD_TPU_NAME ($DD_TYPE) is ready; next: tpu/setup.sh --name $DD_TPU_NAME --zone $DD_ZONE"
