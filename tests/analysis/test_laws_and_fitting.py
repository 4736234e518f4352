import json

import numpy as np
import pytest

from depthdelusion.analysis import Runs, fit, get_law, list_laws, register_law
from depthdelusion.analysis.laws import LawInputs, _REGISTRY

from .conftest import params_of

TRUE = {"A": 30.0, "alpha": 0.15, "lam": 0.1, "kappa": 2.5, "gamma": 0.2, "E": 1.5}


def synthetic_runs(values=TRUE, law="depth_delusion", noise=0.004, seed=1, depths=(2, 4, 8, 16, 24, 32, 48, 64),
                   widths=(256, 512, 1024, 2048), tokens=None):
    D, W = np.meshgrid(depths, widths)
    D, W = D.ravel(), W.ravel()
    N = np.array([params_of(d, w) for d, w in zip(D, W)], float)
    T = np.full(len(D), np.nan) if tokens is None else np.asarray(tokens, float)
    clean = get_law(law)(LawInputs.of(D, W, N, T), **values)
    loss = clean + noise * np.random.default_rng(seed).standard_normal(len(D))
    n = len(D)
    return Runs(D, W, N, loss, T, np.full(n, np.nan), ["g"] * n, [f"{d}x{w}" for d, w in zip(D, W)])


def test_registry_has_the_named_laws_with_docs():
    names = {law.name for law in list_laws()}
    assert {"depth_delusion", "depth_delusion_relative", "depth_delusion_power", "kaplan", "chinchilla"} <= names
    for name in names:  # the built-in ones (laws other tests register have source "user")
        law = get_law(name)
        if law.source == "user":
            continue
        assert law.formula and law.doc and all(p.init[0] <= p.init[1] for p in law.params)


def test_unknown_law_lists_known_ones():
    with pytest.raises(ValueError, match=r"unknown law 'nope'; known laws: .*depth_delusion.*kaplan"):
        get_law("nope")


def test_lm_recovers_depth_delusion_parameters_within_intervals():
    r = fit(synthetic_runs(), "depth_delusion", bootstrap=100, seed=3)
    for name in ("kappa", "alpha", "gamma"):
        lo, hi = r.ci_jacobian[name]
        assert lo <= TRUE[name] <= hi, (name, r.params[name], (lo, hi))
    assert abs(r.params["kappa"] - 2.5) < 0.3
    assert r.r2 > 0.99 and r.rmse < 0.01
    assert r.n_bootstrap + r.n_bootstrap_failed == 100
    assert r.correlation.shape == (6, 6) and np.allclose(np.diag(r.correlation), 1)
    assert np.isfinite(r.loo_rmse) and r.loo_rmse >= r.rmse * 0.9
    assert np.allclose(r.predict(synthetic_runs()), r.predicted)
    text = r.summary()
    assert "kappa" in text and "95% CI bootstrap (100)" in text and "AIC" in text
    assert "95% CI Jacobian" in text and "95% CI profile" in text


def test_bootstrap_is_seeded():
    runs = synthetic_runs()
    a = fit(runs, "kaplan", bootstrap=30, seed=7, leave_one_out=False)
    b = fit(runs, "kaplan", bootstrap=30, seed=7, leave_one_out=False)
    c = fit(runs, "kaplan", bootstrap=30, seed=8, leave_one_out=False)
    assert np.array_equal(a.bootstrap_params, b.bootstrap_params)
    assert not np.array_equal(a.bootstrap_params, c.bootstrap_params)


def test_huber_fit_recovers_kappa():
    r = fit(synthetic_runs(), "depth_delusion", method="huber", bootstrap=20, seed=0)
    assert abs(r.params["kappa"] - 2.5) < 0.4 and r.method == "huber"


def test_information_criteria_prefer_the_true_law():
    runs = synthetic_runs()
    dd, kaplan = fit(runs, "depth_delusion", bootstrap=0), fit(runs, "kaplan", bootstrap=0)
    assert dd.aic < kaplan.aic - 10 and dd.bic < kaplan.bic - 10 and dd.loo_rmse < kaplan.loo_rmse


def test_inactive_penalty_is_flagged_not_hidden():
    # Every run shallower than D_crit: λ, κ and γ have nothing to fit.
    runs = synthetic_runs(depths=(2, 3, 4, 5), widths=(512, 1024, 2048, 4096, 8192))
    r = fit(runs, "depth_delusion", bootstrap=20)
    text = " ".join(r.flags)
    assert "not identifiable" in text or "collapsed" in text or "spans zero" in text
    assert r.flags and "Identifiability flags:\n  !" in r.summary()


def test_user_registered_plain_function_law_is_fitted():
    def shifted_power(x, E, A, alpha):
        return E + A * (x.N / 1e6) ** -alpha

    try:
        register_law(shifted_power, params={"E": (1.0, 2.0), "A": (0.5, 20, "log"), "alpha": (0.1, 0.9)},
                     formula="E + A·(N/1e6)^−α")
        runs = synthetic_runs({"E": 1.7, "A": 4.0, "alpha": 0.3}, law="shifted_power", noise=0.002)
        r = fit(runs, "shifted_power", bootstrap=0)
        assert abs(r.params["alpha"] - 0.3) < 0.03 and abs(r.params["E"] - 1.7) < 0.05
    finally:
        _REGISTRY.pop("shifted_power", None)


def test_bad_parameter_spec_is_rejected():
    with pytest.raises(ValueError, match="does not accept parameter"):
        register_law(lambda x, E: E, name="bad_law", params={"E": (1, 2), "Q": (1, 2)})


