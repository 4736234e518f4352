"""What a depth costs over a few seeds (analysis/science/depth_penalty.py): the robust seed
noise, the penalty against the best depth, the U-shape test."""
import math

import numpy as np
import pytest

from depthdelusion.analysis.science.depth_penalty import (
    is_u_shaped,
    penalty_against_best,
    robust_seed_sd,
)


def test_seed_noise_is_not_set_by_one_cell_where_a_seed_diverged():
    rng = np.random.default_rng(0)
    cells = [tuple(1.5 + 0.02 * rng.standard_normal(3)) for _ in range(12)]
    quiet, dof = robust_seed_sd(cells)
    assert 0.01 < quiet < 0.04 and dof == 24
    noisy, _ = robust_seed_sd([*cells, (1.5, 1.6, 2.4)])  # one seed at divergence
    assert noisy == pytest.approx(quiet, rel=0.3)  # a mean of squares would give about 0.13
    assert robust_seed_sd([(1.5,), (1.4, math.inf)]) == (None, None)  # no cell of 2 finite seeds


def test_the_penalty_is_against_the_best_depth_over_depths_whose_seeds_all_finished():
    got = penalty_against_best({2: (1.10, 1.12, 1.14), 8: (1.30, 1.31, 1.35), 16: (1.2, math.inf, 1.3),
                                32: (1.5,)})
    assert set(got) == {2, 8}  # a diverged seed or a single seed: left out
    assert got[2].estimate == 0 and got[2].se == 0  # the best depth, taken as given
    assert got[8].estimate == pytest.approx(0.2) and got[8].lo > 0
    assert penalty_against_best({2: (1.1, 1.2)}) == {}  # one depth: nothing to compare


def test_u_shape_needs_an_interior_minimum_below_both_ends():
    assert is_u_shaped([2.36, 2.20, 2.14, 2.30], tolerance=0.01)
    assert not is_u_shaped([2.18, 2.20, 2.47, 2.52], tolerance=0.01)  # best at an end
    assert not is_u_shaped([2.150, 2.145, 2.150], tolerance=0.01)  # within tolerance
