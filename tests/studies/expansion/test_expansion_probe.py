"""The first-order signal of an inserted block against an explicit computation, the Gram-matrix
statistics against direct ones, the per-token activation gradients and the jumpboard step."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from depthdelusion.model import parametrization as pz
from depthdelusion.model.transformer import Transformer, _norm, rope
from depthdelusion.studies.expansion import surgery
from depthdelusion.studies.expansion import probe
from depthdelusion.train.step import cross_entropy
from tests.studies.expansion.test_expansion import tiny_model, trained_like_params


def explicit_signal(model, params, k, block, tokens_BxS1, residual=None):
    """∂L/∂(out_kernel, down_kernel) of the block `block` inserted after k, from its definition:
    r·Σ_tokens φ ⊗ ∂L/∂h_k, the fresh block's features at h_k correlated with the activation
    gradient there (L the mean loss, r the single-insertion model's branch multiplier)."""
    h_DxBxSxW, g_DxBxSxW = residual or probe.residual_grads(model, params, tokens_BxS1)
    h, g = h_DxBxSxW[k], g_DxBxSxW[k]
    p = {n: v[0] for n, v in block.items()}
    r = pz.residual_multiplier(dataclasses.replace(model, depth=model.depth + 1))
    a = _norm(h, p, "attn_norm", model.norm)
    qkv = jnp.einsum("bsw,wthk->bsthk", a, p["qkv_kernel"]) + p["qkv_b"]
    q, kk, v = rope(qkv[:, :, 0], model.rope_base), rope(qkv[:, :, 1], model.rope_base), qkv[:, :, 2]
    att_BxSxHxK = jax.nn.dot_product_attention(q, kk, v, is_causal=True)
    m = _norm(h, p, "mlp_norm", model.norm)  # the attention branch adds zero: the MLP sees h
    act_BxSxF = jax.nn.gelu(jnp.einsum("bsw,wf->bsf", m, p["up_kernel"]) + p["up_b"])
    d_out = r * jnp.einsum("bshk,bsw->hkw", att_BxSxHxK, g)
    d_down = r * jnp.einsum("bsf,bsw->fw", act_BxSxF, g)
    return np.concatenate([np.ravel(d_out), np.ravel(d_down)])


@pytest.mark.parametrize("parametrization", ["sp", "completep"])
def test_signal_equals_feature_gradient_correlation(parametrization):
    """All D insertion points from one backward pass equal the explicit correlation at each
    (under CompleteP this checks the r(D+1)/r(2D) correction)."""
    model = tiny_model(parametrization=parametrization)
    params = trained_like_params(model)
    tokens = jax.random.randint(jax.random.key(3), (2, 17), 0, model.vocab_size)
    signal = probe.SignalProbe(model, params, seed=5)
    grads_DxP = signal.gradients(tokens)
    residual = probe.residual_grads(model, params, tokens)
    for k in range(model.depth):
        expected = explicit_signal(model, params, k, signal.block(k), tokens, residual)
        assert np.linalg.norm(expected) > 1e-4
        np.testing.assert_allclose(grads_DxP[k], expected, rtol=1e-4, atol=1e-7)


def test_explicit_signal_is_the_single_insertion_gradient():
    """The explicit formula is autodiff through the real expanded model (CompleteP)."""
    model = tiny_model(parametrization="completep")
    params = trained_like_params(model)
    tokens = jax.random.randint(jax.random.key(4), (2, 17), 0, model.vocab_size)
    k = 1
    block = surgery.fresh_blocks(model, 1, seed=2)
    child_model, child = surgery.expand_params(params, model, [k], fresh=block)
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: Transformer(child_model, rngs=nnx.Rngs(0))))
    g = jax.grad(lambda p: cross_entropy(nnx.merge(graphdef, p)(tokens[:, :-1]), tokens[:, 1:]))(child)
    blocks = g["blocks"]["params"]
    direct = np.concatenate([np.ravel(np.asarray(blocks[n][...])[k + 1]) for n in probe.PROBED])
    np.testing.assert_allclose(direct, explicit_signal(model, params, k, block, tokens), rtol=1e-4, atol=1e-7)


def test_residual_grads_forward_is_the_models():
    model = tiny_model()
    params = trained_like_params(model)
    tokens = jax.random.randint(jax.random.key(5), (2, 17), 0, model.vocab_size)
    h, g = probe.residual_grads(model, params, tokens)
    assert h.shape == g.shape == (model.depth, 2, 16, model.width)
    # ‖∂L/∂h_l‖: the stream entering block l+1 is the one after block l
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: Transformer(model, rngs=nnx.Rngs(0))))
    probe_grads = jax.grad(lambda pr: cross_entropy(nnx.merge(graphdef, params)(tokens[:, :-1], pr),
                                                    tokens[:, 1:]))(jnp.zeros(model.depth))
    np.testing.assert_allclose(np.sum(np.square(g[:-1]), axis=(1, 2, 3)), probe_grads[1:], rtol=1e-4)


