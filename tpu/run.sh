#!/usr/bin/env bash
# Run one depthdelusion command (train or sweep) on every worker of a slice, detached from this
# SSH session (it keeps running if the connection drops), output to a gs:// directory.
# Each worker first stops what still runs there and clears the libtpu lock; jax.distributed is
# initialised on each (DEPTHDELUSION_DISTRIBUTED=1); the compilation cache is OUT/jax_cache.
#   tpu/run.sh --name dd-v4 --zone us-central2-b [--follow] [-e KEY[=VALUE] ...] [--env-file F] -- sweep experiments/paper_baseline.yaml --out gs://BUCKET/runs/baseline --set data.path=gs://BUCKET/sp
#   tpu/run.sh --name dd-v4 --zone us-central2-b -- train experiments/paper_16x512.yaml --out gs://BUCKET/runs/16x512
# Logs: tpu/logs.sh; on the bucket OUT/logs/worker-<id>.log and .status (the exit status; 75 = preempted).
# The environment (-e, --env-file; -e KEY takes KEY's value from here) goes to the workers in a
# file of mode 600, never on a command line: it holds secrets (WANDB_API_KEY, HF_TOKEN).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

usage() {
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
}

follow=0
args=()
for arg in "$@"; do
  if [[ "$arg" == "--follow" ]]; then follow=1; else args+=("$arg"); fi
done
parse_common "${args[@]}"
require_name_zone
require_all_workers
[[ ${#DD_REST[@]} -ge 1 ]] || die "give the command to run after --, e.g. -- sweep experiments/smoke.yaml --out gs://BUCKET/runs/smoke"
case "${DD_REST[0]}" in
  train|sweep) ;;
  *) die "command ${DD_REST[0]}: run.sh runs train or sweep" ;;
esac
out="$(gs_out_of_command)" || exit 2

# Every argument quoted for the remote shell.
remote="$DD_NEED_SETUP$DD_WORKER_SH run $(printf '%q' "$out")"
if [[ ${#DD_ENV[@]} -gt 0 ]]; then
  env_file="$(write_env_file)"
  trap 'rm -f "$env_file"' EXIT
  location_flags
  ssh_flags
  # into secrets/ (mode 700, made by setup.sh); worker.sh makes the file 600
  gcloud compute tpus tpu-vm scp "$env_file" "$DD_TPU_NAME:$DD_REMOTE_DIR/secrets/run.env" "${DD_LOCATION[@]}" \
    --worker=all "${DD_SSH[@]}"
  remote+=" --env-file $DD_REMOTE_DIR/secrets/run.env"
fi
remote+=" --$(printf ' %q' "${DD_REST[@]}")"
on_workers "$remote"
echo "started on every worker of $DD_TPU_NAME; logs: tpu/logs.sh --name $DD_TPU_NAME --zone $DD_ZONE; results: $out"
if [[ "$follow" -eq 1 ]]; then
  DD_WORKER=0
  on_workers "tail -n +1 -F $DD_REMOTE_DIR/logs/worker-0.log"
fi
