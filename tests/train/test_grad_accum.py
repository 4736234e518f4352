"""Gradient accumulation: k microbatches then one update gives the numbers of the whole batch at
once (loss, gradient norms, per-layer statistics, parameters), on one device and on a mesh."""
import dataclasses

import jax
import numpy as np
import pytest

from depthdelusion.config import Config, MeshConfig, ModelConfig, TrainConfig
from depthdelusion.parallel.mesh import make_mesh
from depthdelusion.train.step import build_trainer

CFG = Config(
    model=ModelConfig(depth=2, width=64, head_dim=16, vocab_size=257, seq_len=32, compute_dtype="float32"),
    train=TrainConfig(steps=2, batch_size=16, lr=1e-2, warmup_steps=1),
)
# Float32 sums in a different order (per microbatch, then over microbatches, and over devices):
# losses agree to 1e-5 relative, gradient norms to 1e-4 (as in tests/parallel/test_sharding.py). After two Adam updates, as in tests/parallel/test_sharding.py, an element with
# a ~0 gradient may move by a visible part of one step: elementwise 5% of lr, mean below 1e-6.
LOSS_RTOL = 1e-5
NORM_RTOL = 1e-4
PARAM_ATOL = 0.05 * CFG.train.lr
PARAM_MEAN_ATOL = 1e-6


def compiled_step(grad_accum_steps: int, mesh):
    cfg = dataclasses.replace(CFG, train=dataclasses.replace(CFG.train, grad_accum_steps=grad_accum_steps))
    trainer = build_trainer(cfg, mesh)
    tokens = jax.ShapeDtypeStruct((16, 33), np.int32, sharding=trainer.batch_sharding)
    return trainer, trainer.step_with_layer_stats.lower(trainer.abstract_state, tokens).compile()


def run(grad_accum_steps: int, mesh):
    trainer, step = compiled_step(grad_accum_steps, mesh)
    state = trainer.init()
    initial = jax.device_get(state.params)
    rng = np.random.default_rng(0)
    batches = [jax.device_put(rng.integers(0, 257, (16, 33), dtype=np.int32), trainer.batch_sharding)
               for _ in range(2)]
    # The layer-stats variant (the plain one runs the same accumulation with no probes; the loop
    # test in tests/train/test_profile.py trains with both variants and grad_accum_steps=2).
    metrics = []
    for batch in batches:
        state, step_metrics = step(state, batch)
        metrics.append(step_metrics)
    eval_loss = trainer.eval_loss(state, batches[0])
    return jax.device_get((metrics, eval_loss, state.params)), (initial, step.memory_analysis().temp_size_in_bytes)


@pytest.fixture(scope="module")
def whole_batch():
    return run(1, make_mesh(MeshConfig(1, 1, 1), devices=jax.devices()[:1]))


def test_four_microbatches_on_a_2x2x2_mesh_equal_the_whole_batch_on_one_device(whole_batch):
    # data*fsdp = 4 devices, 16 sequences = 4 microbatches of 4: one sequence per device each.
    (metrics, eval_loss, params), _ = run(4, make_mesh(MeshConfig(2, 2, 2)))
    (ref_metrics, ref_eval, ref_params), (initial, _) = whole_batch
    for step, (m, ref) in enumerate(zip(metrics, ref_metrics), 1):
        np.testing.assert_allclose(m["loss"], ref["loss"], rtol=LOSS_RTOL, err_msg=f"loss, step {step}")
        for name in ("grad_norm", "per_layer_grad_norm", "per_layer_act_grad_norm"):
            np.testing.assert_allclose(m[name], ref[name], rtol=NORM_RTOL, err_msg=f"{name}, step {step}")
    np.testing.assert_allclose(eval_loss, ref_eval, rtol=LOSS_RTOL)
    diffs = [np.abs(a - b) for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(ref_params))]
    assert max(d.max() for d in diffs) < PARAM_ATOL
    assert np.concatenate([d.ravel() for d in diffs]).mean() < PARAM_MEAN_ATOL
    # Not vacuous: the two updates moved the parameters by much more than the tolerance.
    moved = [np.abs(a - b) for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(initial))]
    assert max(d.max() for d in moved) > 10 * PARAM_ATOL


def test_microbatches_hold_a_quarter_of_the_activations(whole_batch):
    """What accumulation is for: XLA's temporaries (activations saved for the backward pass,
    logits) of one step shrink with the microbatch, on the same device."""
    _, (_, whole_temp) = whole_batch
    _, step = compiled_step(4, make_mesh(MeshConfig(1, 1, 1), devices=jax.devices()[:1]))
    accumulated_temp = step.memory_analysis().temp_size_in_bytes
    assert accumulated_temp < 0.5 * whole_temp, (accumulated_temp, whole_temp)


def test_a_batch_that_does_not_split_over_microbatches_and_devices_is_rejected():
    cfg = dataclasses.replace(CFG, train=dataclasses.replace(CFG.train, grad_accum_steps=4))
    with pytest.raises(ValueError, match=r"train.batch_size=16 is not divisible by train.grad_accum_steps=4 "
                                         r"x the data-parallel size data\*fsdp=8.*multiple of 32"):
        build_trainer(cfg, make_mesh(MeshConfig(8, 1, 1)))
    with pytest.raises(ValueError, match="train.batch_size=16 is not divisible by train.grad_accum_steps=3"):
        dataclasses.replace(cfg.train, grad_accum_steps=3).validate()
    with pytest.raises(ValueError, match="train.grad_accum_steps=0: must be a positive integer"):
        dataclasses.replace(cfg.train, grad_accum_steps=0).validate()


def test_a_run_resumes_with_another_microbatch_count():
    """A preempted run may come back on fewer chips with more microbatches: the same numbers."""
    from depthdelusion.rundir import differs_in_numbers

    more = dataclasses.replace(CFG, train=dataclasses.replace(CFG.train, grad_accum_steps=4))
    assert differs_in_numbers(CFG, more) == []
    bigger = dataclasses.replace(more, train=dataclasses.replace(more.train, batch_size=32))
    assert differs_in_numbers(CFG, bigger) == ["train.batch_size: 16 -> 32"]
