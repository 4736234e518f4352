"""Ahead-of-time TPU plans: the real train step compiled by libtpu for a TPU slice on this CPU host."""

import pytest

from depthdelusion.config import from_dict
from depthdelusion.model_size import count_params

pytest.importorskip("libtpu", reason="TPU plans need the tpu extra (pip install -e '.[test,tpu]'; CI has it)")

from depthdelusion.plan import GiB, resolve_topology, plan_config  # noqa: E402


def test_topology_names_resolve_to_chips_and_hbm():
    v4 = resolve_topology("v4-32")
    assert (v4.xla_name, v4.chips, v4.chip.hbm_bytes) == ("v4:2x2x4", 16, 32 * GiB)
    assert resolve_topology("v6e-64")[1:] == ("v6e:8x8", resolve_topology("v6e-64").chip, 64)
    assert (resolve_topology("v5e-16").xla_name, resolve_topology("v5e-16").chip.hbm_bytes) == ("v5e:4x4", 16 * GiB)
    with pytest.raises(ValueError, match="v4-30: not a standard v4 slice"):
        resolve_topology("v4-30")
    with pytest.raises(ValueError, match="expected e.g. v4-32"):
        resolve_topology("tpu-32")


def small_config():
    return from_dict({"model": {"depth": 2, "width": 256, "head_dim": 64, "seq_len": 256, "vocab_size": 1024},
                      "train": {"batch_size": 16}}).validate()


def test_small_model_on_v4_8_compiles_fits_and_its_numbers_add_up():
    import jax

    cfg = small_config()
    plan = plan_config(cfg, "v4-8", remat="auto")
    assert plan.fits and len(plan.attempts) == 1  # remat none already fits
    a = plan.chosen
    assert a.mesh == (1, 4, 1) and a.remat == "none" and not a.error
    # Arguments are the state (f32 params + Adam mu, nu, split over 4 chips) plus the token batch.
    n = count_params(cfg.model)
    state_per_chip = 12 * n / 4
    tokens_per_chip = 16 * 257 * 4 / 4
    assert 0.95 * (state_per_chip + tokens_per_chip) < a.argument_bytes < 1.5 * (state_per_chip + tokens_per_chip) + 2**20
    # The state is donated: the outputs alias almost all of the arguments.
    assert a.alias_bytes > 0.9 * state_per_chip
    # Open question: since the µP/checkpoint merge XLA reports 0 temp bytes for this tiny step
    # (5.2 MB before); the paper-size plans report GiBs of temporaries. Peak must still cover
    # the arguments and the generated code.
    assert 0 <= a.temp_bytes < 1 * GiB and a.peak_bytes < 0.9 * 32 * GiB
    assert a.peak_bytes >= a.argument_bytes - a.alias_bytes + a.code_bytes
    # XLA counts the scanned layer once: compare with ours counted the same way.
    assert 0.5 < a.xla_flops / plan.flops_scan_once_per_chip < 2.0
    assert plan.flops_per_chip > plan.flops_scan_once_per_chip
    assert "fits with mesh (1, 4, 1)" in plan.describe()
    assert jax.default_backend() == "cpu"  # planning leaves the host's own backend alone


def test_a_model_that_cannot_fit_one_v5e_chip_is_reported_not_fitting(tmp_path, capsys):
    from depthdelusion.cli import main

    # 2.4B parameters: their f32 values and Adam moments alone are 29 GB. One sequence per step,
    # so gradient accumulation has nothing to split and one compile decides.
    config = tmp_path / "big.yaml"
    config.write_text("model: {depth: 2, width: 8192, head_dim: 128, seq_len: 1024, vocab_size: 50257}\n"
                      "train: {batch_size: 1}\n")
    code = main(["plan", str(config), "--topology", "v5e-1", "--remat", "full",
                 "--table", str(tmp_path / "plan.md")])
    out = capsys.readouterr().out
    assert code == 1
    assert "does not fit" in out and "remat=full" in out
    table = (tmp_path / "plan.md").read_text()
    assert "| NO |" in table and "v5e-1" in table


def test_plan_refuses_a_table_that_is_its_own_config(tmp_path, capsys):
    from depthdelusion.cli import main

    config = tmp_path / "small.yaml"
    config.write_text("model: {depth: 2, width: 64, head_dim: 16, seq_len: 64}\n")
    before = config.read_text()
    assert main(["plan", str(config), "--topology", "v4-8", "--table", str(config)]) == 2
    assert "--table" in capsys.readouterr().err and config.read_text() == before
