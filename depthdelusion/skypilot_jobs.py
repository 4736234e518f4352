"""A sweep across many TPU slices as SkyPilot managed jobs: one job per run of a grid.

SkyPilot's managed jobs give what tpu/babysit.sh gives one slice (queued TPU VMs, spot
preemption recovery, the same command re-run until it finishes) for any number of slices at
once, with a controller that outlives the laptop that launched them. Each job runs
``depthdelusion sweep GRID --only RUN`` on its own slice, all writing the same gs:// sweep
directory (the sweep is idempotent and runs.csv is rebuilt from the run directories, so the jobs
keep each other's rows); a job that exits 75 (preempted, state saved) is recovered like a
preemption. Workers set up offline from the run bucket's wheelhouse (tpu/worker.sh setup).

This module only writes files: one task YAML per run, a SkyPilot config (labels on every GCP
resource, the reservation, the service account) and launch.sh with the ``sky jobs launch``
commands. SkyPilot itself (the ``skypilot`` extra) is needed to launch, and, when installed,
checks every file here with its own parser before anything is written.
"""
from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

import yaml

from depthdelusion import exit_codes
from depthdelusion.config import read_yaml
from depthdelusion.training_options import SkyJobsOptions

CAPACITIES = ("spot", "reserved", "best-effort")
PREEMPTED_EXIT = 75  # exit_codes.PREEMPTED: the run saved its state on SIGTERM
# The software image per TPU generation (cloud.google.com/tpu/docs/runtimes), as tpu/common.sh.
_RUNTIMES = (("v6e-", "v2-alpha-tpuv6e"), ("v5litepod-", "v2-alpha-tpuv5-lite"), ("v5e-", "v2-alpha-tpuv5-lite"),
             ("v5p-", "v2-alpha-tpuv5"))


def label_value(text: str) -> str:
    """A GCP label value: lower-case letters, digits, '_' and '-', at most 63 characters."""
    return re.sub(r"[^a-z0-9_-]", "-", text.lower())[:63]


def tpu_accelerator(topology: str) -> tuple[str, str]:
    """SkyPilot's accelerator name and the TPU runtime image for a slice like v6e-64."""
    if not re.fullmatch(r"v[0-9][a-z]*(pod)?-[0-9]+", topology):
        raise ValueError(f"topology {topology!r}: expected a TPU slice like v4-32, v5litepod-16, v6e-64")
    runtime = next((image for prefix, image in _RUNTIMES if topology.startswith(prefix)), "tpu-ubuntu2204-base")
    name = topology.replace("v5e-", "v5litepod-")  # SkyPilot names v5e slices v5litepod
    return f"tpu-{name}", runtime


def job_name(grid: str, run: str) -> str:
    """A SkyPilot task name (letters and digits joined by one or two of . _ -)."""
    name = re.sub(r"[^a-zA-Z0-9._-]+", "-", f"{grid}-{run}")
    return re.sub(r"[._-]{2,}", "-", name).strip("._-")


# capacity and max_restarts default to `sky-jobs`' command-line defaults, declared once (SkyJobsOptions).
def render(grid_path: str, out: str, *, overrides: list[str] | tuple[str, ...] = (), only: str | None = None,
           topology: str | None = None, capacity: str = SkyJobsOptions.capacity, zone: str | None = None,
           max_restarts: int = SkyJobsOptions.max_restarts,
           secrets: list[str] | tuple[str, ...] = ()) -> tuple[str, list[tuple[str, dict]]]:
    """The grid's name and (run name, SkyPilot task) for every run of it (or those matching `only`)."""
    from depthdelusion.sweep import load_grid, select

    if not out.startswith("gs://"):
        raise ValueError(f"--out {out}: must be a gs:// directory (every job writes there; a slice's disk vanishes)")
    if capacity not in CAPACITIES:
        raise ValueError(f"--capacity {capacity}: expected one of {', '.join(CAPACITIES)}")
    grid = load_grid(grid_path, list(overrides))
    topology = topology or grid.topology
    if not topology:
        raise ValueError(f"{grid_path}: the grid names no topology; give --topology (e.g. v6e-64)")
    accelerator, runtime = tpu_accelerator(topology)
    for name in secrets:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"--secret {name}: expected an environment variable name (the value is read at launch)")
    tasks = []
    for run, _ in select(grid.runs, only):
        resources: dict[str, Any] = {
            "infra": f"gcp/{zone.rsplit('-', 1)[0]}/{zone}" if zone else "gcp",
            "accelerators": accelerator,
            "accelerator_args": {"runtime_version": runtime, "tpu_vm": True},
            # cost attribution: these land on the TPU VMs (the config's gcp.labels on the rest)
            "labels": {"app": "depthdelusion", "sweep": label_value(grid.name), "run": label_value(run)},
            # a preemption (or exit 75: SIGTERM, state saved) re-launches on a new slice; a real
            # error is retried max_restarts times, then the job fails
            "job_recovery": {"strategy": "FAILOVER", "max_restarts_on_errors": max_restarts,
                             "recover_on_exit_codes": [PREEMPTED_EXIT]},
        }
        if capacity == "spot":
            resources["use_spot"] = True
        elif capacity == "reserved":
            resources["use_spot"] = False  # the reservation comes from the config (gcp.specific_reservations)
        else:  # best-effort: whichever of spot and on-demand SkyPilot can get, spot (cheaper) preferred
            resources["any_of"] = [{"use_spot": True}, {"use_spot": False}]
        command = ["sweep", grid_path, "--only", run, "--out", out]
        for override in overrides:
            command += ["--set", override]
        tasks.append((run, {
            "name": job_name(grid.name, run),
            "workdir": ".",  # this checkout, synced to every host of the slice
            "resources": resources,
            "envs": {"DEPTHDELUSION_DISTRIBUTED": "1", "JAX_COMPILATION_CACHE_DIR": f"{out.rstrip('/')}/jax_cache",
                     "DD_WHEELHOUSE": None},  # given at launch (launch.sh): tpu/wheelhouse.sh's directory
            # values never in a file or on a command line: `sky jobs launch --secret NAME` reads them here
            **({"secrets": {name: None for name in secrets}} if secrets else {}),
            "setup": 'bash tpu/worker.sh setup "$DD_WHEELHOUSE"',
            "run": ".venv/bin/python -m depthdelusion " + shlex.join(command),
        }))
    return grid.name, tasks


