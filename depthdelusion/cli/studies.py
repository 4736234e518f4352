"""The arguments of the study commands: coord-check, lr-transfer, depth-confound, public-shapes,
depth-vs-size, expand and the expansion studies, the persistence probe and study, spectrum, the
redundancy and data-exponent studies. A study's options are those its options object declares
(``studies/<study>/options.py``, :func:`.arguments.add_options`); here only its inputs (RUN,
EXPERIMENT, ...), ``--out``, ``--set`` and the planned studies' ``--max-runs``/``--report-only``."""
from __future__ import annotations

from .arguments import COUNT, CommandArguments, add_options, add_out, add_set

ARGUMENTS = CommandArguments()


def add_study_options(p, options_type) -> None:
    """The options the study's options object declares (``studies/<study>/options.py``, which
    imports no JAX: the help shows their defaults without loading the study)."""
    add_options(p, options_type, "the study's options")


@ARGUMENTS.command("coord-check", "Coordinate check: train each width x depth for a few steps at the same "
            "base lr and record the RMS of every block's output and of the logits (table + PNG).")
def _coord_check(p):
    from depthdelusion.studies.coord_check.options import CoordCheckOptions

    add_study_options(p, CoordCheckOptions)
    add_out(p)


@ARGUMENTS.command("lr-transfer", "Learning-rate transfer experiment (e.g. experiments/lr_transfer.yaml), "
            "run as two grids by the sweep runner under DIR/runs: finished runs are reused, "
            "unfinished ones resumed, failed ones trained again. Exit code 1 if a run failed.")
def _lr_transfer(p):
    p.add_argument("experiment", metavar="EXPERIMENT", help="YAML file: base, parametrizations, "
                   "widths, depths, lrs, depth_sweep")
    add_out(p)


@ARGUMENTS.command("depth-confound", "The depth-confound study (e.g. experiments/depth_confound.yaml): "
            "plans and trains its runs under DIR/runs with the sweep runner's rules (finished runs "
            "skipped, unfinished resumed), extends lr grids until their best is interior, then "
            "writes report.md, points.csv, lr_curves.csv and loss_vs_depth.png (a partial study "
            "is labelled partial).")
def _depth_confound(p):
    add_planned_study(p, "base, widths, depths, lrs, lr_bounds, seeds, arm_a_depth, completep, "
                      "iso_flop, metric")


def add_planned_study(p, keys: str) -> None:
    """The arguments of a study planned from its finished runs (studies/common/planned_runs.py)."""
    p.add_argument("experiment", metavar="EXPERIMENT", help=f"YAML file: {keys}")
    add_out(p)
    p.add_argument("--max-runs", type=COUNT, default=None, help="train at most N runs this time")
    p.add_argument("--report-only", action="store_true", help="train nothing; report what finished")


@ARGUMENTS.command("public-shapes", "The public-shapes study: every law fitted to the Gemstones suite (hot and "
            "cooldown; total, Kaplan's non-embedding and fitted-ε N) by name, cluster-bootstrap intervals over whole runs, "
            "the calibrated tests with a per-run random effect, the critical depth, the learning-rate "
            "interaction and the paper's audit, the compute-optimal shape, the prediction test, the check on "
            "Gadre et al., the same tests on Chinchilla's runs (chinchilla_shapes), the later budgets to 350B; writes report.md, CSVs and figures. Tables are "
            "downloaded and cached (DEPTHDELUSION_TABLES_URL, DEPTHDELUSION_CACHE).")
def _public_shapes(p):
    from depthdelusion.studies.public_shapes.options import PublicShapesOptions

    add_out(p)
    add_study_options(p, PublicShapesOptions)


@ARGUMENTS.command("depth-vs-size", "The depth-vs-size study (e.g. experiments/depth_vs_size.yaml): at "
            "fixed non-embedding parameters and tokens, shapes from deep-narrow to shallow-wide; SP "
            "tuned per shape on a tuning seed, CompleteP transferred from each level's base shape. "
            "Plans and trains its runs under DIR/runs (finished skipped, unfinished resumed), then "
            "writes report.md, points.csv, lr_curves.csv and loss_vs_depth.png (a partial study is "
            "labelled partial).")
def _depth_vs_size(p):
    add_planned_study(p, "base, levels, tokens_per_param, warmup_fraction, match_tolerance, lrs, "
                      "lr_bounds, tuning_seed, seeds, metric")


@ARGUMENTS.command("expand", "Depth expansion. With --after: write a new run directory whose checkpoint has "
            "a block inserted after each given block (0 = bottom), initialised like a fresh block with "
            "zero attention-output and MLP-down projections, so the function is unchanged; it resumes "
            "with the parent's data position. With --probe: the loss gradient w.r.t. those projections "
            "at every insertion point on train and held-out batches, the jumpboard step, and the "
            "activation-gradient covariance.")
def _expand(p):
    from depthdelusion.studies.expansion.options import ExpandOptions

    p.add_argument("run", metavar="RUN", help="a trained run directory (with checkpoints/)")
    add_out(p, "the new run directory (--probe: where probe.json/md go; default RUN/expansion_probe, "
            "which the report's persistence figure reads)", required=False)
    add_set(p, "train.* fields of the new run, e.g. --set train.steps=600 (repeatable)")
    add_study_options(p, ExpandOptions)


