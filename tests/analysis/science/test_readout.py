"""The source-smoothness estimator of analysis/science/readout.py recovers a known s (and so the
predicted exponent) from sampled features and a readout built to the source condition."""
import math

import numpy as np
import pytest

from depthdelusion.analysis.science import readout, spectra
from depthdelusion.analysis.science.redundancy import predicted_exponent, random_rotation


def _sampled(beta, s, *, width=64, n=40_000, groups=8, seed=0):
    """Eigen-decompositions (all tokens, delete-one-group) of features x = R·(√λ ⊙ z) and a head
    whose readout, in the eigenbasis, has power λ_i θ_i² = i^(−(1 + 2βs))."""
    rng = np.random.default_rng(seed)
    i = np.arange(1, width + 1, dtype=float)
    lam = i ** -beta
    rot = random_rotation(width, rng)
    x_NxW = (rng.standard_normal((n, width)) * np.sqrt(lam)) @ rot.T
    theta_W = rot @ np.sqrt(i ** -(1 + 2 * beta * s) / lam)
    # two tokens, equally frequent: the centred columns are ±θ/2 (power λθ²/4, same decay)
    head_WxV = np.stack([theta_W, np.zeros(width)], axis=1)
    parts = np.array_split(x_NxW, groups)

    def eig(rows):
        c = np.cov(np.concatenate(rows), rowvar=False)
        ev, vec = np.linalg.eigh(c)
        return ev[::-1], vec[:, ::-1], np.array([0.5, 0.5])

    full = eig(parts)
    halves = eig(parts[:groups // 2])[0], eig(parts[groups // 2:])[0]
    jack = [eig(parts[:g] + parts[g + 1:]) for g in range(groups)]
    return full, halves, jack, head_WxV


@pytest.mark.parametrize("beta,s", [(2.0, 0.5), (1.5, 1.0)])
@pytest.mark.slow  # samples and jackknifes 40,000 synthetic tokens per case
def test_recovers_the_smoothness_and_the_predicted_exponent(beta, s):
    full, halves, jack, head = _sampled(beta, s)
    tail = spectra.tail_fit(0, full[0], halves, [j[0] for j in jack], 40_000)
    fit = readout.source_fit(full, jack, head, tail.rank_range, tail.beta, tail.ci, 40_000)
    assert fit.decay == pytest.approx(1 + 2 * beta * s, rel=0.1)
    assert fit.s == pytest.approx(s, rel=0.15)
    assert fit.b_pred == pytest.approx(predicted_exponent(beta, s), abs=0.03)
    assert fit.b_pred_ci[0] < fit.b_pred < fit.b_pred_ci[1]


def test_centring_removes_a_shift_shared_by_every_readout():
    full, _, _, head = _sampled(2.0, 0.5, n=5000)
    shifted = head + np.random.default_rng(3).standard_normal((head.shape[0], 1))
    assert np.allclose(readout.readout_power(*full[:2], head, full[2]),
                       readout.readout_power(*full[:2], shifted, full[2]))


def test_power_decaying_no_faster_than_one_over_i_is_outside_the_law():
    assert all(math.isnan(v) for v in readout.implied(2.0, 0.9))
    assert readout.implied(2.0, 3.0) == (0.5, pytest.approx(2 / 3))
