"""Does the architecture penalty earn its parameters? Verdicts that compare like with like.

Each architecture law (one with a depth penalty λ·max(0, D − D_crit(W))·W^−γ) is compared with
the shape-agnostic law that has the same data term — ``kaplan`` when the fit has no token term,
``chinchilla`` when it fitted one — so the comparison isolates the penalty. Setting λ = 0 turns
every architecture law into that baseline, so the baseline's residual sum of squares is the
profile likelihood of λ at 0: λ's 95% profile-likelihood interval excludes 0 exactly when
LR = n·ln(RSS_baseline / RSS_law) > χ²₁(0.95) = 3.84 (Venzon & Moolgavkar 1988). Under λ = 0
the kink parameters (κ or c, p; γ) are not identified, so the χ²₁ reference is approximate
(Davies 1987); the verdict also asks both information criteria to agree.

When the runs have too little shape variation to identify a penalty — fewer than three shapes,
one depth or one width, depth collinear with width, or depth determined by N — the verdict is
"cannot tell", whatever the criteria say.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

LR_THRESHOLD = float(stats.chi2.ppf(0.95, 1))  # 3.84
COLLINEAR_R2 = 0.99  # ln D explained this well by ln W (or by ln N): shape does not vary on its own
PENALTY_PARAMS = ("lam",)


@dataclass
class ShapeVariation:
    ok: bool
    reason: str
    n_shapes: int
    n_depths: int
    n_widths: int


def _r2(y, x) -> float:
    X = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    ss = float(((y - y.mean()) ** 2).sum())
    return 1.0 if ss == 0 else 1.0 - float(((y - X @ coef) ** 2).sum()) / ss


def shape_variation(runs) -> ShapeVariation:
    """Whether the runs vary depth and width enough, and independently enough of each other and
    of N, for a depth penalty to be told apart from the capacity term."""
    D, W = np.asarray(runs.depth, float), np.asarray(runs.width, float)
    N = np.asarray(runs.params, float)
    if not (np.all(np.isfinite(D)) and np.all(np.isfinite(W))):
        return ShapeVariation(False, "the runs do not give every depth and width", 0, 0, 0)
    shapes = {(int(d), int(w)) for d, w in zip(D, W)}
    nd, nw = len(set(D.tolist())), len(set(W.tolist()))
    if len(shapes) < 3:
        return ShapeVariation(False, f"only {len(shapes)} distinct shape(s) (D, W)", len(shapes), nd, nw)
    if nd < 2 or nw < 2:
        what = "depth" if nd < 2 else "width"
        return ShapeVariation(False, f"every run has the same {what}", len(shapes), nd, nw)
    lnD, lnW, lnN = np.log(D), np.log(W), np.log(N)
    r2_w, r2_n = _r2(lnD, lnW), _r2(lnD, lnN)
    if r2_w >= COLLINEAR_R2:
        return ShapeVariation(False, f"depth and width are collinear (ln D on ln W: R² = {r2_w:.3f})",
                              len(shapes), nd, nw)
    if r2_n >= COLLINEAR_R2:
        return ShapeVariation(False, f"depth is determined by N (ln D on ln N: R² = {r2_n:.3f})",
                              len(shapes), nd, nw)
    return ShapeVariation(True, f"{len(shapes)} shapes, {nd} depths, {nw} widths "
                          f"(ln D on ln W: R² = {r2_w:.2f}; on ln N: R² = {r2_n:.2f})",
                          len(shapes), nd, nw)


def is_architecture_law(fit) -> bool:
    return "lam" in fit.params or "lam" in fit.fixed


def baseline_for(fit) -> str:
    """The shape-agnostic law with the same data term as ``fit``."""
    has_tokens = any(k in fit.params for k in getattr(fit.law, "token_params", {}) or {}) \
        or getattr(fit.law, "needs_tokens", False)
    return "chinchilla" if has_tokens else "kaplan"


@dataclass
class PenaltyVerdict:
    law: str
    baseline: str
    answer: str            # "yes", "no", "not clearly", "cannot tell", "not compared"
    d_aicc: float = math.nan
    d_bic: float = math.nan
    lr: float = math.nan   # n·ln(RSS_baseline / RSS_law), the profile LR of λ = 0
    p_value: float = math.nan
    reason: str = ""

    @property
    def significant(self) -> bool:
        return bool(np.isfinite(self.lr) and self.lr > LR_THRESHOLD)

    def sentence(self) -> str:
        head = {"yes": "Yes", "no": "No", "not clearly": "Not clearly", "cannot tell": "Cannot tell",
                "not compared": "Not compared"}[self.answer]
        if self.answer == "not compared":
            return f"{head}: {self.law} — {self.reason}"
        facts = (f"{self.law} vs {self.baseline} (same data term): ΔAICc = {self.d_aicc:+.2f}, "
                 f"ΔBIC = {self.d_bic:+.2f} (negative favours {self.law}); λ = 0 "
                 + ("rejected" if self.significant else "not rejected")
                 + f" by the profile likelihood (LR = {self.lr:.2f}, p = {self.p_value:.2g})")
        return f"{head}: {self.reason}. ({facts}.)"


def significance(law_fit, base_fit) -> tuple[float, float]:
    """(LR, p) of λ = 0 from the two fits' residual sums of squares (same runs, same data term)."""
    if law_fit.n != base_fit.n:
        raise ValueError("the law and its baseline were fitted to different runs")
    lr = max(0.0, law_fit.n * math.log(max(base_fit.rss, 1e-300) / max(law_fit.rss, 1e-300)))
    return lr, float(stats.chi2.sf(lr, 1))


