#!/usr/bin/env bash
# shellcheck disable=SC2034  # the DD_* variables are read by the scripts that source this file
# Shared by the tpu/*.sh scripts: option parsing, validation, the gcloud flags every call needs.
# Options may also come from the environment: DD_TPU_NAME, DD_ZONE, DD_PROJECT, DD_TYPE.
# What runs on the workers is tpu/worker.sh (shipped by setup.sh): these scripts only call it.
set -euo pipefail

DD_TPU_NAME="${DD_TPU_NAME:-}"
DD_ZONE="${DD_ZONE:-}"
DD_PROJECT="${DD_PROJECT:-}"
DD_TYPE="${DD_TYPE:-}"
DD_VERSION="${DD_VERSION:-}"
DD_SPOT=0
DD_QUEUED=0
DD_WORKER="${DD_WORKER:-all}"
DD_WORKER_GIVEN=0
DD_INTERNAL_IP=0
DD_IAP=0
DD_ENV=()
DD_REST=()
# Where setup.sh unpacks the package on every worker (relative to the worker's home directory,
# where each ssh command starts); each worker's log is $DD_REMOTE_DIR/logs/worker-<id>.log.
DD_REMOTE_DIR=depthdelusion
DD_WORKER_SH="bash $DD_REMOTE_DIR/tpu/worker.sh"
# Before calling worker.sh on a slice that setup.sh may not have reached yet.
DD_NEED_SETUP="test -f $DD_REMOTE_DIR/tpu/worker.sh || { echo \"\$(hostname): depthdelusion is not installed here: run tpu/setup.sh first\" >&2; exit 2; }; "

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
      --worker) DD_WORKER="${2:-}"; DD_WORKER_GIVEN=1; shift 2 ;;
      --worker=*) DD_WORKER="${1#*=}"; DD_WORKER_GIVEN=1; shift ;;
      -e|--env) add_env "${2:-}"; shift 2 ;;
      --env=*) add_env "${1#*=}"; shift ;;
      --internal-ip) DD_INTERNAL_IP=1; shift ;;
      --tunnel-through-iap) DD_IAP=1; shift ;;
      --spot) DD_SPOT=1; shift ;;
      --queued) DD_QUEUED=1; shift ;;
      -h|--help) usage; exit 0 ;;
      --) shift; DD_REST=("$@"); return 0 ;;
      -*) die "unknown option $1 (see --help)" ;;
      *) DD_REST=("$@"); return 0 ;;
    esac
  done
}

# -e KEY=VALUE: an environment variable for the run on every worker (LIBTPU_INIT_ARGS, XLA_FLAGS,
# WANDB_API_KEY, ...).
add_env() {
  [[ "$1" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "-e $1: expected KEY=VALUE (KEY: letters, digits, _)"
  DD_ENV+=("$1")
}

# run, setup and stop act on every worker: one worker alone would leave jax.distributed waiting
# for the others (MaxText's multihost_runner and Levanter's launcher also always use all).
require_all_workers() {
  [[ "$DD_WORKER_GIVEN" -eq 0 || "$DD_WORKER" == all ]] \
    || die "--worker $DD_WORKER: $(basename "$0") always acts on every worker of the slice (--worker all)"
  DD_WORKER=all
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
  elif [[ "$DD_TYPE" == v5p-* ]]; then
    echo "v2-alpha-tpuv5"
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

# Flags for tpu-vm ssh / scp: never prompt (the first ssh to 16 new workers would ask 16 times
# to accept a host key; MaxText's multihost_runner passes the same flag), and optionally reach
# the workers by internal IP (from a VM in the VPC) or through an IAP tunnel (no external IP).
ssh_flags() {
  DD_SSH=(--strict-host-key-checking=no --quiet)
  if [[ "$DD_INTERNAL_IP" -eq 1 ]]; then
    DD_SSH+=(--internal-ip)
  fi
  if [[ "$DD_IAP" -eq 1 ]]; then
    DD_SSH+=(--tunnel-through-iap)
  fi
}

# Run a command on the slice's workers (all by default), streaming their output here; its exit
# status is gcloud's (non-zero if the command failed on any worker).
on_workers() {
  location_flags
  ssh_flags
  gcloud compute tpus tpu-vm ssh "$DD_TPU_NAME" "${DD_LOCATION[@]}" --worker="$DD_WORKER" "${DD_SSH[@]}" \
    --command="$1"
}

# The options that select and reach this slice, to hand to another tpu/ script.
forward_flags() {
  DD_FORWARD=(--name "$DD_TPU_NAME" --zone "$DD_ZONE")
  if [[ -n "$DD_PROJECT" ]]; then
    DD_FORWARD+=(--project "$DD_PROJECT")
  fi
  if [[ "$DD_INTERNAL_IP" -eq 1 ]]; then
    DD_FORWARD+=(--internal-ip)
  fi
  if [[ "$DD_IAP" -eq 1 ]]; then
    DD_FORWARD+=(--tunnel-through-iap)
  fi
}
