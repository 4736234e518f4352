"""Issue 63 item 16: the report's text agrees with its own tables — the headline names both
criteria's best laws when they disagree, and a parameter printed "n.i." has no interval beside it
(a bootstrap of a ridge can return one value over and over: kappa [15.21, 15.21])."""
import math
from types import SimpleNamespace

from depthdelusion.analysis.laws import get_law
from depthdelusion.analysis.report.markdown import best_law_text
from depthdelusion.analysis.report.tables import paper_comparison, parameters

INF = math.inf


def _fit(name, aicc, bic):
    return SimpleNamespace(law=SimpleNamespace(name=name), aicc=aicc, bic=bic)


def test_the_headline_names_both_laws_when_aicc_and_bic_disagree():
    fits = {"kaplan": _fit("kaplan", 10.0, 40.0), "shape_quadratic": _fit("shape_quadratic", 12.5, 16.4)}
    assert best_law_text(fits) == (" The criteria disagree: best law by AICc: kaplan (AICc 2.5 below "
                                   "shape_quadratic's); by BIC: shape_quadratic (BIC 23.6 below kaplan's).")
    fits["shape_quadratic"].aicc = 9.0
    assert best_law_text(fits) == " Best law by AICc and BIC: shape_quadratic."


def _ridge_fit():
    """A depth_delusion fit (its real law: the report asks the law its roles) whose κ is not
    identified (its profile open at both ends) while the bootstrap returned one value every
    time, and whose α is identified."""
    return SimpleNamespace(
        law=get_law("depth_delusion"), params={"kappa": 15.21, "alpha": 0.3},
        all_params={"kappa": 15.21, "alpha": 0.3}, at_bound=set(), starts=None, jacobian_log=set(),
        stderr={"kappa": INF, "alpha": 0.01}, r2=0.99, flags=[],
        ci_profile={"kappa": (-INF, INF), "alpha": (0.28, 0.32)},
        ci_jacobian={"kappa": (-INF, INF), "alpha": (0.28, 0.32)},
        ci_bootstrap={"kappa": (15.21, 15.21), "alpha": (0.29, 0.31)})


def _cells(table, row_key, column):
    return [row[table.columns.index(column)] for row in table.rows if row_key(row)]


def test_a_parameter_not_identified_prints_n_i_and_no_interval():
    f = _ridge_fit()
    r = SimpleNamespace(fits={"depth_delusion": f}, laws=["depth_delusion"],
                        design=SimpleNamespace(main_label="all runs"))
    comp = paper_comparison(r)
    assert _cells(comp, lambda row: row[0].startswith("κ"), "depth_delusion") == ["n.i."]
    assert _cells(comp, lambda row: row[0] == "α", "depth_delusion") == ["0.3 [0.28, 0.32]"]
    table = parameters(r)
    kappa = [row for row in table.rows if row[1] == "kappa"][0]
    assert kappa[2:] == ["n.i.", "not_identified", "n.i.", "n.i.", "n.i."]
    assert "15.2" not in " ".join(map(str, kappa))
    f.ci_profile["kappa"] = (2.5, INF)  # one end closed by the data: said, as a bound, not an interval
    assert _cells(paper_comparison(r), lambda row: row[0].startswith("κ"), "depth_delusion") == ["n.i. (≥ 2.5)"]
