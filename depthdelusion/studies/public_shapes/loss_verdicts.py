"""Every verdict that rests on a fit, under both fitting losses (issue 62 item 4; the part
"huber" of `depthdelusion public-shapes`, fitting_loss_verdicts.csv): least squares on the loss
(the study's) beside Huber on log-loss (the Gemstones authors', δ = 10⁻³, `fit(..., loss="huber")`),
each verdict computed the same way under both, from the same seed and draw counts:

- **λ = 0 against chinchilla** for each kink law the core tests (``study.KINKS``): the core's
  parametric bootstrap with a per-run random effect (``verdict.penalty_verdicts``). Under Huber
  the fits, the replicates' refits and the noise (lognormal, on log residuals) are Huber's; the
  statistic is the engine's, n·ln(RSS_chinchilla / RSS_kink) of the fits' RSS on the loss.
- **the nested kink** inside gemstones_width_depth (``nested.nested_test``): under Huber its
  statistic is n·ln(H_null / H_kink), H the Huber objective, and the log residuals' run series
  are resampled; under Huber also its power against the paper's kink at full, half and quarter
  size (half the null's draws per size: ``nested.power_draws``; the least-squares curve is the core's).
- **the learning rate**: shape_quadratic's centre m and curvature q (and gemstones_width_depth's
  aw, ad) at the published and at half the lr, paired cluster bootstrap of the difference
  (``answers.lr_interaction``). The model-free half-lr penalty slope fits no law and does not
  depend on the loss.
- **prediction**: gemstones_width_depth's held-out RMSE minus chinchilla's (``prediction.predict``).

A verdict *depends on the fitting loss* where its answer (rejected or not; moves or not; the
interval's side of 0) differs between the two.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from depthdelusion.analysis import fit
from depthdelusion.analysis.formats.table_text import markdown_table
from depthdelusion.analysis.report.verdict import penalty_verdicts
from depthdelusion.studies.public_shapes import answers, nested, prediction
from depthdelusion.studies.public_shapes.fitting_loss import HUBER
from depthdelusion.studies.public_shapes.study import KINKS

LOSSES = {"ls": "least squares on loss", "huber": HUBER}
PREDICTION_LAWS = ("chinchilla", "gemstones_width_depth")


@dataclass(frozen=True)
class Outcome:
    """One verdict under one fitting loss: its estimate (an LR or a difference), interval, p and answer."""

    value: float
    ci: tuple = (np.nan, np.nan)
    p: float = np.nan
    answer: str = ""
    detail: str = ""     # what the fit found beside the verdict (the kink fitted)


@dataclass(frozen=True)
class LossVerdict:
    """A verdict of the study on one arm, under least squares and under Huber on log-loss."""

    verdict: str         # "λ = 0: <law>", "nested kink", "lr: <law> <parameter>", "prediction: <held-out set>"
    arm: str
    statistic: str       # what ``value`` is
    draws: int           # null draws or bootstrap draws behind p or the interval
    ls: Outcome
    huber: Outcome

    @property
    def depends(self) -> str:
        """"" when the answer is the same under both losses, else "ls answer → Huber answer"."""
        return "" if self.ls.answer == self.huber.answer else f"{self.ls.answer} → {self.huber.answer}"

    @property
    def depends_text(self) -> str:
        """The "depends on the loss" cell: the change, "no", or that neither loss gives a verdict."""
        if self.depends:
            return self.depends
        return "no verdict under either loss" if self.ls.answer.startswith("too few runs") else "no"

    @property
    def mc_error(self) -> tuple:
        """The Monte-Carlo error √(p(1 − p)/draws) of each p (NaN without one)."""
        return tuple(np.sqrt(o.p * (1 - o.p) / self.draws) if self.draws and np.isfinite(o.p) else np.nan
                     for o in (self.ls, self.huber))


def lambda_zero(arm, *, replicates: int, seed: int) -> list[LossVerdict]:
    """λ = 0 against chinchilla for each of ``study.KINKS`` fitted on ``arm``, under both losses."""
    laws = ["chinchilla"] + [k for k in KINKS if k in arm.fits]
    if not replicates or len(laws) < 2:
        return []
    found = {}
    for loss in LOSSES:
        fits = {law: arm.fits[law] if loss == "ls" else fit(
            arm.runs, law, loss=loss, bootstrap=0, seed=seed, profile=False, leave_one_out=False, diagnostics=False)
            for law in laws}
        found[loss] = {v.law: v for v in penalty_verdicts(fits, arm.runs, replicates=replicates, seed=seed,
                                                          clusters=arm.clusters) if v.test is not None}
    return [LossVerdict(f"λ = 0: {law}", arm.label, "LR = n·ln(RSS_chinchilla / RSS_kink), the fits' RSS on loss",
                        found["ls"][law].test.replicates, *(_penalty(found[loss][law]) for loss in LOSSES))
            for law in laws[1:] if all(law in found[loss] for loss in LOSSES)]


def _penalty(v) -> Outcome:
    return Outcome(v.test.lr, p=v.test.p, answer="rejected" if v.significant else "not rejected")


def nested_kink(arm, *, replicates: int, seed: int, start) -> list[LossVerdict]:
    """The kink nested in gemstones_width_depth on ``arm`` under both losses (the least-squares p
    is the core's at the same draws: its power curve's draws follow the null's)."""
    if not replicates:
        return []
    tests = [nested.nested_test(arm, replicates=replicates, seed=seed, start=start, huber=huber,
                                power_draws=nested.power_draws(replicates) if huber else 0)
             for huber in (False, True)]
    out = [Outcome(k.lr, p=k.p, answer="rejected" if k.rejects else "not rejected",
                   detail=f"λ {k.kink[0]:.3g}, κ {k.kink[1]:g}, γ {k.kink[2]:.2f}" + _power(k)) for k in tests]
    return [LossVerdict("nested kink", arm.label, "LR = n·ln(RSS_null / RSS_kink); Huber: n·ln(H_null / H_kink)",
                        replicates, *out)]


def _power(k: nested.NestedKink) -> str:
    """The Huber test's power curve against the paper's kink (the least-squares one is the core's)."""
    if not k.power:
        return ""
    sizes = ", ".join(f"{pw:.2f} at {size:g}× ({pen:.2g} nats)" for size, pen, pw in k.power)
    return f"; power at {k.worst_shape} ({k.power_draws} draws per size): {sizes}"


def learning_rate(*, bootstrap: int, seed: int, convention: str, epsilon) -> list[LossVerdict]:
    """The lr shift (half − published) of each shape parameter of ``answers.LR_LAWS`` in
    ``convention``, under both losses."""
    found = [answers.lr_interaction(bootstrap=bootstrap, seed=seed, convention=convention, epsilon=epsilon,
                                    loss=loss) for loss in LOSSES]
    return [LossVerdict(f"lr: {a.law} {a.parameter}", f"gemstones vs gemstones_lr_half ({convention} N)",
                        "half − published", a.draws, *(Outcome(
                            x.half - x.hot, x.diff_ci, x.p, "moves" if x.moves else "does not move",
                            f"{x.hot:.4g} → {x.half:.4g}") for x in (a, b)))
            for a, b in zip(*found)]


def predicted(arm, *, bootstrap: int, seed: int) -> list[LossVerdict]:
    """gemstones_width_depth's held-out RMSE minus chinchilla's per held-out set, under both losses."""
    found = [{p.held_out: p for p in prediction.predict(arm, PREDICTION_LAWS, bootstrap=bootstrap, seed=seed,
                                                         loss=loss) if p.law == PREDICTION_LAWS[1]}
             for loss in LOSSES]
    return [LossVerdict(f"prediction: {held}", arm.label, "RMSE − RMSE(chinchilla), nats", bootstrap,
                        *(Outcome(p.vs_baseline, p.vs_ci, answer=p.verdict,
                                  detail=f"{p.runs_worse} of {p.runs} runs worse, swap p {p.swap_p:.3g}")
                          for p in (f[held] for f in found)))
            for held in prediction.HELD_OUT if all(held in f for f in found)]


def rows(found) -> list[dict]:
    """fitting_loss_verdicts.csv: per verdict and arm its outcome under each loss and whether it
    depends on the loss."""
    def cells(o: Outcome, tag: str) -> dict:
        return {f"{tag}_value": _round(o.value), f"{tag}_ci95_low": _round(o.ci[0]),
                f"{tag}_ci95_high": _round(o.ci[1]),
                f"{tag}_p": None if not np.isfinite(o.p) else round(o.p, 3), f"{tag}_answer": o.answer,
                f"{tag}_fit": o.detail}
    return [{"verdict": v.verdict, "arm": v.arm, "statistic": v.statistic, "draws": v.draws,
             **cells(v.ls, "least_squares"), **cells(v.huber, "huber"),
             "depends_on_fitting_loss": v.depends_text} for v in found]


def _round(v):
    """4 significant digits: a curvature's interval end of ~2e-05 must not print as 0.0."""
    return None if not np.isfinite(v) else float(f"{float(v):.4g}") + 0.0


def section(found, *, replicates: int, bootstrap: int) -> list[str]:
    """The report's section: every verdict under both losses, then one line per verdict on
    whether it depends on the loss."""
    if not found:
        return []
    table = [[v.verdict, v.arm, *(_text(o, mc, v.draws) for o, mc in zip((v.ls, v.huber), v.mc_error)),
              v.depends_text] for v in found]
    return ["## The fitting loss, every verdict: least squares against Huber on log-loss (fitting_loss_verdicts.csv)",
            "",
            f"Each verdict that rests on a fit, computed twice from the same seed and draws: fits by least "
            f"squares on the loss (the study's) and by {HUBER} (the Gemstones authors'). λ = 0: the "
            f"core's parametric bootstrap with a per-run random effect ({replicates} replicates; under "
            "Huber the refits are Huber's and the noise lognormal), statistic n·ln(RSS_chinchilla / "
            "RSS_kink) of the fits' RSS on the loss. Nested kink (inside gemstones_width_depth): the "
            f"runs' residual series resampled ({replicates} draws; under Huber the log residuals'), "
            "statistic n·ln(H_null / H_kink) under Huber, H the Huber objective; under Huber also its power "
            "against the paper's kink at 1×, 0.5× and 0.25× its size (the penalty at the worst shape in "
            f"nats; {nested.power_draws(replicates)} draws per size, the test's 5% critical value from its "
            "null draws; the least-squares curve is the core's). Learning rate: half − published, paired cluster "
            f"bootstrap over shapes ({bootstrap} draws); the model-free half-lr penalty slope fits no law, "
            "so it cannot depend on the loss. Prediction: RMSE − RMSE(chinchilla) of gemstones_width_depth "
            f"on each held-out set, 95% cluster bootstrap over held-out runs ({bootstrap} draws); worse or "
            "better also needs the exact swap test over those runs at 5% (none with fewer than 6 runs: "
            "section 5). ± is a p's Monte-Carlo error.", "",
            markdown_table(["verdict", "arm", "least squares", "Huber on log-loss", "depends on the loss"],
                           table, "lllll"), "",
            "Depends on the fitting loss:", "", *_depends_lines(found), ""]


def _text(o: Outcome, mc: float, draws: int) -> str:
    ci = f" [{o.ci[0]:+.3g}, {o.ci[1]:+.3g}]" if np.isfinite(o.ci[0]) else ""
    if not np.isfinite(o.p):
        p = ""
    elif o.p == 0:   # a bootstrap p with no draw on the other side: its resolution, as 4.3 states it
        p = f", p < {2.0 / draws:.2g}"
    else:
        p = f", p = {o.p:.3f} ± {mc:.3f}"
    fitted = f"; {o.detail}" if o.detail else ""
    return f"{o.value:+.3g}{ci}{p}: {o.answer}{fitted}"


def _depends_lines(found) -> list[str]:
    """One line per verdict: the arms where its answer changes with the loss, or that none does."""
    out = []
    for verdict in dict.fromkeys(v.verdict for v in found):
        mine = [v for v in found if v.verdict == verdict]
        moved = [f"{v.arm} ({v.depends})" for v in mine if v.depends]
        out.append(f"- {verdict}: " + ("depends on the loss on " + "; ".join(moved) if moved else
                                       f"does not depend on the loss (the same answer on all {len(mine)})"))
    return out
