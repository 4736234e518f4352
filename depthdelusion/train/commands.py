"""CLI subcommands of the trainer: `depthdelusion train`."""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

PRESETS = ("quickstart",)


def resolve_config_path(config: str | None) -> Path:
    """A YAML path, or the name of a preset shipped in the package (default: quickstart)."""
    name = config or "quickstart"
    if name in PRESETS:
        return Path(str(resources.files("depthdelusion") / "presets" / f"{name}.yaml"))
    return Path(name)


EXIT_PREEMPTED = 75  # EX_TEMPFAIL: saved on SIGTERM; run the same command again to resume


def run_train(args) -> int:
    from depthdelusion.config import load_config
    from depthdelusion.parallel.distributed import initialize

    initialize(args.coordinator, args.num_processes, args.process_id)
    import jax

    from depthdelusion.train.loop import train

    config = args.config
    if config is None and (Path(args.out) / "config.yaml").exists():
        config = str(Path(args.out) / "config.yaml")  # resuming: the run's own configuration
    cfg = load_config(resolve_config_path(config), args.overrides)
    summary = train(cfg, args.out)
    if jax.process_index() == 0:
        keys = ("status", "steps", "final_loss", "final_loss_se", "eval_loss", "params", "tokens", "wall_time_s")
        print(json.dumps({k: summary.get(k) for k in keys}))
        print(f"run written to {args.out}")
    return EXIT_PREEMPTED if summary["status"] == "preempted" else 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train one model; writes config.yaml, metrics.jsonl, summary.json",
        description="Train one model. CONFIG is a YAML file with sections model, data, train, mesh "
        f"(or a preset: {', '.join(PRESETS)}; default quickstart).",
    )
    parser.add_argument("config", nargs="?", metavar="CONFIG", help="YAML file or preset name")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a config field by its dotted path, e.g. --set model.depth=24 (repeatable)",
    )
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="run directory; an existing one is resumed from its latest checkpoint")
    multi = parser.add_argument_group("multi-process (not needed on TPU VMs, found automatically)")
    multi.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address")
    multi.add_argument("--num-processes", type=int, metavar="N")
    multi.add_argument("--process-id", type=int, metavar="I")
    parser.set_defaults(func=run_train)
