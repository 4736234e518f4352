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
from depthdelusion.analysis.report.shape import Counts, optimal_shape
from depthdelusion.analysis.table.published import GEMSTONES_VOCAB, gemstones_width_depth_released
from depthdelusion.studies.public_shapes.answers import percentile_interval

#: the laws with a shape optimum (the kink laws collapse to chinchilla here: no shape term left)
OPTIMAL_LAWS = ("gemstones_width_depth", "shape_quadratic")
BUDGET_POINTS = 9
RELEASED = {"cool_end": "gemstones_cooldown", "lr_ablation_hot": "gemstones_lr_half"}


#: the search's depth limit (layers) and width range: a draw whose D* or W* reaches an edge
#: (D = 1 or DEPTH_MAX; W within 1% of either end) has no interior optimum
DEPTH_MAX = 200
WIDTH_RANGE = (64.0, 131072.0)
#: a shape term whose range over the suite's shapes is below this (nats) has vanished: the draw's
#: optimum is then set by the other terms alone (a tenth of the runs' residual sd, ≈ 0.02)
VANISHED = 0.002
#: the shape terms of each law, as functions of (values, D, W): a draw loses one when it vanishes
SHAPE_TERMS = {
    "gemstones_width_depth": {"width term Aw·W^−aw": lambda v, D, W: v["Aw"] * W ** -v["aw"],
                              "depth term Ad·D^−ad": lambda v, D, W: v["Ad"] * D ** -v["ad"]},
    "shape_quadratic": {"bowl q·(ln(D/W) − m)²": lambda v, D, W: v["q"] * (np.log(D / W) - v["m"]) ** 2},
}


@dataclass(frozen=True)
class Draws:
    """The cluster-bootstrap draws of one optimum, re-solved: the exponents' 95% intervals over
    every draw and over the draws that are not degenerate (D* or W* at a search limit for some budget,
    a shape term vanished, or no shape optimum), with the count of each kind of degeneracy."""

    total: int
    degenerate: tuple          # (reason, draws) pairs
    depth_all: tuple
    width_all: tuple
    depth_kept: tuple
    width_kept: tuple

    @property
    def kept(self) -> int:
        return self.total - sum(n for _, n in self.degenerate)

    def moved(self, shape: str) -> bool:
        """Whether dropping the degenerate draws moves an interval end by more than 0.005."""
        a, b = (self.depth_all, self.depth_kept) if shape == "depth" else (self.width_all, self.width_kept)
        return bool(np.isfinite(a[0]) and np.isfinite(b[0]) and max(abs(a[0] - b[0]), abs(a[1] - b[1])) > 0.005)


@dataclass(frozen=True)
class Optimum:
    arm: str
    law: str
    source: str           # "fit (cluster bootstrap)" or "the authors' released parameters"
    result: object        # shape.OptimalShape
    budgets: tuple        # (low, high) C in FLOPs
    deepest: float        # the suite's deepest run: a D* beyond it is an extrapolation in depth
    draws: Draws | None = None
    local: tuple = ()     # (shape, exponent over the lower half of the budgets, upper half) per shape


def gemstones_counts(runs, epsilon: float = 1.0):
    """N(D, W) of the Gemstones architecture as the arm counts it, N_nonemb + ε·N_emb (ε = 1:
    total; N_emb the two untied V×W vocabulary matrices), and C = 6·N_total·T, from a
    least-squares fit of the table's per-shape total count; with its largest relative error."""
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
    """D*(C), W*(C) per shape law fitted to ``arm``, intervals from ``bootstrap`` of its draws
    with the degenerate draws counted and set aside (:func:`draw_exponents`), and the local
    exponents over the lower and upper half of the budgets."""
    counts, budgets = gemstones_counts(arm.runs, arm.epsilon), suite_budgets(arm.runs, arm.epsilon)
    out = []
    for law in OPTIMAL_LAWS:
        if law in arm.fits:
            fit = arm.fits[law]
            res = optimal_shape(fit, budgets, counts=counts, bootstrap=0, depth_max=DEPTH_MAX,
                                width_range=WIDTH_RANGE)
            draws = draw_exponents(fit, arm.runs, budgets, counts, bootstrap)
            if draws.total >= 2:
                res.depth_exponent_ci, res.width_exponent_ci = draws.depth_kept, draws.width_kept
                res.n_bootstrap = draws.kept
            out.append(Optimum(arm.label, law, "fit (cluster bootstrap)", res, (budgets[0], budgets[-1]),
                               float(np.max(arm.runs.depth)), draws, local_exponents(res, budgets)))
    return out


