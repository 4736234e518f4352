"""The learning-rate transfer study as a `Study` (the protocol: `studies/common/study.py`)."""
from depthdelusion.studies.common.study import Study
from depthdelusion.studies.lr_transfer import study

STUDIES = (
    Study(command="lr-transfer", spec_type=study.LrTransferSpec, results_type=study.LrTransferResults,
          measure=study.measure, sections=study.sections, handler=study.run_command),
)
