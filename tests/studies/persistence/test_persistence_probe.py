"""The probe's per-layer gradients are the trainer's layer-stats step's; checked against an
independent per-block gradient computation at initialisation."""
import numpy as np
import optax
import jax
import jax.numpy as jnp
from flax import nnx

from depthdelusion.data.pipeline import Batches
from depthdelusion.model.transformer import Transformer
from depthdelusion.studies.persistence.probe import (ProbeSetup, fit_rows, layer_gradient_profiles,
                                                     probe_config, write)


def test_probe_profiles_match_a_direct_gradient_and_the_report_keeps_the_sign(tmp_path):
    setup = ProbeSetup(steps=1, batch_size=2, seq_len=16, head_dim=16)
    cfg = probe_config(16, 3, setup)
    prof = layer_gradient_profiles(cfg, setup.steps)
    assert prof["weight"].shape == (2, 3) and prof["activation"].shape == (2, 3)
    assert np.all(prof["weight"] > 0) and np.all(np.isfinite(prof["activation"]))

    # independent: jax.grad of the model's loss on the same first batch, norm per block
    tokens = np.asarray(next(Batches(cfg.data, cfg.model.seq_len, cfg.train.batch_size)))
    graphdef, params = nnx.split(Transformer(cfg.model, rngs=nnx.Rngs(params=cfg.train.seed)), nnx.Param)

    def loss(p):
        logits = nnx.merge(graphdef, p)(jnp.asarray(tokens[:, :-1]))
        return optax.softmax_cross_entropy_with_integer_labels(logits, jnp.asarray(tokens[:, 1:])).mean()

    grads = jax.grad(loss)(params)
    blocks = nnx.to_pure_dict(grads)["blocks"]
    direct = np.sqrt(sum(np.sum(np.square(np.asarray(g)).reshape(3, -1), axis=1)
                         for g in jax.tree.leaves(blocks)))
    np.testing.assert_allclose(prof["weight"][0], direct, rtol=1e-4)

    result = {"shapes": [{"width": 16, "depth": 3, "params": 1, "seconds": 1.0, **prof}], "skipped": []}
    fits = fit_rows(result, setup)
    assert {f.status for f in fits} <= {"decay", "growth", "flat"}
    files = write(result, setup, tmp_path / "probe", "test")
    md = (tmp_path / "probe" / "report.md").read_text()
    assert "g_0/g_D" in md and all(p.exists() for p in files)
    f0 = next(f for f in fits if f.kind == "weight" and f.step == 0)
    assert f"{f0.rate:+.3f}" in md  # the signed rate is printed, growth included