def local_exponents(res, budgets) -> tuple:
    """d ln D* / d ln C and d ln W* / d ln C over the lower and the upper half of ``budgets``
    (least-squares slopes over each half, the middle budget in both): the exponent's drift."""
    half = len(budgets) // 2
    out = []
    for shape in ("depth", "width"):
        y, x = np.log([getattr(r, shape) for r in res.rows]), np.log(budgets)
        out.append((shape, *(float(np.polyfit(x[sl], y[sl], 1)[0]) for sl in (slice(0, half + 1), slice(half, None)))))
    return tuple(out)


def draw_exponents(fit, runs, budgets, counts, bootstrap: int) -> Draws:
    """Every cluster-bootstrap draw of ``fit`` (up to ``bootstrap``) re-solved for D*(C), W*(C);
    each draw checked for degeneracy: D* or W* at an edge of the search (:data:`DEPTH_MAX`, D = 1,
    :data:`WIDTH_RANGE`), a shape term of
    :data:`SHAPE_TERMS` whose range over the suite's shapes is below :data:`VANISHED`, no optimum."""
    boot = fit.bootstrap_params if fit.bootstrap_params is not None else np.zeros((0, len(fit.param_names)))
    D, W = np.asarray(runs.depth, float), np.asarray(runs.width, float)
    exps, why = [], []
    for draw in boot[:bootstrap]:
        values = {**fit.fixed, **dict(zip(fit.param_names, draw))}
        r = optimal_shape(fit.law, budgets, counts=counts, bootstrap=0, values=values, depth_max=DEPTH_MAX,
                          width_range=WIDTH_RANGE)
        exps.append((r.depth_exponent, r.width_exponent))
        why.append(_degenerate(getattr(fit.law, "name", fit.law), values, r, D, W))
    exps = np.array(exps).reshape(-1, 2)
    keep = np.array([w is None for w in why], bool)
    reasons = {}
    for w in why:
        if w is not None:
            reasons[w] = reasons.get(w, 0) + 1
    return Draws(len(exps), tuple(reasons.items()), percentile_interval(exps[:, 0]), percentile_interval(exps[:, 1]),
                 percentile_interval(exps[keep, 0]), percentile_interval(exps[keep, 1]))


def _degenerate(law: str, values: dict, r, D, W) -> str | None:
    """Why a draw's optimum is degenerate (a vanished term before its consequence, D* at the
    limit), None when it is not."""
    if not (np.isfinite(r.depth_exponent) and np.isfinite(r.width_exponent)):
        return "no shape optimum"
    for name, term in SHAPE_TERMS.get(law, {}).items():  # the cause first: a lost term sends D* off
        t = term(values, D, W)
        if float(np.max(t) - np.min(t)) < VANISHED:
            return f"{name} vanished"
    if any(x.depth >= DEPTH_MAX for x in r.rows):
        return f"D* at the search limit D = {DEPTH_MAX}"
    if any(x.depth <= 1 for x in r.rows):
        return "D* at the search limit D = 1"
    if any(x.width >= 0.99 * WIDTH_RANGE[1] or x.width <= 1.01 * WIDTH_RANGE[0] for x in r.rows):
        return f"W* at a width search limit ({WIDTH_RANGE[0]:g} or {WIDTH_RANGE[1]:g})"
    return None


def released_optima(runs) -> list[Optimum]:
    """The exponents implied by the authors' released width-depth optimum for each table (total
    N, their convention), over ``runs``' compute range; no interval (none is released)."""
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
            all_ci = (o.draws.depth_all if what == "depth" else o.draws.width_all) if o.draws else None
            local = next((x[1:] for x in o.local if x[0] == what), (None, None))
            out.append({"arm": o.arm, "law": o.law, "source": o.source, "shape": what,
                        "exponent": _r(value), "ci95_low": _r(ci[0]) if ci else None,
                        "ci95_high": _r(ci[1]) if ci else None, "bootstrap_draws": r.n_bootstrap,
                        "degenerate_draws": sum(n for _, n in o.draws.degenerate) if o.draws else 0,
                        "degenerate_why": "; ".join(f"{k}: {v}" for k, v in o.draws.degenerate)
                        if o.draws else "",
                        "ci95_all_draws_low": _r(all_ci[0]) if all_ci else None,
                        "ci95_all_draws_high": _r(all_ci[1]) if all_ci else None,
                        "local_lower_half": _r(local[0]), "local_upper_half": _r(local[1]),
                        "paper": paper, "paper_in_ci": against_paper(paper, ci) if ci else "",
                        "c_low": float(f"{o.budgets[0]:.3g}"), "c_high": float(f"{o.budgets[1]:.3g}"),
                        "d_star_low_c": r.rows[0].depth, "d_star_high_c": r.rows[-1].depth,
                        "w_star_low_c": round(r.rows[0].width), "w_star_high_c": round(r.rows[-1].width),
                        "d_star_beyond_deepest_run": bool(max(x.depth for x in r.rows) > o.deepest)})
    return out


def _r(v, digits: int = 3):
    return None if v is None or not np.isfinite(v) else float(f"{v:.{digits}g}")
