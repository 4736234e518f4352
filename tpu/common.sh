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
DD_KEEP=0
DD_WHEELHOUSE="${DD_WHEELHOUSE:-}"
DD_ENV=()
DD_ENV_FILES=()
DD_REST=()
# Retries of a gcloud call that failed for a transient reason (anything but NOT_FOUND /
# ALREADY_EXISTS): DD_GCLOUD_TRIES tries in all, waiting DD_BACKOFF_SECONDS, doubling up to
# DD_BACKOFF_MAX_SECONDS. The tests set them to fractions of a second.
DD_GCLOUD_TRIES="${DD_GCLOUD_TRIES:-5}"
DD_BACKOFF_SECONDS="${DD_BACKOFF_SECONDS:-10}"
DD_BACKOFF_MAX_SECONDS="${DD_BACKOFF_MAX_SECONDS:-1800}"
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
      --env-file) add_env_file "${2:-}"; shift 2 ;;
      --env-file=*) add_env_file "${1#*=}"; shift ;;
      --keep) DD_KEEP=1; shift ;;
      --wheelhouse) DD_WHEELHOUSE="${2:-}"; shift 2 ;;
      --wheelhouse=*) DD_WHEELHOUSE="${1#*=}"; shift ;;
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

# -e KEY=VALUE, or -e KEY to take the value from this environment (a secret: WANDB_API_KEY, HF_TOKEN):
# an environment variable for the run on every worker. Values travel in a file of mode 600
# (write_env_file), never on a command line here or on the workers.
add_env() {
  local kv="$1"
  if [[ "$kv" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
    [[ -n "${!kv+x}" ]] || die "-e $kv: $kv is not set in this environment (or give -e $kv=VALUE)"
    kv="$kv=${!kv}"
  fi
  [[ "$kv" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "-e ${1%%=*}: expected KEY=VALUE or KEY (KEY: letters, digits, _)"
  [[ "$kv" != *$'\n'* ]] || die "-e ${kv%%=*}: a value may not contain a newline"
  DD_ENV+=("$kv")
}

# --env-file FILE: KEY=VALUE lines (blank lines and # comments skipped), as for -e.
add_env_file() {
  local file="$1" line n=0
  [[ -f "$file" && -r "$file" ]] || die "--env-file $file: no such readable file"
  while IFS= read -r line || [[ -n "$line" ]]; do
    n=$((n + 1))
    [[ -z "${line//[[:space:]]/}" || "$line" =~ ^[[:space:]]*# ]] && continue
    [[ "$line" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env-file $file line $n: expected KEY=VALUE"
    DD_ENV+=("$line")
  done <"$file"
  DD_ENV_FILES+=("$file")
}

# DD_ENV into a new file of mode 600 (mktemp's), one KEY=VALUE a line; prints its path.
write_env_file() {
  local file kv
  file="$(mktemp "${TMPDIR:-/tmp}/dd-env.XXXXXX")"
  chmod 600 "$file"
  for kv in "${DD_ENV[@]}"; do
    printf '%s\n' "$kv" >>"$file"
  done
  echo "$file"
}

# The n-th wait of a backoff (n = 1, 2, ...): DD_BACKOFF_SECONDS doubled n-1 times, at most
# DD_BACKOFF_MAX_SECONDS.
backoff_seconds() {
  awk -v base="$DD_BACKOFF_SECONDS" -v cap="$DD_BACKOFF_MAX_SECONDS" -v n="$1" \
    'BEGIN { t = base * 2 ^ (n - 1); if (t > cap) t = cap; print t }'
}

# gcloud ARGS with retries. A call that fails with NOT_FOUND returns 4 and one that fails with
# ALREADY_EXISTS returns 5 at once (answers, not errors); any other failure is taken as transient
# and retried with backoff, DD_GCLOUD_TRIES tries in all; then it is persistent: its message goes
# to stderr and the status is 1. stdout is gcloud's.
gcloud_retry() {
  local try=1 err rc=0
  err="$(mktemp)"
  while true; do
    if gcloud "$@" 2>"$err"; then
      rm -f "$err"
      return 0
    fi
    if grep -qE 'NOT_FOUND|matched no objects' "$err"; then rc=4; fi
    if grep -q ALREADY_EXISTS "$err"; then rc=5; fi
    if [[ "$rc" -ne 0 ]]; then
      rm -f "$err"
      return "$rc"
    fi
    if [[ "$try" -ge "$DD_GCLOUD_TRIES" ]]; then
      echo "gcloud $1 $2 $3 $4 failed $try times in a row (persistent): $(tail -n 3 "$err")" >&2
      rm -f "$err"
      return 1
    fi
    echo "gcloud $1 $2 $3 $4 failed (try $try of $DD_GCLOUD_TRIES, retrying in $(backoff_seconds "$try")s): $(tail -n 1 "$err")" >&2
    sleep "$(backoff_seconds "$try")"
    try=$((try + 1))
  done
}

# The queued resource's state and failure message (state.failedData.error.message, empty when
# none), tab-separated, retried; NOT_FOUND when there is none. Status 1: persistent error.
qr_describe() {
  local out rc=0
  out="$(gcloud_retry compute tpus queued-resources describe "$DD_TPU_NAME" "${DD_LOCATION[@]}" \
    --format='value(state.state,state.failedData.error.message)')" || rc=$?
  if [[ "$rc" -eq 4 ]]; then
    printf 'NOT_FOUND\t\n'
  elif [[ "$rc" -eq 0 ]]; then
    printf '%s\n' "$out"
  else
    return 1
  fi
}

# A FAILED queued resource's message that says there was no capacity: quota or a stockout
# (worth waiting for), unlike a bad flag or a permission (not worth retrying).
is_capacity_message() {
  grep -qiE 'quota|capacity|stockout|resource_exhausted|exhausted|insufficient|no more|unavailable in|not enough' <<<"$1"
}

# The command that deletes this slice (printed when --keep leaves it).
delete_command() {
  local cmd
  cmd="tpu/delete.sh --name $(printf '%q' "$DD_TPU_NAME") --zone $(printf '%q' "$DD_ZONE")"
  if [[ -n "$DD_PROJECT" ]]; then
    cmd+=" --project $(printf '%q' "$DD_PROJECT")"
  fi
  if [[ $# -gt 0 ]]; then
    cmd+="$(printf ' %q' "$@")"
  fi
  echo "$cmd"
}

# run, setup and stop act on every worker: one worker alone would leave jax.distributed waiting
# for the others (MaxText's multihost_runner and Levanter's launcher also always use all).
# The --out of the command after -- (DD_REST), which must be a gs:// directory: the workers'
# disks vanish with the slice. Prints it; dies otherwise.
gs_out_of_command() {
  local out="" i
  for ((i = 1; i < ${#DD_REST[@]}; i++)); do
    case "${DD_REST[$i]}" in
      --out) out="${DD_REST[$((i + 1))]:-}" ;;
      --out=*) out="${DD_REST[$i]#*=}" ;;
    esac
  done
  [[ "$out" == gs://* ]] || die "--out must be a gs:// directory (got '${out}'): the workers' disks vanish with the slice"
  printf '%s\n' "$out"
}

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
