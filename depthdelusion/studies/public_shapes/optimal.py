"""The public-shapes study's compute-optimal shape (issue 51, item 4.2): D*(C) and W*(C).

Each fitted shape law is minimised over (D, W) at fixed compute by
:func:`depthdelusion.analysis.report.shape.optimal_shape` (integer D, continuous W, T = C / (6·N_total)),
with N(D, W) the Gemstones architecture's own count, recovered from the table: a least-squares
fit of ``params_active_precise`` on D·W², D·W and W over the suite's shapes (the table gives the
count per shape, not the formula). The exponents D* ∝ C^a, W* ∝ C^b are slopes over budgets
inside the suite's compute range, their intervals re-solved for every cluster-bootstrap draw of
the fit (whole runs resampled). The authors' released width-depth optimum (cool-down and half
learning rate; ``published.gemstones_width_depth_released``) is optimised the same way: the
exponents it implies, computed here — not numbers the authors report.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from depthdelusion.analysis.reference import PAPER_SHAPE_EXPONENTS

#: the laws with a shape optimum (the kink laws collapse to chinchilla here: no shape term left)
OPTIMAL_LAWS = ("gemstones_width_depth", "shape_quadratic")
BUDGET_POINTS = 9
RELEASED = {"cool_end": "gemstones_cooldown", "lr_ablation_hot": "gemstones_lr_half"}


@dataclass(frozen=True)
class Optimum:
    arm: str
    law: str
    source: str           # "fit (cluster bootstrap)" or "the authors' released parameters"
    result: object        # shape.OptimalShape
    budgets: tuple        # (low, high) C in FLOPs
    deepest: float        # the suite's deepest run: a D* beyond it is an extrapolation in depth


def gemstones_counts(runs, epsilon: float = 1.0):
    """N(D, W) of the Gemstones architecture as the arm counts it, N_nonemb + ε·N_emb (ε = 1:
    total; N_emb the two untied V×W vocabulary matrices), and C = 6·N_total·T, from a
    least-squares fit of the table's per-shape total count; with its largest relative error."""
    from depthdelusion.analysis.report.shape import Counts
    from depthdelusion.analysis.table.published import GEMSTONES_VOCAB

    removed = 2 * GEMSTONES_VOCAB * (1.0 - epsilon)   # per unit width: the part of N_emb not counted
    total = np.asarray(runs.params, float) + removed * np.asarray(runs.width, float)
    D, W = np.asarray(runs.depth, float), np.asarray(runs.width, float)
    X = np.c_[D * W ** 2, D * W, W]
    coef = np.linalg.lstsq(X, total, rcond=None)[0]
    worst = float(np.max(np.abs(X @ coef - total) / total))

    def n_total(D, W):
        D, W = np.asarray(D, float), np.asarray(W, float)
        return coef[0] * D * W ** 2 + coef[1] * D * W + coef[2] * W

    formula = (f"N_total = {coef[0]:.3g}·D·W² + {coef[1]:.3g}·D·W + {coef[2]:.4g}·W (least squares on the "
               f"table's params_active_precise, largest relative error {worst:.1%})"
               + (f"; the law's N = N_total − {removed:.0f}·W (ε = {epsilon:.3g} of the 2·{GEMSTONES_VOCAB}·W "
                  "vocabulary matrices counted)" if epsilon != 1.0 else ""))
    return Counts(lambda D, W: n_total(D, W) - removed * np.asarray(W, float),
                  lambda D, W: 6.0 * n_total(D, W), formula, "C = 6·N_total·T")


def suite_budgets(runs, epsilon: float = 1.0) -> np.ndarray:
    """Budgets spanning the suite's own compute, 6·N_total·T from its smallest to its largest
    checkpoint (log-spaced): the exponents describe the data's range, not an extrapolation."""
    counts = gemstones_counts(runs, epsilon)
    c = counts.flops_per_token(runs.depth, runs.width) * np.asarray(runs.tokens, float)
    return np.geomspace(c.min(), c.max(), BUDGET_POINTS)


def optima(arm, *, bootstrap: int) -> list[Optimum]:
    """D*(C), W*(C) per shape law fitted to ``arm``, intervals from ``bootstrap`` of its draws."""
    from depthdelusion.analysis.report.shape import optimal_shape

    counts, budgets = gemstones_counts(arm.runs, arm.epsilon), suite_budgets(arm.runs, arm.epsilon)
    out = []
    for law in OPTIMAL_LAWS:
        if law in arm.fits:
            res = optimal_shape(arm.fits[law], budgets, counts=counts, bootstrap=bootstrap)
            out.append(Optimum(arm.label, law, "fit (cluster bootstrap)", res, (budgets[0], budgets[-1]),
                               float(np.max(arm.runs.depth))))
    return out


def released_optima(runs) -> list[Optimum]:
    """The exponents implied by the authors' released width-depth optimum for each table (total
    N, their convention), over ``runs``' compute range; no interval (none is released)."""
    from depthdelusion.analysis.report.shape import optimal_shape
    from depthdelusion.analysis.table.published import gemstones_width_depth_released

    counts, budgets = gemstones_counts(runs), suite_budgets(runs)
    return [Optimum(f"{table} (total N)", "gemstones_width_depth", "the authors' released parameters",
                    optimal_shape("gemstones_width_depth", budgets, counts=counts, bootstrap=0,
                                  values=gemstones_width_depth_released(kind)), (budgets[0], budgets[-1]),
                    float(np.max(runs.depth)))
            for kind, table in RELEASED.items()]


def against_paper(value: float, ci) -> str:
    """Whether the paper's exponent (depth or width) lies inside ``ci``."""
    return "inside" if ci and ci[0] <= value <= ci[1] else "outside"


def rows(found: list[Optimum]) -> list[dict]:
    """compute_optimal.csv: per arm, law and source the exponents, their intervals and the paper's."""
    out = []
    for o in found:
        r = o.result
        for what, value, ci in (("depth", r.depth_exponent, r.depth_exponent_ci),
                                ("width", r.width_exponent, r.width_exponent_ci)):
            paper = PAPER_SHAPE_EXPONENTS[what]
            out.append({"arm": o.arm, "law": o.law, "source": o.source, "shape": what,
                        "exponent": _r(value), "ci95_low": _r(ci[0]) if ci else None,
                        "ci95_high": _r(ci[1]) if ci else None, "bootstrap_draws": r.n_bootstrap,
                        "paper": paper, "paper_in_ci": against_paper(paper, ci) if ci else "",
                        "c_low": float(f"{o.budgets[0]:.3g}"), "c_high": float(f"{o.budgets[1]:.3g}"),
                        "d_star_low_c": r.rows[0].depth, "d_star_high_c": r.rows[-1].depth,
                        "w_star_low_c": round(r.rows[0].width), "w_star_high_c": round(r.rows[-1].width),
                        "d_star_beyond_deepest_run": bool(max(x.depth for x in r.rows) > o.deepest)})
    return out


def _r(v, digits: int = 3):
    return None if v is None or not np.isfinite(v) else float(f"{v:.{digits}g}")
