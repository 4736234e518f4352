"""The public-shapes study's results: :func:`measure` turns a
:class:`~.study.PublicShapesSpec` into a frozen :class:`PublicShapesResults` holding
every number the report, its CSVs and its figures state (rendered by
``report.sections``); the core's answers come from :mod:`.answers`,
the compute-optimal shape from :mod:`.optimal`, the prediction test from
:mod:`.prediction`, the check on Gadre et al. from :mod:`.gadre`, the figures' facts from
:mod:`.figures`."""
from __future__ import annotations

import functools
import importlib.util
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from depthdelusion.studies.public_shapes import study
from depthdelusion.studies.public_shapes import answers
from depthdelusion.studies.public_shapes import chinchilla
from depthdelusion.studies.public_shapes import fitting_loss
from depthdelusion.studies.public_shapes import gadre
from depthdelusion.studies.public_shapes import loss_verdicts
from depthdelusion.studies.public_shapes import nested
from depthdelusion.studies.public_shapes import optimal
from depthdelusion.studies.public_shapes import prediction
from depthdelusion.studies.public_shapes.figures import figure_facts


@dataclass(frozen=True)
class PublicShapesResults:
    """Every number the study states, computed once by :func:`measure` (rendered by
    ``report.sections``; its CSVs and figures written from the same object)."""

    spec: study.PublicShapesSpec
    arms: tuple                       # Arm per (table, convention) of the spec
    critical: tuple = ()              # answers.CriticalDepth per arm with the power kink (4.1)
    interaction: tuple = ()           # answers.Interaction per shape parameter (4.3)
    audit: tuple = ()                 # answers.AuditRow per shape of the first arm (4.4)
    deep_minus_rest: float = np.nan   # mean excess of the deep shapes minus the rest (nats)
    deep_ci: tuple = (np.nan, np.nan)
    audits: tuple = ()                # answers.AuditContrast per arm (every convention: issue 62)
    nested: tuple = ()                # nested.NestedKink per arm (kink inside the smooth law, power)
    noise: tuple = ()                 # nested.NestedKink per hot arm and NOISE_NULLS entry
    chinchilla: tuple = ()            # chinchilla.ChinchillaShapes per convention (issue 58 item 3)
    later: tuple = ()                 # prediction.Prediction: gemstones_100b_plus fitted to 100B
    losses: tuple = ()                # fitting_loss.LossComparison per arm (least squares vs Huber)
    lr_penalty: tuple = ()            # answers.LrPenalty per convention (4.3's model-free check)
    audit_drawn: bool = False         # audit.png can be drawn (matplotlib is installed)
    optimal: tuple = ()               # optimal.Optimum: fitted, then the authors' released (4.2)
    predictions: tuple = ()           # prediction.Prediction per arm, held-out set and law (5)
    gadre: tuple = ()                 # gadre.GadreArm per N convention (item 2)
    figures: object = None            # figures.FigureFacts of the first arm (6)
    loss_verdicts: tuple = ()         # loss_verdicts.LossVerdict per verdict and arm (part "huber")
    noise_part: tuple = ()            # nested.NestedKink per NOISE_PART_TABLES arm and null (part "noise")
    wall_s: float = 0.0               # measure()'s wall time on this machine


#: The noise-model check (issue 62 item 5) on the hot table's arms: the kink nested in the smooth
#: law with an N × T interaction in the token term, and λ = 0 (the kink nested in chinchilla)
#: with the additive and the interacting token term; the smooth law's additive test is ``nested``.
#: The kink-in-the-smooth-law test gets its power curve under either token term (what "not
#: rejected" excludes depends on the null's noise); the chinchilla rows are null draws only, as
#: the core's λ = 0 verdicts have no power curve either.
NOISE_TABLES = ("gemstones",)
NOISE_NULLS = (nested.Model(shape=True, interaction=True), nested.Model(shape=False),
               nested.Model(shape=False, interaction=True))
#: the part "noise": the same check on the tables the core leaves out, each arm's additive nested
#: test (with its power curve) first, then NOISE_NULLS' (noise_model_cooldown.csv)
NOISE_PART_TABLES = ("gemstones_cooldown",)


