#!/usr/bin/env bash
# Build, once, what every worker installs from offline, and put it on the bucket: every wheel
# pinned by tpu/constraints.txt (for the TPU VMs: CPython 3.11, manylinux x86_64), a CPython
# build (the TPU images ship Python 3.10), that requirements file and SHA256SUMS. Prints the
# directory, PARENT/py<PYTHON_VERSION>-<hash of the requirements>: a new lock gets a new one, an
# unchanged lock reuses the one there (setup.sh calls this script first).
#   tpu/wheelhouse.sh gs://BUCKET/wheelhouse
# Runs here (the launching machine: python3 with pip, gcloud): pip downloads for the workers'
# platform from any OS; the Python build comes from `uv python install` (Linux x86_64 here),
# or from DD_PYTHON_BUILD=FILE.tar.gz (a python-build-standalone install_only tarball, whose
# top directory is python/).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
}

UV_VERSION=0.13.8     # only here, to fetch the Python build
PYTHON_VERSION=3.11.18 # jax 0.10, flax 0.12 and grain need 3.11
parent="${1:-}"
[[ "$parent" == -h || "$parent" == --help ]] && { usage; exit 0; }
[[ $# -eq 1 && "$parent" == gs://* ]] || die "give the wheelhouse's parent directory on the bucket, e.g. gs://BUCKET/wheelhouse"
root="$(cd "$(dirname "$0")/.." && pwd)"
requirements="${DD_REQUIREMENTS:-$root/tpu/constraints.txt}"
[[ -f "$requirements" ]] || die "DD_REQUIREMENTS $requirements: no such file"
key="py$PYTHON_VERSION-$(sha256sum "$requirements" | cut -c1-12)"
url="${parent%/}/$key"

rc=0
gcloud_retry storage ls "$url/SHA256SUMS" >/dev/null || rc=$?
if [[ "$rc" -eq 0 ]]; then
  echo "wheelhouse $url is there already" >&2
  echo "$url"
  exit 0
elif [[ "$rc" -ne 4 ]]; then
  die "cannot tell whether $url exists (gcloud keeps failing)"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
dir="$work/wheelhouse"
mkdir -p "$dir"
cp "$requirements" "$dir/requirements.txt"
# The workers' platform: Ubuntu 22.04 (glibc 2.35) on x86_64, CPython 3.11. pip takes the
# platform tags literally, so every manylinux tag a 2.35 system accepts is named.
platforms=()
for minor in $(seq 35 -1 5); do
  platforms+=(--platform "manylinux_2_${minor}_x86_64")
done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
# A package published as source only (future, promise, ...) is built into a wheel here, which
# must come out pure Python (py3-none-any) to serve the workers; pip download names one such
# package per failure, so this goes round until every line is served.
wanted="$work/wanted.txt"
grep -vE '^[[:space:]]*(#|$)' "$requirements" | sed 's/[[:space:]]*#.*//' >"$wanted"
for _ in $(seq 1 50); do
  echo "downloading the wheels of $requirements ..." >&2
  if python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$dir" "${platforms[@]}" \
    --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none -r "$wanted" 2>"$work/pip.err"; then
    break
  fi
  missing="$(sed -n 's/.*No matching distribution found for \([^ ]*\).*/\1/p' "$work/pip.err" | head -n 1)"
  [[ -n "$missing" ]] || { cat "$work/pip.err" >&2; die "pip download failed (above)"; }
  echo "$missing has no wheel for the workers: building one here" >&2
  rm -rf "$work/built"
  python3 -m pip wheel --quiet --no-deps --wheel-dir "$work/built" "$missing" >&2
  built="$(find "$work/built" -name "*.whl" | head -n 1)"
  [[ "$built" == *-py3-none-any.whl || "$built" == *-py2.py3-none-any.whl ]] \
    || die "$missing: the wheel built here ($built) is not pure Python, so it cannot serve the workers"
  mv "$built" "$dir/"
  grep -vxF "$missing" "$wanted" >"$wanted.next" || true
  mv "$wanted.next" "$wanted"
done

if [[ -n "${DD_PYTHON_BUILD:-}" ]]; then
  cp "$DD_PYTHON_BUILD" "$dir/python.tar.gz"
else
  [[ "$(uname -sm)" == "Linux x86_64" ]] \
    || die "the Python build for the workers is fetched with uv on Linux x86_64 only; here set DD_PYTHON_BUILD=python.tar.gz"
  python3 -m pip install --quiet --target "$work/uv" "uv==$UV_VERSION"
  UV_PYTHON_INSTALL_DIR="$work/py" "$work/uv/bin/uv" python install --quiet "$PYTHON_VERSION"
  mv "$work/py/cpython-$PYTHON_VERSION-linux-x86_64-gnu" "$work/python"
  tar -czf "$dir/python.tar.gz" -C "$work" python
fi
(cd "$dir" && sha256sum -- * >"$work/SHA256SUMS")
# SHA256SUMS last: a wheelhouse with it is complete
gcloud_retry storage cp --quiet "$dir/*" "$url/" >&2 || die "could not upload the wheelhouse to $url"
gcloud_retry storage cp --quiet "$work/SHA256SUMS" "$url/SHA256SUMS" >&2 || die "could not upload $url/SHA256SUMS"
echo "wheelhouse $url: $(find "$dir" -name '*.whl' | wc -l) wheels, $(du -sh "$dir" | cut -f1)" >&2
echo "$url"
