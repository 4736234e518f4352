"""Depth expansion surgery: the expanded model computes the parent's function (SP and CompleteP),
the expanded run directory trains on from the parent's data position with the parent's optimizer
state for old blocks and zero state for new ones."""
import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from depthdelusion.config import Config, DataConfig, ModelConfig, TrainConfig
from depthdelusion.data.pipeline import Batches
from depthdelusion.model.transformer import Transformer
from depthdelusion.rundir import read_metrics
from depthdelusion.studies.expansion import surgery
from depthdelusion.train.loop import train


def tiny_model(**kw) -> ModelConfig:
    base = dict(depth=3, width=32, head_dim=16, seq_len=16, vocab_size=61, base_width=32, base_depth=2)
    return ModelConfig(**{**base, **kw})


def trained_like_params(model: ModelConfig, seed: int = 0):
    """Init params with every leaf perturbed, so zero biases / unit norms are not special."""
    params = nnx.state(Transformer(model, rngs=nnx.Rngs(params=seed)), nnx.Param)
    key = jax.random.key(seed + 1)
    leaves, treedef = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(key, len(leaves))
    return jax.tree_util.tree_unflatten(
        treedef, [x + 0.05 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])


def logits(model: ModelConfig, params, tokens):
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: Transformer(model, rngs=nnx.Rngs(0))))
    return nnx.merge(graphdef, params)(tokens)


@pytest.mark.parametrize("parametrization,after", [("sp", (0, 1, 1, 2)), ("completep", (0,)),
                                                   ("depth_mup", (2,))])
def test_expanded_logits_equal_parents(parametrization, after):
    model = tiny_model(parametrization=parametrization, ffn="swiglu" if after == (2,) else "gelu")
    params = trained_like_params(model)
    tokens = jax.random.randint(jax.random.key(7), (2, 16), 0, model.vocab_size)
    child_model, child = surgery.expand_params(params, model, after, seed=3)
    assert child_model.depth == model.depth + len(after)
    np.testing.assert_allclose(logits(child_model, child, tokens), logits(model, params, tokens),
                               rtol=2e-5, atol=2e-5)
    # The inserted blocks are not all-zero: only the two residual-writing projections are.
    _, new_pos = surgery.layout(model.depth, after)
    blocks = child["blocks"]["params"]
    for name in ("qkv_kernel", "up_kernel"):
        assert float(jnp.abs(np.asarray(blocks[name][...])[new_pos]).min()) >= 0 and float(jnp.abs(np.asarray(blocks[name][...])[new_pos]).max()) > 0
    for name in surgery.ZERO_PROJECTIONS:
        assert float(jnp.abs(np.asarray(blocks[name][...])[new_pos]).max()) == 0.0


def test_compensation_is_needed_under_completep():
    """Without rescaling the old projections the CompleteP function changes (the branch
    multiplier m_L^-1 moved): the compensation is doing the work in the test above."""
    model = tiny_model(parametrization="completep")
    assert surgery.branch_compensation(model, 5) == pytest.approx(5 / 3)
    assert surgery.branch_compensation(dataclasses.replace(model, parametrization="sp"), 5) == 1.0
    params = trained_like_params(model)
    tokens = jax.random.randint(jax.random.key(7), (2, 16), 0, model.vocab_size)
    child_model = surgery.expanded_model_config(model, 2)
    flat = {jax.tree_util.keystr(p): v for p, v in jax.tree_util.tree_flatten_with_path(params)[0]}
    abstract = nnx.state(nnx.eval_shape(lambda: Transformer(child_model, rngs=nnx.Rngs(0))), nnx.Param)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(abstract)
    shapes = {jax.tree_util.keystr(p): leaf.shape for p, leaf in leaves}
    uncompensated = surgery.insert_blocks(flat, shapes, 3, (0, 1), surgery.fresh_blocks(model, 2, 0),
                                            1.0, kind=lambda k: "param")
    child = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(uncompensated[k]) for k in shapes])
    diff = jnp.abs(logits(child_model, child, tokens) - logits(model, params, tokens)).max()
    assert float(diff) > 1e-3


def test_bad_after_is_a_clear_error():
    with pytest.raises(ValueError, match="0..3"):
        surgery.parse_after("1,4", 4)
    with pytest.raises(ValueError, match="comma-separated"):
        surgery.parse_after("a", 4)
    assert surgery.parse_after("3,0", 4) == (0, 3)