def test_gram_statistics_equal_direct_ones():
    rng = np.random.default_rng(0)
    n_tr, n_te, P = 5, 4, 30
    mu = rng.normal(size=P)
    G = mu + rng.normal(size=(n_tr + n_te, P))
    stats = probe.GramStats(np.einsum("ip,jp->ij", G, G)[None], n_tr, G[:n_tr].mean(0)[None], G[n_tr:].mean(0)[None])
    row = probe.signal_table(stats, n_boot=50)[0]
    a, b = G[:n_tr].mean(0), G[n_tr:].mean(0)
    assert row["signal_train"] == pytest.approx(np.linalg.norm(a))
    assert row["signal_test"] == pytest.approx(np.linalg.norm(b))
    assert row["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    pairs = [G[i] @ G[j] for i in range(n_tr) for j in range(n_tr) if i != j]
    assert row["unbiased_sq_train"] == pytest.approx(np.mean(pairs))
    assert row["signal_train_lo"] <= row["signal_train"] <= row["signal_train_hi"]
    assert row["cosine_lo"] <= row["cosine"] <= row["cosine_hi"]
    assert row["noise_sq_train"] == pytest.approx(np.linalg.norm(a) ** 2 - np.mean(pairs))
    loo = [np.mean([G[i] @ G[j] for i in range(n_tr) for j in range(n_tr) if i != j and drop not in (i, j)])
           for drop in range(n_tr)]
    assert row["unbiased_sq_train_se"] == pytest.approx(np.sqrt((n_tr - 1) / n_tr * np.sum((np.array(loo) - np.mean(loo)) ** 2)))


def test_covariance_energy_separates_correlated_from_diagonal():
    rng = np.random.default_rng(1)
    independent = rng.normal(size=(4000, 16)) * np.linspace(0.5, 2, 16)
    mixed = independent @ np.linalg.qr(rng.normal(size=(16, 16)))[0]
    frac, null = probe.covariance_energy(independent, rng)
    assert frac < 0.05 and null < 0.05
    frac, null = probe.covariance_energy(mixed, rng)
    assert frac > 0.2 and null < 0.05


def test_jumpboard_first_order_agrees_for_small_steps():
    """ΔL ≈ −η‖g‖ along −g/‖g‖ for a small η (the loss is smooth in the projections)."""
    model = tiny_model()
    params = trained_like_params(model)
    batches = [np.asarray(jax.random.randint(jax.random.key(i), (2, 17), 0, model.vocab_size)) for i in range(2)]
    signal = probe.SignalProbe(model, params, seed=0)
    grads_DxP = np.mean([signal.gradients(b) for b in batches], axis=0)
    k = 2
    rows = probe.jumpboard(model, params, k, signal.block(k), -grads_DxP[k], [1e-3, 1e-2], batches, batches)
    norm = np.linalg.norm(grads_DxP[k])
    assert rows[0]["delta_train"] == pytest.approx(-1e-3 * norm, rel=0.05)
    assert rows[1]["delta_train"] < 0


def test_intervals_respect_the_bounds_of_their_quantities():
    """Nearly parallel train and held-out gradients, few batches: the cosine's interval stays in
    [-1, 1] and the norms' above 0 (reflected on the raw scale the cosine's upper end passes 1)."""
    rng = np.random.default_rng(1)
    n_tr, n_te, P = 4, 4, 50
    mu = rng.normal(size=P)
    G = mu + 0.25 * rng.normal(size=(n_tr + n_te, P))
    stats = probe.GramStats(np.einsum("ip,jp->ij", G, G)[None], n_tr, G[:n_tr].mean(0)[None], G[n_tr:].mean(0)[None])
    row = probe.signal_table(stats, n_boot=400)[0]
    assert row["cosine"] > 0.9
    assert -1.0 <= row["cosine_lo"] <= row["cosine"] <= row["cosine_hi"] <= 1.0
    for name in ("signal_train", "signal_test"):
        assert 0.0 < row[f"{name}_lo"] <= row[name] <= row[f"{name}_hi"]


def test_too_few_batches_is_a_clear_error(capsys):
    """Two batches per set leave the jackknife one batch: a one-line error, never a NaN."""
    from depthdelusion.cli import main

    rng = np.random.default_rng(2)
    G = rng.normal(size=(4, 10))
    stats = probe.GramStats(np.einsum("ip,jp->ij", G, G)[None], 2, G[:2].mean(0)[None], G[2:].mean(0)[None])
    with pytest.raises(ValueError, match="at least 3 training batches"):
        probe.signal_table(stats, n_boot=10)
    assert main(["expand", "no_such_run", "--probe", "--batches", "2"]) == 2
    err = capsys.readouterr().err
    assert "--batches: the probe needs at least 3" in err and len(err.strip().splitlines()) == 1
