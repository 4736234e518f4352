"""Does the architecture penalty earn its parameters? Verdicts that compare like with like.

Each architecture law (one with a depth penalty λ·max(0, D − D_crit(W))·W^−γ) is compared with
the shape-agnostic law that has the same data term — ``kaplan`` when the fit has no token term,
``chinchilla`` when it fitted one — so the comparison isolates the penalty. Setting λ = 0 turns
every architecture law into that baseline, so the baseline's residual sum of squares is the
profile likelihood of λ at 0: LR = n·ln(RSS_baseline / RSS_law). Under λ = 0, λ sits on its
bound and the kink parameters (κ or c, p; γ) are not identified, so χ²₁ is not its reference
(Davies 1987): the p-value comes from :mod:`.lr_test` — a parametric bootstrap from the baseline
fit by default, Davies' bound as the fast option — and says which. The verdict also asks both
information criteria to agree. A comparison with n − K − 1 ≤ 5 (K parameters counting the
noise variance, as AICc does) is "uninformative": the AICc correction 2K(K+1)/(n − K − 1) then
dominates the criteria and the bootstrap rests on a handful of residual degrees of freedom.

Whether there is a *critical* depth is a different question: a kink law must beat the best
smooth shape law (laws registered with ``shape="smooth"``: no critical depth), not only a law
without any shape term. :func:`critical_depth_verdict` tests the kink against the smooth law
with the lowest AICc by a parametric bootstrap from the smooth fit (the laws are not nested).

When the runs have too little shape variation to identify a penalty — fewer than three shapes,
one depth or one width, depth collinear with width, or depth determined by N — the verdict is
"cannot tell", whatever the criteria say.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..fitting.kink_reach import KinkReach, reach_of_fit
from ..fitting.lr_test import (
    DEFAULT_REPLICATES,
    LRTest,
    bootstrap_tests,
    davies_test,
)
from ..fitting.refits import default_refit
from ..fitting.workers import in_this_process
from ..laws import shape_kind
from ..fitting.options import SEED

MIN_RESIDUAL_DF = 5  # n − K − 1 at or below this: "too few runs for K parameters"
COLLINEAR_R2 = 0.99  # ln D explained this well by ln W (or by ln N): shape does not vary on its own


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
    """A law with a critical depth (a kink); smooth shape laws are its alternatives."""
    penalty = fit.law.penalty
    return shape_kind(fit.law) == "kink" and bool(penalty) and (penalty in fit.params or penalty in fit.fixed)


def too_few_runs(fit) -> str | None:
    """Why a comparison involving ``fit`` is uninformative, or None."""
    big_k = fit.k + 1  # the noise variance counts, as in AICc
    df = fit.n - big_k - 1
    if df > MIN_RESIDUAL_DF:
        return None
    corr = f"{2 * big_k * (big_k + 1) / df:.0f}" if df > 0 else "infinite"
    # k as the law-comparison table counts it, then K as AICc does: one count per meaning
    return (f"too few runs for {fit.k} parameters and the noise variance ({fit.law.name}: n = "
            f"{fit.n}, K = {big_k}, n − K − 1 = {df} ≤ {MIN_RESIDUAL_DF}; the AICc correction "
            f"alone is {corr})")


def baseline_for(fit) -> str:
    """The shape-agnostic law with the same data term as ``fit``."""
    has_tokens = any(k in fit.params for k in getattr(fit.law, "token_params", {}) or {}) \
        or getattr(fit.law, "needs_tokens", False)
    return "chinchilla" if has_tokens else "kaplan"


HEADS = {"yes": "Yes", "no": "No", "not clearly": "Not clearly", "cannot tell": "Cannot tell",
         "not compared": "Not compared", "uninformative": "Uninformative"}


@dataclass
class PenaltyVerdict:
    law: str
    baseline: str
    answer: str            # "yes", "no", "not clearly", "cannot tell", "uninformative", "not compared"
    d_aicc: float = math.nan
    d_bic: float = math.nan
    lr: float = math.nan   # n·ln(RSS_baseline / RSS_law), the profile LR of λ = 0
    p_value: float = math.nan
    reason: str = ""
    test: LRTest | None = None  # how p_value was obtained
    reach: KinkReach | None = None  # the shapes past the fitted D_crit: what the verdict rests on

    @property
    def significant(self) -> bool:
        """λ = 0 rejected at 5% by the calibrated test (never by an uninformative comparison)."""
        if self.answer == "uninformative" or self.test is None:
            return False
        return self.test.rejects()

    def p_text(self) -> str:
        return self.test.p_text() if self.test is not None else f"p = {self.p_value:.2g}"

    def sentence(self) -> str:
        head = HEADS[self.answer]
        if self.answer == "not compared":
            return f"{head}: {self.law} — {self.reason}"
        # an uninformative comparison is not tested: its LR is shown, a p-value (or a bound on
        # one) would read as a test
        facts = (f"{self.law} vs {self.baseline} (same data term): ΔAICc = {self.d_aicc:+.2f}, "
                 f"ΔBIC = {self.d_bic:+.2f} (negative favours {self.law}); λ = 0 "
                 + (f"not tested (LR = {self.lr:.2f}; no p-value)" if self.answer == "uninformative"
                    else ("rejected" if self.significant else "not rejected")
                    + f" (LR = {self.lr:.2f}, {self.p_text()})"))
        return f"{head}: {self.reason}{_untested(self.reach)}. ({facts}.){_reach_text(self.reach)}"


def penalty_test(law_fit, base_fit) -> LRTest:
    """The fast calibrated test of λ = 0: Davies' bound along the profile of the kink's location
    (the law's declared ``kink``)."""
    return davies_test(law_fit, base_fit, law_fit.law.kink)


def penalty_verdict(law_fit, base_fit, variation: ShapeVariation | None = None,
                    test: LRTest | None = None, runs=None) -> PenaltyVerdict:
    """``test``: the calibrated test of λ = 0 (default: Davies' bound, :func:`penalty_test`);
    ``runs``: the fitted rows, for the kink's reach (which shapes its penalty touches)."""
    name, base = law_fit.law.name, base_fit.law.name
    d_aicc, d_bic = law_fit.aicc - base_fit.aicc, law_fit.bic - base_fit.bic
    test = test or penalty_test(law_fit, base_fit)
    v = PenaltyVerdict(name, base, "", d_aicc, d_bic, test.lr, test.p, test=test,
                       reach=None if runs is None else reach_of_fit(law_fit, runs))
    few = too_few_runs(law_fit)
    if variation is not None and not variation.ok:
        v.answer, v.reason = "cannot tell", (f"the runs cannot identify a depth penalty: {variation.reason}; "
                                             "any difference between the laws is not about shape")
    elif few:
        v.answer, v.reason = "uninformative", few
    elif not v.significant or (d_aicc > 0 and d_bic > 0):
        v.answer = "no"
        v.reason = (f"the penalty of {name} does not earn its extra parameters over {base}"
                    + ("" if v.significant else " — λ = 0 is not rejected at 5%"))
    elif d_aicc < -2 and d_bic < -2:
        v.answer, v.reason = "yes", f"the penalty of {name} earns its extra parameters over {base}"
    else:
        v.answer, v.reason = "not clearly", (f"λ of {name} is significant but the information "
                                             "criteria do not both favour it by more than 2")
    return v


def penalty_verdicts(fits: dict, runs, *, replicates: int = DEFAULT_REPLICATES,
                     seed: int = SEED, clusters=None, map_units=in_this_process) -> list[PenaltyVerdict]:
    """One verdict per fitted architecture law, each against its same-data-term baseline, λ = 0
    tested by a parametric bootstrap from the baseline fit (``replicates`` > 0, every law
    against one baseline on the same replicates; ``clusters``: labels of the rows of one run,
    simulated with a per-run random effect) or by Davies' bound (``replicates=0``). ``map_units``:
    how each law's refits are made (``fitting.workers.Workers.map``: in worker processes)."""
    variation = shape_variation(runs)
    out, by_base = [], {}
    for name, f in fits.items():
        if is_architecture_law(f):
            by_base.setdefault(baseline_for(f), []).append(name)
    tests = {}
    for base, names in by_base.items():
        if base in fits and replicates > 0 and variation.ok:
            testable = {n: fits[n] for n in names if not too_few_runs(fits[n])}
            if testable:
                tests.update(bootstrap_tests(runs, fits[base], testable, replicates=replicates,
                                             seed=seed, clusters=clusters,
                                             refit=default_refit(fits[base]), map_units=map_units))
    for name, f in fits.items():
        if not is_architecture_law(f):
            continue
        base = baseline_for(f)
        if base not in fits:
            out.append(PenaltyVerdict(name, base, "not compared",
                                      reason=f"its same-data-term baseline {base!r} was not fitted"))
            continue
        out.append(penalty_verdict(f, fits[base], variation, tests.get(name), runs))
    return out


def _untested(reach: KinkReach | None) -> str:
    """"; the kink is not tested within widths …" for a verdict whose kink no width brackets."""
    return f"; {reach.untested()}" if reach is not None and reach.untested() else ""


def _reach_text(reach: KinkReach | None) -> str:
    return f" {reach.sentence()}" if reach is not None else ""


@dataclass
class CriticalDepthVerdict:
    """Does a kink (a critical depth) fit better than the best smooth shape law?"""

    kink: str
    smooth: str
    answer: str  # "yes", "no", "uninformative", "cannot tell", "not compared"
    d_aicc: float = math.nan  # AICc(kink) − AICc(smooth): negative favours the kink
    test: LRTest | None = None
    reason: str = ""
    reach: KinkReach | None = None  # the shapes past the fitted D_crit

    @property
    def kink_wins(self) -> bool:
        return self.answer == "yes"

    def sentence(self) -> str:
        head = HEADS[self.answer]
        if self.test is None:
            return f"{head}: {self.reason}{_untested(self.reach)}.{_reach_text(self.reach)}"
        return (f"{head}: {self.reason}{_untested(self.reach)}. ({self.kink} vs the best smooth "
                f"shape law {self.smooth}: ΔAICc = {self.d_aicc:+.2f} (negative favours the kink); "
                f"LR = n·ln(RSS_smooth / RSS_kink) = {self.test.lr:.2f}, {self.test.p_text()}.)"
                + _reach_text(self.reach))


def critical_depth_verdict(fits: dict, runs, kink: str, penalty: PenaltyVerdict | None = None, *,
                           replicates: int = DEFAULT_REPLICATES, seed: int = SEED,
                           clusters=None, map_units=in_this_process) -> CriticalDepthVerdict:
    """The kink law ``kink`` against the smooth shape law with the lowest AICc among ``fits``:
    the kink wins when a parametric bootstrap from the smooth fit rejects it (p ≤ 0.05) and its
    own penalty is significant against the shape-agnostic baseline (``penalty``). ``map_units``: as
    :func:`penalty_verdicts`'."""
    smooth = [f for f in fits.values() if shape_kind(f.law) == "smooth" and f.n == fits[kink].n]
    if not smooth:
        return CriticalDepthVerdict(kink, "", "not compared", reason="no smooth shape law was fitted")
    best = min(smooth, key=lambda f: f.aicc)
    kf = fits[kink]
    v = CriticalDepthVerdict(kink, best.law.name, "", kf.aicc - best.aicc, reach=reach_of_fit(kf, runs))
    variation = shape_variation(runs)
    few = too_few_runs(kf) or too_few_runs(best)
    if not variation.ok:
        v.answer, v.reason = "cannot tell", f"the runs cannot identify a shape penalty: {variation.reason}"
        return v
    if few:
        v.answer, v.reason = "uninformative", few
        return v
    if replicates > 0:
        v.test = bootstrap_tests(runs, best, {kink: kf}, replicates=replicates, seed=seed,
                                 nested=False, clusters=clusters, refit=default_refit(best), map_units=map_units)[kink]
    else:  # no calibrated fast option for non-nested laws: say the comparison was not tested
        v.answer, v.reason = "not compared", "the kink-vs-smooth test needs bootstrap replicates"
        return v
    if v.test.rejects() and v.reach is not None and not v.reach.threshold_inside:
        side = "below" if v.reach.past_rows else "above"
        v.answer, v.reason = "no", (f"the kink of {kink} fits significantly better than the smooth "
                                    f"{best.law.name}, but its D_crit lies {side} every depth tested (no "
                                    "rows on one side of it), so what fits better is a depth penalty "
                                    "without a threshold in the data, not a critical depth")
    elif v.test.rejects() and (penalty is None or penalty.significant):
        v.answer, v.reason = "yes", (f"the kink of {kink} fits significantly better than the smooth "
                                     f"{best.law.name}: a critical depth is supported")
    else:
        why = ("the smooth law is not rejected" if not v.test.rejects() else
               f"the smooth law is rejected, but {kink}'s own penalty is not significant")
        v.answer, v.reason = "no", (f"{why}, so the data do not establish a *critical* depth "
                                    "(a kink) over a smooth shape effect")
    return v


def overall(verdicts: list[PenaltyVerdict]) -> str:
    """One answer over all architecture laws: yes if any earns its parameters, no if none is
    even significant, cannot tell if the runs cannot identify a penalty."""
    answers = {v.answer for v in verdicts if v.answer != "not compared"}
    if not answers:
        return "not compared"
    for a in ("cannot tell", "yes"):
        if a in answers:
            return a
    if answers == {"uninformative"}:
        return "uninformative"
    answers.discard("uninformative")
    return "no" if answers == {"no"} else "not clearly"