def measure(spec: study.PublicShapesSpec) -> PublicShapesResults:
    """The study's fits, tests and answers for ``spec``: the core (part "laws") and the parts
    beyond it, each only when ``spec.parts`` names it."""
    start = time.perf_counter()
    common = {"bootstrap": spec.bootstrap, "seed": spec.seed}
    if spec.core:
        arms = tuple(study.fit_arm(t, c, spec.laws, replicates=spec.replicates, **common) for t, c in spec.arms)
    else:
        # the shape laws' cluster bootstrap serves 4.2 only; the other parts need point fits
        arms = tuple(parts_arm(t, c, spec.laws, bootstrap=spec.bootstrap if "optimal" in spec.parts else 0,
                               seed=spec.seed) for t, c in spec.arms)
    found = {**_parts(spec, arms), **(_core(spec, arms) if spec.core else {})}
    return PublicShapesResults(spec, arms, **found, wall_s=time.perf_counter() - start)


def parts_arm(table: str, convention: str, laws, *, bootstrap: int, seed: int) -> study.Arm:
    """An arm without the core's tests: the shape laws of 4.2 with their cluster bootstrap, the
    rest of ``laws`` bare (the figures need only their optima)."""
    runs, epsilon, weight = study.convention_runs(table, convention)
    clusters = study.shape_labels(runs)
    boot = [law for law in laws if law in optimal.OPTIMAL_LAWS]
    fits = {**study.fit_laws(runs, clusters, boot, bootstrap=bootstrap, seed=seed),
            **study.fit_laws(runs, clusters, [law for law in laws if law not in boot], bootstrap=0, seed=seed)}
    return study.Arm(table, convention, runs, clusters, fits, epsilon=epsilon, weight=weight)


def _parts(spec: study.PublicShapesSpec, arms) -> dict:
    """The parts beyond the core: 4.2, 5, the check on Gadre et al. and the figures' facts."""
    found, common = {}, {"bootstrap": spec.bootstrap, "seed": spec.seed}
    if "optimal" in spec.parts:
        found["optimal"] = tuple([o for a in arms for o in optimal.optima(a, bootstrap=spec.bootstrap)]
                                 + optimal.released_optima(arms[0].runs))
    if "prediction" in spec.parts:
        found["predictions"] = tuple(p for a in arms for p in prediction.predict(a, spec.laws, **common))
    if "gadre" in spec.parts:
        found["gadre"] = gadre.measure(spec.conventions, **common)
    if "figures" in spec.parts:
        found["figures"] = figure_facts(arms[0], arms)
    if "chinchilla_shapes" in spec.parts:
        found["chinchilla"] = chinchilla.measure(spec.conventions, replicates=spec.replicates, **common)
    if "later" in spec.parts:
        found["later"] = tuple(p for c in spec.conventions for p in prediction.predict_later(
            c, _hot_epsilon(arms, c), spec.laws, **common))
    if "huber" in spec.parts:
        found["loss_verdicts"] = _loss_verdicts(spec, arms)
    if "noise" in spec.parts:
        found["noise_part"] = tuple(k for a in arms if a.table in NOISE_PART_TABLES
                                    for m in (nested.SMOOTH, *NOISE_NULLS)
                                    for k in [_noise_test(a, m, spec)] if k is not None)
    return found


def _noise_test(arm, model, spec: study.PublicShapesSpec):
    """One nested test of the noise model (its power curve where the kink is in the smooth law)."""
    return nested.nested_test(arm, replicates=spec.replicates, seed=spec.seed, start=_smooth_start(arm), model=model,
                              power_draws=nested.power_draws(spec.replicates) if model.shape else 0)


