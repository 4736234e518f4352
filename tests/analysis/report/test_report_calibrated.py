"""The design cells rechecked by bootstrap (analysis/report/calibrated.py), on the paper's runs:
the non-embedding cell the design table calls 'Yes' on Davies' bound is retested by the
parametric bootstrap and the kink against the smooth law, and the large_scale cell the rule sets
aside is described with its limits."""
import pytest

from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.analysis.report.calibrated import calibrated_cells
from depthdelusion.analysis.report.contents import exceeding
from depthdelusion.analysis.report.consistency import with_param_convention
from depthdelusion.analysis.report.markdown import calibrated_reading
from depthdelusion.analysis.report.results import design_forms, fit_form
from depthdelusion.analysis.report.verdict import penalty_verdict, shape_variation
from depthdelusion.analysis.table.load import load_runs

QUICK = FitOptions(bootstrap=0, leave_one_out=False)
CELLS = ("all runs, group offsets", "large_scale alone, size-class offsets")


def _matrix(forms):
    """The design matrix of depth_delusion in two cells, non-embedding N (``design_matrix``'s fits)."""
    out = {}
    for label, sub, offsets, caveat in forms:
        r, _ = with_param_convention(sub, "non_embedding")
        lf = fit_form(r, "depth_delusion", QUICK, offsets)  # profiled, as design_matrix does
        bf = fit_form(r, "kaplan", QUICK.without_intervals(), offsets)
        out[(label, "non_embedding")] = (penalty_verdict(lf, bf, shape_variation(r)), lf, caveat)
    return out


@pytest.mark.slow  # fits the paper's forms and bootstraps them (about a minute)
def test_a_bound_yes_is_retested_and_an_uninformative_kink_is_described_with_its_limits():
    forms = [f for f in design_forms(load_runs("paper")) if f[0] in CELLS]
    matrix = _matrix(forms)
    main, large = calibrated_cells(forms, matrix, "depth_delusion", FitOptions(), 19,
                                   ["shape_quadratic"], fit_form)
    assert (main.form, main.kind, large.kind) == (CELLS[0], "calibrated", "described")
    assert main.bound.test.method == "Davies bound"
    pen = main.penalty.test
    assert pen.method == "parametric bootstrap" and pen.replicates == 19
    assert pen.lr == pytest.approx(19.4, abs=0.1) and exceeding(pen) == round(pen.p * 20) - 1
    # the smooth law fits better than the kink where the penalty is significant
    assert main.smooth.rss == pytest.approx(0.0992, abs=5e-4) and main.kink.rss == pytest.approx(0.1057, abs=5e-4)
    assert main.kink.aicc - main.smooth.aicc == pytest.approx(5.7, abs=0.2) and not main.critical.kink_wins
    assert "smooth shape effect, not a critical depth" in calibrated_reading(main)
    # large_scale within size classes: the kink fits far better, on too few runs for a verdict
    assert large.kink_lr == pytest.approx(17.6, abs=0.1) and large.penalty is None
    assert large.kink.all_params["kappa"] == pytest.approx(5.75, abs=0.05)
    assert "one run per shape" in large.limits and "token budgets unknown for 12 of 12 runs" in large.limits
    assert "n − K − 1 = 2 ≤ 5" in large.limits
    assert "Described, not a verdict" in calibrated_reading(large)
