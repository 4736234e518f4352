"""Learning-rate transfer: the best learning rate across widths and depths.

- `study.py` — a grid run by `sweep.run_sweep`; `LrTransferSpec` → `measure` →
  `LrTransferResults` → `sections`; `declaration.py` — its `STUDIES`.
"""
from depthdelusion.studies.common.command import Argument, StudyCommand

COMMANDS = (
    StudyCommand(
        "lr-transfer", "depthdelusion.studies.lr_transfer.study:run_command",
        "lr sweep per width x depth and parameterization, then a depth sweep; CSV, PNG, report",
        "Learning-rate transfer experiment (e.g. experiments/lr_transfer.yaml), run as two grids by "
        "the sweep runner under DIR/runs: finished runs are reused, unfinished ones resumed, failed "
        "ones trained again. Exit code 1 if a run failed.",
        inputs=(Argument("experiment", "YAML file: base, parametrizations, widths, depths, lrs, "
                         "depth_sweep", metavar="EXPERIMENT"),)),
)
