"""The persistence studies as `Study`s (the protocol: `studies/common/study.py`): the probe of
gradient profiles on freshly trained shapes, and the study of trained runs."""
from depthdelusion.studies.common.study import Study
from depthdelusion.studies.persistence import probe, sections, study

STUDIES = (
    Study(command="persistence-probe", spec_type=probe.ProbeSpec, results_type=probe.ProbeResults,
          measure=probe.measure, sections=probe.sections, handler=probe.run_command),
    Study(command="persistence-study", spec_type=study.PersistenceSpec, results_type=study.PersistenceResults,
          measure=study.measure, sections=sections.sections, handler=study.run_command),
)
