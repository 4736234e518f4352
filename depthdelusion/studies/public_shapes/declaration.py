"""The public-shapes study as a `Study` (the protocol: `studies/common/study.py`)."""
from depthdelusion.studies.common.study import Study
from depthdelusion.studies.public_shapes import report, results, study

STUDIES = (
    Study(command="public-shapes", spec_type=study.PublicShapesSpec, results_type=results.PublicShapesResults,
          measure=results.measure, sections=report.sections, handler=report.run_command),
)
