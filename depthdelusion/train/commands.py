"""CLI subcommands of the trainer: `depthdelusion train`, `coord-check`, `lr-transfer`."""
from __future__ import annotations

import json
from importlib import resources

from etils import epath

PRESETS = ("quickstart",)


def resolve_config_path(config: str | None) -> epath.Path:
    """A YAML path (local or gs://), or the name of a preset shipped in the package (default: quickstart)."""
    name = config or "quickstart"
    if name in PRESETS:
        return epath.Path(str(resources.files("depthdelusion") / "presets" / f"{name}.yaml"))
    return epath.Path(name)


EXIT_PREEMPTED = 75  # EX_TEMPFAIL: saved on SIGTERM; run the same command again to resume


def run_train(args) -> int:
    from depthdelusion.config import load_config
    from depthdelusion.parallel.distributed import initialize

    initialize(args.coordinator, args.num_processes, args.process_id)
    import jax

    from depthdelusion.train.loop import train

    config = args.config
    if config is None and (epath.Path(args.out) / "config.yaml").exists():
        config = str(epath.Path(args.out) / "config.yaml")  # resuming: the run's own configuration
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
    register_coord_check(subparsers)
    register_lr_transfer(subparsers)
    from depthdelusion.train import bench

    bench.register(subparsers)


def run_coord_check(args) -> int:
    from depthdelusion.config import PARAMETRIZATIONS
    from depthdelusion.train import coord_check

    names = [n.strip() for n in args.parametrization.split(",") if n.strip()]
    bad = [n for n in names if n not in PARAMETRIZATIONS]
    if bad or not names:
        raise ValueError(f"--parametrization={args.parametrization!r}: valid values are "
                         f"{', '.join(PARAMETRIZATIONS)} (comma-separated)")
    widths = coord_check.parse_ints(args.widths, "--widths")
    depths = coord_check.parse_ints(args.depths, "--depths")
    coord_check.check_shapes(widths, args.head_dim)
    setup = coord_check.CoordCheckSetup(
        steps=args.steps, lr=args.lr, batch_size=args.batch_size, seq_len=args.seq_len,
        head_dim=args.head_dim, base_width=args.base_width, base_depth=args.base_depth)
    rows = coord_check.run(names, widths, depths, setup)
    paths = coord_check.write_outputs(rows, setup, args.out)
    print(paths["md"].read_text())
    print(f"written: {', '.join(str(p) for p in paths.values())}")
    return 0


def register_coord_check(subparsers) -> None:
    parser = subparsers.add_parser(
        "coord-check",
        help="RMS of every block's output and the logits over the first steps, per shape",
        description="Coordinate check: train each width x depth for a few steps at the same base "
        "lr and record the RMS of every block's output and of the logits (table + PNG).",
    )
    parser.add_argument("--widths", default="64,128,256,512")
    parser.add_argument("--depths", default="2,4,8,16")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--parametrization", default="sp,mup,depth_mup,completep",
                        help="comma-separated: sp, mup, depth_mup, completep (one panel each)")
    parser.add_argument("--lr", type=float, default=1e-2, help="base learning rate (constant)")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--head-dim", type=int, default=16)
    parser.add_argument("--base-width", type=int, default=64)
    parser.add_argument("--base-depth", type=int, default=2)
    parser.add_argument("--out", required=True, metavar="DIR")
    parser.set_defaults(func=run_coord_check)


def run_lr_transfer(args) -> int:
    from depthdelusion.train.lr_transfer import run_experiment

    report = run_experiment(args.experiment, args.out)
    print(report.read_text())
    print(f"report written to {report}")
    return 0


def register_lr_transfer(subparsers) -> None:
    parser = subparsers.add_parser(
        "lr-transfer",
        help="lr sweep per width x depth and parameterization, then a depth sweep; CSV, PNG, report",
        description="Learning-rate transfer experiment (e.g. experiments/lr_transfer.yaml). Runs "
        "already finished under DIR/runs are reused.",
    )
    parser.add_argument("experiment", metavar="EXPERIMENT", help="YAML file: base, parametrizations, "
                        "widths, depths, lrs, depth_sweep")
    parser.add_argument("--out", required=True, metavar="DIR")
    parser.set_defaults(func=run_lr_transfer)
