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


def run_train(args) -> int:
    from depthdelusion.config import load_config
    from depthdelusion.train.loop import train

    cfg = load_config(resolve_config_path(args.config), args.overrides)
    summary = train(cfg, args.out)
    print(json.dumps({k: summary[k] for k in ("final_loss", "final_loss_se", "params", "tokens",
                                              "wall_time_s")}))
    print(f"run written to {args.out}")
    return 0


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
    parser.add_argument("--out", required=True, metavar="DIR", help="run directory to create")
    parser.set_defaults(func=run_train)
