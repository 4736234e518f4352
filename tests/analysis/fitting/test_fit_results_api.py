"""The results API people expect (statsmodels / lmfit names), and parameters at a bound or not
identified flagged as such instead of printed as estimates."""
import dataclasses
import math
import warnings

import numpy as np
import pytest

from depthdelusion.analysis import fit
from depthdelusion.analysis.fitting.result import parameter_status

from .test_fit_engine import kaplan_runs
from ..test_laws_and_fitting import synthetic_runs


def assert_same_intervals(got: dict, expected: dict):
    """{name: (lo, hi)} equal to rounding (pytest.approx takes no nested dicts since pytest 9.2)."""
    assert list(got) == list(expected)
    for name, interval in expected.items():
        assert got[name] == pytest.approx(interval), name


@pytest.fixture(scope="module")
def kaplan_fit():
    return fit(synthetic_runs(), "kaplan", bootstrap=100, seed=0)


def test_params_bse_cov_and_intervals_by_method(kaplan_fit):
    r = kaplan_fit
    assert list(r.bse) == list(r.params)
    assert np.allclose(np.diag(r.cov), [r.bse[p] ** 2 for p in r.params])
    assert_same_intervals(r.conf_int(method="wald"), r.ci_jacobian)
    assert r.conf_int(method="profile") == r.ci_profile
    boot = r.conf_int(method="bootstrap")
    assert_same_intervals(boot, r.ci_bootstrap)
    for name in r.params:  # a 99% interval contains the 95% one, for every method
        for method in ("wald", "profile", "bootstrap"):
            lo95, hi95 = r.conf_int(0.05, method)[name]
            lo99, hi99 = r.conf_int(0.01, method)[name]
            assert lo99 <= lo95 + 1e-12 and hi99 >= hi95 - 1e-12, (name, method)
    with pytest.raises(ValueError, match="method must be"):
        r.conf_int(method="jackknife")
    frame = r.to_frame()
    assert list(frame.index) == list(r.params) and list(frame["status"]) == list(r.status.values())
    assert np.allclose(r.predict(synthetic_runs()), r.predicted)


DERIVED = ("residuals", "rss", "r2", "rmse", "aic", "aicc", "bic", "loo_rmse")


def test_loss_statistics_are_views_computed_from_the_fit_and_cannot_be_set(kaplan_fit):
    """RSS, R², RMSE, AIC, AICc, BIC and the leave-one-out RMSE follow from the observed and
    predicted losses, n and k, exactly as the engine computed them when they were stored."""
    r = kaplan_fit
    y, resid = r.observed, r.observed - r.predicted
    rss, n, big_k = float(resid @ resid), len(y), r.k + 1
    loglik_term = n * math.log(rss / n)
    assert np.array_equal(r.residuals, resid)
    assert r.rss == rss and r.rmse == math.sqrt(rss / n)
    assert r.r2 == 1 - rss / float(((y - y.mean()) ** 2).sum())
    assert r.aic == loglik_term + 2 * big_k and r.bic == loglik_term + big_k * math.log(n)
    assert r.aicc == r.aic + 2 * big_k * (big_k + 1) / (n - big_k - 1)
    loo = r.loo_residuals[np.isfinite(r.loo_residuals)]
    assert len(loo) and r.loo_rmse == float(np.sqrt(np.mean(loo ** 2)))
    assert {k: r.to_dict()[k] for k in ("rss", "aic")} == {"rss": r.rss, "aic": r.aic}
    for name in DERIVED:  # read-only: they follow from the fields
        assert name not in {f.name for f in dataclasses.fields(r)}
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(r, name, 0.0)
    for field in dataclasses.fields(r):  # a result is built once: no field is set after it
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(r, field.name, getattr(r, field.name))
    assert r.rss == rss
    moved = dataclasses.replace(r, predicted=r.predicted + 0.01)  # another fit's views are its own
    assert moved.rss == pytest.approx(float((resid - 0.01) @ (resid - 0.01)), rel=1e-12)
    assert r.rss == rss


def test_profile_intervals_skipped_by_a_fit_are_computed_on_request():
    runs = synthetic_runs()
    full = fit(runs, "kaplan", bootstrap=0, profile=True)
    lazy = fit(runs, "kaplan", bootstrap=0, profile=False)
    assert lazy.ci_profile is None
    assert_same_intervals(lazy.conf_int(method="profile"), full.ci_profile)


def test_a_parameter_at_its_bound_is_flagged_in_the_summary_and_never_printed_as_an_estimate():
    runs = kaplan_runs(np.geomspace(1e7, 1e10, 20), E=-0.4, A=60.0, alpha=0.12)
    r = fit(runs, "kaplan", bootstrap=0)
    assert r.status["E"] == "at_bound" and parameter_status(r, "A") in ("ok", "not_identified")
    row = next(line for line in r.summary().splitlines() if line.startswith("E "))
    assert "at bound 0" in row
    assert r.to_dict()["status"]["E"] == "at_bound"


def test_a_parameter_the_data_do_not_constrain_is_not_identified_and_no_warning_comes_out():
    # every run shallower than kappa*ln W: the depth penalty is inactive, lambda unconstrained
    runs = synthetic_runs()
    keep = runs.depth <= 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = fit(runs.subset(keep), "depth_delusion", bootstrap=0, profile=False)
    assert "not_identified" in r.status.values()
    for name, status in r.status.items():
        row = next(line for line in r.summary().splitlines() if line.split()[:1] == [name])
        if status == "not_identified":
            assert row.split()[1] == "n.i."


def chinchilla_fit():
    import pandas as pd

    rng = np.random.default_rng(0)
    N, T = 10 ** rng.uniform(7, 10, 60), 10 ** rng.uniform(8, 11, 60)
    loss = 1.82 + 482 * N ** -0.3478 + 2085 * T ** -0.3658 + 0.01 * rng.standard_normal(60)
    return fit(pd.DataFrame({"params": N, "tokens": T, "loss": loss}), "chinchilla", bootstrap=0,
               profile=False, leave_one_out=False)


def test_predict_takes_a_table_without_a_loss_column_and_named_inputs():
    import pandas as pd

    r = chinchilla_fit()
    truth = 1.82 + 482 * 1e9 ** -0.3478 + 2085 * 2e10 ** -0.3658
    for got in (r.predict(pd.DataFrame({"params": [1e9], "tokens": [2e10]})),
                r.predict([{"params": 1e9, "tokens": 2e10}]), r.predict(params=1e9, tokens=2e10)):
        assert float(np.ravel(got)[0]) == pytest.approx(truth, abs=0.02)
    with pytest.raises(ValueError, match="unknown input"):
        r.predict(parms=1e9)


def test_predict_refuses_an_input_the_law_needs_and_was_not_given():
    """A missing column made every prediction NaN; now the error names it and the law's columns."""
    import pandas as pd

    r = chinchilla_fit()
    need = r"law 'chinchilla' reads params, tokens; tokens is missing"
    with pytest.raises(ValueError, match=need + " for every row"):
        r.predict(params=1e9)
    with pytest.raises(ValueError, match=need + " for every row"):
        r.predict(pd.DataFrame({"params": [1e9, 2e9]}))
    with pytest.raises(ValueError, match=need + r" for 1 of 2 rows \(row 2\)"):
        r.predict([{"params": 1e9, "tokens": 2e10}, {"params": 2e9, "tokens": ""}])
    with pytest.raises(ValueError, match="params, tokens are missing"):
        r.predict_range(pd.DataFrame({"depth": [4]}))
    assert np.isfinite(r.predict(params=1e9, tokens=2e10)).all()
