"""Multi-host start: `jax.distributed.initialize` from flags or the environment.

- On a multi-host TPU VM slice JAX finds the coordinator itself (TPU_WORKER_HOSTNAMES lists the
  workers, or tpu/run.sh sets DEPTHDELUSION_DISTRIBUTED=1); nothing needs to be passed.
- Elsewhere (CPU or GPU hosts, local tests) pass the coordinator address, the process count and
  this process's id, as flags or as DEPTHDELUSION_COORDINATOR / DEPTHDELUSION_NUM_PROCESSES /
  DEPTHDELUSION_PROCESS_ID. CPU processes exchange collectives through gloo.
"""
from __future__ import annotations

import os

import jax


def _tpu_worker_count() -> int:
    """Workers listed in TPU_WORKER_HOSTNAMES. libtpu, when it cannot read TPU metadata, may
    leave a warning sentence there (with commas): only host names count."""
    hosts = [h.strip() for h in os.environ.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]
    return len(hosts) if hosts and all(" " not in h for h in hosts) else 0


def initialize(coordinator: str | None = None, num_processes: int | None = None,
               process_id: int | None = None) -> bool:
    """Join the multi-process job if one is configured; returns whether it did."""
    coordinator = coordinator or os.environ.get("DEPTHDELUSION_COORDINATOR")
    if num_processes is None and os.environ.get("DEPTHDELUSION_NUM_PROCESSES"):
        num_processes = int(os.environ["DEPTHDELUSION_NUM_PROCESSES"])
    if process_id is None and os.environ.get("DEPTHDELUSION_PROCESS_ID"):
        process_id = int(os.environ["DEPTHDELUSION_PROCESS_ID"])
    explicit = (coordinator, num_processes, process_id)
    if any(v is not None for v in explicit):
        if any(v is None for v in explicit):
            raise ValueError(
                "multi-process start needs all of coordinator (host:port), num_processes and "
                f"process_id; got coordinator={coordinator!r}, num_processes={num_processes!r}, "
                f"process_id={process_id!r}"
            )
        if not 0 <= process_id < num_processes:
            raise ValueError(f"process_id={process_id} must be in [0, {num_processes})")
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator, num_processes=num_processes, process_id=process_id)
        return True
    requested = os.environ.get("DEPTHDELUSION_DISTRIBUTED", "") in ("1", "true")
    if requested or _tpu_worker_count() > 1:  # a multi-host TPU slice
        jax.distributed.initialize()
        return True
    return False
