"""The scanned model against an unrolled reference: activation-gradient probes, remat, dtypes."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from depthdelusion.config import ModelConfig
from depthdelusion.model.transformer import Transformer, _norm, attention_branch, block, mlp_branch
from depthdelusion.train.step import cross_entropy, per_layer_sq_norm

TINY = ModelConfig(depth=3, width=32, head_dim=8, vocab_size=50, seq_len=16, compute_dtype="float32")


def tiny_model(cfg=TINY):
    return Transformer(cfg, rngs=nnx.Rngs(params=1))


def tokens(cfg=TINY, batch=2):
    return jax.random.randint(jax.random.key(0), (batch, cfg.seq_len + 1), 0, cfg.vocab_size)


def unrolled_loss(model: Transformer, deltas_DxBxSxW, tokens_BxS1):
    """A Python loop over layers (no scan, no probe); h_l + delta_l enters block l, so
    ∂L/∂delta_l = ∂L/∂h_l."""
    cfg = model.cfg
    x = model.embed[...][tokens_BxS1[:, :-1]]
    stacked = {k: v[...] for k, v in model.blocks.params.items()}
    for layer in range(cfg.depth):
        x = block(x + deltas_DxBxSxW[layer], {k: v[layer] for k, v in stacked.items()}, cfg)
    final = {"final_norm_scale": model.final_norm_scale[...], "final_norm_bias": model.final_norm_bias[...]}
    h = _norm(x, final, "final_norm", cfg.norm)
    logits = h @ model.head_kernel[...] + model.head_b[...]
    return cross_entropy(logits, tokens_BxS1[:, 1:])


def probe_loss(model, probes_D, tokens_BxS1):
    return cross_entropy(model(tokens_BxS1[:, :-1], probes_D), tokens_BxS1[:, 1:])


@pytest.mark.slow  # compiles and differentiates a model per hidden state
def test_activation_gradient_probe_matches_explicit_grad_wrt_hidden_states():
    tok = tokens()
    graphdef, params = nnx.split(tiny_model())
    B, S, W = tok.shape[0], TINY.seq_len, TINY.width
    deltas = jnp.zeros((TINY.depth, B, S, W))
    # jitted: op by op, the unrolled reference's gradient is hundreds of small compiles
    unrolled = jax.jit(jax.value_and_grad(lambda p, d: unrolled_loss(nnx.merge(graphdef, p), d, tok), argnums=1))
    unrolled_value, grads_h = unrolled(params, deltas)
    expected_D = jnp.sqrt(jnp.sum(grads_h**2, axis=(1, 2, 3)))
    probes_D = jnp.zeros((TINY.depth,))
    probed = jax.jit(jax.value_and_grad(lambda p, d: probe_loss(nnx.merge(graphdef, p), d, tok), argnums=1))
    loss, probe_grads_D = probed(params, probes_D)
    np.testing.assert_allclose(jnp.sqrt(probe_grads_D), expected_D, rtol=1e-5)
    # The probe changes nothing in the forward pass.
    np.testing.assert_allclose(loss, unrolled_value, rtol=1e-6)
    assert np.all(np.asarray(expected_D) > 0)


def test_per_layer_weight_grad_norms_match_the_unrolled_reference():
    model, tok = tiny_model(), tokens()
    deltas = jnp.zeros((TINY.depth, 2, TINY.seq_len, TINY.width))
    graphdef, params = nnx.split(model)
    ref = jax.jit(jax.grad(lambda p: unrolled_loss(nnx.merge(graphdef, p), deltas, tok)))(params)
    ours = jax.jit(jax.grad(lambda p: probe_loss(nnx.merge(graphdef, p), None, tok)))(params)
    for layer in range(TINY.depth):
        expected = np.sqrt(sum(np.sum(np.asarray(g[layer]) ** 2) for g in jax.tree.leaves(ref["blocks"])))
        assert float(jnp.sqrt(per_layer_sq_norm(ours["blocks"])[layer])) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("remat", ["full", "save_dots"])
def test_remat_policies_change_nothing_but_memory(remat):
    tok = tokens()
    graphdef, params = nnx.split(tiny_model())
    cfg = ModelConfig(**{**TINY.__dict__, "remat": remat})
    graphdef_r, _ = nnx.split(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))))
    base = jax.value_and_grad(lambda p: probe_loss(nnx.merge(graphdef, p), None, tok))(params)
    rem = jax.jit(jax.value_and_grad(lambda p: probe_loss(nnx.merge(graphdef_r, p), None, tok)))(params)
    np.testing.assert_allclose(base[0], rem[0], rtol=1e-6)
    for a, b in zip(jax.tree.leaves(base[1]), jax.tree.leaves(rem[1])):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("remat, policy", [("none", None), ("full", "policy=None"),
                                           ("save_dots", "policy=DotsSaveable")])
def test_remat_policy_reaches_the_scanned_block(remat, policy):
    """The block under the layer scan is wrapped in jax.checkpoint (remat2) with the named policy."""
    cfg = ModelConfig(**{**TINY.__dict__, "remat": remat})
    graphdef, params = nnx.split(tiny_model(cfg))
    jaxpr = str(jax.make_jaxpr(jax.grad(lambda p: probe_loss(nnx.merge(graphdef, p), None, tokens())))(params))
    if policy is None:
        assert "remat2[" not in jaxpr
    else:
        assert jaxpr.count("remat2[") == 1 and policy in jaxpr


def test_bf16_compute_gives_float32_logits_close_to_float32():
    cfg16 = ModelConfig(**{**TINY.__dict__, "compute_dtype": "bfloat16"})
    graphdef, params = nnx.split(tiny_model())
    graphdef16, _ = nnx.split(nnx.eval_shape(lambda: Transformer(cfg16, rngs=nnx.Rngs(0))))
    tok = tokens()[:, :-1]
    logits16 = nnx.merge(graphdef16, params)(tok)
    logits32 = nnx.merge(graphdef, params)(tok)
    assert logits16.dtype == jnp.float32
    np.testing.assert_allclose(logits16, logits32, atol=0.05)


def test_learned_positions_and_rmsnorm_swiglu_run_causally():
    cfg = ModelConfig(**{**TINY.__dict__, "positions": "learned", "norm": "rmsnorm", "ffn": "swiglu",
                         "use_bias": False})
    model = tiny_model(cfg)
    tok = tokens(cfg)[:, :-1]
    logits = model(tok)
    # Causality: changing the last token leaves every earlier position's logits unchanged.
    changed = model(tok.at[:, -1].set((tok[:, -1] + 1) % cfg.vocab_size))
    np.testing.assert_allclose(logits[:, :-1], changed[:, :-1], rtol=1e-6)
    assert not np.allclose(logits[:, -1], changed[:, -1])


@pytest.mark.parametrize("overrides", [{}, {"compute_dtype": "bfloat16", "ffn": "swiglu", "use_bias": False}])
def test_a_block_is_the_attention_branch_then_the_mlp_branch(overrides):
    """block = x + Attn(LN x), then + FFN(LN ·), each branch added in the residual's dtype."""
    cfg = ModelConfig(**{**TINY.__dict__, **overrides})
    layer = {k: v[...][0] for k, v in tiny_model(cfg).blocks.params.items()}
    x = jax.random.normal(jax.random.key(1), (2, cfg.seq_len, cfg.width))
    mid = x + attention_branch(x, layer, cfg).astype(x.dtype)
    np.testing.assert_array_equal(block(x, layer, cfg), mid + mlp_branch(mid, layer, cfg).astype(x.dtype))
