"""Issue 63 item 4: a kink law's output says which shapes and rows its penalty touches, and says
in the verdict when no three widths have shapes on both sides of D_crit."""
import warnings

import numpy as np

from depthdelusion.analysis.commands import _summary
from depthdelusion.analysis.fitting.kink_reach import kink_reach
from depthdelusion.analysis.fitting.lr_test import LRTest
from depthdelusion.analysis.laws import get_law
from depthdelusion.analysis.report.verdict import PenaltyVerdict

# κ = 2: D_crit(512) = 12.5, D_crit(1024) = 13.9, D_crit(4096) = 16.6
DEPTH = [4, 8, 16, 4, 16, 32, 8, 48, 48]
WIDTH = [512, 512, 512, 1024, 1024, 1024, 4096, 4096, 4096]


def test_the_reach_counts_shapes_and_rows_past_d_crit_and_widths_on_both_sides():
    reach = kink_reach("depth_delusion", {"kappa": 2.0, "lam": 0.1}, DEPTH, WIDTH)
    # 48×4096 twice: two rows, one shape; the most-past shape first (D − D_crit: 31.4, 18.1, 3.5,
    # 2.1 layers)
    assert reach.past_shapes == ("48L×4096", "32L×1024", "16L×512", "16L×1024")
    assert (reach.n_shapes, reach.n_rows, reach.past_rows) == (8, 9, 5)
    assert (reach.widths_both_sides, reach.n_widths) == (3, 3) and reach.tested_within_widths
    assert reach.untested() == ""
    assert reach.sentence().startswith("Kink reach (D_crit = 2·ln W): 4 of 8 shapes (5 of 9 "
                                       "rows) have D > D_crit(W): 48L×4096, 32L×1024")


def test_a_row_on_the_kink_s_break_is_not_past_it_whichever_way_the_last_bit_falls():
    """The search puts κ on a row's break (D = κ·ln W, search.scan_breaks), where D − D_crit is
    a rounding error of either sign: that row pays nothing and is not past D_crit."""
    on_break = 16 / np.log(1024)
    for kappa in (np.nextafter(on_break, 0), on_break, np.nextafter(on_break, 1)):
        reach = kink_reach("depth_delusion", {"kappa": kappa, "lam": 0.1}, DEPTH, WIDTH)
        assert "16L×1024" not in reach.past_shapes and reach.past_rows == 4, kappa


def test_a_kink_past_only_the_widest_shapes_is_not_tested_within_widths():
    reach = kink_reach("depth_delusion", {"kappa": 3.0, "lam": 0.1}, DEPTH, WIDTH)  # D_crit(1024) = 20.8: only 32L and 48L
    assert reach.widths_both_sides == 2 and not reach.tested_within_widths
    assert "the kink is not tested within widths (only 2 of 3 widths" in reach.untested()
    many = kink_reach("depth_delusion_power", {"c": 1.0, "p": 0.0, "lam": 0.1}, list(range(2, 14)), [64] * 12)  # D_crit = 1
    assert "…and 4 more" in many.sentence() and "12 of 12 shapes" in many.sentence()
    assert many.sentence().startswith("Kink reach (D_crit = 1·W^0)")
    assert kink_reach("kaplan", {"A": 1.0}, DEPTH, WIDTH) is None  # no critical depth: no reach
    with warnings.catch_warnings():  # D_crit = 0: every shape past it, and no division by it
        warnings.simplefilter("error")
        flat = kink_reach("depth_delusion", {"kappa": 0.0}, DEPTH, WIDTH)
    assert len(flat.past_shapes) == 8 and flat.past_shapes[0] == "48L×4096"


def test_the_verdict_line_says_the_kink_is_not_tested_within_widths():
    test = LRTest("kaplan", "depth_delusion", 20.0, 0.01, "parametric bootstrap", 99, 0)
    v = PenaltyVerdict("depth_delusion", "kaplan", "yes", -17.0, -12.0, 20.0, 0.01,
                       "the penalty earns its extra parameters", test,
                       reach=kink_reach("depth_delusion", {"kappa": 3.0}, DEPTH, WIDTH))
    head = v.sentence().split(". (")[0]
    assert head.endswith("what it fits may be a break across widths or model sizes")
    assert "Kink reach (D_crit = 3·ln W): 2 of 8 shapes (3 of 9 rows)" in v.sentence()


class _Fit:  # what fit's summary reads of a result
    law = get_law("depth_delusion")
    all_params = {"kappa": 2.0, "lam": 0.1}

    def summary(self):
        return "the summary"


class _Runs:
    depth, width = np.array(DEPTH, float), np.array(WIDTH, float)


def test_fit_summary_of_a_kink_law_ends_with_its_reach():
    text = _summary(_Fit(), _Runs())
    assert text.startswith("the summary\nKink reach (D_crit = 2·ln W): 4 of 8 shapes")
    kaplan = _Fit()
    kaplan.law = get_law("kaplan")
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


def test_a_kink_past_only_the_largest_models_says_a_size_break_splits_alike():
    params = [12 * d * w * w for d, w in zip(DEPTH, WIDTH)]  # N = 12·D·W²: 48L×4096 the largest
    reach = kink_reach("depth_delusion", {"kappa": 5.0}, DEPTH, WIDTH, params)  # D_crit(4096) = 41.6: only 48L×4096
    assert reach.past_shapes == ("48L×4096",) and reach.size_break == 12 * 48 * 4096 ** 2
    assert "The rows past D_crit are the 2 largest models (N ≥ 9.66e+09): a break in model size" \
        in reach.sentence()
    mixed = kink_reach("depth_delusion", {"kappa": 2.0}, DEPTH, WIDTH, params)  # 16L×512 is past, 8L×4096 is not
    assert "largest models" not in mixed.sentence()


def test_the_report_s_first_paragraph_says_which_yes_rests_on_an_untested_kink():
    from depthdelusion.analysis.report.markdown import _conclusions

    test = LRTest("kaplan", "depth_delusion", 20.0, 0.01, "parametric bootstrap", 99, 0)
    yes = dict(answer="yes", d_aicc=-17.0, d_bic=-12.0, lr=20.0, p_value=0.01, test=test)
    untested = PenaltyVerdict("depth_delusion", "kaplan", reach=kink_reach("depth_delusion", {"kappa": 3.0}, DEPTH, WIDTH), **yes)
    tested = PenaltyVerdict("depth_delusion", "kaplan", reach=kink_reach("depth_delusion", {"kappa": 2.0}, DEPTH, WIDTH), **yes)
    matrix = {("all runs pooled", "total"): (untested, None, ""),
              ("all runs pooled", "non_embedding"): (tested, None, "")}
    (text,) = _conclusions(matrix, "depth_delusion", "all runs pooled", "yes")
    assert ("For all runs pooled (total N), the kink is not tested within widths (fewer than 3 widths "
            "have shapes on both sides of the fitted D_crit)") in text
    assert "non-embedding N), the kink is not tested" not in text