def test_token_term_is_dropped_for_constant_tokens_and_used_when_they_vary():
    runs = synthetic_runs(tokens=np.full(32, 6.4e9))
    r = fit(runs, "depth_delusion", bootstrap=0, leave_one_out=False, profile=False)
    assert r.fixed["B"] == 0 and any("token term dropped" in n for n in r.notes)
    with pytest.raises(ValueError, match="needs per-run token counts that vary"):
        fit(runs, "chinchilla")
    tokens = np.geomspace(1e9, 1e11, 32)
    varied = synthetic_runs({**TRUE, "B": 400.0, "beta": 0.3}, tokens=tokens)
    r2 = fit(varied, "depth_delusion", bootstrap=0, leave_one_out=False, profile=False)
    assert "B" in r2.params and abs(r2.params["beta"] - 0.3) < 0.1


def test_fixed_parameters_and_json():
    r = fit(synthetic_runs(), "depth_delusion", bootstrap=10, fixed={"kappa": 2.43})
    assert "kappa" not in r.params and r.fixed["kappa"] == 2.43
    data = json.loads(r.to_json())
    assert data["law"] == "depth_delusion" and data["fixed"]["kappa"] == 2.43
    with pytest.raises(ValueError, match="has no parameter 'kapa'"):
        fit(synthetic_runs(), "depth_delusion", fixed={"kapa": 1.0})


def test_too_few_runs_is_a_clear_error():
    runs = synthetic_runs().subset(np.arange(5))
    with pytest.raises(ValueError, match="needs more than 7 runs, got 5"):
        fit(runs, "depth_delusion")


def test_ridge_of_equally_good_fits_is_flagged_and_the_choice_is_the_first_start():
    # Only the product a·b is determined: every start ends somewhere else on the ridge a·b = const.
    def product_law(x, E, a, b):
        return E + a * b * x.N ** -0.2

    register_law(product_law, params={"E": (1.0, 2.0), "a": (0.5, 50, "log"), "b": (0.5, 50, "log")})
    try:
        runs = synthetic_runs(values={"E": 1.5, "a": 5.0, "b": 6.0}, law="product_law", noise=0.002)
        r = fit(runs, "product_law", bootstrap=0, leave_one_out=False)
        again = fit(runs, "product_law", bootstrap=0, leave_one_out=False)
    finally:
        _REGISTRY.pop("product_law", None)
    assert r.starts.ridge_params == ["a", "b"]
    assert any("a, b: starts that reach the chosen optimum's objective" in f and "ridge" in f for f in r.flags)
    assert abs(r.params["a"] * r.params["b"] - 30.0) < 1.0
    assert r.params == again.params


def test_identified_fit_reports_no_ridge():
    r = fit(synthetic_runs(), "kaplan", bootstrap=0, leave_one_out=False)
    assert r.starts.ridge_params == [] and not any("ridge" in f for f in r.flags)


def test_the_inverse_depth_law_is_registered_with_its_source():
    law = get_law("inverse_depth")
    assert "2602.05970" in law.source and "held_out_validation.py @ 07360e3" in law.source
    assert law.param_names == ["E", "Aw", "aw", "Ad", "ad", "B", "beta"] and law.needs_tokens
    x = LawInputs.of(D=[24.0], W=[2048.0], N=[1e9], T=[1e11])
    value = law(x, E=1.7, Aw=8.0, aw=0.5, Ad=1.2, ad=0.9, B=400.0, beta=0.3)
    assert value == pytest.approx(1.7 + 8.0 * 2048 ** -0.5 + 1.2 * 24 ** -0.9 + 400.0 * 1e11 ** -0.3)


def test_a_power_of_a_repeating_column_is_taken_once_per_distinct_value_to_the_same_bits():
    """LawInputs.power: where a column repeats (a run's checkpoints share D, W and N) the power is
    taken per distinct value and spread back; every built-in law's values are then the plain
    expression's, bit for bit, at a scalar and at (M, 1) exponents; a column without repeats (or
    an exponent per row) is powered as it is."""
    from depthdelusion.analysis.law_types import LawInputs
    from depthdelusion.analysis.laws import list_laws

    rng = np.random.default_rng(3)
    D = np.repeat(rng.integers(2, 80, 25).astype(float), 8)
    W = np.repeat(rng.integers(64, 4096, 25).astype(float), 8)
    T = np.tile(np.geomspace(1e9, 1e11, 8), 25)
    x = LawInputs(D, W, 12 * D * W ** 2, T)
    e = rng.uniform(0.05, 0.7, (40, 1))
    for column in "DWNT":
        plain = getattr(x, column) ** -e
        assert np.array_equal(x.power(column, -e), plain) and x._distinct[column] is not None
        assert np.array_equal(x.power(column, -0.3), getattr(x, column) ** -0.3)
    per_row = rng.uniform(0.1, 0.5, (40, len(D)))
    assert np.array_equal(x.power("W", -per_row), W ** -per_row)
    distinct = LawInputs(*(rng.uniform(1, 100, 30) for _ in range(4)))
    assert np.array_equal(distinct.power("W", -e), distinct.W ** -e) and distinct._distinct["W"] is None
    for law in list_laws():
        kw = {p.name: rng.uniform(0.1, 0.6, (40, 1)) for p in law.params}
        plain = LawInputs(D, W, x.N, T)
        plain._distinct.update(dict.fromkeys("DWNT"))   # every column powered as it is
        with np.errstate(all="ignore"):
            assert np.array_equal(law(x, **kw), law(plain, **kw), equal_nan=True), law.name
