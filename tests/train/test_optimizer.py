import jax
import numpy as np
import pytest
from flax import nnx

from depthdelusion.config import ModelConfig, TrainConfig
from depthdelusion.model.transformer import Transformer
from depthdelusion.train.optimizer import lr_at, lr_schedule, make_optimizer, schedule_values, weight_decay_mask


def test_schedule_warms_up_linearly_then_decays_by_cosine_to_the_floor():
    tc = TrainConfig(lr=1e-3, warmup_steps=10, steps=110, lr_min_ratio=0.1)
    lr = lr_schedule(tc)
    assert float(lr(0)) == pytest.approx(1e-4)  # the first update is not wasted at lr = 0
    assert float(lr(9)) == pytest.approx(1e-3)  # peak reached at update `warmup_steps`
    assert float(lr(59)) == pytest.approx(1e-4 + 0.5 * 9e-4, rel=1e-4)  # half-way down the cosine
    assert float(lr(109)) == pytest.approx(1e-4)
    assert float(lr(500)) == pytest.approx(1e-4)


def test_the_schedule_as_arguments_is_optax_schedule_to_the_bit():
    """A compiled step takes the schedule's numbers as arguments (one program for every lr,
    warmup and length); its learning rates are those of optax's warmup-cosine schedule with the
    numbers compiled in, to the last bit, for every update of each of these runs."""
    import itertools

    import jax.numpy as jnp
    import optax

    as_arguments = jax.jit(lambda count, values: jax.vmap(lambda c: lr_at(c, values))(count))
    for lr, warmup, steps, floor in itertools.product((3e-4, 6e-4, 1.7e-2), (0, 1, 5, 2000),
                                                      (1, 4, 1000, 24414), (0.1, 0.0, 1.0)):
        tc = TrainConfig(lr=lr, warmup_steps=warmup, steps=steps, lr_min_ratio=floor)
        reference = optax.warmup_cosine_decay_schedule(0.0, lr, warmup, max(steps, warmup + 1), lr * floor)
        count = jnp.arange(max(steps, warmup) + 2, dtype=jnp.int32)
        expected = np.asarray(jax.jit(jax.vmap(lambda c: reference(c + 1)))(count))
        assert np.array_equal(np.asarray(as_arguments(count, schedule_values(tc))), expected), tc
        assert np.array_equal(np.asarray(jax.jit(jax.vmap(lr_schedule(tc)))(count)), expected), tc


def test_weight_decay_skips_norms_and_biases():
    cfg = ModelConfig(depth=2, width=32, head_dim=8, vocab_size=40, seq_len=8, positions="learned")
    params = nnx.state(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    mask = nnx.to_pure_dict(weight_decay_mask(params))
    blocks = mask["blocks"]["params"]
    assert all(blocks[k] for k in ("qkv_kernel", "out_kernel", "up_kernel", "down_kernel"))
    assert not any(blocks[k] for k in ("qkv_b", "out_b", "up_b", "down_b", "attn_norm_scale",
                                        "attn_norm_bias", "mlp_norm_scale", "mlp_norm_bias"))
    assert mask["embed"] and mask["pos_embed"] and mask["head_kernel"]
    assert not mask["head_b"] and not mask["final_norm_scale"] and not mask["final_norm_bias"]


def test_decoupled_weight_decay_and_clipping():
    """With zero gradient only decay acts: w <- w - lr * wd * w on decayed leaves, none on others.
    A huge gradient is clipped to global norm 1 before Adam (its direction is kept)."""
    tc = TrainConfig(lr=0.1, warmup_steps=0, steps=10, weight_decay=0.5, lr_min_ratio=1.0)
    params = {"w_kernel": nnx.Param(np.ones((2, 2), np.float32), weight_decay=True),
              "w_b": nnx.Param(np.ones((2,), np.float32), weight_decay=False)}
    tx = make_optimizer(tc)
    state = tx.init(params)
    zeros = jax.tree.map(np.zeros_like, params)
    updates, state = tx.update(zeros, state, params)
    np.testing.assert_allclose(updates["w_kernel"][...], -0.1 * 0.5 * np.ones((2, 2)), rtol=1e-6)
    np.testing.assert_allclose(updates["w_b"][...], 0.0)


def test_a_parameter_without_a_weight_decay_flag_is_refused():
    tx = make_optimizer(TrainConfig())
    with pytest.raises(ValueError, match="parameter 'w' has no weight-decay flag"):
        tx.init({"w": nnx.Param(np.ones((2,), np.float32))})



def test_global_norm_clipping_happens_before_adam():
    """With a large Adam eps, the update depends on the gradient's scale: a gradient of norm 200
    must then give exactly the update of the same gradient rescaled to norm 1 (clipped first)."""
    param = lambda value: {"w_kernel": nnx.Param(np.asarray(value, np.float32), weight_decay=True)}
    params = param(np.ones((2, 2)))
    grad = param(np.full((2, 2), 100.0))  # global norm 200
    unit = param(np.full((2, 2), 100.0 / 200.0))

    def first_update(tc, g):
        tx = make_optimizer(tc)
        return tx.update(g, tx.init(params), params)[0]["w_kernel"][...]

    clipped = TrainConfig(lr=0.1, warmup_steps=0, eps=1.0, weight_decay=0.0, grad_clip=1.0)
    np.testing.assert_allclose(first_update(clipped, grad), first_update(clipped, unit), rtol=1e-6)
    unclipped = TrainConfig(lr=0.1, warmup_steps=0, eps=1.0, weight_decay=0.0, grad_clip=0.0)
    assert not np.allclose(first_update(unclipped, grad), first_update(unclipped, unit))


def test_decay_and_group_come_from_the_parameters_metadata_not_their_names():
    """A leaf named like a bias but created as a decayed matrix is decayed and grouped as one."""
    from depthdelusion.train.optimizer import param_groups

    params = nnx.State({"qkv_b": nnx.Param(np.ones((2, 2), np.float32), weight_decay=True, group="hidden_matrix"),
                        "w_kernel": nnx.Param(np.ones((2,), np.float32), weight_decay=False, group="hidden_bias")})
    assert nnx.to_pure_dict(weight_decay_mask(params)) == {"qkv_b": True, "w_kernel": False}
    assert nnx.to_pure_dict(param_groups(params)) == {"qkv_b": "hidden_matrix", "w_kernel": "hidden_bias"}
    with pytest.raises(ValueError, match="parameter group 'hiden_matrix' is not one of embedding"):
        param_groups({"w": nnx.Param(np.ones(2), group="hiden_matrix")})