def _loss_verdicts(spec: study.PublicShapesSpec, arms) -> tuple:
    """Part "huber": every verdict that rests on a fit under least squares and Huber on log-loss:
    per arm λ = 0, the nested kink and the prediction; per convention the lr shift. Each arm and
    convention is one seeded unit of work (its arm refitted there), so ``spec.workers`` processes
    give the same numbers as one."""
    common = {"replicates": spec.replicates, "seed": spec.seed, "bootstrap": spec.bootstrap}
    units = [functools.partial(_arm_loss_verdicts, a.table, a.convention, tuple(spec.laws), **common) for a in arms]
    units += [functools.partial(loss_verdicts.learning_rate, bootstrap=spec.bootstrap, seed=spec.seed, convention=c,
                                epsilon=_hot_epsilon(arms, c)) for c in spec.conventions] if spec.lr_interaction else []
    if spec.workers > 1:
        # fork: the workers inherit the loaded modules and the tables' mirror and cache settings
        with ProcessPoolExecutor(spec.workers, mp_context=multiprocessing.get_context("fork")) as pool:
            done = list(pool.map(_call, units))
    else:
        done = [unit() for unit in units]
    per_arm, lr = done[:len(arms)], [v for found in done[len(arms):] for v in found]
    return tuple([v for a in per_arm for v in a[0]] + [v for a in per_arm for v in a[1]] + lr
                 + [v for a in per_arm for v in a[2]])


def _call(unit):
    return unit()


def _arm_loss_verdicts(table: str, convention: str, laws, *, replicates: int, seed: int, bootstrap: int) -> tuple:
    """(λ = 0, nested kink, prediction) verdicts under both losses on one arm, refitted here."""
    arm = parts_arm(table, convention, laws, bootstrap=0, seed=seed)
    return (loss_verdicts.lambda_zero(arm, replicates=replicates, seed=seed),
            loss_verdicts.nested_kink(arm, replicates=replicates, seed=seed, start=_smooth_start(arm)),
            loss_verdicts.predicted(arm, bootstrap=bootstrap, seed=seed))


def _core(spec: study.PublicShapesSpec, arms) -> dict:
    """The core's answers: the critical depth (4.1), the learning-rate interaction (4.3) and the
    paper's audit (4.4)."""
    critical = tuple(c for c in (answers.critical_depth(a) for a in arms) if c is not None)
    interaction = tuple(i for c in spec.conventions for i in answers.lr_interaction(
        bootstrap=spec.bootstrap, seed=spec.seed, convention=c, epsilon=_hot_epsilon(arms, c))
        ) if spec.lr_interaction else ()
    lr_penalty = tuple(answers.lr_penalty_slope(bootstrap=spec.bootstrap, seed=spec.seed, convention=c,
                                                epsilon=_hot_epsilon(arms, c))
                       for c in spec.conventions) if spec.lr_interaction else ()
    audits = answers.audit_contrasts(arms, bootstrap=spec.bootstrap, seed=spec.seed)
    first = audits[0]
    kinks = tuple(k for k in (nested.nested_test(a, replicates=spec.replicates, seed=spec.seed, start=_smooth_start(a),
                                                 power_draws=nested.power_draws(spec.replicates)) for a in arms)
                  if k is not None)
    noise = tuple(k for a in arms if a.table in NOISE_TABLES for m in NOISE_NULLS
                  for k in [_noise_test(a, m, spec)] if k is not None)
    return {"critical": critical, "interaction": interaction, "audit": first.rows, "deep_minus_rest": first.diff,
            "deep_ci": first.ci, "audits": audits, "nested": kinks, "noise": noise, "lr_penalty": lr_penalty,
            "losses": tuple(c for c in (fitting_loss.compare(a, bootstrap=spec.bootstrap, seed=spec.seed)
                                        for a in arms) if c is not None),
            "audit_drawn": importlib.util.find_spec("matplotlib") is not None}


def _smooth_start(arm) -> tuple:
    """The nested test's starting exponents: the arm's gemstones_width_depth fit when it has one."""
    f = arm.fits.get("gemstones_width_depth")
    return tuple(f.params[k] for k in ("aw", "ad", "alpha", "beta")) if f is not None else (0.3, 0.5, 0.3, 0.3)


def _hot_epsilon(arms, convention: str) -> float | None:
    """ε of the hot table's arm in ``convention`` (the lr comparison uses one ε for both tables)."""
    hot = [a for a in arms if a.table == "gemstones" and a.convention == convention]
    if hot:
        return hot[0].epsilon
    return study.convention_runs("gemstones", convention)[1]
