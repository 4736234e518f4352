"""The fitting loss stated and compared (issue 62, item 4): the study fits least squares on the
loss; the Gemstones authors (and Hoffmann et al.) fit a Huber loss (δ = 10⁻³) on log-loss
residuals. Per arm, chinchilla and gemstones_width_depth are refitted by Huber on log-loss (bare
fits: the point optimum, no resampling of the Huber fit itself) and the verdicts that rest on a
fit are recomputed from them:

- the audit contrast (deep shapes minus the rest, excess over chinchilla; its interval the same
  bootstrap over shapes as under least squares);
- the compute-optimal depth and width exponents of gemstones_width_depth (point values).

A verdict *depends on the loss* when its sign (the audit: the interval's side of 0) differs, or an
exponent moves by more than :data:`MOVES` between the two.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from depthdelusion.analysis import fit
from depthdelusion.analysis.report.shape import optimal_shape
from depthdelusion.studies.public_shapes import answers
from depthdelusion.studies.public_shapes.optimal import DEPTH_MAX, gemstones_counts, suite_budgets
from depthdelusion.studies.public_shapes.study import Arm

MOVES = 0.03   # an exponent that moves by more than this between the losses depends on the loss
HUBER = "Huber (δ = 10⁻³) on log-loss residuals"


@dataclass(frozen=True)
class LossComparison:
    arm: str
    contrast: tuple          # (least squares AuditContrast, Huber AuditContrast)
    exponents: tuple         # ((depth, width) least squares, (depth, width) Huber)
    huber_rss: float         # the Huber fit's RSS on loss (nats²), beside least squares'
    ls_rss: float

    @property
    def depends(self) -> list[str]:
        """The verdicts that change with the fitting loss."""
        out = []
        if self.contrast[0].sign != self.contrast[1].sign:
            out.append(f"audit contrast ({self.contrast[0].sign} → {self.contrast[1].sign})")
        for i, what in enumerate(("depth", "width")):
            a, b = self.exponents[0][i], self.exponents[1][i]
            if np.isfinite(a) and np.isfinite(b) and abs(a - b) > MOVES:
                out.append(f"{what} exponent ({a:.3g} → {b:.3g})")
        return out


def compare(arm: Arm, *, bootstrap: int, seed: int) -> LossComparison | None:
    """Least squares against Huber on log-loss for ``arm`` (None without both laws fitted)."""
    laws = ("chinchilla", "gemstones_width_depth")
    if not all(law in arm.fits for law in laws):
        return None
    huber = {law: fit(arm.runs, law, "huber", bootstrap=0, seed=seed, profile=False, leave_one_out=False,
                      diagnostics=False) for law in laws}
    contrasts = answers.audit_contrasts([arm, dataclasses.replace(arm, fits=huber)], bootstrap=bootstrap, seed=seed)
    exps = tuple(_exponents(arm, f["gemstones_width_depth"]) for f in (arm.fits, huber))
    law = "gemstones_width_depth"
    rss = float(np.sum((np.asarray(arm.runs.loss, float) - huber[law].predict(arm.runs)) ** 2))
    return LossComparison(arm.label, contrasts, exps, rss, float(arm.fits[law].rss))


def _exponents(arm: Arm, f) -> tuple:
    res = optimal_shape(f, suite_budgets(arm.runs, arm.epsilon), counts=gemstones_counts(arm.runs, arm.epsilon),
                        bootstrap=0, depth_max=DEPTH_MAX)
    return (float(res.depth_exponent), float(res.width_exponent))


def rows(found) -> list[dict]:
    """fitting_loss.csv: per arm and loss the audit contrast and the exponents."""
    out = []
    for c in found:
        for i, loss in enumerate(("least squares on loss", HUBER)):
            a = c.contrast[i]
            out.append({"arm": c.arm, "fitting_loss": loss, "deep_minus_rest": round(a.diff, 4),
                        "ci95_low": round(a.ci[0], 4), "ci95_high": round(a.ci[1], 4), "sign": a.sign,
                        "depth_exponent": round(c.exponents[i][0], 3), "width_exponent": round(c.exponents[i][1], 3),
                        "gemstones_width_depth_rss_on_loss": round(c.huber_rss if i else c.ls_rss, 4)})
    return out
