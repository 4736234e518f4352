"""SP / µP / depth-µP / CompleteP: SP is the skeleton bit for bit, shapes and FLOPs never move,
and each group gets the multipliers of the rules table."""
import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from depthdelusion.config import ModelConfig, TrainConfig, load_config
from depthdelusion.model import parametrization as pz
from depthdelusion.model_size import count_params, flops_per_token
from depthdelusion.model.transformer import Transformer, block
from depthdelusion.train.optimizer import make_optimizer, param_groups
import sp_fingerprint

PARAMETRIZATIONS = ("sp", "mup", "depth_mup", "completep")
SKELETON = json.loads((Path(sp_fingerprint.__file__).parent / "sp_skeleton.json").read_text())


def fingerprint(**model_overrides):
    mc = ModelConfig(**{**sp_fingerprint.MODEL, **model_overrides})
    return sp_fingerprint.fingerprint(mc, make_optimizer(TrainConfig(**sp_fingerprint.TRAIN), mc))


def test_sp_is_the_skeleton_model_and_optimizer():
    """Same initial parameters (sha256) and same three training losses as commit 9b0781f."""
    got = fingerprint(parametrization="sp")
    assert got["param_sha256"] == SKELETON["param_sha256"]
    np.testing.assert_allclose(got["losses"], SKELETON["losses"], rtol=1e-6)


@pytest.mark.parametrize("parametrization", ["mup", "completep"])
def test_every_parametrization_is_sp_at_the_base_shape(parametrization):
    """At width = base_width and depth = base_depth all multipliers are 1: the per-group optimizer
    must reproduce SP exactly; one width or depth off, it must not."""
    base = dict(parametrization=parametrization, base_width=64, base_depth=3)
    got = fingerprint(**base)
    assert got["param_sha256"] == SKELETON["param_sha256"]
    np.testing.assert_allclose(got["losses"], SKELETON["losses"], rtol=1e-6)
    off = fingerprint(**{**base, "base_width": 32})
    assert off["param_sha256"] != SKELETON["param_sha256"]
    assert not np.allclose(off["losses"], SKELETON["losses"], rtol=1e-4)


@pytest.mark.parametrize("ffn, norm, use_bias", [("gelu", "layernorm", True), ("swiglu", "rmsnorm", False)])
def test_param_count_shapes_and_flops_do_not_depend_on_the_parametrization(ffn, norm, use_bias):
    shapes, counts, flops = [], [], []
    for name in PARAMETRIZATIONS:
        cfg = ModelConfig(depth=6, width=128, head_dim=32, vocab_size=257, seq_len=64, ffn=ffn,
                          norm=norm, use_bias=use_bias, parametrization=name, base_width=32, base_depth=2)
        abstract = nnx.state(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))), nnx.Param)
        shapes.append(jax.tree.map(lambda x: (x.shape, x.dtype), nnx.to_pure_dict(abstract)))
        counts.append((count_params(cfg), sum(x.size for x in jax.tree.leaves(abstract))))
        flops.append(flops_per_token(cfg))
    assert all(s == shapes[0] for s in shapes) and len(set(counts)) == 1 and len(set(flops)) == 1
    assert counts[0][0] == counts[0][1]


