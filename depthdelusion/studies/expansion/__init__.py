"""Depth expansion (`docs/depth_expansion.md`): insert zero-output blocks into a trained run, measure
the first-order descent signal of an inserted block, and the study and trained tests built on them.

- `surgery.py`, `probe.py`, `study.py`, `trials.py`, `control.py`, `commands.py` — insert
  zero-output blocks into a trained model (surgery), measure the descent signal (probe), the
  study (its flags a frozen `ExpansionSpec` built through `spec.from_flags`; `measure()` trains,
  grows and probes into a frozen `ExpansionResults`, `sections()` renders results.md), the
  trained tests (signal vs realised loss; growth vs a compute-matched baseline; their flags the
  frozen `PredictionSpec` and `GrowthSpec`, through `spec.from_flags` too), the growth claim's
  static control at equal FLOPs (control) and the commands' handlers (commands).
- `options.py` — `ExpandOptions`, `ExpansionStudyOptions`, `PredictionOptions`, `GrowthOptions`,
  the commands' flags; `declaration.py` — its `STUDIES` (`expand` is a tool, not a study).
"""
from depthdelusion.studies.common.command import Argument, StudyCommand

_HANDLERS = "depthdelusion.studies.expansion.commands"
_OPTIONS = "depthdelusion.studies.expansion.options"

COMMANDS = (
    StudyCommand(
        "expand", f"{_HANDLERS}:run_expand",
        "insert zero-output blocks into a trained run (new run directory), or --probe the "
        "first-order signal per insertion layer",
        "Depth expansion. With --after: write a new run directory whose checkpoint has a block "
        "inserted after each given block (0 = bottom), initialised like a fresh block with zero "
        "attention-output and MLP-down projections, so the function is unchanged; it resumes with "
        "the parent's data position. With --probe: the loss gradient w.r.t. those projections at "
        "every insertion point on train and held-out batches, the jumpboard step, and the "
        "activation-gradient covariance.",
        inputs=(Argument("run", "a trained run directory (with checkpoints/)", metavar="RUN"),),
        out="the new run directory (--probe: where probe.json/md go; default RUN/expansion_probe, "
            "which the report's persistence figure reads)", out_required=False,
        overrides="train.* fields of the new run, e.g. --set train.steps=600 (repeatable)",
        options=f"{_OPTIONS}:ExpandOptions"),
    StudyCommand(
        "expansion-study", f"{_HANDLERS}:run_expansion_study",
        "the depth-expansion study: train (resumable), grow, probe, tables and figures",
        "Trains the depth grid and the growth grid (skipping finished runs), expands each growth "
        "parent and trains it on, probes every depth-grid run, and writes tables and figures to "
        "--out (probes are cached under OUT/probes).",
        options=f"{_OPTIONS}:ExpansionStudyOptions"),
    StudyCommand(
        "expansion-prediction", f"{_HANDLERS}:run_expansion_prediction",
        "does the probe's signal rank insertion points as training each child does? (Spearman, seeds)",
        "For every parent run under --runs (a finished sweep of "
        "experiments/depth_expansion_prediction.yaml): probe every insertion point, expand after "
        "each k and train each child --steps more steps; the Spearman correlation of the signal "
        "with the realised drop in validation loss per parent (seed), and its mean over seeds with "
        "a t interval over seeds (cut to [-1, 1]) and a within-seed permutation p-value.",
        inputs=(Argument("--runs", "the parents' sweep directory", required=True),),
        options=f"{_OPTIONS}:PredictionOptions"),
    StudyCommand(
        "expansion-growth", f"{_HANDLERS}:run_expansion_growth",
        "growth against a compute-matched from-scratch baseline, lrs tuned per arm, seeds",
        "For a finished sweep of experiments/depth_expansion_growth_matched.yaml: expands every "
        "depth-2 run from its --switch-step checkpoint to depth 4, trains it to its schedule's end, "
        "then compares each arm at its tuned learning rate (the depth-confound rule on the mean "
        "validation loss over seeds) with the compute-matched depth-4 scratch runs: the paired "
        "difference and its t interval, on --test-seeds when given. With --static-control: the "
        "grown and scratch arms (OUT/growth_matched.csv) against a static model of the parents' "
        "depth at the same FLOPs, each arm's lr chosen on the seeds other than --test-seeds, "
        "Welch's t interval on the test seeds (labelled PARTIAL while control runs are unfinished).",
        options=f"{_OPTIONS}:GrowthOptions"),
)
