import numpy as np
import pytest

from depthdelusion.analysis import load_runs
from depthdelusion.analysis.persistence import persistence_length, persistence_lengths, persistence_scaling


def test_persistence_length_is_recovered_from_run_directories(run_factory, tmp_path):
    run_factory("d24w512", 24, 512, 3.4, ell=6.0, act_ell=9.0, steps=(0, 900, 2000))
    fits = persistence_lengths(tmp_path / "runs", step=1000)
    (f,) = fits
    assert f.status == "decay" and f.step == 900 and f.requested_step == 1000
    assert f.ci[0] < 6.0 < f.ci[1] and abs(f.length - 6.0) < 0.5 and f.r2 > 0.95
    (a,) = persistence_lengths(tmp_path / "runs", step=1000, kind="activation")
    assert abs(a.length - 9.0) < 1.0
    assert "step 900 for requested 1000" in f.describe()


def test_gradients_that_do_not_decay_say_no_decay():
    rng = np.random.default_rng(0)
    growing = np.exp(-0.05 * np.arange(16)) * np.exp(0.01 * rng.standard_normal(16))  # larger at the input
    flat = np.exp(0.02 * rng.standard_normal(16))
    for norms in (growing, flat):
        f = persistence_length(norms, name="x", width=512)
        assert f.status == "no decay" and f.length is None
        assert "no decay" in f.describe() and "ℓ =" not in f.describe()


def test_too_few_layers_and_bad_norms():
    assert persistence_length([1.0, 2.0]).status == "too few layers"
    with pytest.raises(ValueError, match="must be positive"):
        persistence_length([1.0, 0.0, 2.0], name="r")


def test_power_law_in_width_beats_log_form_when_data_follow_a_power_law(run_factory, tmp_path):
    for i, w in enumerate((256, 512, 1024, 2048, 4096)):
        ell = 0.5 * w ** 0.44
        run_factory(f"w{w}", 40, w, 3.0, ell=ell, noise=0.01, seed=i)
    scaling = persistence_scaling(persistence_lengths(tmp_path / "runs"))
    assert abs(scaling.p - 0.44) < 0.05 and scaling.p_ci[0] < 0.44 < scaling.p_ci[1]
    assert scaling.r2_power > 0.98 and scaling.r2_power > scaling.r2_log
    assert "power law" in scaling.summary()


def test_scaling_needs_several_widths(run_factory, tmp_path):
    run_factory("a", 12, 256, 3.0, ell=4.0)
    with pytest.raises(ValueError, match="at least 3 runs"):
        persistence_scaling(persistence_lengths(load_runs(tmp_path / "runs")))