def test_every_model_parameter_has_a_group_and_unknown_names_raise():
    cfg = ModelConfig(depth=2, width=32, head_dim=16, vocab_size=40, seq_len=8, ffn="swiglu",
                      positions="learned")
    params = nnx.state(Transformer(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    groups = nnx.to_pure_dict(param_groups(params))
    assert groups["embed"] == "embedding" and groups["head_kernel"] == "head"
    assert groups["blocks"]["params"]["gate_kernel"] == "hidden_matrix"
    assert groups["blocks"]["params"]["mlp_norm_scale"] == "block_norm"
    with pytest.raises(ValueError, match="'mystery_kernel' has no parameterization group"):
        param_groups({"mystery_kernel": np.zeros(2)})


def test_rules_follow_the_table():
    """m_N = 4, m_L = 8: hidden-matrix lr 1/m_N · m_L^(α-1), init std m_N^-½, decay ×m_N,
    eps 1/m_N · m_L^-α in blocks and 1/m_N outside; embedding and head at base lr. µP has no
    depth factors (its α is 'none', not 0: eps and branches are not depth-scaled)."""
    for name, depth_lr, branch in (("mup", 1.0, 1.0), ("depth_mup", 8**-0.5, 8**-0.5),
                                   ("completep", 1.0, 1 / 8)):
        cfg = ModelConfig(width=256, depth=16, base_width=64, base_depth=2, parametrization=name)
        hidden, norm, embed = (pz.group_rule(cfg, g) for g in ("hidden_matrix", "block_norm", "embedding"))
        assert hidden.lr == pytest.approx(depth_lr / 4) and hidden.init_std == pytest.approx(0.5)
        assert hidden.weight_decay == 4 and hidden.eps == pytest.approx(branch / 4)
        assert norm.lr == pytest.approx(depth_lr) and embed.lr == 1 and embed.eps == 0.25
        assert pz.residual_multiplier(cfg) == pytest.approx(branch)
        assert pz.logit_multiplier(cfg) == 0.25
    sp = ModelConfig(width=256, depth=16, base_width=64, parametrization="sp")
    assert all(r == pz.GroupRule() for r in pz.rules_table(sp).values())


def test_group_learning_rate_and_decay_reach_the_updates():
    """Zero gradients leave only decoupled decay: w <- w - lr · lr_g · wd · wd_g · w. Under µP the
    hidden matrices decay at lr · wd (width-independent), the embedding at lr · wd, norms not at all."""
    mc = ModelConfig(depth=2, width=64, head_dim=16, vocab_size=40, seq_len=8, parametrization="mup",
                     base_width=16)
    tc = TrainConfig(lr=0.1, warmup_steps=0, steps=10, weight_decay=0.5, lr_min_ratio=1.0)
    params = nnx.state(Transformer(mc, rngs=nnx.Rngs(0)), nnx.Param)
    tx = make_optimizer(tc, mc)
    updates, _ = tx.update(jax.tree.map(jnp.zeros_like, params), tx.init(params), params)
    u, p = nnx.to_pure_dict(updates), nnx.to_pure_dict(params)
    np.testing.assert_allclose(u["blocks"]["params"]["up_kernel"], -0.05 * p["blocks"]["params"]["up_kernel"], rtol=1e-5)
    np.testing.assert_allclose(u["embed"], -0.05 * p["embed"], rtol=1e-5)
    assert not np.any(u["blocks"]["params"]["mlp_norm_scale"])


def test_forward_multipliers_scale_branches_and_logits():
    """Same parameters, two parameterizations: µP's logits (no head bias) are SP's / m_N, and
    each CompleteP residual branch is SP's times m_L^-1 (checked with the other branch zeroed)."""
    sp = ModelConfig(depth=4, width=64, head_dim=16, vocab_size=40, seq_len=8, use_bias=False,
                     compute_dtype="float32")
    params = nnx.state(Transformer(sp, rngs=nnx.Rngs(0)), nnx.Param)
    tokens = jnp.arange(16).reshape(2, 8) % 40
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: Transformer(sp, rngs=nnx.Rngs(0))))
    mup = dataclasses.replace(sp, parametrization="mup", base_width=16)
    logits_sp = nnx.merge(graphdef, params)(tokens)
    logits_mup = nnx.merge(nnx.graphdef(nnx.eval_shape(lambda: Transformer(mup, rngs=nnx.Rngs(0)))), params)(tokens)
    np.testing.assert_allclose(logits_mup, logits_sp / 4, rtol=1e-5, atol=1e-7)

    cp = dataclasses.replace(sp, parametrization="completep", base_depth=1)  # m_L = 4
    x = jax.random.normal(jax.random.key(0), (2, 8, 64))
    layer = {k: v[...][0] for k, v in params["blocks"]["params"].items()}
    for zeroed in ("down_kernel", "out_kernel"):  # keep only the attention, then only the MLP branch
        one_branch = {**layer, zeroed: jnp.zeros_like(layer[zeroed])}
        np.testing.assert_allclose(block(x, one_branch, cp) - x, (block(x, one_branch, sp) - x) / 4,
                                   rtol=1e-4, atol=1e-6)


def test_config_validates_base_shape_and_parametrization():
    with pytest.raises(ValueError, match="model.parametrization='mu': valid values are sp, mup, depth_mup, completep"):
        load_config(None, ["model.parametrization=mu"])
    with pytest.raises(ValueError, match="model.base_width=0: must be a positive integer"):
        load_config(None, ["model.base_width=0"])
    assert load_config(None, ["model.parametrization=completep"]).model.parametrization == "completep"


def test_completep_trains_sharded_with_adam_state_sharded_like_the_params():
    """optax.partition leaves shapeless MaskedNodes in the per-group Adam states; the sharded
    step must still compile, shard the moments like their parameters and match one device."""
    from depthdelusion.config import Config, MeshConfig
    from depthdelusion.parallel.mesh import make_mesh
    from depthdelusion.train.step import build_trainer

    cfg = Config(model=ModelConfig(depth=4, width=64, head_dim=16, vocab_size=257, seq_len=32,
                                   compute_dtype="float32", parametrization="completep",
                                   base_width=32, base_depth=2),
                 train=TrainConfig(steps=2, batch_size=8, lr=1e-2, warmup_steps=1))
    batch = np.random.default_rng(0).integers(0, 257, (8, 33), dtype=np.int32)

    def losses(mesh):
        trainer = build_trainer(cfg, mesh)
        state, out = trainer.init(), []
        for _ in range(2):
            state, metrics = trainer.step(state, jax.device_put(batch, trainer.batch_sharding))
            out.append(float(metrics["loss"]))
        return out, state

    sharded, state = losses(make_mesh(MeshConfig(data=2, fsdp=2, tensor=2)))
    single, _ = losses(make_mesh(MeshConfig(data=1, fsdp=1, tensor=1), devices=jax.devices()[:1]))
    np.testing.assert_allclose(sharded, single, rtol=1e-5)
    mu_up = [leaf for path, leaf in jax.tree_util.tree_leaves_with_path(state.opt_state)
             if "up_kernel" in jax.tree_util.keystr(path) and getattr(leaf, "ndim", 0) == 3]
    assert mu_up and all(leaf.sharding.spec == state.params["blocks"]["params"]["up_kernel"][...].sharding.spec
                         for leaf in mu_up)