def sky_config(grid_name: str, *, capacity: str, reservation: str | None, service_account: bool) -> dict:
    """The SkyPilot config for the sweep (`sky jobs launch --config`): GCP labels on every resource
    it creates (the controller VM and disks included), the reservation, the service account."""
    if capacity == "reserved" and not reservation:
        raise ValueError("--capacity reserved needs --reservation NAME (a TPU reservation in the zone)")
    gcp: dict[str, Any] = {"labels": {"app": "depthdelusion", "sweep": label_value(grid_name)}}
    if reservation:
        gcp["specific_reservations"] = [reservation]
        gcp["prioritize_reservations"] = True
    if service_account:
        # The VMs run as SkyPilot's service account, skypilot-v1@PROJECT.iam.gserviceaccount.com
        # (give it the bucket), instead of carrying the launcher's uploaded credentials. On GCP
        # SkyPilot takes no other account's e-mail here (its config schema refuses one).
        gcp["remote_identity"] = "SERVICE_ACCOUNT"
    return {"gcp": gcp}


def validate(tasks: list[tuple[str, dict]], config: dict, directory: Path) -> list:
    """SkyPilot's own checks: every task YAML as written, read back and parsed by sky.Task with
    the --env and --secret values `sky jobs launch` adds (placeholders here), the config through
    SkyPilot's config schema. Returns the sky.Task objects; ImportError without SkyPilot."""
    import sky
    from sky.utils import common_utils, schemas

    common_utils.validate_schema(config, schemas.get_config_schema(), "Invalid SkyPilot config: ")
    parsed = []
    for run, _ in tasks:
        written = read_yaml(directory / "jobs" / f"{run}.yaml")
        parsed.append(sky.Task.from_yaml_config(
            written, env_overrides=[("DD_WHEELHOUSE", "gs://bucket/wheelhouse/py3.11-0")],
            secrets_overrides=[(name, "placeholder") for name in written.get("secrets", {})]))
    return parsed


def launch_script(tasks: list[tuple[str, dict]], directory: Path, wheelhouse_parent: str, secrets) -> str:
    lines = ["#!/usr/bin/env bash",
             "# Launch every run as a SkyPilot managed job (written by `depthdelusion sky-jobs`).",
             "# Run from the checkout's root: it is each job's workdir. Secrets are read from this",
             "# environment by `sky jobs launch --secret NAME`, never written here.",
             "set -euo pipefail",
             '[[ -f tpu/worker.sh ]] || { echo "launch.sh: run me from the depthdelusion checkout" >&2; exit 2; }',
             f"wheelhouse=\"$(tpu/wheelhouse.sh {shlex.quote(wheelhouse_parent)})\"  # built once, offline installs"]
    flags = f"--config {shlex.quote(str(directory / 'sky-config.yaml'))}"
    flags += "".join(f" --secret {name}" for name in secrets)
    for run, task in tasks:
        lines.append(f"sky jobs launch --yes --name {shlex.quote(task['name'])} {flags} "
                     f"--env DD_WHEELHOUSE=\"$wheelhouse\" {shlex.quote(str(directory / 'jobs' / f'{run}.yaml'))}")
    return "\n".join(lines) + "\n"


def run_sky_jobs(*, grid: str, out: str, directory: str, overrides: list[str] = (),
                 options: SkyJobsOptions = SkyJobsOptions()) -> int:
    """`depthdelusion sky-jobs`: write DIR/jobs/<run>.yaml, DIR/sky-config.yaml and DIR/launch.sh."""
    secrets = tuple(options.secret or ())
    try:
        name, tasks = render(grid, out, overrides=overrides, only=options.only, topology=options.topology,
                             capacity=options.capacity, zone=options.zone, max_restarts=options.max_restarts,
                             secrets=secrets)
        config = sky_config(name, capacity=options.capacity, reservation=options.reservation,
                            service_account=options.service_account)
    except ValueError as err:
        print(f"depthdelusion sky-jobs: error: {err}", file=sys.stderr)
        return exit_codes.USAGE
    target = Path(directory)
    (target / "jobs").mkdir(parents=True, exist_ok=True)
    for run, task in tasks:
        (target / "jobs" / f"{run}.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    (target / "sky-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    bucket = out[len("gs://"):].split("/", 1)[0]
    script = target / "launch.sh"
    script.write_text(launch_script(tasks, target, options.wheelhouse or f"gs://{bucket}/wheelhouse", secrets))
    script.chmod(0o755)
    if not options.no_check:
        try:
            validate(tasks, config, target)
        except ImportError:
            print("SkyPilot is not installed (pip install -e '.[skypilot]'): the files are not checked by it")
        except Exception as err:  # SkyPilot's own validation error types vary by version
            print(f"depthdelusion sky-jobs: error: SkyPilot rejects the jobs: {err}", file=sys.stderr)
            return exit_codes.USAGE
    print(f"{len(tasks)} jobs ({options.capacity}) in {target / 'jobs'}; launch them with: bash {script}")
    return exit_codes.OK


run_sky_jobs.option_groups = {"options": SkyJobsOptions}  # built by depthdelusion.cli
