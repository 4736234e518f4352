"""The depth-confound study: SP at one lr vs SP tuned per shape vs CompleteP transferred.

- `study.py` — plans its runs from the finished ones (lr grids extended until interior), trains
  them through the sweep runner, measures the depth penalty per arm (`DepthConfoundSpec` →
  `measure` → `DepthConfoundResults`); `report.py` — its `sections` (report.md), CSVs, figure
  and command; `declaration.py` — its `STUDIES`.
"""
from depthdelusion.studies.common.command import Argument, StudyCommand

COMMANDS = (
    StudyCommand(
        "depth-confound", "depthdelusion.studies.depth_confound.report:run_command",
        "SP at one lr vs SP tuned per shape vs CompleteP transferred, per depth x width; report",
        "The depth-confound study (e.g. experiments/depth_confound.yaml): plans and trains its runs "
        "under DIR/runs with the sweep runner's rules (finished runs skipped, unfinished resumed), "
        "extends lr grids until their best is interior, then writes report.md, points.csv, "
        "lr_curves.csv and loss_vs_depth.png (a partial study is labelled partial).",
        inputs=(Argument("experiment", "YAML file: base, widths, depths, lrs, lr_bounds, seeds, "
                         "arm_a_depth, completep, iso_flop, metric", metavar="EXPERIMENT"),),
        planned=True),
)
