"""Issue 63 item 4: a kink law's output says which shapes and rows its penalty touches, and says
in the verdict when no three widths have shapes on both sides of D_crit."""
import numpy as np

from depthdelusion.analysis.commands import _summary
from depthdelusion.analysis.fitting.kink_reach import kink_reach
from depthdelusion.analysis.fitting.lr_test import LRTest
from depthdelusion.analysis.report.verdict import PenaltyVerdict

# κ = 2: D_crit(512) = 12.5, D_crit(1024) = 13.9, D_crit(4096) = 16.6
DEPTH = [4, 8, 16, 4, 16, 32, 8, 48, 48]
WIDTH = [512, 512, 512, 1024, 1024, 1024, 4096, 4096, 4096]


def test_the_reach_counts_shapes_and_rows_past_d_crit_and_widths_on_both_sides():
    reach = kink_reach({"kappa": 2.0, "lam": 0.1}, DEPTH, WIDTH)
    # 48×4096 twice: two rows, one shape; the most-past shape first (D / D_crit: 48/16.6 = 2.9,
    # 32/13.9 = 2.3, 16/12.5 = 1.3, 16/13.9 = 1.2)
    assert reach.past_shapes == ("48L×4096", "32L×1024", "16L×512", "16L×1024")
    assert (reach.n_shapes, reach.n_rows, reach.past_rows) == (8, 9, 5)
    assert (reach.widths_both_sides, reach.n_widths) == (3, 3) and reach.tested_within_widths
    assert reach.untested() == ""
    assert reach.sentence().startswith("Kink reach (κ = 2: D_crit = κ·ln W): 4 of 8 shapes (5 of 9 "
                                       "rows) have D > D_crit(W): 48L×4096, 32L×1024")


def test_a_kink_past_only_the_widest_shapes_is_not_tested_within_widths():
    reach = kink_reach({"kappa": 3.0, "lam": 0.1}, DEPTH, WIDTH)  # D_crit(1024) = 20.8: only 32L and 48L
    assert reach.widths_both_sides == 2 and not reach.tested_within_widths
    assert "the kink is not tested within widths (only 2 of 3 widths" in reach.untested()
    many = kink_reach({"c": 1.0, "p": 0.0, "lam": 0.1}, list(range(2, 14)), [64] * 12)  # D_crit = 1
    assert "…and 4 more" in many.sentence() and "12 of 12 shapes" in many.sentence()
    assert kink_reach({"A": 1.0}, DEPTH, WIDTH) is None  # no critical depth: no reach


def test_the_verdict_line_says_the_kink_is_not_tested_within_widths():
    test = LRTest("kaplan", "depth_delusion", 20.0, 0.01, "parametric bootstrap", 99, 0)
    v = PenaltyVerdict("depth_delusion", "kaplan", "yes", -17.0, -12.0, 20.0, 0.01,
                       "the penalty earns its extra parameters", test,
                       reach=kink_reach({"kappa": 3.0}, DEPTH, WIDTH))
    head = v.sentence().split(". (")[0]
    assert head.endswith("so a break in model size fits the same rows")
    assert "Kink reach (κ = 3: D_crit = κ·ln W): 2 of 8 shapes (3 of 9 rows)" in v.sentence()


class _Fit:  # what fit's summary reads of a result
    all_params = {"kappa": 2.0, "lam": 0.1}

    def summary(self):
        return "the summary"


class _Runs:
    depth, width = np.array(DEPTH, float), np.array(WIDTH, float)


def test_fit_summary_of_a_kink_law_ends_with_its_reach():
    text = _summary(_Fit(), _Runs())
    assert text.startswith("the summary\nKink reach (κ = 2: D_crit = κ·ln W): 4 of 8 shapes")
    kaplan = _Fit()
    kaplan.all_params = {"E": 1.7, "A": 400.0, "alpha": 0.34}
    assert _summary(kaplan, _Runs()) == "the summary"


def test_fit_json_of_a_kink_law_carries_its_reach():
    from depthdelusion.analysis.commands import _json_doc

    class _JsonFit(_Fit):
        all_params = {"kappa": 3.0, "lam": 0.1}

        def json_doc(self):
            return {"law": "depth_delusion"}

    doc = _json_doc(_JsonFit(), _Runs())
    assert doc["kink_reach"]["past_shapes"] == ["48L×4096", "32L×1024"]
    assert doc["kink_reach"]["tested_within_widths"] is False and doc["law"] == "depth_delusion"
