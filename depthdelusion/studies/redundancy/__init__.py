"""The synthetic check of the redundancy law (ridge regression on power-law spectra); numpy only.

- `study.py` — a `RedundancySpec` from the command's flags (`spec.from_flags`), `measure()` to a
  frozen `RedundancyResults` (or read back from its tables for `--report-only`), `sections()` to
  report.md; `options.py` — `RedundancyOptions`, the command's flags; `declaration.py` — its
  `STUDIES`.
"""
from depthdelusion.studies.common.command import StudyCommand

COMMANDS = (
    StudyCommand(
        "redundancy-study", "depthdelusion.studies.redundancy.study:run_command",
        "synthetic check of the redundancy law (ridge regression on power-law spectra); numpy only",
        "The synthetic check of the redundancy law: fitted data-scaling exponents of ridge regression "
        "against 2βs/(2βs+1), their invariance under a change of features, and a mixture of two "
        "spectra (rates.csv, invariance.csv, mixture.csv, report.md, learning_curves.png).",
        options="depthdelusion.studies.redundancy.options:RedundancyOptions"),
)
