"""Intervals over three seeds cover at their nominal rate; the percentile bootstrap over three
seeds does not; the no-depth-term null is not rejected on data made without a depth term.
Synthetic data with known seed noise, seeded; tolerances stated beside each assert."""
import math

import numpy as np
import pytest

from scipy import stats

from depthdelusion.analysis.fitting.seed_intervals import (
    fieller_ratio,
    lack_of_fit,
    mean_interval,
    paired_interval,
    welch_interval,
)

DRAWS = 4000  # binomial SE of a 95% coverage over 4000 draws: 0.0034
TOL = 0.015   # > 4 binomial SEs


def test_t_interval_over_3_seeds_covers_95_percent_where_the_percentile_bootstrap_does_not():
    rng = np.random.default_rng(1)
    seeds = rng.normal(1.4, 0.03, size=(DRAWS, 3))
    t_cover = np.mean([(iv.lo <= 1.4 <= iv.hi) for iv in map(mean_interval, seeds)])
    assert abs(t_cover - 0.95) < TOL
    idx = rng.integers(0, 3, size=(DRAWS, 200, 3))
    boot = np.take_along_axis(seeds[:, None, :].repeat(200, 1), idx, 2).mean(2)
    lo, hi = np.percentile(boot, [2.5, 97.5], axis=1)
    boot_cover = np.mean((lo <= 1.4) & (1.4 <= hi))
    assert boot_cover < 0.80  # about 0.71: resampling 3 values cannot see the tails


def test_welch_interval_covers_with_unequal_seed_noise():
    rng = np.random.default_rng(2)
    a = rng.normal(1.0, 0.01, size=(DRAWS, 3))
    b = rng.normal(0.9, 0.08, size=(DRAWS, 3))
    cover = np.mean([(iv.lo <= 0.1 <= iv.hi) for iv in (welch_interval(x, y) for x, y in zip(a, b))])
    assert cover >= 0.95 - TOL  # Welch–Satterthwaite is slightly conservative here, never liberal


def test_fieller_ratio_covers_and_is_unbounded_when_the_denominator_may_be_zero():
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(DRAWS):
        num = welch_interval(rng.normal(1.6, 0.1, 3), rng.normal(1.0, 0.05, 3))
        den = welch_interval(rng.normal(2.0, 0.1, 3), rng.normal(1.0, 0.05, 3))
        _, lo, hi = fieller_ratio(num, den)
        hits += lo <= 0.6 <= hi
    assert hits / DRAWS >= 0.95 - TOL  # min-df t quantile: conservative
    small = welch_interval([0.01, -0.02, 0.03], [0.0, 0.01, -0.01])
    assert fieller_ratio(small, small)[1:] == (-math.inf, math.inf)


def _no_depth_rows(rng, noise=0.02):
    """9 cells (5 sizes at one token budget, 4 more budgets at other sizes) × 3 seeds from
    E + A N^-α + B T^-β: no depth term. Depth is set as in a fixed-width depth sweep."""
    cells = [(2, 3e4, 1.5e5), (4, 4.4e4, 1.5e5), (8, 7e4, 1.5e5), (16, 1.3e5, 1.5e5),
             (32, 2.5e5, 1.5e5), (2, 3e4, 4.3e5), (4, 4.4e4, 2.7e5), (16, 1.3e5, 8.2e4),
             (32, 2.5e5, 4.3e4)]
    return [{"depth": d, "width": 32, "params": n, "tokens": t,
             "loss": 0.9 + 300 * n ** -0.4 + 2e3 * t ** -0.5 + rng.normal(0, noise)}
            for d, n, t in cells for _ in range(3)]


def test_no_depth_term_null_is_not_rejected_on_data_without_a_depth_term():
    from depthdelusion.studies.common.laws import no_depth_term

    rng = np.random.default_rng(4)
    draws = 60
    p = np.array([no_depth_term(_no_depth_rows(rng))[1].p for _ in range(draws)])
    # nominal 5%: 3 expected; 9 is > 3 binomial SDs above (nonlinear fit: first-order F)
    assert np.sum(p < 0.05) <= 9
    # and it does reject when the data have a depth term the law cannot absorb
    rows = _no_depth_rows(rng)
    for r in rows:
        r["loss"] += 0.15 * (r["depth"] == 16)
    assert no_depth_term(rows)[1].p < 0.01


def test_lack_of_fit_needs_more_cells_than_parameters():
    with pytest.raises(ValueError, match="more cells"):
        lack_of_fit([1, 1.1, 2, 2.1], [1, 1, 2, 2], ["a", "a", "b", "b"], k=3)


def test_the_t_interval_of_three_seeds_is_scipys_one_sample_interval():
    xs = [1.51, 1.48, 1.56]
    got = mean_interval(xs)
    ci = stats.ttest_1samp(xs, 0).confidence_interval(0.95)
    assert (got.lo, got.hi) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert got.estimate == pytest.approx(np.mean(xs)) and got.df == 2


def test_the_welch_interval_is_scipys_unequal_variance_interval():
    a, b = [1.51, 1.48, 1.56], [1.40, 1.47, 1.38, 1.45]
    got = welch_interval(a, b)
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (got.lo, got.hi) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert got.estimate == pytest.approx(np.mean(a) - np.mean(b))


def test_the_paired_interval_is_scipys_related_samples_interval_and_removes_a_shared_seed_effect():
    seed_effect = np.array([0.06, 0.0, -0.05])  # each seed's corpus moves both conditions alike
    a = list(1.50 + seed_effect + [0.002, -0.001, 0.0])
    b = list(1.48 + seed_effect + [-0.001, 0.001, 0.001])
    got = paired_interval(a, b)
    ci = stats.ttest_rel(a, b).confidence_interval(0.95)
    assert (got.lo, got.hi) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert got.lo > 0 and welch_interval(a, b).lo < 0  # the 0.02 gap: seen paired, lost unpaired


def test_fewer_than_two_seeds_give_no_interval_and_a_paired_interval_needs_pairs():
    with pytest.raises(ValueError, match="at least 2 seeds"):
        mean_interval([1.5])
    with pytest.raises(ValueError, match="equal counts"):
        paired_interval([1.0, 2.0], [1.0])
