"""The depth-confound study as a `Study` (the protocol: `studies/common/study.py`)."""
from depthdelusion.studies.common.study import Study
from depthdelusion.studies.depth_confound import report, study

STUDIES = (
    Study(command="depth-confound", spec_type=study.DepthConfoundSpec, results_type=study.DepthConfoundResults,
          measure=study.measure, sections=report.sections, handler=report.run_command),
)
