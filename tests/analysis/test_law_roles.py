"""Issue 61 item 3: a law declares which parameter is its penalty, which is its kink's location
and how it gives D_crit(W); the verdicts, the kink's reach and the report ask the law, so a kink
law whose parameters are named otherwise gets the same tests as the paper's."""
import numpy as np
import pytest

from depthdelusion.analysis import Roles, fit, register_law
from depthdelusion.analysis.laws import get_law, kappa_ln_w, shape_kind, signed_penalty
from depthdelusion.analysis.report.results import derived_quantities_blocked
from depthdelusion.analysis.report.shape import critical_depth
from depthdelusion.analysis.report.tables import PAPER_QUANTITIES
from depthdelusion.analysis.report.verdict import is_architecture_law, penalty_verdicts

from .test_laws_and_fitting import TRUE, synthetic_runs

RENAMED = "kink_with_unusual_names"


def _renamed(x, A, size_exp, strength, slope, gamma, E):
    excess = np.maximum(0.0, x.D - slope * np.log(x.W))
    return A * x.N ** -size_exp + strength * excess * x.W ** -gamma + E


register_law(_renamed, name=RENAMED, shape="kink", replace=True,
             params={"A": (10.0, 1e4, "log"), "size_exp": (0.05, 0.6), "strength": (0.01, 1.0, "log"),
                     "slope": (1.0, 4.0), "gamma": (0.0, 0.8), "E": (0.5, 2.5)},
             roles=Roles(penalty="strength", kink="slope", capacity_exponent="size_exp",
                         d_crit=lambda W, slope: slope * np.log(W), d_crit_text="{slope:.3g}·ln W"),
             formula="A·N^−size_exp + strength·max(0, D − slope·ln W)·W^−γ + E")


@pytest.fixture(scope="module")
def fits():
    runs = synthetic_runs(noise=0.002)  # the paper's law at κ = 2.5, λ = 0.1
    return runs, {RENAMED: fit(runs, RENAMED, bootstrap=0, leave_one_out=False),
                  "kaplan": fit(runs, "kaplan", bootstrap=0, leave_one_out=False)}


def test_a_renamed_kink_law_gets_the_penalty_test_with_its_kink_location_as_the_nuisance(fits):
    runs, laws = fits
    f = laws[RENAMED]
    assert abs(f.params["slope"] - TRUE["kappa"]) < 0.3
    assert shape_kind(f.law) == "kink" and is_architecture_law(f)
    (v,) = penalty_verdicts(laws, runs, replicates=0)
    # Davies' bound along the profile of the declared kink location (not χ̄², "no profile of kappa")
    assert v.law == RENAMED and v.baseline == "kaplan" and v.test.method == "Davies bound", v.test
    assert v.significant and v.answer == "yes"


def test_a_renamed_kink_law_gives_its_d_crit_and_where_the_kink_acts(fits):
    runs, laws = fits
    f = laws[RENAMED]
    slope = f.params["slope"]
    W = np.asarray(runs.width, float)
    assert np.allclose(critical_depth(f, W), slope * np.log(W))
    (v,) = penalty_verdicts(laws, runs, replicates=0)
    past = np.asarray(runs.depth, float) > slope * np.log(W)
    assert v.reach.location == f"D_crit = {slope:.3g}·ln W"
    assert v.reach.past_rows == int(past.sum()) > 0
    assert f"Kink reach (D_crit = {slope:.3g}·ln W)" in v.sentence()
    # the parameters D_crit is derived from are the declared ones
    assert derived_quantities_blocked(f) is None
    assert get_law(RENAMED).d_crit_params == ("slope",)
    assert get_law(RENAMED).critical_depth_formula() == "D_crit = slope·ln W"


def test_the_signed_penalty_frees_the_declared_penalty():
    law = signed_penalty(RENAMED)
    assert law.param("strength").bounds == (-np.inf, np.inf) and not law.param("strength").log


def test_roles_must_name_parameters_and_a_kink_law_must_declare_its_critical_depth():
    params = {"E": (1.0, 2.0), "strength": (0.01, 1.0, "log"), "slope": (1.0, 4.0)}

    def law(x, E, strength, slope):
        return E + strength * np.maximum(0.0, x.D - slope * np.log(x.W))

    with pytest.raises(ValueError, match="penalty='lam' is not one of its parameters"):
        register_law(law, name="roles_bad_penalty", params=params, roles=Roles(penalty="lam"))
    with pytest.raises(ValueError, match="d_crit takes kappa, not among its parameters"):
        register_law(law, name="roles_bad_d_crit", params=params,
                     roles=Roles(penalty="strength", d_crit=lambda W, kappa: kappa * np.log(W)))
    with pytest.raises(ValueError, match="a shape='kink' law declares its penalty"):
        register_law(law, name="roles_no_d_crit", params=params, shape="kink", roles=Roles(penalty="strength"))


