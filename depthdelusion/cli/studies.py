"""The arguments of the study commands: coord-check, lr-transfer, depth-confound, public-shapes,
depth-vs-size, expand and the expansion studies, the persistence probe and study, spectrum, the
redundancy and data-exponent studies."""
from __future__ import annotations

from .arguments import COUNT, POSITIVE, POSITIVE_FLOAT, LIBRARY_DEFAULT, SEED_HELP, CommandArguments, add_out, add_set

ARGUMENTS = CommandArguments()


@ARGUMENTS.command("coord-check", "Coordinate check: train each width x depth for a few steps at the same "
            "base lr and record the RMS of every block's output and of the logits (table + PNG).")
def _coord_check(p):
    p.add_argument("--widths", default=LIBRARY_DEFAULT, help="comma-separated")
    p.add_argument("--depths", default=LIBRARY_DEFAULT, help="comma-separated")
    p.add_argument("--steps", type=POSITIVE, default=LIBRARY_DEFAULT, help="updates per shape")
    p.add_argument("--parametrization", default=LIBRARY_DEFAULT,
                   help="comma-separated: sp, mup, depth_mup, completep (one panel each)")
    p.add_argument("--lr", type=POSITIVE_FLOAT, default=LIBRARY_DEFAULT, help="base learning rate (constant)")
    p.add_argument("--batch-size", type=POSITIVE, default=LIBRARY_DEFAULT, help="sequences per step")
    p.add_argument("--seq-len", type=POSITIVE, default=LIBRARY_DEFAULT, help="tokens per sequence")
    p.add_argument("--head-dim", type=POSITIVE, default=LIBRARY_DEFAULT, help="per-head dimension")
    p.add_argument("--base-width", type=POSITIVE, default=LIBRARY_DEFAULT, help="the shape where the "
                   "multipliers are 1")
    p.add_argument("--base-depth", type=POSITIVE, default=LIBRARY_DEFAULT, help="the shape where the "
                   "multipliers are 1")
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
    add_out(p)
    p.add_argument("--bootstrap", type=COUNT, default=LIBRARY_DEFAULT, help="cluster-bootstrap refits per law")
    p.add_argument("--replicates", type=COUNT, default=LIBRARY_DEFAULT,
                   help="parametric-bootstrap replicates per test (0: Davies' bound, no kink test)")
    p.add_argument("--seed", type=COUNT, default=LIBRARY_DEFAULT, help=SEED_HELP)
    p.add_argument("--tables", default="gemstones,gemstones_cooldown",
                   help="tables fitted, comma-separated (default gemstones,gemstones_cooldown)")
    p.add_argument("--conventions", default="total,nonembedding,fitted",
                   help="N conventions, comma-separated: total, nonembedding (Kaplan's: both vocabulary "
                   "matrices removed), fitted (N_nonemb + ε·N_emb, ε fitted), no_embeds (the authors': one "
                   "matrix removed) (default total,nonembedding,fitted)")
    p.add_argument("--laws", default=None, help="laws fitted, comma-separated (default: all of the study's; "
                   "must include chinchilla)")
    p.add_argument("--no-lr-interaction", dest="lr_interaction", action="store_false",
                   help="skip the learning-rate comparison (gemstones vs gemstones_lr_half)")
    p.add_argument("--parts", default="laws,optimal,prediction,gadre,figures,chinchilla_shapes,later",
                   help="parts run, comma-separated (default all: laws,optimal,prediction,gadre,figures,"
                   "chinchilla_shapes (the same statistics on Chinchilla's runs), later (gemstones_100b_plus: "
                   "fitted to 100B tokens, predicted to 350B)); "
                   "without laws (the core: fits, tests, 4.1, 4.3, 4.4) the others write report_partial.md")
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
    p.add_argument("run", metavar="RUN", help="a trained run directory (with checkpoints/)")
    p.add_argument("--after", metavar="K[,K...]", help="insert a block after each of these blocks")
    add_out(p, "the new run directory (--probe: where probe.json/md go; default RUN/expansion_probe, "
            "which the report's persistence figure reads)", required=False)
    p.add_argument("--seed", type=COUNT, default=0, help="draw of the inserted blocks (default 0)")
    add_set(p, "train.* fields of the new run, e.g. --set train.steps=600 (repeatable)")
    p.add_argument("--probe", action="store_true", help="measure instead of expanding")
    p.add_argument("--batches", type=POSITIVE, default=16, help="--probe: train and held-out batches each")
    p.add_argument("--etas", metavar="E[,E...]", help="--probe: jumpboard step sizes")
    p.add_argument("--step", type=COUNT, help="--after: the parent's checkpoint to expand (default the newest)")


@ARGUMENTS.command("expansion-prediction", "For every parent run under --runs (a finished sweep of "
            "experiments/depth_expansion_prediction.yaml): probe every insertion point, expand after "
            "each k and train each child --steps more steps; the Spearman correlation of the signal "
            "with the realised drop in validation loss per parent (seed), and its mean over seeds with "
            "a t interval over seeds (cut to [-1, 1]) and a within-seed permutation p-value.")
