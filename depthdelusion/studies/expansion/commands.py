"""`depthdelusion expand` (grow a trained run's depth, or probe where growing helps),
`expansion-study`, `expansion-prediction` and `expansion-growth`: plain functions of the parsed
arguments (the parser is `depthdelusion.cli`); a study's flags become its frozen spec first."""
from __future__ import annotations

import dataclasses
import json

from etils import epath

from depthdelusion import exit_codes
from depthdelusion.analysis.table.run_dirs import INSERTION_PROBE
from depthdelusion.studies.common import spec as study_spec
from depthdelusion.studies.expansion import surgery
from depthdelusion.studies.expansion.control import static_control_study
from depthdelusion.studies.expansion.options import (
    ExpandOptions,
    ExpansionStudyOptions,
    GrowthOptions,
    PredictionOptions,
)
from depthdelusion.studies.expansion.probe import ETAS, markdown, probe_run
from depthdelusion.studies.expansion.study import run_study, spec_from_flags
from depthdelusion.studies.expansion.trials import (
    PredictionSpec,
    growth_spec_from_flags,
    measure_growth,
    measure_prediction,
    write_outputs,
)


def run_expand(*, run: str, out: str | None = None, overrides: list[str] = (),
               options: ExpandOptions = ExpandOptions()) -> int:
    after, seed = options.after, options.seed
    if options.probe:
        steps = [float(x) for x in options.etas.split(",")] if options.etas else ETAS
        result = probe_run(run, n_batches=options.batches, etas=steps, seed=seed)
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
    record = surgery.expand_run(run, blocks, out, seed=seed, overrides=list(overrides), step=options.step)
    print(json.dumps(record))
    print(f"expanded run written to {out}; train it on with: depthdelusion train --out {out}")
    return exit_codes.OK


def run_expansion_study(*, out: str, options: ExpansionStudyOptions = ExpansionStudyOptions()) -> int:
    """The options become a frozen `ExpansionSpec` (a bad one: a ValueError naming the flag), which
    the study measures and reports into OUT."""
    spec = spec_from_flags(**dataclasses.asdict(options))
    run_study(spec, out)
    return exit_codes.OK


def run_expansion_prediction(*, runs: str, out: str, options: PredictionOptions = PredictionOptions()) -> int:
    spec = study_spec.from_flags(PredictionSpec, {"runs": runs, **dataclasses.asdict(options)})
    write_outputs(measure_prediction(spec, out), out)
    return exit_codes.OK


def run_expansion_growth(*, out: str, options: GrowthOptions = GrowthOptions()) -> int:
    """With --runs: grow, train and compare (OUT/growth_matched.*); with --static-control: the
    grown arm (from OUT/growth_matched.csv) against the static control (OUT/static_control.*)."""
    spec = growth_spec_from_flags(**dataclasses.asdict(options))
    if spec.runs:
        write_outputs(measure_growth(spec), out)
    if spec.static_control:
        static_control_study(out, spec.static_control, spec.static_grid, test_seeds=spec.test_seeds)
    return exit_codes.OK


run_expand.option_groups = {"options": ExpandOptions}
run_expansion_study.option_groups = {"options": ExpansionStudyOptions}
run_expansion_prediction.option_groups = {"options": PredictionOptions}
run_expansion_growth.option_groups = {"options": GrowthOptions}
