"""CLI subcommands `depthdelusion sweep` (run a grid) and `depthdelusion plan` (TPU memory plans)."""
from __future__ import annotations

import datetime
import platform
import sys

import yaml
from etils import epath


def _is_grid(path: str) -> bool:
    p = epath.Path(path)
    if not p.exists() or p.suffix not in (".yaml", ".yml"):
        return False
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError:
        return False
    return isinstance(raw, dict) and ("grid" in raw or "runs" in raw)


def run_sweep_command(args) -> int:
    from depthdelusion.parallel.distributed import initialize
    from depthdelusion.sweep import load_grid, run_sweep

    initialize()  # multi-host TPU slices: found automatically

    grid = load_grid(args.experiment, args.overrides)
    rows = run_sweep(grid, args.out, only=args.only, dry_run=args.dry_run,
                     report=not args.no_report, bootstrap=args.bootstrap,
                     log=lambda text: print(text, flush=True))
    if args.dry_run:
        print(f"{len(rows)} run(s) of {grid.name}; nothing was run (--dry-run)")
        return 0
    if any(r["status"] == "preempted" for r in rows):
        from depthdelusion.train.commands import EXIT_PREEMPTED

        return EXIT_PREEMPTED
    failed = [r["name"] for r in rows if r["status"] == "failed"]
    print(f"{len(rows) - len(failed)} of {len(rows)} run(s) finished; table: "
          f"{epath.Path(args.out) / 'runs.csv'}")
    if failed:
        print(f"failed: {', '.join(failed)} (errors in runs.csv and <run>/error.txt)", file=sys.stderr)
        return 1
    return 0


def run_plan_command(args) -> int:
    from depthdelusion.config import load_config
    from depthdelusion.plan import markdown_table, plan_config, resolve_topology, topology_devices
    from depthdelusion.sweep import load_grid, select
    from depthdelusion.train.commands import resolve_config_path

    if _is_grid(args.config):
        grid = load_grid(args.config, args.overrides)
        runs = select(grid.runs, args.only)
        topology_name = args.topology or grid.topology
        if not topology_name:
            raise ValueError(f"{args.config}: no topology key; pass --topology (e.g. v4-32)")
    else:
        path = resolve_config_path(args.config)
        runs = [(path.stem, load_config(path, args.overrides))]
        topology_name = args.topology
        if not topology_name:
            raise ValueError("--topology is required for a single config (e.g. v4-32, v6e-64)")
    topology = resolve_topology(topology_name)
    mesh = None
    if args.mesh:
        try:
            mesh = tuple(int(x) for x in args.mesh.split(","))
            assert len(mesh) == 3
        except (ValueError, AssertionError):
            raise ValueError(f"--mesh {args.mesh!r}: expected DATA,FSDP,TENSOR, e.g. 1,16,1") from None
    devices = topology_devices(topology)
    plans = []
    for name, cfg in runs:
        p = plan_config(cfg, topology, name=name, mesh=mesh, remat=args.remat,
                        margin=args.margin, devices=devices)
        print(p.describe(), flush=True)
        plans.append(p)
        if args.table:  # rewritten after every run, so a long table keeps what is done
            _write_table(args, topology, plans, done=len(plans) == len(runs))
    print(markdown_table(plans))
    return 0 if all(p.fits for p in plans) else 1


def _write_table(args, topology, plans, done: bool) -> None:
    from depthdelusion.plan import markdown_table

    table = markdown_table(plans)
    import jax
    import libtpu  # noqa: F401

    from importlib.metadata import version

    cmd = "depthdelusion plan " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["plan"] else "depthdelusion plan ..."
    header = (f"# TPU memory plans: {args.config}\n\n"
              f"Generated {datetime.date.today().isoformat()} with `{cmd}` on a CPU host "
              f"({platform.machine()}, {platform.system()}; jax {jax.__version__}, "
              f"libtpu {version('libtpu')}): the real train step compiled ahead of time for "
              f"{topology.name} ({topology.chips} chips, "
              f"{topology.chip.hbm_bytes / 2**30:.0f} GiB HBM each); a run fits when its peak "
              f"per-chip bytes are at most {args.margin:.0%} of HBM.\n\n")
    detail = "\n\n## Details\n\n```\n" + "\n".join(p.describe() for p in plans) + "\n```\n"
    status = "" if done else "\n(In progress: more runs are being compiled.)\n"
    epath.Path(args.table).write_text(header + table + status + detail)
    if done:
        print(f"table written to {args.table}")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep", help="run an experiment grid (idempotent), then write runs.csv and the report",
        description="Expand EXPERIMENT.yaml (format: experiments/README.md), train every run that "
        "has not finished under OUT/<run name>/ (finished runs are skipped, unfinished ones "
        "resumed), record failures without stopping, write OUT/runs.csv and OUT/report/.")
    p.add_argument("experiment", metavar="EXPERIMENT.yaml")
    p.add_argument("--out", required=True, metavar="DIR", help="sweep directory (local or gs://)")
    p.add_argument("--only", metavar="PATTERN", help="run only names matching this glob (e.g. 'd16_*'; "
                   "comma-separated alternatives)")
    p.add_argument("--dry-run", action="store_true", help="list the runs and their state; run nothing")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of every run, e.g. --set data.path=gs://b/sp (repeatable)")
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap refits in the report (default 200)")
    p.add_argument("--no-report", action="store_true", help="write runs.csv only, no fit")
    p.set_defaults(func=run_sweep_command)

    p = subparsers.add_parser(
        "plan", help="compile the train step for a TPU slice on this host; per-chip HBM, fits or not",
        description="Ahead-of-time compile the real train step for a TPU topology (needs the tpu "
        "extra: libtpu) and report per-chip HBM (arguments, outputs, temporaries) against the "
        "chip's capacity, XLA's FLOP count next to ours, and the mesh / remat that fits. CONFIG is "
        "a config YAML, a preset, or an experiment grid (every run is planned). Exit code 1 if "
        "any run does not fit.")
    p.add_argument("config", metavar="CONFIG")
    p.add_argument("--topology", help="v4-32, v5e-16, v6e-64, v5p-128, ... (default: the grid's topology)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--only", metavar="PATTERN", help="grids: plan only runs matching this glob")
    p.add_argument("--mesh", metavar="D,F,T", help="check this (data, fsdp, tensor) mesh "
                   "(default: fsdp over every chip)")
    p.add_argument("--remat", default="auto", help="auto (none -> save_dots -> full, first that fits) "
                   "or check one of none, save_dots, full")
    p.add_argument("--margin", type=float, default=0.9, help="usable fraction of HBM (default 0.9)")
    p.add_argument("--table", metavar="FILE.md", help="also write the table and details here")
    p.set_defaults(func=run_plan_command)