def _expansion_prediction(p):
    p.add_argument("--runs", required=True, help="the parents' sweep directory")
    add_out(p)
    p.add_argument("--steps", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="training steps of each child after expansion")
    p.add_argument("--probe-batches", type=POSITIVE, default=LIBRARY_DEFAULT, help="batches per probe")


@ARGUMENTS.command("expansion-growth", "For a finished sweep of experiments/depth_expansion_growth_matched.yaml: "
            "expands every depth-2 run from its --switch-step checkpoint to depth 4, trains it to its "
            "schedule's end, then compares each arm at its tuned learning rate (the depth-confound rule on "
            "the mean validation loss over seeds) with the compute-matched depth-4 scratch runs: the "
            "paired difference and its t interval, on --test-seeds when given. With --static-control: "
            "the grown and scratch arms (OUT/growth_matched.csv) against a static model of the parents' "
            "depth at the same FLOPs, each arm's lr chosen on the seeds other than --test-seeds, "
            "Welch's t interval on the test seeds (labelled PARTIAL while control runs are unfinished).")
def _expansion_growth(p):
    p.add_argument("--runs", help="the growth sweep directory (omit with --static-control to compare the "
                   "table already in OUT)")
    add_out(p)
    p.add_argument("--switch-step", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="the parents' checkpoint to grow from")
    p.add_argument("--test-seeds", default="", metavar="S[,S...]",
                   help="seeds kept out of the lr choice, on which the difference is measured at each "
                        "arm's chosen lr (default: none; the difference is then measured on the seeds "
                        "that chose the lrs)")
    p.add_argument("--static-control", metavar="DIR",
                   help="the static control sweep's directory (experiments/depth_expansion_static_control.yaml)")
    p.add_argument("--static-grid", default=LIBRARY_DEFAULT, metavar="YAML",
                   help="the control's grid, which says how many runs are planned")


@ARGUMENTS.command("expansion-study", "Trains the depth grid and the growth grid (skipping finished runs), "
            "expands each growth parent and trains it on, probes every depth-grid run, and writes "
            "tables and figures to --out (probes are cached under OUT/probes).")
def _expansion_study(p):
    p.add_argument("--depth-grid", default=LIBRARY_DEFAULT, help="the depth grid's YAML")
    p.add_argument("--growth-grid", default=LIBRARY_DEFAULT, help="the growth grid's YAML")
    p.add_argument("--runs", default=LIBRARY_DEFAULT, help="parent folder of the two sweeps' run directories")
    add_out(p)
    p.add_argument("--probe-batches", type=POSITIVE, default=LIBRARY_DEFAULT, help="batches per probe")
    p.add_argument("--train", choices=("all", "growth", "none"), default=LIBRARY_DEFAULT,
                   help="what to train before probing: both grids and the grown runs (all), "
                   "the growth grid and grown runs only (growth), nothing (none)")


@ARGUMENTS.command("persistence-probe", "Per-layer weight- and activation-gradient norms at initialisation "
            "and over the first K AdamW steps for a grid of widths x depths (built-in corpus), the "
            "persistence rate 1/ℓ of each with its sign, ℓ(W) power law vs log form, and one figure "
            "panel per width.")
def _persistence_probe(p):
    from depthdelusion.config import PARAMETRIZATIONS

    p.add_argument("--widths", default=LIBRARY_DEFAULT, help="comma-separated")
    p.add_argument("--depths", default=LIBRARY_DEFAULT, help="comma-separated")
    p.add_argument("--steps", type=POSITIVE, default=LIBRARY_DEFAULT, help="K, AdamW updates after init")
    p.add_argument("--batch-size", type=POSITIVE, default=LIBRARY_DEFAULT, help="sequences per step")
    p.add_argument("--seq-len", type=POSITIVE, default=LIBRARY_DEFAULT, help="tokens per sequence")
    p.add_argument("--head-dim", type=POSITIVE, default=LIBRARY_DEFAULT, help="per-head dimension")
    p.add_argument("--lr", type=POSITIVE_FLOAT, default=LIBRARY_DEFAULT, help="AdamW learning rate")
    p.add_argument("--parametrization", default=LIBRARY_DEFAULT, choices=PARAMETRIZATIONS,
                   help="one of sp, mup, depth_mup, completep")
    p.add_argument("--compute-dtype", default=LIBRARY_DEFAULT, choices=("auto", "float32", "bfloat16"),
                   help="auto: bfloat16 on accelerators, float32 on CPU")
    p.add_argument("--seed", type=COUNT, default=LIBRARY_DEFAULT, help="initialisation and data seed")
    p.add_argument("--max-params", type=POSITIVE_FLOAT, default=LIBRARY_DEFAULT,
                   help="skip shapes with more parameters (at the default: about 2 GB with Adam)")
    add_out(p)


