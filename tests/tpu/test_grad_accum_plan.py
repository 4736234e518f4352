"""The plan chooses gradient accumulation when no remat policy fits the HBM budget.

The search is the thing under test, so the real train step is compiled, but by the host's CPU
compiler (its memory_analysis is what the TPU plan reads too) with an artificially small budget:
TPU compiles take ~20 s each here, and one is spent in tests/model/test_splash.py.
"""
import jax

from depthdelusion.config import from_dict
from depthdelusion.plan import GiB, plan_config

# Measured with this config (2026-11-23, jax 0.10.2 CPU compiler): peak bytes per device with full
# remat 147.5 MB whole batch, 79.8 MB in 2 microbatches, 46.8 MB in 4. A 100 MB budget sits
# between the first two with a margin of 25% either way.
BUDGET_BYTES = 100e6


def test_plan_accumulates_gradients_when_remat_is_not_enough():
    cfg = from_dict({"model": {"depth": 1, "width": 64, "head_dim": 32, "seq_len": 128, "vocab_size": 4096},
                     "train": {"batch_size": 16}}).validate()
    plan = plan_config(cfg, "v5e-1", remat="full", devices=jax.devices()[:1], margin=BUDGET_BYTES / (16 * GiB))
    whole, *rest = plan.attempts
    assert (whole.remat, whole.grad_accum, whole.fits) == ("full", 1, False) and not whole.error
    assert plan.fits and plan.chosen.grad_accum == 2 and plan.chosen.remat == "full"
    assert [a.grad_accum for a in plan.attempts] == [1, 2]  # the search stops at the first fit
    assert plan.chosen.peak_bytes <= BUDGET_BYTES < whole.peak_bytes
    assert "remat full, train.grad_accum_steps=2" in plan.describe()
    assert plan.row()["grad accum"] == 2 and plan.row()["tried"] == "full:x full/k2:ok"