def test_the_paper_comparison_asks_each_law_its_roles_not_its_parameter_names():
    def law(x, E, strength, kappa, shrink):
        return E + strength * np.maximum(0.0, x.D - kappa * np.log(x.W)) * x.W ** -shrink

    register_law(law, name="roles_paper_rows", replace=True, shape="kink",
                 params={"E": (1.0, 2.0), "strength": (0.01, 1.0, "log"), "kappa": (1.0, 4.0), "shrink": (0.0, 0.8)},
                 roles=Roles(penalty="strength", kink="kappa", width_exponent="shrink", d_crit=kappa_ln_w))
    rows = {key: estimate(get_law("roles_paper_rows")) for _, key, estimate in PAPER_QUANTITIES}
    assert rows == {"persistence_exponent": "", "kappa": "kappa", "alpha": "", "lam": "strength", "gamma": "shrink"}
    # depth_delusion_power's kink is c of D_crit = c·W^p: not the paper's κ, whose row it leaves empty
    power = {key: estimate(get_law("depth_delusion_power")) for _, key, estimate in PAPER_QUANTITIES}
    assert power == {"persistence_exponent": "p", "kappa": "", "alpha": "alpha", "lam": "lam", "gamma": "gamma"}
    # the capacity exponent is the declared one, whatever its name (size_exp here)
    renamed = {key: estimate(get_law(RENAMED)) for _, key, estimate in PAPER_QUANTITIES}
    assert renamed == {"persistence_exponent": "", "kappa": "", "alpha": "size_exp", "lam": "strength", "gamma": ""}
    with pytest.raises(ValueError, match="width_exponent='gamma' is not one of its parameters"):
        register_law(law, name="roles_bad_width_exponent", params={"E": (1.0, 2.0), "strength": (0.01, 1.0),
                                                                   "kappa": (1.0, 4.0), "shrink": (0.0, 0.8)},
                     roles=Roles(penalty="strength", width_exponent="gamma"))


def test_the_report_gives_the_paper_s_kappa_beside_a_kink_only_where_the_law_s_critical_depth_is_kappa_ln_w():
    """The first paragraph's "the paper reports κ = 2.43" follows the law's roles, not the kink's
    name: said of the paper's law; not of the renamed law (strength, slope), nor of a kink named
    kappa whose critical depth is a power of W, nor of one that shares a name with another of the
    paper's numbers. A kink parameter without a doc is called the kink location."""
    from depthdelusion.analysis.report.markdown import _kink_locations

    def power(x, E, strength, kappa):
        return E + strength * np.maximum(0.0, x.D - kappa * np.sqrt(x.W))

    def gamma_kink(x, E, strength, gamma):
        return E + strength * np.maximum(0.0, x.D - gamma * np.log(x.W))

    params = {"E": (1.0, 2.0), "strength": (0.01, 1.0, "log")}
    register_law(power, name="roles_kappa_power", replace=True, shape="kink", params={**params, "kappa": (1.0, 4.0)},
                 roles=Roles(penalty="strength", kink="kappa", d_crit=lambda W, kappa: kappa * np.sqrt(W),
                             d_crit_text="{kappa:.3g}·W^0.5"))
    register_law(gamma_kink, name="roles_gamma_kink", replace=True, shape="kink", params={**params, "gamma": (1.0, 4.0)},
                 roles=Roles(penalty="strength", kink="gamma", d_crit=lambda W, gamma: gamma * np.log(W),
                             d_crit_text="{gamma:.3g}·ln W"))
    said = {name: _kink_locations(get_law(name), ["2.5 [2.4, 2.6] (all runs pooled, total N)"])
            for name in ("depth_delusion", RENAMED, "roles_kappa_power", "roles_gamma_kink")}
    assert said["depth_delusion"].endswith("(95% profile-likelihood intervals); the paper reports κ = 2.43. ")
    # its parameters have no doc to name the kink by
    assert said[RENAMED].startswith("Where strength is significant, the kink location is slope = 2.5 [2.4, 2.6]")
    for name in (RENAMED, "roles_kappa_power", "roles_gamma_kink"):
        assert "the paper reports" not in said[name], said[name]
