"""`depthdelusion expand` (grow a trained run's depth, or probe where growing helps),
`expansion-study`, `expansion-prediction` and `expansion-growth`: plain functions of the parsed
arguments (the parser is `depthdelusion.cli`); a study's flags become its frozen spec first."""
from __future__ import annotations

import json

from etils import epath

from depthdelusion import exit_codes
from depthdelusion.analysis.table.run_dirs import INSERTION_PROBE
from depthdelusion.studies.common import spec as study_spec
from depthdelusion.studies.expansion import surgery
from depthdelusion.studies.expansion.control import static_control_study
from depthdelusion.studies.expansion.probe import ETAS, markdown, probe_run
from depthdelusion.studies.expansion.study import ExpansionSpec, run_study, spec_from_flags
from depthdelusion.studies.expansion.trials import (
    GrowthSpec,
    PredictionSpec,
    growth_spec_from_flags,
    measure_growth,
    measure_prediction,
    write_outputs,
)


def run_expand(*, run: str, after: str | None = None, out: str | None = None, seed: int = 0,
               overrides: list[str] = (), probe: bool = False, batches: int = 16,
               etas: str | None = None, step: int | None = None) -> int:
    if probe:
        steps = [float(x) for x in etas.split(",")] if etas else ETAS
        result = probe_run(run, n_batches=batches, etas=steps, seed=seed)
        text = markdown(result)
        # by default beside the run, where the report's persistence figure finds it
        where = epath.Path(out) if out else epath.Path(run) / INSERTION_PROBE
        where.mkdir(parents=True, exist_ok=True)
        (where / "probe.json").write_text(json.dumps(result, indent=2) + "\n")
        (where / "probe.md").write_text(text)
        print(text)
        print(f"probe written to {where}")
        return exit_codes.OK
    if not after or not out:
        raise ValueError("expand: give --after K[,K...] and --out DIR (or --probe)")
    cfg = surgery.read_run_config(run)
    blocks = surgery.parse_after(after, cfg.model.depth)
    record = surgery.expand_run(run, blocks, out, seed=seed, overrides=list(overrides), step=step)
    print(json.dumps(record))
    print(f"expanded run written to {out}; train it on with: depthdelusion train --out {out}")
    return exit_codes.OK


def run_expansion_study(*, out: str, depth_grid: str = ExpansionSpec.depth_grid,
                        growth_grid: str = ExpansionSpec.growth_grid, runs: str = ExpansionSpec.runs,
                        probe_batches: int = ExpansionSpec.probe_batches, train: str = ExpansionSpec.train) -> int:
    """The flags become a frozen `ExpansionSpec` (a bad one: a ValueError naming the flag), which
    the study measures and reports into OUT."""
    spec = spec_from_flags(depth_grid=depth_grid, growth_grid=growth_grid, runs=runs,
                           probe_batches=probe_batches, train=train)
    run_study(spec, out)
    return exit_codes.OK


def run_expansion_prediction(*, runs: str, out: str, steps: int = PredictionSpec.steps,
                             probe_batches: int = PredictionSpec.probe_batches) -> int:
    spec = study_spec.from_flags(PredictionSpec, {"runs": runs, "steps": steps, "probe_batches": probe_batches})
    write_outputs(measure_prediction(spec, out), out)
    return exit_codes.OK


def run_expansion_growth(*, out: str, runs: str | None = None, switch_step: int = GrowthSpec.switch_step,
                         test_seeds: str = "", static_control: str | None = None,
                         static_grid: str = GrowthSpec.static_grid) -> int:
    """With --runs: grow, train and compare (OUT/growth_matched.*); with --static-control: the
    grown arm (from OUT/growth_matched.csv) against the static control (OUT/static_control.*)."""
    spec = growth_spec_from_flags(runs=runs, switch_step=switch_step, test_seeds=test_seeds,
                                  static_control=static_control, static_grid=static_grid)
    if spec.runs:
        write_outputs(measure_growth(spec), out)
    if spec.static_control:
        static_control_study(out, spec.static_control, spec.static_grid, test_seeds=spec.test_seeds)
    return exit_codes.OK