@ARGUMENTS.command("expansion-prediction", "For every parent run under --runs (a finished sweep of "
            "experiments/depth_expansion_prediction.yaml): probe every insertion point, expand after "
            "each k and train each child --steps more steps; the Spearman correlation of the signal "
            "with the realised drop in validation loss per parent (seed), and its mean over seeds with "
            "a t interval over seeds (cut to [-1, 1]) and a within-seed permutation p-value.")
def _expansion_prediction(p):
    from depthdelusion.studies.expansion.options import PredictionOptions

    p.add_argument("--runs", required=True, help="the parents' sweep directory")
    add_out(p)
    add_study_options(p, PredictionOptions)


@ARGUMENTS.command("expansion-growth", "For a finished sweep of experiments/depth_expansion_growth_matched.yaml: "
            "expands every depth-2 run from its --switch-step checkpoint to depth 4, trains it to its "
            "schedule's end, then compares each arm at its tuned learning rate (the depth-confound rule on "
            "the mean validation loss over seeds) with the compute-matched depth-4 scratch runs: the "
            "paired difference and its t interval, on --test-seeds when given. With --static-control: "
            "the grown and scratch arms (OUT/growth_matched.csv) against a static model of the parents' "
            "depth at the same FLOPs, each arm's lr chosen on the seeds other than --test-seeds, "
            "Welch's t interval on the test seeds (labelled PARTIAL while control runs are unfinished).")
def _expansion_growth(p):
    from depthdelusion.studies.expansion.options import GrowthOptions

    add_out(p)
    add_study_options(p, GrowthOptions)


@ARGUMENTS.command("expansion-study", "Trains the depth grid and the growth grid (skipping finished runs), "
            "expands each growth parent and trains it on, probes every depth-grid run, and writes "
            "tables and figures to --out (probes are cached under OUT/probes).")
def _expansion_study(p):
    from depthdelusion.studies.expansion.options import ExpansionStudyOptions

    add_out(p)
    add_study_options(p, ExpansionStudyOptions)


@ARGUMENTS.command("persistence-probe", "Per-layer weight- and activation-gradient norms at initialisation "
            "and over the first K AdamW steps for a grid of widths x depths (built-in corpus), the "
            "persistence rate 1/ℓ of each with its sign, ℓ(W) power law vs log form, and one figure "
            "panel per width.")
def _persistence_probe(p):
    from depthdelusion.studies.persistence.options import ProbeOptions

    add_study_options(p, ProbeOptions)
    add_out(p)


@ARGUMENTS.command("persistence-study", "Windowed persistence rate per run, its evolution over training, "
            "ℓ(W) power law vs log form over all runs, loss vs depth and the loss-optimal depth per "
            "width, seed-level intervals per cell, the paper's implied ℓ(W) against the measured one. "
            "RUNS: one or more sweep output directories (experiments/persistence_study.yaml, "
            "persistence_width.yaml, or another sweep logging per-layer gradient norms); each is a "
            "study of its own.")
def _persistence_study(p):
    from depthdelusion.studies.persistence.options import PersistenceOptions

    p.add_argument("runs", metavar="RUNS", nargs="+", help="sweep output directories")
    add_out(p)
    add_study_options(p, PersistenceOptions)


@ARGUMENTS.command("spectrum", "Covariance spectra of the token embeddings and of the residual stream after "
            "every block, over held-out tokens, with a tail-index fit per layer.")
def _spectrum(p):
    from depthdelusion.studies.spectrum.options import SpectrumOptions

    p.add_argument("run", metavar="RUN", help="a run directory written by `depthdelusion train`")
    add_study_options(p, SpectrumOptions)
    add_out(p, "output directory (default RUN/spectrum)", required=False)


@ARGUMENTS.command("data-exponent", "Token sweeps (ROOT/SWEEP/RUN/, one run per budget): the data "
            "exponent b of L = E + B·T^-b with its profile-likelihood interval, against 2βs/(2βs+1) "
            "from the spectrum of the LM head's input and the readout's source smoothness s.")
def _data_exponent(p):
    from depthdelusion.studies.data_exponent.options import DataExponentOptions

    p.add_argument("root", metavar="ROOT", help="a directory of token sweeps: ROOT/SWEEP/RUN/")
    add_out(p, "the study directory to write")
    add_study_options(p, DataExponentOptions)


@ARGUMENTS.command("data-exponent-ridge", "Ridge readouts on a trained run's frozen features (the LM "
            "head's input over held-out tokens; target: the head's centred readout of the most "
            "frequent next token plus Gaussian noise): the data exponent b of the exact excess "
            "risk over n, ridge tuned per n, with a bootstrap interval, against 2βs/(2βs+1) from "
            "the features' spectrum and from spectra with β halved and doubled (which must fail).")
def _data_exponent_ridge(p):
    from depthdelusion.studies.data_exponent.options import RidgeOptions

    p.add_argument("run", metavar="RUN", help="a run directory written by `depthdelusion train`")
    add_out(p, "the directory to write ridge.csv, curves.csv and ridge.md into")
    add_study_options(p, RidgeOptions)


@ARGUMENTS.command("redundancy-study", "The synthetic check of the redundancy law: fitted data-scaling "
            "exponents of ridge regression against 2βs/(2βs+1), their invariance under a change of "
            "features, and a mixture of two spectra (rates.csv, invariance.csv, mixture.csv, "
            "report.md, learning_curves.png).")
def _redundancy_study(p):
    from depthdelusion.studies.redundancy.options import RedundancyOptions

    add_out(p)
    add_study_options(p, RedundancyOptions)

