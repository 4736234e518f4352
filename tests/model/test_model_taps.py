"""`Transformer.forward` with `Taps`, the model's one instrumentation surface: with no tap it is
the model's forward; its streams, perturbation, head input and inserted blocks agree with the
model computed other ways, in the configured residual dtype."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from depthdelusion.model import parametrization as pz
from depthdelusion.model.transformer import Taps, Transformer, block, residual_dtype
from depthdelusion.studies.expansion import probe, surgery
from depthdelusion.train.step import cross_entropy
from tests.studies.expansion.test_expansion import logits, tiny_model, trained_like_params


def merged(model, params):
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: Transformer(model, rngs=nnx.Rngs(0))))
    return nnx.merge(graphdef, params)


@pytest.mark.parametrize("residual", ["float32", "compute"])
def test_tapped_forward_is_the_models_and_keeps_the_residual_dtype(residual):
    """bf16 compute: the plain call, the tapped forward and a loop of the public pieces (embed,
    block, head) give the same logits, and every stream is in the configured residual dtype."""
    model = tiny_model(compute_dtype="bfloat16", residual_dtype=residual)
    m = merged(model, trained_like_params(model))
    tokens = jax.random.randint(jax.random.key(1), (2, 16), 0, model.vocab_size)
    out = jax.jit(lambda t: m.forward(t, Taps(stream_fn=lambda x: x, block_rms=True,
                                              head_input_fn=lambda h: h)))(tokens)
    # separately compiled graphs: equal up to bf16 rounding where the stream itself is bf16
    tol = 1e-5 if residual == "float32" else 3e-2
    np.testing.assert_allclose(np.asarray(out.logits), np.asarray(jax.jit(m)(tokens)), rtol=tol, atol=tol)
    assert out.streams.dtype == residual_dtype(model) == (jnp.float32 if residual == "float32" else jnp.bfloat16)
    assert out.streams.shape == (model.depth + 1, 2, 16, model.width)
    x = m.embed_tokens(tokens)
    np.testing.assert_allclose(np.asarray(out.streams[0], np.float32), np.asarray(x, np.float32), rtol=tol, atol=tol)
    for layer in range(model.depth):
        x = block(x, {k: v[...][layer] for k, v in m.blocks.params.items()}, model)
        np.testing.assert_allclose(np.asarray(out.streams[layer + 1], np.float32), np.asarray(x, np.float32),
                                   rtol=2e-2, atol=2e-2)
    rms = np.sqrt(np.mean(np.square(np.asarray(out.streams[1:], np.float32)), axis=(1, 2, 3)))
    np.testing.assert_allclose(np.asarray(out.block_rms_D), rms, rtol=1e-3)  # reduction order
    np.testing.assert_allclose(np.asarray(m.head(out.head_input)), np.asarray(out.logits), rtol=tol, atol=tol)


def test_residual_grads_are_in_the_residual_dtype():
    """The expansion probe's streams and activation gradients come from the model's forward:
    a float32 residual stream under bf16 compute stays float32 (a carry in the compute dtype
    would round every block's sum to bf16)."""
    model = tiny_model(compute_dtype="bfloat16", residual_dtype="float32")
    params = trained_like_params(model)
    tokens = jax.random.randint(jax.random.key(2), (2, 17), 0, model.vocab_size)
    h, g = probe.residual_grads(model, params, tokens)
    assert h.dtype == g.dtype == jnp.float32
    streams = merged(model, params).forward(tokens[:, :-1], Taps(stream_fn=lambda x: x)).streams
    np.testing.assert_array_equal(np.asarray(h), np.asarray(streams[1:]))


def test_perturbation_gradient_is_the_finite_difference():
    model = tiny_model()
    m = merged(model, trained_like_params(model))
    tokens = jax.random.randint(jax.random.key(3), (2, 17), 0, model.vocab_size)

    def loss(perturb):
        return cross_entropy(m.forward(tokens[:, :-1], Taps(perturb_DxBxSxW=perturb)).logits, tokens[:, 1:])

    zeros = jnp.zeros((model.depth, 2, 16, model.width))
    g = jax.grad(loss)(zeros)
    direction = jax.random.normal(jax.random.key(4), zeros.shape)
    eps = 1e-3
    fd = (loss(eps * direction) - loss(-eps * direction)) / (2 * eps)
    np.testing.assert_allclose(float(jnp.vdot(g, direction)), float(fd), rtol=2e-3)


@pytest.mark.parametrize("parametrization", ["sp", "completep"])
def test_inserted_blocks_are_the_expanded_models(parametrization):
    """Blocks inserted by the tap (non-zero projections, so they change the function) give the
    logits of the model `expand_params` builds with the same blocks: after every block with the
    2D-block model's multiplier, and after one block k with the default (one block deeper)."""
    model = tiny_model(parametrization=parametrization)
    params = trained_like_params(model)
    tokens = jax.random.randint(jax.random.key(5), (2, 16), 0, model.vocab_size)
    D = model.depth
    blocks = surgery.inserted_blocks(model, range(D), seed=1)
    rng = np.random.default_rng(0)
    for name in surgery.ZERO_PROJECTIONS:
        blocks[name] = 0.05 * rng.standard_normal(blocks[name].shape).astype(np.float32)
    m = merged(model, params)
    r_2d = pz.residual_multiplier(dataclasses.replace(model, depth=2 * D))
    tapped = m.forward(tokens, Taps(inserted=blocks, inserted_multiplier=r_2d)).logits
    child_model, child = surgery.expand_params(params, model, range(D), fresh=blocks)
    np.testing.assert_allclose(np.asarray(tapped), np.asarray(logits(child_model, child, tokens)),
                               rtol=2e-5, atol=2e-5)
    k = 1
    one = {n: v.copy() for n, v in blocks.items()}
    for name in surgery.ZERO_PROJECTIONS:
        one[name][np.arange(D) != k] = 0.0
    tapped = m.forward(tokens, Taps(inserted=one)).logits
    child_model, child = surgery.expand_params(params, model, [k], fresh={n: v[k:k + 1] for n, v in one.items()})
    np.testing.assert_allclose(np.asarray(tapped), np.asarray(logits(child_model, child, tokens)),
                               rtol=2e-5, atol=2e-5)
    assert not np.allclose(np.asarray(tapped), np.asarray(logits(model, params, tokens)), atol=1e-3)


def test_the_probe_inserts_the_block_expand_inserts():
    """Insertion point k of the probe is the block `expand --after k --seed s` inserts, alone or
    among other insertions (one code path: surgery.inserted_blocks)."""
    model = tiny_model()
    params = trained_like_params(model)
    signal = probe.SignalProbe(model, params, seed=7)
    for after in ([1], [0, 1, 2]):
        _, child = surgery.expand_params(params, model, after, seed=7)
        _, new_pos = surgery.layout(model.depth, after)
        for k, pos in zip(after, new_pos):
            for name, value in signal.block(k).items():
                np.testing.assert_array_equal(np.asarray(child["blocks"]["params"][name][...])[pos], value[0])
