"""The depth-expansion studies as `Study`s (the protocol: `studies/common/study.py`): the study,
and its two trained tests. `expand` is a tool, not a study: it grows or probes one run."""
from depthdelusion.studies.common.study import Study
from depthdelusion.studies.expansion import commands, study, trials

STUDIES = (
    Study(command="expansion-study", spec_type=study.ExpansionSpec, results_type=study.ExpansionResults,
          measure=study.measure, sections=study.sections, handler=commands.run_expansion_study),
    Study(command="expansion-prediction", spec_type=trials.PredictionSpec, results_type=trials.TrialResults,
          measure=trials.measure_prediction, sections=trials.sections, handler=commands.run_expansion_prediction),
    Study(command="expansion-growth", spec_type=trials.GrowthSpec, results_type=trials.TrialResults,
          measure=trials.measure_growth, sections=trials.sections, handler=commands.run_expansion_growth),
)
