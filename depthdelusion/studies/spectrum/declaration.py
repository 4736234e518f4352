"""The spectrum command as a `Study` (the protocol: `studies/common/study.py`)."""
from depthdelusion.studies.common.study import Study
from depthdelusion.studies.spectrum import study

STUDIES = (
    Study(command="spectrum", spec_type=study.SpectrumSpec, results_type=study.SpectrumResults,
          measure=study.measure, sections=study.sections, handler=study.run_command),
)