def penalty_verdict(law_fit, base_fit, variation: ShapeVariation | None = None) -> PenaltyVerdict:
    name, base = law_fit.law.name, base_fit.law.name
    d_aicc, d_bic = law_fit.aicc - base_fit.aicc, law_fit.bic - base_fit.bic
    lr, p = significance(law_fit, base_fit)
    v = PenaltyVerdict(name, base, "", d_aicc, d_bic, lr, p)
    if variation is not None and not variation.ok:
        v.answer, v.reason = "cannot tell", (f"the runs cannot identify a depth penalty: {variation.reason}; "
                                             "any difference between the laws is not about shape")
    elif not v.significant or (d_aicc > 0 and d_bic > 0):
        v.answer = "no"
        v.reason = (f"the penalty of {name} does not earn its extra parameters over {base}"
                    + ("" if v.significant else " — λ's profile interval includes 0"))
    elif d_aicc < -2 and d_bic < -2:
        v.answer, v.reason = "yes", f"the penalty of {name} earns its extra parameters over {base}"
    else:
        v.answer, v.reason = "not clearly", (f"λ of {name} is significant but the information "
                                             "criteria do not both favour it by more than 2")
    return v


def penalty_verdicts(fits: dict, runs) -> list[PenaltyVerdict]:
    """One verdict per fitted architecture law, each against its same-data-term baseline."""
    variation = shape_variation(runs)
    out = []
    for name, f in fits.items():
        if not is_architecture_law(f):
            continue
        base = baseline_for(f)
        if base not in fits:
            out.append(PenaltyVerdict(name, base, "not compared",
                                      reason=f"its same-data-term baseline {base!r} was not fitted"))
            continue
        out.append(penalty_verdict(f, fits[base], variation))
    return out


def overall(verdicts: list[PenaltyVerdict]) -> str:
    """One answer over all architecture laws: yes if any earns its parameters, no if none is
    even significant, cannot tell if the runs cannot identify a penalty."""
    answers = {v.answer for v in verdicts if v.answer != "not compared"}
    if not answers:
        return "not compared"
    for a in ("cannot tell", "yes"):
        if a in answers:
            return a
    return "no" if answers == {"no"} else "not clearly"
