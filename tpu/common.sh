#!/usr/bin/env bash
# shellcheck disable=SC2034  # the DD_* variables are read by the scripts that source this file
# Shared by the tpu/*.sh scripts: option parsing, validation, the gcloud flags every call needs.
# Options may also come from the environment: DD_TPU_NAME, DD_ZONE, DD_PROJECT, DD_TYPE.
set -euo pipefail

DD_TPU_NAME="${DD_TPU_NAME:-}"
DD_ZONE="${DD_ZONE:-}"
DD_PROJECT="${DD_PROJECT:-}"
DD_TYPE="${DD_TYPE:-}"
DD_VERSION="${DD_VERSION:-}"
DD_SPOT=0
DD_QUEUED=0
DD_WORKER="${DD_WORKER:-all}"
DD_REST=()
# Where setup.sh unpacks the package on every worker and run.sh writes its log (relative to the
# worker's home directory, where each ssh command starts).
DD_REMOTE_DIR=depthdelusion
DD_REMOTE_LOG=depthdelusion/run.log

die() {
  echo "$(basename "$0"): error: $*" >&2
  exit 2
}

# Parse the common options; anything after `--` (or the first non-option) lands in DD_REST.
parse_common() {
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --name) DD_TPU_NAME="${2:-}"; shift 2 ;;
      --name=*) DD_TPU_NAME="${1#*=}"; shift ;;
      --zone) DD_ZONE="${2:-}"; shift 2 ;;
      --zone=*) DD_ZONE="${1#*=}"; shift ;;
      --project) DD_PROJECT="${2:-}"; shift 2 ;;
      --project=*) DD_PROJECT="${1#*=}"; shift ;;
      --type) DD_TYPE="${2:-}"; shift 2 ;;
      --type=*) DD_TYPE="${1#*=}"; shift ;;
      --version) DD_VERSION="${2:-}"; shift 2 ;;
      --version=*) DD_VERSION="${1#*=}"; shift ;;
      --worker) DD_WORKER="${2:-}"; shift 2 ;;
      --worker=*) DD_WORKER="${1#*=}"; shift ;;
      --spot) DD_SPOT=1; shift ;;
      --queued) DD_QUEUED=1; shift ;;
      -h|--help) usage; exit 0 ;;
      --) shift; DD_REST=("$@"); return 0 ;;
      -*) die "unknown option $1 (see --help)" ;;
      *) DD_REST=("$@"); return 0 ;;
    esac
  done
}

require_name_zone() {
  [[ -n "$DD_TPU_NAME" ]] || die "--name is required (the TPU VM / slice name), or set DD_TPU_NAME"
  [[ "$DD_TPU_NAME" =~ ^[a-z]([-a-z0-9]*[a-z0-9])?$ ]] \
    || die "--name $DD_TPU_NAME: use lower-case letters, digits and '-', starting with a letter"
  [[ -n "$DD_ZONE" ]] || die "--zone is required (e.g. us-central2-b for v4, us-east5-b for v6e), or set DD_ZONE"
}

require_type() {
  [[ -n "$DD_TYPE" ]] || die "--type is required (an accelerator type: v4-32, v5litepod-16, v6e-64, ...)"
  [[ "$DD_TYPE" =~ ^v[0-9][a-z]*(pod)?-[0-9]+$ ]] \
    || die "--type $DD_TYPE: expected an accelerator type like v4-32, v5litepod-16, v6e-64"
}

# The software image for an accelerator type unless --version names one.
default_version() {
  if [[ -n "$DD_VERSION" ]]; then
    echo "$DD_VERSION"
  elif [[ "$DD_TYPE" == v6e-* ]]; then
    echo "v2-alpha-tpuv6e"
  elif [[ "$DD_TYPE" == v5litepod-* || "$DD_TYPE" == v5e-* ]]; then
    echo "v2-alpha-tpuv5-lite"
  else
    echo "tpu-ubuntu2204-base"
  fi
}

# Flags that every gcloud call carries: the zone, and the project when one is given.
location_flags() {
  DD_LOCATION=(--zone="$DD_ZONE")
  if [[ -n "$DD_PROJECT" ]]; then
    DD_LOCATION+=(--project="$DD_PROJECT")
  fi
}

# Run a command on the slice's workers (all by default), streaming their output here.
on_workers() {
  location_flags
  gcloud compute tpus tpu-vm ssh "$DD_TPU_NAME" "${DD_LOCATION[@]}" --worker="$DD_WORKER" --command="$1"
}
