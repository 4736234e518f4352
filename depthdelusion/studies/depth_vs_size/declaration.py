"""The depth-vs-size study as a `Study` (the protocol: `studies/common/study.py`)."""
from depthdelusion.studies.common.study import Study
from depthdelusion.studies.depth_vs_size import report, study

STUDIES = (
    Study(command="depth-vs-size", spec_type=study.DepthVsSizeSpec, results_type=study.DepthVsSizeResults,
          measure=study.measure, sections=report.sections, handler=report.run_command),
)
