"""`depthdelusion sweep` (run a grid) and `depthdelusion plan` (TPU memory plans): plain
functions of the parsed arguments (the parser is `depthdelusion.cli`), returning exit codes."""
from __future__ import annotations

import datetime
import platform
import sys

from etils import epath

from depthdelusion import exit_codes
from depthdelusion.analysis.fitting.options import SWEEP_BOOTSTRAP, FitOptions
from depthdelusion.config import read_yaml
from depthdelusion.training_options import PlanOptions, SweepOptions


def _is_grid(path: str) -> bool:
    p = epath.Path(path)
    if not p.exists() or p.suffix not in (".yaml", ".yml"):
        return False
    try:
        raw = read_yaml(p)
    except ValueError:  # not YAML: not a grid (the config reader reports it)
        return False
    return isinstance(raw, dict) and ("grid" in raw or "runs" in raw)


def run_sweep_command(*, experiment: str, out: str, overrides: list[str],
                      options: SweepOptions = SweepOptions(),
                      fit: FitOptions = FitOptions(bootstrap=SWEEP_BOOTSTRAP)) -> int:
    from depthdelusion.parallel.distributed import initialize
    from depthdelusion.sweep import load_grid, run_sweep

    initialize()  # multi-host TPU slices: found automatically

    grid = load_grid(experiment, overrides)
    rows = run_sweep(grid, out, only=options.only, dry_run=options.dry_run, report=not options.no_report,
                     fit=fit, report_workers=options.report_workers, log=lambda text: print(text, flush=True))
    if options.dry_run:
        print(f"{len(rows)} run(s) of {grid.name}; nothing was run (--dry-run)")
        return exit_codes.OK
    if any(r["status"] == "preempted" for r in rows):
        return exit_codes.PREEMPTED
    failed = [r["name"] for r in rows if r["status"] == "failed"]
    if failed:
        print(f"failed: {', '.join(failed)} (errors in runs.csv and <run>/error.txt)", file=sys.stderr)
        return exit_codes.FAILED
    return exit_codes.OK


def run_plan_command(*, config: str, overrides: list[str], options: PlanOptions = PlanOptions(),
                     table: str | None = None) -> int:
    from depthdelusion.config import load_config, resolve_config_path
    from depthdelusion.outputs import refuse_input_as_output
    from depthdelusion.plan import (
        markdown_table,
        plan_config,
        resolve_topology,
        topology_devices,
    )
    from depthdelusion.sweep import load_grid, select

    refuse_input_as_output("--table", table, [config])
    if _is_grid(config):
        grid = load_grid(config, overrides)
        runs = select(grid.runs, options.only)
        topology_name = options.topology or grid.topology
        if not topology_name:
            raise ValueError(f"{config}: no topology key; pass --topology (e.g. v4-32)")
    else:
        path = resolve_config_path(config)
        runs = [(path.stem, load_config(path, overrides))]
        topology_name = options.topology
        if not topology_name:
            raise ValueError("--topology is required for a single config (e.g. v4-32, v6e-64)")
    slice_ = resolve_topology(topology_name)
    mesh_shape, mesh = None, options.mesh
    if mesh:
        try:
            mesh_shape = tuple(int(x) for x in mesh.split(","))
            assert len(mesh_shape) == 3
        except (ValueError, AssertionError):
            raise ValueError(f"--mesh {mesh!r}: expected DATA,FSDP,TENSOR, e.g. 1,16,1") from None
    devices = topology_devices(slice_)
    plans = []
    for name, cfg in runs:
        p = plan_config(cfg, slice_, name=name, mesh=mesh_shape, remat=options.remat, margin=options.margin,
                        devices=devices)
        print(p.describe(), flush=True)
        plans.append(p)
        if table:  # rewritten after every run, so a long table keeps what is done
            _write_table(table, config, options.margin, slice_, plans, done=len(plans) == len(runs))
    print(markdown_table(plans))
    return exit_codes.OK if all(p.fits for p in plans) else exit_codes.FAILED


def _write_table(path: str, config: str, margin: float, topology, plans, done: bool) -> None:
    from depthdelusion.plan import markdown_table

    table = markdown_table(plans)
    from importlib.metadata import version

    import jax
    import libtpu  # noqa: F401

    cmd = "depthdelusion plan " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["plan"] else "depthdelusion plan ..."
    header = (f"# TPU memory plans: {config}\n\n"
              f"Generated {datetime.date.today().isoformat()} with `{cmd}` on a CPU host "
              f"({platform.machine()}, {platform.system()}; jax {jax.__version__}, "
              f"libtpu {version('libtpu')}): the real train step compiled ahead of time for "
              f"{topology.name} ({topology.chips} chips, "
              f"{topology.chip.hbm_bytes / 2**30:.0f} GiB HBM each); a run fits when its peak "
              f"per-chip bytes are at most {margin:.0%} of HBM.\n\n")
    detail = "\n\n## Details\n\n```\n" + "\n".join(p.describe() for p in plans) + "\n```\n"
    status = "" if done else "\n(In progress: more runs are being compiled.)\n"
    epath.Path(path).write_text(header + table + status + detail)
    if done:
        print(f"table written to {path}")


# The option objects each command gets whole: depthdelusion.cli builds them from the parsed
# arguments (their fields' names are the options' dests); the sweep's report takes the fit's.
run_sweep_command.option_groups = {"options": SweepOptions, "fit": FitOptions}
run_plan_command.option_groups = {"options": PlanOptions}