RUN = Config(
    model=ModelConfig(depth=2, width=32, head_dim=16, seq_len=32, parametrization="completep",
                      base_width=32, base_depth=2),
    data=DataConfig(builtin_documents=3000),
    train=TrainConfig(steps=4, batch_size=8, lr=3e-3, warmup_steps=2, log_every=1, layer_stats_every=100,
                      eval_every=100, eval_batches=0, checkpoint_every=0, checkpoint_minutes=0),
)


def test_expanded_run_continues_parent(tmp_path):
    """CompleteP parent of depth 2, 4 steps -> block after block 0 -> depth 3 trained to step 6.
    The child's step-5 loss (computed before its update, on the batch after the parent's last)
    equals the parent model's loss on that batch: the function is unchanged and the data iterator
    continues where the parent stopped. Old blocks keep their Adam moments (the rescaled
    projections' scaled by 1/c, 1/c²); the new block's are zero."""
    from depthdelusion.train.step import cross_entropy

    parent = tmp_path / "parent"
    train(RUN, parent)
    record = surgery.expand_run(parent, [0], tmp_path / "child", seed=1, overrides=["train.steps=6"])
    assert record["new_positions"] == [1] and record["parent_step"] == 4
    c = record["branch_compensation"]
    assert c == pytest.approx(1.5)

    parent_cfg = surgery.read_run_config(parent)
    child_cfg = surgery.read_run_config(tmp_path / "child")
    assert child_cfg.model.depth == 3 and child_cfg.train.steps == 6
    _, pflat, pstate, _ = surgery.restore_state(parent, parent_cfg)
    _, cflat, _, _ = surgery.restore_state(tmp_path / "child", child_cfg)
    for key, value in cflat.items():
        if "['blocks']" not in key or surgery.state_kind(key) not in ("mu", "nu"):
            continue
        name, kind = surgery.leaf_name(key), surgery.state_kind(key)
        factor = {"mu": 1 / c, "nu": 1 / c ** 2}[kind] if name in surgery.RESIDUAL_WRITERS else 1.0
        np.testing.assert_allclose(np.asarray(value)[[0, 2]], np.asarray(pflat[key]) * factor, rtol=1e-6)
        assert not np.any(np.asarray(value)[1]), f"{key}: new block's optimizer state is not zero"
    assert int(cflat[".step"]) == 4

    batches = Batches(RUN.data, RUN.model.seq_len, RUN.train.batch_size)
    fifth = [next(batches) for _ in range(5)][-1]
    batches.close()
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: Transformer(parent_cfg.model, rngs=nnx.Rngs(0))))
    expected = float(cross_entropy(nnx.merge(graphdef, pstate.params)(jnp.asarray(fifth[:, :-1])),
                                   jnp.asarray(fifth[:, 1:])))

    summary = train(child_cfg, tmp_path / "child")
    assert summary["status"] == "finished" and summary["steps"] == 6
    losses = {r["step"]: r["loss"] for r in read_metrics(tmp_path / "child")}
    assert sorted(losses) == [5, 6]
    assert losses[5] == pytest.approx(expected, rel=1e-4)
    assert json.loads((tmp_path / "child" / "expansion.json").read_text())["parent"] == str(parent)


def test_expand_refuses_shape_overrides(tmp_path):
    (tmp_path / "run").mkdir()
    cfg = dataclasses.replace(RUN, model=dataclasses.replace(RUN.model, vocab_size=257))
    from depthdelusion.rundir import write_config

    write_config(tmp_path / "run", cfg)
    with pytest.raises(ValueError, match="train.batch_size"):
        surgery.expand_run(tmp_path / "run", [0], tmp_path / "out", overrides=["model.width=64"])


def test_cli_expand_errors_name_the_flag(tmp_path, capsys):
    from depthdelusion.cli import main
    from depthdelusion.rundir import write_config

    (tmp_path / "run").mkdir()
    write_config(tmp_path / "run", dataclasses.replace(RUN, model=dataclasses.replace(RUN.model, vocab_size=257)))
    assert main(["expand", str(tmp_path / "run"), "--after", "2", "--out", str(tmp_path / "o")]) == 2
    assert "--after '2': block indices must be in 0..1" in capsys.readouterr().err
    assert main(["expand", str(tmp_path / "run"), "--after", "0", "--out", str(tmp_path / "o")]) == 2
    assert "no checkpoint" in capsys.readouterr().err
