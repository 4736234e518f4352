#!/usr/bin/env bash
# Install this checkout of depthdelusion (with its tpu extra: libtpu) on every worker of a slice:
# pack the source, copy it to all workers, unpack it there and build a Python 3.11 environment
# with uv from tpu/constraints.txt (tpu/worker.sh setup). Logs and the environment are kept.
#   tpu/setup.sh --name dd-v4 --zone us-central2-b [--project P] [--internal-ip | --tunnel-through-iap]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'
}

parse_common "$@"
require_name_zone
require_all_workers
[[ ${#DD_REST[@]} -eq 0 ]] || die "unexpected argument(s): ${DD_REST[*]}"
location_flags
ssh_flags

root="$(cd "$(dirname "$0")/.." && pwd)"
workdir="$(mktemp -d)"
trap 'rm -rf "$workdir"' EXIT
tarball="$workdir/depthdelusion.tar.gz"
tar -czf "$tarball" -C "$root" pyproject.toml README.md depthdelusion experiments \
  tpu/worker.sh tpu/constraints.txt

gcloud compute tpus tpu-vm scp "$tarball" "$DD_TPU_NAME:depthdelusion.tar.gz" "${DD_LOCATION[@]}" --worker=all "${DD_SSH[@]}"
d="$DD_REMOTE_DIR"
on_workers "set -e; mkdir -p $d; rm -rf $d/depthdelusion $d/experiments $d/tpu; tar -xzf depthdelusion.tar.gz -C $d; $DD_WORKER_SH setup"
echo "installed on every worker of $DD_TPU_NAME; next: tpu/run.sh --name $DD_TPU_NAME --zone $DD_ZONE -- sweep ... --out gs://..."
