"""The public-shapes study's answers (issue 51, item 4), each with an interval and its method.

- :func:`critical_depth`: the power-law kink D_crit = c·W^p per arm — its exponent p against the
  paper's (``reference.PAPER_FIT``), D_crit at each width, how many checkpoints lie past it — with
  cluster-bootstrap percentile intervals (whole runs resampled).
- :func:`lr_interaction`: the same shapes at the published learning rate and at half of it; the
  shape parameters (optimal aspect ratio m and curvature q of ``shape_quadratic``; the width and
  depth exponents of ``gemstones_width_depth``) fitted to each, and their difference with a
  *paired* cluster bootstrap: one draw of shapes, the same for both tables (the same seed and the
  same run labels give the same draw), so a shape's two runs stay together.
- :func:`audit`: the paper's D / D_crit(W) = D / (κ·ln W), its κ, for every shape, against the
  shape's own excess loss over the shape-agnostic chinchilla fit (its checkpoints' mean residual);
  deep shapes (D / D_crit > 1) against the rest, with a cluster bootstrap of the difference.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from depthdelusion.analysis.fitting.result import parameter_status
from depthdelusion.analysis.reference import PAPER_FIT, PAPER_KAPPA
from depthdelusion.studies.public_shapes.study import POWER_KINK, Arm, convention_runs, fit_laws, shape_labels

LEVEL = 95
#: a D_crit exponent whose 95% interval is wider than this is not identified (a boundary artefact)
P_SPAN = 1.0
PAPER_EXPONENT = PAPER_FIT["persistence_exponent"]
LR_LAWS = {"shape_quadratic": ("m", "q"), "gemstones_width_depth": ("aw", "ad")}


def percentile_interval(samples) -> tuple[float, float]:
    """The central LEVEL% percentile interval of the finite samples (NaN, NaN when none is)."""
    s = np.asarray(samples, float)
    s = s[np.isfinite(s)]
    if not len(s):
        return (np.nan, np.nan)
    return tuple(float(v) for v in np.percentile(s, [(100 - LEVEL) / 2, (100 + LEVEL) / 2]))


@dataclass(frozen=True)
class CriticalDepth:
    arm: str
    p: float
    p_ci: tuple
    p_status: str
    widths: list          # (W, D_crit, (lo, hi)) per width of the suite
    past: int             # checkpoints with D > D_crit at the fit
    rows: int

    @property
    def artefact(self) -> str:
        """Why an "ok" p is still a boundary artefact: its interval spans more than
        :data:`P_SPAN` (D_crit moving by a factor of more than the suite's width range), or the
        fitted D_crit is under one layer at the narrowest width; "" when neither."""
        lo, hi = self.p_ci
        if np.isfinite(lo) and hi - lo > P_SPAN:
            return f"its bootstrap interval [{lo:.3g}, {hi:.3g}] spans more than {P_SPAN:g}"
        if self.widths and self.widths[0][1] < 1:
            return f"the fitted D_crit at W = {int(self.widths[0][0])} is {self.widths[0][1]:.2g} layers"
        return ""

    def exponent_text(self) -> str:
        ref, (rlo, rhi) = PAPER_EXPONENT
        if self.p_status != "ok" or self.past == 0 or self.artefact:
            where = ("no checkpoint lies past the fitted D_crit, so the kink is outside the data"
                     if self.past == 0 else self.artefact if self.p_status == "ok"
                     else f"its status is {self.p_status}")
            return (f"p is not identified ({where}; the optimum's p = {self.p:.3g} is one point of "
                    f"a flat ridge, not an estimate): nothing to set against the paper's {ref} [{rlo}, {rhi}]")
        lo, hi = self.p_ci
        overlap = np.isfinite(lo) and lo <= rhi and hi >= rlo
        return (f"p = {self.p:.3g} [{lo:.3g}, {hi:.3g}] (cluster bootstrap, 95% percentile) against "
                f"the paper's {ref} [{rlo}, {rhi}]: the intervals " + ("overlap" if overlap else "do not overlap"))


def critical_depth(arm: Arm) -> CriticalDepth | None:
    """The power-law kink of ``arm`` (None when it was not fitted)."""
    f = arm.fits.get(POWER_KINK)
    if f is None:
        return None
    law, names = f.law, list(f.params)
    boot = f.bootstrap_params if f.bootstrap_params is not None else np.zeros((0, len(names)))
    # D_crit as the law declares it, at the fit and at each bootstrap draw of its free parameters
    # (roles.d_crit itself: a width stays a Python float, as the committed numbers were computed)
    at = {n: f.all_params[n] for n in law.d_crit_params}
    drawn = {**at, **{n: boot[:, names.index(n)] for n in law.d_crit_params if n in names}}
    widths = []
    for w in sorted({float(x) for x in arm.runs.width}):
        widths.append((w, law.roles.d_crit(w, **at), percentile_interval(law.roles.d_crit(w, **drawn))))
    d_crit = law.roles.d_crit(np.asarray(arm.runs.width, float), **at)
    past = int(np.sum(np.asarray(arm.runs.depth, float) > d_crit))
    return CriticalDepth(arm.label, f.params["p"], f.ci_bootstrap["p"] if f.ci_bootstrap else (np.nan, np.nan),
                         parameter_status(f, "p"), widths, past, f.n)


@dataclass(frozen=True)
class Interaction:
    law: str
    parameter: str
    hot: float
    half: float
    diff_ci: tuple
    p: float
    paired: bool
    shapes: int
    convention: str = "total"
    draws: int = 0

    @property
    def p_text(self) -> str:
        """p to the bootstrap's resolution: 0 of the draws on the other side is p < 2/draws."""
        if self.draws and self.p < 2.0 / self.draws:
            return f"< {2.0 / self.draws:.2g}"
        return f"{self.p:.3f}"

    @property
    def moves(self) -> bool:
        lo, hi = self.diff_ci
        return bool(np.isfinite(lo) and (lo > 0 or hi < 0))


def lr_interaction(*, bootstrap: int, seed: int, convention: str = "total",
                   epsilon: float | None = None, loss: str = "ls") -> list[Interaction]:
    """Shape parameters at the published and at half the learning rate, on the shapes both
    tables hold, N in ``convention`` (both tables with the same ε: ``epsilon`` when given), with a
    paired cluster bootstrap of each difference (half − published) and its two-sided bootstrap
    p-value, 2·min(P*(Δ ≤ 0), P*(Δ ≥ 0)) (never below 1/draws: reported as a bound there);
    ``loss``: the fitting loss (``fit``'s: ls or huber)."""
    hot, half = (convention_runs(name, convention, epsilon)[0] for name in ("gemstones", "gemstones_lr_half"))
    common = set(shape_labels(hot).tolist()) & set(shape_labels(half).tolist())
    arms = [r.subset(np.isin(shape_labels(r), sorted(common))) for r in (hot, half)]
    fits = [fit_laws(r, shape_labels(r), tuple(LR_LAWS), bootstrap=bootstrap, seed=seed, loss=loss) for r in arms]
    out = []
    for law, params in LR_LAWS.items():
        a, b = fits[0][law], fits[1][law]
        paired = a.n_bootstrap == b.n_bootstrap == bootstrap  # no resample left out: rows align
        for name in params:
            i = list(a.params).index(name)
            if paired and bootstrap:
                diff = b.bootstrap_params[:, i] - a.bootstrap_params[:, i]
            else:  # unpaired: independent draws of each (a wider interval than the paired one)
                n = min(a.n_bootstrap, b.n_bootstrap)
                diff = b.bootstrap_params[:n, i] - a.bootstrap_params[::-1][:n, i]
            p = 2 * min(np.mean(diff <= 0), np.mean(diff >= 0)) if len(diff) else np.nan
            out.append(Interaction(law, name, a.params[name], b.params[name], percentile_interval(diff),
                                   float(min(1.0, p)), paired, len(common), convention, len(diff)))
    return out


def lr_flips(interactions) -> list[str]:
    """One sentence per shape parameter whose lr shift (half − published) has opposite signs
    under different N conventions; none when every convention agrees."""
    by = {}
    for i in interactions:
        by.setdefault((i.law, i.parameter), []).append(i)
    out = []
    for (law, name), xs in by.items():
        if len({np.sign(x.half - x.hot) for x in xs}) > 1:
            out.append(f"{law} {name}: " + "; ".join(
                f"{x.convention} N {x.half - x.hot:+.3g} [{x.diff_ci[0]:+.3g}, {x.diff_ci[1]:+.3g}]" for x in xs))
    return out


@dataclass(frozen=True)
class LrPenalty:
    """The model-free check of 4.3: each shape's half-lr penalty (mean loss at half the lr minus
    at the published lr, over the token budgets both runs reached), regressed on ln(D/W) and ln N;
    the slope on ln(D/W) (nats per unit) with a cluster bootstrap over shapes."""

    convention: str
    slope: float
    ci: tuple
    shapes: int
    mean_penalty: float

    def text(self) -> str:
        return (f"{self.slope:+.4f} nats per unit ln(D/W) [{self.ci[0]:+.4f}, {self.ci[1]:+.4f}] at fixed "
                f"{self.convention} N ({self.shapes} shapes; mean penalty {self.mean_penalty:+.4f} nats)")


def lr_penalty_slope(*, bootstrap: int, seed: int, convention: str = "total",
                     epsilon: float | None = None) -> LrPenalty:
    """:class:`LrPenalty` with N in ``convention`` (both tables with ``epsilon`` when given)."""
    hot, half = (convention_runs(name, convention, epsilon)[0] for name in ("gemstones", "gemstones_lr_half"))
    lab_hot, lab_half = shape_labels(hot), shape_labels(half)
    rows = []
    for shape in sorted(set(lab_hot.tolist()) & set(lab_half.tolist())):
        a, b = hot.subset(lab_hot == shape), half.subset(lab_half == shape)
        ta, tb = np.round(np.asarray(a.tokens, float), -9), np.round(np.asarray(b.tokens, float), -9)
        both = sorted(set(ta.tolist()) & set(tb.tolist()))
        if not both:
            continue
        pen = np.mean([np.mean(b.loss[tb == t]) - np.mean(a.loss[ta == t]) for t in both])
        rows.append((np.log(float(a.depth[0]) / float(a.width[0])), np.log(float(np.mean(a.params))), pen))
    x = np.array(rows)
    X = np.c_[np.ones(len(x)), x[:, 0], x[:, 1]]
    slope = float(np.linalg.lstsq(X, x[:, 2], rcond=None)[0][1])
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(bootstrap):
        i = rng.integers(0, len(x), len(x))
        if np.ptp(x[i, 0]) > 0:
            draws.append(np.linalg.lstsq(X[i], x[i, 2], rcond=None)[0][1])
    return LrPenalty(convention, slope, percentile_interval(draws), len(x), float(np.mean(x[:, 2])))


@dataclass(frozen=True)
class AuditRow:
    shape: str
    depth: int
    width: int
    params: float
    ratio: float       # D / D_crit(W), the paper's κ
    excess: float      # mean residual over chinchilla (nats): > 0 the shape loses


@dataclass(frozen=True)
class AuditContrast:
    """The audit of one arm: its rows and the deep-minus-rest contrast with its interval."""

    arm: str
    table: str
    convention: str
    rows: tuple
    diff: float
    ci: tuple

    @property
    def sign(self) -> str:
        """"deep lose" / "deep win" when the 95% interval excludes 0, else "no sign"."""
        lo, hi = self.ci
        if not np.isfinite(lo):
            return "no interval"
        return "deep lose" if lo > 0 else "deep win" if hi < 0 else "no sign"

    def text(self) -> str:
        lo, hi = self.ci
        return f"{self.diff:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def audit_contrasts(arms, *, bootstrap: int, seed: int) -> tuple:
    """:func:`audit` of every arm, as AuditContrast."""
    out = []
    for arm in arms:
        rows, diff, ci = audit(arm, bootstrap=bootstrap, seed=seed)
        out.append(AuditContrast(arm.label, arm.table, arm.convention, tuple(rows), diff, ci))
    return tuple(out)


def sign_flips(contrasts) -> list[str]:
    """One sentence per table whose deep-minus-rest contrast changes sign between conventions
    (point estimates of opposite sign, or a 95% interval that excludes 0 under one convention
    and not under another); none when every convention agrees."""
    out = []
    for table in dict.fromkeys(c.table for c in contrasts):
        mine = [c for c in contrasts if c.table == table and np.isfinite(c.diff)]
        if len({np.sign(round(c.diff, 3)) for c in mine}) > 1 or len({c.sign for c in mine}) > 1:
            out.append(f"{table}: " + "; ".join(f"{c.convention} N {c.text()} ({c.sign})" for c in mine))
    return out


def audit(arm: Arm, *, bootstrap: int, seed: int) -> tuple[list[AuditRow], float, tuple]:
    """Per shape, the paper's D / D_crit and the shape's excess loss over ``arm``'s chinchilla
    fit; and the mean excess of the deep shapes (D / D_crit > 1) minus that of the others, with
    a cluster bootstrap interval (shapes resampled within each of the two groups)."""
    f = arm.fits["chinchilla"]
    resid = np.asarray(arm.runs.loss, float) - f.predict(arm.runs)
    rows = []
    for label in sorted(set(arm.clusters.tolist()), key=lambda s: tuple(int(x) for x in s.split("x"))):
        at = arm.clusters == label
        w, d = (int(x) for x in label.split("x"))
        rows.append(AuditRow(label, d, w, float(np.mean(np.asarray(arm.runs.params)[at])),
                             d / (PAPER_KAPPA * np.log(w)), float(np.mean(resid[at]))))
    deep = np.array([r.ratio > 1 for r in rows])
    excess = np.array([r.excess for r in rows])
    if deep.all() or not deep.any():
        return rows, np.nan, (np.nan, np.nan)
    rng = np.random.default_rng(seed)
    draws = [rng.choice(excess[deep], deep.sum()).mean() - rng.choice(excess[~deep], (~deep).sum()).mean()
             for _ in range(bootstrap)]
    return rows, float(excess[deep].mean() - excess[~deep].mean()), percentile_interval(draws)
