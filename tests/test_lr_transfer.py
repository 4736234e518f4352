"""lr-transfer experiment file: validated before any run; the U-shape verdict rule."""
import pytest
import yaml

from depthdelusion.train import lr_transfer


def test_committed_experiment_loads_and_builds_valid_run_configs():
    exp = lr_transfer.load_experiment("experiments/lr_transfer.yaml")
    cfg = lr_transfer.run_config(exp, "completep", 128, 4, 1e-2)
    assert (cfg.model.width, cfg.model.depth, cfg.model.parametrization, cfg.train.lr) == (128, 4, "completep", 1e-2)
    assert cfg.model.base_width == exp["widths"][0]  # the smallest shape is the tuning proxy


def test_bad_experiment_names_the_problem(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({"base": {}, "parametrizations": ["mu"], "widths": [32],
                                    "depths": [2], "lrs": [1e-2], "depth_sweep": {}}))
    with pytest.raises(ValueError, match=r"parametrizations \['mu'\]: valid values are sp, mup"):
        lr_transfer.load_experiment(path)
    path.write_text(yaml.safe_dump({"base": {}}))
    with pytest.raises(ValueError, match="missing keys parametrizations"):
        lr_transfer.load_experiment(path)


def test_u_shape_needs_an_interior_minimum_below_both_ends():
    assert lr_transfer.is_u_shaped([2.36, 2.20, 2.14, 2.30], tolerance=0.01)
    assert not lr_transfer.is_u_shaped([2.18, 2.20, 2.47, 2.52], tolerance=0.01)  # best at an end
    assert not lr_transfer.is_u_shaped([2.150, 2.145, 2.150], tolerance=0.01)  # within tolerance
