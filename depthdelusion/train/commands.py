"""`depthdelusion train` and `depthdelusion bench`: the command-line face of the trainer.

Plain functions of the parsed arguments (the parser is `depthdelusion.cli`); each returns an
exit code (:mod:`depthdelusion.exit_codes`).
"""
from __future__ import annotations

import json

from etils import epath

from depthdelusion import exit_codes, rundir
from depthdelusion.training_options import BenchOptions, ProcessOptions


def run_train(*, config: str | None, out: str, overrides: list[str],
              processes: ProcessOptions = ProcessOptions()) -> int:
    from depthdelusion.config import load_config, resolve_config_path
    from depthdelusion.parallel.distributed import initialize

    initialize(processes.coordinator, processes.num_processes, processes.process_id)
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


def run_bench(*, config: str | None, overrides: list[str], options: BenchOptions = BenchOptions(),
              json_output: bool = False) -> int:
    from depthdelusion.config import load_config, resolve_config_path
    from depthdelusion.train.bench import bench

    cfg = load_config(resolve_config_path(config), overrides)
    result = bench(cfg, steps=options.steps, warmup=options.warmup, layer_stats=options.layer_stats)
    print(json.dumps(result.to_dict()) if json_output else result.summary())
    return exit_codes.OK


# The option objects each command gets whole: depthdelusion.cli builds them from the parsed
# arguments (their fields' names are the options' dests).
run_train.option_groups = {"processes": ProcessOptions}
run_bench.option_groups = {"options": BenchOptions}
