"""The depth-vs-size study: depth traded against width at fixed non-embedding parameters and tokens.

- `study.py` — levels of shapes [width, depth(, FFN width)] matched in N (`tokens_per_param`
  tokens per parameter), SP tuned per shape on a tuning seed (or its lrs fixed per level by `sp_lrs`),
  CompleteP transferred from each level's base shape (`arms` may keep one arm), every point at
  held-out test seeds; measures loss against depth with t intervals and the neighbouring
  differences (description), the tests of `trend.py`, the laws of `common/laws.py` on
  seed-centred rows with κ fixed at the paper's value, the depth-free law in non-embedding and
  total N, the lr grids (`DepthVsSizeSpec` → `measure` → `DepthVsSizeResults`); `report.py` — its
  `sections` (report.md), CSVs, figure and command.
- `trend.py` — its pre-specified tests, numbers only: the OLS slope with a fixed effect per seed
  (loss against ln(D/W), ln D or ln W; the line's lack of fit), Welch contrasts, Holm; the trend
  family, the depth and width series of a level, the shapes below the paper's D_crit;
  `tests_text.py` — their report sections, the verdict on depth against narrowness, the FFN-ratio
  nuisance, the eval set and what a seed draws, and tests.csv.
- `declaration.py` — its `STUDIES`.
"""
from depthdelusion.studies.common.command import Argument, StudyCommand

COMMANDS = (
    StudyCommand(
        "depth-vs-size", "depthdelusion.studies.depth_vs_size.report:run_command",
        "depth traded against width at fixed non-embedding parameters and tokens; report",
        "The depth-vs-size study (e.g. experiments/depth_vs_size.yaml): at fixed non-embedding "
        "parameters and tokens, shapes from deep-narrow to shallow-wide; SP tuned per shape on a "
        "tuning seed, CompleteP transferred from each level's base shape. Plans and trains its runs "
        "under DIR/runs (finished skipped, unfinished resumed), then writes report.md, points.csv, "
        "lr_curves.csv and loss_vs_depth.png (a partial study is labelled partial).",
        inputs=(Argument("experiment", "YAML file: base, levels, tokens_per_param, warmup_fraction, "
                         "match_tolerance, lrs, lr_bounds, tuning_seed, seeds, metric",
                         metavar="EXPERIMENT"),),
        planned=True),
)
