"""The coordinate check as a `Study` (the protocol: `studies/common/study.py`)."""
from depthdelusion.studies.common.study import Study
from depthdelusion.studies.coord_check import study

STUDIES = (
    Study(command="coord-check", spec_type=study.CoordCheckSpec, results_type=study.CoordCheckResults,
          measure=study.measure, sections=study.sections, handler=study.run_command),
)
