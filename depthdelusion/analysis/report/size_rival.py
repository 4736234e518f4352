"""Is a depth kink told apart from a break in model size?

A kink in depth past D_crit(W) can gain over the shape-agnostic law only on the rows past D_crit;
when those are the largest models, a penalty that switches on past a model size N_c (the law
``size_kink``: the same penalty shape in ln N, no depth in it) can fit as well. Both are fitted
against the same shape-agnostic baseline (:func:`.verdict.baseline_for`) on the same rows; the
depth kink is *distinguished* from the size break only when its AICc is lower than the size
break's by more than :data:`MARGIN`.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..fitting.options import FitOptions
from ..fitting.result import NOT_IDENTIFIED, format_estimate, parameter_status
from ..formats.interval_text import interval_text
from ..fitting.setup import options_for_law
from ..laws import SIZE_KINK, get_law

MARGIN = 2.0  # AICc: the depth kink beats the size break only by more than this
INTERVAL_METHODS = {"profile": "95% profile likelihood", "wald": "95% Jacobian (Wald), no profile computed"}


@dataclass(frozen=True)
class SizeRival:
    """The depth kink ``kink`` and the size break, each against the shape-agnostic ``baseline``."""

    kink: str
    baseline: str
    n_c: float                # the size break N_c (parameters)
    n_c_interval: tuple       # its interval (an open end: ±inf)
    n_c_method: str           # "profile" or "wald"
    n_c_text: str             # "5.6e+09 [4.1e+09, 7e+09]", or "n.i." when the data do not identify it
    n_c_identified: bool
    d_aicc_size: float        # AICc(size_kink) − AICc(baseline): negative favours the size break
    d_aicc_kink: float        # AICc(kink) − AICc(baseline)

    @property
    def kink_minus_size(self) -> float:
        """AICc(depth kink) − AICc(size break): negative favours the depth kink."""
        return self.d_aicc_kink - self.d_aicc_size

    @property
    def distinguished(self) -> bool:
        return self.kink_minus_size < -MARGIN

    def sentence(self) -> str:
        """One line for beside the kink's verdict."""
        if self.distinguished:
            said = f"the depth kink beats it by {-self.kink_minus_size:.1f} AICc (more than {MARGIN:g})"
        else:
            said = ("a model-size break fits as well" if self.kink_minus_size <= MARGIN else
                    f"a model-size break fits better (by {self.kink_minus_size:.1f} AICc)")
            said += "; the depth kink is not distinguished from it"
            if self.d_aicc_kink > -MARGIN:
                said += f" (nor does it beat {self.baseline} by more than {MARGIN:g} AICc)"
        unit = " parameters" if self.n_c_identified else ""
        return (f"Size-break rival ({SIZE_KINK}): a penalty past N_c = {self.n_c_text}{unit} "
                f"({INTERVAL_METHODS[self.n_c_method]}); "
                f"ΔAICc against {self.baseline}: size break {self.d_aicc_size:+.1f}, depth kink "
                f"({self.kink}) {self.d_aicc_kink:+.1f}; {said}.")

    def to_dict(self) -> dict:
        """Plain keys, rounded as printed (3 significant digits, ΔAICc to 0.01): finer digits
        vary with the machine's arithmetic."""
        lo, hi = self.n_c_interval
        return {"law": SIZE_KINK, "depth_kink": self.kink, "baseline": self.baseline, "n_c": _g3(self.n_c),
                "n_c_identified": self.n_c_identified, "n_c_interval": [_g3(lo), _g3(hi)],
                "n_c_interval_method": INTERVAL_METHODS[self.n_c_method],
                "d_aicc_size_break": round(self.d_aicc_size, 2), "d_aicc_depth_kink": round(self.d_aicc_kink, 2),
                "d_aicc_depth_kink_minus_size_break": round(self.kink_minus_size, 2),
                "depth_kink_distinguished": self.distinguished, "margin_aicc": MARGIN}


def _g3(v: float) -> float | None:
    """3 significant digits; an open end (±inf) is null."""
    return float(f"{v:.3g}") if math.isfinite(v) else None


def size_rival(kink_fit, baseline: str, fitter, options: FitOptions | None = None,
               baseline_fit=None) -> SizeRival:
    """The size break fitted beside the depth-kink fit ``kink_fit`` on its rows, both against
    the shape-agnostic law ``baseline`` (:func:`.verdict.baseline_for`). ``fitter(law, options)``
    fits a law as the kink was fitted (its rows, loss and group offsets); ``options``: the
    user's fit options (each law gets the fixed parameters it has), with the bootstrap,
    leave-one-out and row diagnostics off; ``baseline_fit``: the baseline when already fitted
    alike (else a bare fit of it, without profiles)."""
    quick = dataclasses.replace(options or FitOptions(), bootstrap=0, leave_one_out=False, diagnostics=False)
    if baseline_fit is None or baseline_fit.law.name != baseline or baseline_fit.n != kink_fit.n:
        baseline_fit = fitter(baseline, options_for_law(dataclasses.replace(quick, profile="none"), baseline))
    rival = fitter(SIZE_KINK, options_for_law(quick, SIZE_KINK))
    kink = get_law(SIZE_KINK).kink
    profile = (getattr(rival, "ci_profile", None) or {}).get(kink)
    ci, how = (profile, "profile") if profile is not None else (rival.conf_int(method="wald")[kink], "wald")
    identified = parameter_status(rival, kink) != NOT_IDENTIFIED
    text = f"{format_estimate(rival, kink, '.3g')} {interval_text(ci, '.3g')}" if identified else "n.i."
    return SizeRival(kink_fit.law.name, baseline, float(rival.all_params[kink]), tuple(float(v) for v in ci),
                     how, text, identified, float(rival.aicc - baseline_fit.aicc),
                     float(kink_fit.aicc - baseline_fit.aicc))