@ARGUMENTS.command("persistence-study", "Windowed persistence rate per run, its evolution over training, "
            "ℓ(W) power law vs log form over all runs, loss vs depth and the loss-optimal depth per "
            "width, seed-level intervals per cell, the paper's implied ℓ(W) against the measured one. "
            "RUNS: one or more sweep output directories (experiments/persistence_study.yaml, "
            "persistence_width.yaml, or another sweep logging per-layer gradient norms); each is a "
            "study of its own.")
def _persistence_study(p):
    p.add_argument("runs", metavar="RUNS", nargs="+", help="sweep output directories")
    add_out(p)
    p.add_argument("--step", type=COUNT, default=LIBRARY_DEFAULT, help="requested step")
    p.add_argument("--window", type=POSITIVE_FLOAT, default=LIBRARY_DEFAULT,
                   help="relative half-width of the step window (0.2 at step 1000: steps 800-1200)")
    p.add_argument("--grid", action="append",
                   help="a grid file, to list the runs that have not finished (repeatable)")


@ARGUMENTS.command("spectrum", "Covariance spectra of the token embeddings and of the residual stream after "
            "every block, over held-out tokens, with a tail-index fit per layer.")
def _spectrum(p):
    p.add_argument("run", metavar="RUN", help="a run directory written by `depthdelusion train`")
    p.add_argument("--tokens", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="held-out tokens to use")
    p.add_argument("--rows", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="sequences per forward pass")
    add_out(p, "output directory (default RUN/spectrum)", required=False)


@ARGUMENTS.command("data-exponent", "Token sweeps (ROOT/SWEEP/RUN/, one run per budget): the data "
            "exponent b of L = E + B·T^-b with its profile-likelihood interval, against 2βs/(2βs+1) "
            "from the spectrum of the LM head's input and the readout's source smoothness s.")
def _data_exponent(p):
    p.add_argument("root", metavar="ROOT", help="a directory of token sweeps: ROOT/SWEEP/RUN/")
    add_out(p, "the study directory to write")
    p.add_argument("--tokens", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="held-out tokens per run for the spectra")
    p.add_argument("--largest-only", action="store_true",
                   help="spectra and readout of each sweep's largest budget only (default: every run)")
    p.add_argument("--sweep-commands", metavar="FILE",
                   help="a text file of the sweep commands that trained ROOT, quoted in README.md")
    p.add_argument("--refit-tables", action="store_true",
                   help="ROOT is a written study directory: refit its measured b from runs.csv "
                        "(no run directories needed) and rewrite the tables in --out")


@ARGUMENTS.command("data-exponent-ridge", "Ridge readouts on a trained run's frozen features (the LM "
            "head's input over held-out tokens; target: the head's centred readout of the most "
            "frequent next token plus Gaussian noise): the data exponent b of the exact excess "
            "risk over n, ridge tuned per n, with a bootstrap interval, against 2βs/(2βs+1) from "
            "the features' spectrum and from spectra with β halved and doubled (which must fail).")
def _data_exponent_ridge(p):
    p.add_argument("run", metavar="RUN", help="a run directory written by `depthdelusion train`")
    add_out(p, "the directory to write ridge.csv, curves.csv and ridge.md into")
    p.add_argument("--tokens", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="held-out tokens in the feature pool")
    p.add_argument("--rows", type=POSITIVE, default=LIBRARY_DEFAULT, help="sequences per forward pass")
    p.add_argument("--n-min", type=POSITIVE, default=LIBRARY_DEFAULT, help="smallest training sample")
    p.add_argument("--n-max", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="largest training sample (the grid doubles from --n-min)")
    p.add_argument("--reps", type=POSITIVE, default=LIBRARY_DEFAULT, help="independent replicates")
    p.add_argument("--seed", type=COUNT, default=LIBRARY_DEFAULT, help="seed of the subsamples and noise")
    p.add_argument("--noise", type=POSITIVE_FLOAT, default=LIBRARY_DEFAULT,
                   help="noise standard deviation over the target signal's")
    p.add_argument("--target-rank", type=POSITIVE, default=LIBRARY_DEFAULT,
                   help="the target readout: the head's column of the k-th most frequent next token")


@ARGUMENTS.command("redundancy-study", "The synthetic check of the redundancy law: fitted data-scaling "
            "exponents of ridge regression against 2βs/(2βs+1), their invariance under a change of "
            "features, and a mixture of two spectra (rates.csv, invariance.csv, mixture.csv, "
            "report.md, learning_curves.png).")
def _redundancy_study(p):
    add_out(p)
    p.add_argument("--seeds", type=POSITIVE, default=LIBRARY_DEFAULT, help="seeds per case")
    p.add_argument("--no-figures", action="store_true", help="skip the PNGs (matplotlib not needed)")
    p.add_argument("--report-only", action="store_true",
                   help="rewrite report.md from the tables already in --out")


