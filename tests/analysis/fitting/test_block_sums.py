"""The one-step bootstrap of very large tables through the units' sums: clusters give the steps
of the counts expanded to rows; without clusters, random blocks of rows are drawn whole, with
the rows' bootstrap spread."""
import numpy as np
import pytest

from depthdelusion.analysis import fit
from depthdelusion.analysis.fitting import block_sums, resampling
from depthdelusion.analysis.fitting.problem import Problem
from depthdelusion.analysis.laws import LawInputs, get_law
from depthdelusion.analysis.fitting.resampling import ResamplePlan, _bootstrap_one_step, _bootstrap_weight_blocks, _OneStep

from .test_fit_scale import epoch_rows


def test_cluster_counts_are_each_stratum_s_clusters_drawn_with_replacement():
    """The cluster draw: per resample, per stratum, rng.choice of its clusters, as many as it has
    (the stream the committed cluster bootstraps were made with)."""
    number = np.repeat(np.arange(12), 5)
    clusters, strata = np.char.add("run", np.char.zfill(number.astype(str), 2)), np.where(number < 4, "a", "b")
    rng = np.random.default_rng(7)
    expected = []
    for _ in range(6):
        counts = np.bincount(rng.choice(np.arange(4), 4), minlength=12)
        counts = counts + np.bincount(rng.choice(np.arange(4, 12), 8), minlength=12)
        expected.append(counts[number])
    W = next(_bootstrap_weight_blocks(ResamplePlan(6, 7, strata, clusters), 60, block=6))
    assert np.array_equal(W, np.array(expected, float))


def _problem_and_linearisation(n: int):
    runs = epoch_rows(n, seed=1)
    problem = Problem(get_law("chinchilla"), {}, LawInputs.from_runs(runs), runs.loss, "lm")
    theta = np.array([np.log(482.0), 0.3478, np.log(2085.0), 0.3658, np.log(1.82)])[:problem.k]
    J = np.random.default_rng(2).standard_normal((n, problem.k))
    r = 0.01 * np.random.default_rng(3).standard_normal(n)
    return problem, theta, J, r


def test_clusters_summed_give_the_steps_of_their_counts_expanded_to_rows(monkeypatch):
    n = 3000
    problem, theta, J, r = _problem_and_linearisation(n)
    clusters = np.random.default_rng(4).integers(0, 40, n)
    strata = np.where(clusters < 10, "a", "b")
    plan, step = ResamplePlan(50, 9, strata, clusters), _OneStep(problem, theta, J, r)
    expanded = _bootstrap_one_step(problem, plan, step)
    monkeypatch.setattr(resampling, "BLOCK_SUMS_FROM_ROWS", n)
    summed = _bootstrap_one_step(problem, plan, step)
    np.testing.assert_allclose(summed, expanded, rtol=1e-10)


def test_random_blocks_deal_each_stratum_s_rows_into_its_share_of_near_equal_blocks(monkeypatch):
    monkeypatch.setattr(block_sums, "BLOCKS", 100)
    strata = np.repeat(["a", "b", "c"], [3000, 1000, 1])
    labels, block_strata = block_sums.random_blocks(len(strata), 0, strata)
    assert len(block_strata) == labels.max() + 1 == 75 + 25 + 1
    sizes = np.bincount(labels)
    for g, expected in (("a", 40), ("b", 40), ("c", 1)):
        assert set(sizes[block_strata == g]) == {expected}
        assert set(block_strata[labels[strata == g]]) == {g}  # a block holds one stratum's rows
    assert np.array_equal(labels, block_sums.random_blocks(len(strata), 0, strata)[0])
    assert not np.array_equal(labels, block_sums.random_blocks(len(strata), 1, strata)[0])


@pytest.mark.parametrize("seed", [0, 1])
def test_a_table_past_the_threshold_draws_blocks_with_the_rows_spread(seed, monkeypatch):
    """120,000 rows: the scheme names the blocks, and the bootstrap's spread is the Jacobian's
    standard error (the row bootstrap's, 1.00–1.01 here: over 12 seeds the block bootstrap's
    mean ratio was 0.99–1.01, its seed-to-seed SD 0.02–0.03)."""
    runs = epoch_rows(120_000, seed=3)
    r = fit(runs, "chinchilla", bootstrap=400, seed=seed, profile=False, leave_one_out=False)
    assert "dealt at random into 10,000 blocks, each drawn whole" in r.bootstrap_scheme
    for j, name in enumerate(r.param_names):
        b = r.bootstrap_params[:, j]
        sd = np.std(np.log(b) if name in r.jacobian_log else b)
        assert 0.85 < sd / r.se_theta[j] < 1.15, (name, sd / r.se_theta[j])
