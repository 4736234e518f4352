"""The fit at real size: starts sampled whatever the number of parameters, stages that switch
to linear-cost forms on large tables, and --bootstrap 0 resampling nothing."""
import numpy as np

from depthdelusion.analysis import Runs, fit, get_law
from depthdelusion.analysis.fitting import varpro
from depthdelusion.analysis.fitting.search import SEARCH_ROWS, start_grid
from depthdelusion.analysis.laws import LawInputs
from depthdelusion.analysis.fitting.problem import Problem

EPOCH = dict(E=1.82, A=482.0, alpha=0.3478, B=2085.0, beta=0.3658)  # Besiroglu et al. 2024


def epoch_rows(n, seed=0, groups=1):
    rng = np.random.default_rng(seed)
    N, T = 10 ** rng.uniform(7, 10, n), 10 ** rng.uniform(8, 11, n)
    g = np.arange(n) % groups
    loss = get_law("chinchilla")(LawInputs.of(1, 1, N, T), **{**EPOCH, "E": 0}) + EPOCH["E"] + 0.02 * g
    loss = loss + 0.02 * rng.standard_normal(n)
    return Runs(params=N, tokens=T, loss=loss, group=[f"f{i}" for i in g])


def test_starts_are_a_seeded_sobol_design_of_the_stated_size_with_eleven_group_offsets():
    runs = epoch_rows(110, groups=11)
    law = get_law("kaplan")
    labels = sorted(set(runs.group))
    gidx = np.array([labels.index(g) for g in runs.group])
    problem = Problem(law, {}, LawInputs.from_runs(runs), runs.loss, "lm", labels, gidx)
    assert problem.k == 13  # 11 offsets + A + alpha: a 3-point grid would have 3^13 = 1.6 M points
    grid = start_grid(problem, 3, 64, seed=0)
    assert grid.shape == (64, 13)
    lo = np.array([np.log(p.init[0]) if p.log else p.init[0] for p in problem.free])
    hi = np.array([np.log(p.init[1]) if p.log else p.init[1] for p in problem.free])
    assert np.allclose(grid[0], (lo + hi) / 2)  # the centre first
    assert np.all(grid >= lo - 1e-12) and np.all(grid <= hi + 1e-12)
    assert len(np.unique(grid[1:, 0])) == 63  # space-filling, not the 3 grid values per axis
    assert np.array_equal(grid, start_grid(problem, 3, 64, seed=0))
    assert not np.array_equal(grid, start_grid(problem, 3, 64, seed=1))
    # a grid no larger than max_starts is still the full grid
    small = Problem(law, {}, LawInputs.from_runs(runs), runs.loss, "lm")
    assert start_grid(small, 3, 64, seed=0).shape == (27, 3)


def test_group_offsets_fit_with_eleven_groups_and_a_bootstrap():
    r = fit(epoch_rows(220, groups=11), "chinchilla", bootstrap=20, group_offsets=True, profile=False)
    assert r.k == 15 and r.starts.n_starts == 64
    offsets = [r.params[f"E[f{i}]"] for i in range(11)]
    assert np.allclose(np.diff(offsets), 0.02, atol=0.02)
    assert r.n_bootstrap == 20 and "within groups" in r.bootstrap_scheme


def test_bootstrap_zero_resamples_nothing_and_leave_one_out_comes_from_the_hat_matrix():
    runs = epoch_rows(80)
    r = fit(runs, "kaplan", bootstrap=0, profile=False)
    assert r.n_bootstrap == 0 and r.ci_bootstrap is None
    assert any("hat-matrix" in n for n in r.notes)
    exact = fit(runs, "kaplan", bootstrap=0, profile=False, leave_one_out="refit")
    assert not any("hat-matrix" in n for n in exact.notes)
    # the deletion formula is the one-step refit: close to the refitted errors
    assert abs(r.loo_rmse - exact.loo_rmse) < 0.05 * exact.loo_rmse
    assert np.corrcoef(r.loo_residuals, exact.loo_residuals)[0, 1] > 0.99


def test_a_large_table_is_searched_on_a_subsample_and_bootstrapped_in_one_step():
    runs = epoch_rows(SEARCH_ROWS + 1000, seed=3)
    r = fit(runs, "chinchilla", bootstrap=200, seed=0)
    assert any(f"subsample of {varpro.SEARCH_ROWS}" in n for n in r.notes)  # the default search
    assert "variable projection" in r.search
    assert "one Gauss–Newton step" in r.bootstrap_scheme and r.ci_profile is None
    for name, true in EPOCH.items():  # the optimum on every row, near the planted law
        lo, hi = r.ci_jacobian[name]
        assert lo < r.params[name] < hi
        assert abs(r.params[name] - true) < 4 * r.stderr[name] + 1e-9, name
    # the linearised bootstrap agrees with the Jacobian's standard errors at this size
    for j, name in enumerate(r.param_names):
        sd = np.std(np.log(r.bootstrap_params[:, j]) if name in r.jacobian_log else r.bootstrap_params[:, j])
        se = r.se_theta[j]
        assert 0.75 < sd / se < 1.33, (name, sd, se)


def test_the_one_step_bootstrap_draws_the_same_resamples_and_steps_as_the_full_products():
    """Resampling counts are the bincount of rng.integers(0, n, n) (the int64 draw), and each
    resample's step solves Jᵀ W J from its k(k+1)/2 distinct entries: the full k × k products
    give the same steps within 1e-12 relative (BLAS may sum in another order)."""
    from depthdelusion.analysis.fitting.resampling import ResamplePlan, _bootstrap_weight_blocks, _OneStep
    from depthdelusion.analysis.fitting.solver import irls_weights

    n = 3001
    rng = np.random.default_rng(5)
    expected = np.array([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(20)], float)
    W = next(_bootstrap_weight_blocks(ResamplePlan(20, seed=5), n, block=20))
    assert np.array_equal(W, expected)
    runs = epoch_rows(n, seed=1)
    problem = Problem(get_law("chinchilla"), {}, LawInputs.from_runs(runs), runs.loss, "huber")
    theta = np.array([np.log(482.0), 0.3478, np.log(2085.0), 0.3658, np.log(1.82)])[:problem.k]
    J = np.random.default_rng(2).standard_normal((n, problem.k))
    r = 0.01 * np.random.default_rng(3).standard_normal(n)
    step = _OneStep(problem, theta, J, r)
    col = np.linalg.norm(J, axis=0)
    Js, omega = J / col, irls_weights(r, problem.huber, problem.overestimate_weight)
    H = np.einsum("bi,ik,il->bkl", W, Js * omega[:, None], Js)
    g = W @ (Js * (omega * r)[:, None])
    full = np.clip(theta - np.einsum("bkl,bl->bk", np.linalg.pinv(H, hermitian=True), g) / col,
                   problem.lo, problem.hi)
    np.testing.assert_allclose(step(W), full, rtol=1e-12, atol=1e-12)
