"""The public-shapes study (`depthdelusion public-shapes`): the critical-depth law tested on the
Gemstones suite and on Chinchilla's runs, tables by name.

- `study.py`, `answers.py` — its spec (`PublicShapesSpec`, built from the command's flags by
  `spec_from_flags` through the study specs' field checks), every law fitted to the Gemstones
  tables by name with a cluster bootstrap over whole runs, the calibrated tests with a per-run
  random effect; the critical depth, the learning-rate interaction and the paper's audit.
- `results.py` — its `measure(spec)` → `PublicShapesResults`: every number of the report, CSVs and
  figures (arms, answers, optimal shapes, prediction, Gadre check, wall time), no Markdown;
  `report.py` — its `sections` (report.md, or report_partial.md without the core), the CSVs and
  the audit figure written from the same results, and the command.
- `optimal.py` — its compute-optimal depth and width against C (4.2): the fitted shape laws and
  the Gemstones authors' released parameters minimised over (D, W) at fixed 6·N·T by
  `analysis/report/shape.optimal_shape`, N(D, W) recovered from the table.
- `prediction.py` — its prediction test (fit on shapes ≤ 1B at all but the last budgets, predict
  the rest; each law against chinchilla), the later budgets (gemstones_100b_plus fitted to 100B
  tokens, predicted to 350B); `gadre.py` — the check on Gadre et al. 2024 (the laws on its 95
  runs with a shape, one offset per training set, under every N convention, runs resampled within
  training sets) and its section.
- `figures.py`, `sections.py` — its figures (loss against depth at matched N and T, fitted against
  observed per width, D_crit(W) with the paper's band; their facts for the report measured apart
  from the drawing) and the report sections of the parts above.
- `nested.py` — its nested kink test (issue 62): the paper's relative-form kink inside the best
  smooth law (gemstones_width_depth), fitted by variable projection, calibrated by resampling
  whole runs' residual series, with its power against the paper's kink at full, half and quarter
  size; the null law with or without its shape terms and with an N × T interaction in the token
  term (the noise model), and the residuals' within-run autocorrelation; `chinchilla.py` — the
  same statistics on Chinchilla's own runs (chinchilla_shapes: where the runs sit against D_crit,
  the audit, the nested tests with power) per N convention; `fitting_loss.py` — least squares
  against Huber on log-loss for the verdicts that rest on a fit (the audit contrast, the
  compute-optimal exponents); `loss_verdicts.py` — the part "huber": λ = 0, the nested kink
  (Huber: n·ln(H_null / H_kink)), the lr shift and the prediction under both losses, and which of
  them depend on the loss.
- `options.py` — `PublicShapesOptions`, the command's flags; `declaration.py` — its `STUDIES`.
"""
from depthdelusion.studies.common.command import StudyCommand

COMMANDS = (
    StudyCommand(
        "public-shapes", "depthdelusion.studies.public_shapes.report:run_command",
        "the critical-depth law tested on the Gemstones suite (tables by name); report.md, CSVs",
        "The public-shapes study: every law fitted to the Gemstones suite (hot and cooldown; total, "
        "Kaplan's non-embedding and fitted-ε N) by name, cluster-bootstrap intervals over whole runs, "
        "the calibrated tests with a per-run random effect, the critical depth, the learning-rate "
        "interaction and the paper's audit, the compute-optimal shape, the prediction test, the "
        "check on Gadre et al., the same tests on Chinchilla's runs (chinchilla_shapes), the later "
        "budgets to 350B; writes report.md, CSVs and figures. Tables are downloaded and cached "
        "(DEPTHDELUSION_TABLES_URL, DEPTHDELUSION_CACHE).",
        options="depthdelusion.studies.public_shapes.options:PublicShapesOptions"),
)
