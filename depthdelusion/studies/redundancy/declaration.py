"""The redundancy check as a `Study` (the protocol: `studies/common/study.py`)."""
from depthdelusion.studies.common.study import Study
from depthdelusion.studies.redundancy import study

STUDIES = (
    Study(command="redundancy-study", spec_type=study.RedundancySpec, results_type=study.RedundancyResults,
          measure=study.measure, sections=study.sections, handler=study.run_command),
)
