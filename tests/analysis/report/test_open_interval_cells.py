"""The report's cells write an interval with an open end as `fit` does (issue 63 item 2): "≥ lo",
"≤ hi", or "n.i." where the closed end is the parameter's own bound — never "[0, ∞]" beside an
estimate, nor "n.i. [10.4, ∞]"."""
import math

from depthdelusion.analysis import fit
from depthdelusion.analysis.report.cells import estimate_cell, estimate_with_interval, param_interval

from ..fitting.test_open_intervals import faint_penalty


def test_open_ends_are_one_sided_or_not_identified():
    r = fit(faint_penalty(), "depth_delusion", bootstrap=0, leave_one_out=False)
    assert param_interval(r, "lam", (0.0035, math.inf)) == "≥ 0.0035"
    assert param_interval(r, "lam", (0.0, math.inf)) == "n.i."  # its lower end is λ's bound 0
    assert param_interval(r, "E", (-math.inf, 1.9)) == "≤ 1.9"
    assert param_interval(r, "E", (1.7, 1.9)) == "[1.7, 1.9]"
    lam_lo = r.ci_profile["lam"][0]
    assert estimate_with_interval(r, "lam", "n.i.", r.ci_profile["lam"]) == f"n.i. (≥ {lam_lo:.4g})"
    assert "∞" not in estimate_cell(r, "lam", r.ci_profile["lam"])


def test_an_estimate_whose_interval_is_open_on_both_sides_says_so():
    r = fit(faint_penalty(), "depth_delusion", bootstrap=0, leave_one_out=False)
    ok = next(nm for nm in r.params if r.status[nm] == "ok")
    low = r.law.param(ok).bounds[0]
    assert estimate_with_interval(r, ok, "1.23", (low, math.inf)) == "1.23 (interval n.i.)"
    assert estimate_with_interval(r, ok, "1.23", (1.0, 1.5)) == "1.23 [1, 1.5]"
