#!/usr/bin/env bash
# Install this checkout of depthdelusion (with its tpu extra: libtpu) on every worker of a slice:
# pack the source, copy it to all workers, unpack and pip install it there.
#   tpu/setup.sh --name dd-v4 --zone us-central2-b [--project P]
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

root="$(cd "$(dirname "$0")/.." && pwd)"
workdir="$(mktemp -d)"
trap 'rm -rf "$workdir"' EXIT
tarball="$workdir/depthdelusion.tar.gz"
tar -czf "$tarball" -C "$root" pyproject.toml README.md depthdelusion experiments

gcloud compute tpus tpu-vm scp "$tarball" "$DD_TPU_NAME:depthdelusion.tar.gz" "${DD_LOCATION[@]}" --worker=all
on_workers "set -e; rm -rf $DD_REMOTE_DIR; mkdir -p $DD_REMOTE_DIR; tar -xzf depthdelusion.tar.gz -C $DD_REMOTE_DIR; python3 -m pip install --quiet --upgrade pip; python3 -m pip install --quiet -e \"./${DD_REMOTE_DIR}[tpu]\"; python3 -c 'import jax; print(jax.process_index(), jax.device_count(), jax.devices()[0].device_kind)'"
echo "installed on every worker of $DD_TPU_NAME; next: tpu/run.sh --name $DD_TPU_NAME --zone $DD_ZONE sweep ... --out gs://..."
