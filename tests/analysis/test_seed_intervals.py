"""Intervals over a few seeds: Student's t on a mean and Welch's t on a difference, checked
against scipy's own t-test intervals, and what a percentile bootstrap over 3 seeds misses."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from depthdelusion.analysis.seed_intervals import paired_interval, t_interval, welch_interval


def test_the_t_interval_of_three_seeds_is_scipys_one_sample_interval():
    xs = [1.51, 1.48, 1.56]
    got = t_interval(xs)
    ci = stats.ttest_1samp(xs, 0).confidence_interval(0.95)
    assert (got.lo, got.hi) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert got.estimate == pytest.approx(np.mean(xs)) and got.dof == 2


def test_the_welch_interval_is_scipys_unequal_variance_interval():
    a, b = [1.51, 1.48, 1.56], [1.40, 1.47, 1.38, 1.45]
    got = welch_interval(a, b)
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (got.lo, got.hi) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert got.estimate == pytest.approx(np.mean(a) - np.mean(b))


def test_fewer_than_two_seeds_give_no_interval():
    assert np.isnan(t_interval([1.5]).lo) and np.isnan(welch_interval([1.5], [1.4, 1.3]).hi)


def test_with_three_seeds_the_t_interval_covers_at_its_nominal_rate_and_the_bootstrap_does_not():
    rng = np.random.default_rng(0)
    draws = rng.normal(0.0, 1.0, size=(2000, 3))  # true mean 0
    t_cover = np.mean([t_interval(list(x)).lo <= 0 <= t_interval(list(x)).hi for x in draws])
    boot = np.array([[x[rng.integers(0, 3, 3)].mean() for _ in range(200)] for x in draws[:500]])
    lo, hi = np.percentile(boot, [2.5, 97.5], axis=1)
    boot_cover = np.mean((lo <= 0) & (0 <= hi))
    # 2000 draws: the t coverage is 0.95 within ±0.015 (3 binomial SDs); the bootstrap's is far below
    assert abs(t_cover - 0.95) < 0.015
    assert boot_cover < 0.85


def test_the_paired_interval_is_scipys_related_samples_interval_and_removes_a_shared_seed_effect():
    seed_effect = np.array([0.06, 0.0, -0.05])  # each seed's corpus moves both conditions alike
    a = list(1.50 + seed_effect + [0.002, -0.001, 0.0])
    b = list(1.48 + seed_effect + [-0.001, 0.001, 0.001])
    got = paired_interval(a, b)
    ci = stats.ttest_rel(a, b).confidence_interval(0.95)
    assert (got.lo, got.hi) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert got.lo > 0 and welch_interval(a, b).lo < 0  # the 0.02 gap: seen paired, lost unpaired


def test_a_paired_interval_needs_pairs():
    with pytest.raises(ValueError, match="equal counts"):
        paired_interval([1.0, 2.0], [1.0])
