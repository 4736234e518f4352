"""The data-exponent studies as `Study`s (the protocol: `studies/common/study.py`): the token
sweeps against their spectra, and the ridge readouts on one run's frozen features."""
from depthdelusion.studies.common.study import Study
from depthdelusion.studies.data_exponent import ridge, study

STUDIES = (
    Study(command="data-exponent", spec_type=study.DataExponentSpec, results_type=study.DataExponentResults,
          measure=study.measure, sections=study.sections, handler=study.run_data_exponent),
    Study(command="data-exponent-ridge", spec_type=ridge.RidgeSpec, results_type=ridge.RidgeResults,
          measure=ridge.measure, sections=ridge.sections, handler=ridge.run_command),
)
