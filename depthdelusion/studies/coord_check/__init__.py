"""The coordinate check (µP check): activation scale across widths and depths after a few steps.

- `study.py` — `CoordCheckSpec` (built from the command's options by `from_options` with the spec
  loader's field checks) → `measure` (trains the grid) → `CoordCheckResults` (the RMS traces and
  their spreads) → `sections` (coord_check.md); `write_outputs` also writes the CSV, JSON and figure.
- `options.py` — `CoordCheckOptions`, the command's flags; `declaration.py` — its `STUDIES`.
"""
from depthdelusion.studies.common.command import StudyCommand

COMMANDS = (
    StudyCommand(
        "coord-check", "depthdelusion.studies.coord_check.study:run_command",
        "RMS of every block's output and the logits over the first steps, per shape",
        "Coordinate check: train each width x depth for a few steps at the same base lr and record "
        "the RMS of every block's output and of the logits (table + PNG).",
        options="depthdelusion.studies.coord_check.options:CoordCheckOptions"),
)
