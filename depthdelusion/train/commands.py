"""`depthdelusion train` and `depthdelusion bench`: the command-line face of the trainer.

Plain functions of the parsed arguments (the parser is `depthdelusion.cli`); each returns an
exit code (:mod:`depthdelusion.exit_codes`).
"""
from __future__ import annotations

import json

from etils import epath

from depthdelusion import exit_codes, rundir


def run_train(*, config: str | None, out: str, overrides: list[str], coordinator: str | None = None,
              num_processes: int | None = None, process_id: int | None = None) -> int:
    from depthdelusion.config import load_config, resolve_config_path
    from depthdelusion.parallel.distributed import initialize

    initialize(coordinator, num_processes, process_id)
    import jax

    from depthdelusion.train.loop import train

    if config is None and rundir.read_config_dict(out) is not None:
        config = str(epath.Path(out) / rundir.CONFIG)  # resuming: the run's own configuration
    cfg = load_config(resolve_config_path(config), overrides)
    summary = train(cfg, out)
    if jax.process_index() == 0:
        keys = ("status", "steps", "final_loss", "final_loss_se", "eval_loss", "params", "tokens", "wall_time_s")
        print(json.dumps({k: summary.get(k) for k in keys}))
        print(f"run written to {out}")
    return exit_codes.PREEMPTED if summary["status"] == "preempted" else exit_codes.OK


def run_bench(*, config: str | None, overrides: list[str], steps: int, warmup: int, layer_stats: str,
              json_output: bool) -> int:
    from depthdelusion.config import load_config, resolve_config_path
    from depthdelusion.train.bench import bench

    cfg = load_config(resolve_config_path(config), overrides)
    result = bench(cfg, steps=steps, warmup=warmup, layer_stats=layer_stats)
    print(json.dumps(result.to_dict()) if json_output else result.summary())
    return exit_codes.OK
