#!/usr/bin/env bash
# Install this checkout of depthdelusion (with its tpu extra: libtpu) on every worker of a slice,
# offline: tpu/wheelhouse.sh builds the wheelhouse on the bucket once (or finds it there); this
# packs the source, copies it to all workers, unpacks it there, and each worker builds its Python
# 3.11 environment from the wheelhouse alone (tpu/worker.sh setup). Logs are kept.
#   tpu/setup.sh --name dd-v4 --zone us-central2-b --wheelhouse gs://BUCKET/wheelhouse [--project P]
#       [--internal-ip | --tunnel-through-iap]
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
}

parse_common "$@"
require_name_zone
require_all_workers
[[ ${#DD_REST[@]} -eq 0 ]] || die "unexpected argument(s): ${DD_REST[*]}"
[[ "$DD_WHEELHOUSE" == gs://* ]] \
  || die "--wheelhouse gs://BUCKET/wheelhouse is required (or DD_WHEELHOUSE): the workers install from there, offline"
location_flags
ssh_flags
wheelhouse="$("$(dirname "$0")/wheelhouse.sh" "$DD_WHEELHOUSE")"

root="$(cd "$(dirname "$0")/.." && pwd)"
workdir="$(mktemp -d)"
trap 'rm -rf "$workdir"' EXIT
tarball="$workdir/depthdelusion.tar.gz"
# An explicit list of source files, not directories: Python may be writing __pycache__ into the
# checkout meanwhile (a directory that changes while tar reads it fails the archive). The walk
# never enters a __pycache__ (find does, and fails when one vanishes between listing and reading).
(cd "$root" && python3 -c 'import os
def unreadable(err):
    raise err  # a source directory left out would be a worker without it
for top in ("depthdelusion", "experiments"):
    for here, dirs, files in os.walk(top, onerror=unreadable):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if not f.endswith(".pyc"):
                print(os.path.join(here, f))' \
  && printf '%s\n' pyproject.toml README.md tpu/worker.sh) > "$workdir/files"
tar -czf "$tarball" -C "$root" --no-recursion -T "$workdir/files"

gcloud compute tpus tpu-vm scp "$tarball" "$DD_TPU_NAME:depthdelusion.tar.gz" "${DD_LOCATION[@]}" --worker=all "${DD_SSH[@]}"
d="$DD_REMOTE_DIR"
# secrets/ (700) receives run.sh's environment file
on_workers "set -e; mkdir -p $d; install -d -m 700 $d/secrets; rm -rf $d/depthdelusion $d/experiments $d/tpu; tar -xzf depthdelusion.tar.gz -C $d; $DD_WORKER_SH setup $(printf '%q' "$wheelhouse")"
echo "installed on every worker of $DD_TPU_NAME; next: tpu/run.sh --name $DD_TPU_NAME --zone $DD_ZONE -- sweep ... --out gs://..."
