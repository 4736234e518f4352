"""Multi-host start: one JAX process per TPU worker, joined by `jax.distributed`."""
from __future__ import annotations

import os

ENV_FLAG = "DEPTHDELUSION_DISTRIBUTED"


def initialize_from_env() -> bool:
    """If DEPTHDELUSION_DISTRIBUTED=1 (set by tpu/run.sh on every worker), call
    `jax.distributed.initialize()`, which finds the coordinator and this worker's id itself on
    Cloud TPU. Returns whether it initialised."""
    if os.environ.get(ENV_FLAG, "") not in ("1", "true"):
        return False
    import jax

    jax.distributed.initialize()
    return True
