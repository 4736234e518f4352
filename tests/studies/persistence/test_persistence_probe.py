"""The probe's per-layer gradients are the trainer's layer-stats step's; checked against an
independent per-block gradient computation at initialisation. Its flags are checked before it trains."""
import jax
import numpy as np
import optax
import pytest
import jax.numpy as jnp
from flax import nnx

from depthdelusion.data.pipeline import Batches
from depthdelusion.model.transformer import Transformer
from depthdelusion.studies.persistence import probe
from depthdelusion.studies.persistence.options import ProbeOptions
from depthdelusion.studies.persistence.probe import layer_gradient_profiles, probe_config


def test_probe_profiles_match_a_direct_gradient_and_the_report_keeps_the_sign(tmp_path):
    spec = probe.spec_from_flags(widths="16", depths="3", steps=1, batch_size=2, seq_len=16, head_dim=16)
    cfg = probe_config(16, 3, spec.setup())
    prof = layer_gradient_profiles(cfg, spec.steps)
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

    results = probe.results_of(spec, {"shapes": [{"width": 16, "depth": 3, "params": 1, "seconds": 1.0, **prof}],
                                      "skipped": []}, command="test")
    assert {f.status for f in results.fits} <= {"decay", "growth", "flat"}
    files = probe.write_outputs(results, tmp_path / "probe")
    md = (tmp_path / "probe" / "report.md").read_text()
    assert md == probe.sections(results) and "g_0/g_D" in md and all(p.exists() for p in files)
    f0 = next(f for f in results.fits if f.kind == "weight" and f.step == 0)
    assert f"{f0.rate:+.3f}" in md  # the signed rate is printed, growth included


@pytest.mark.parametrize("flags, says", [
    ({"batch_size": 0}, "--batch-size=0: must be a positive integer"),
    ({"widths": "64,abc"}, "--widths[1]='abc': must be an integer"),
    ({"widths": "24,64"}, "--widths=[24]: not multiples of --head-dim 16"),
    ({"compute_dtype": "float16"}, "--compute-dtype='float16': valid values are auto, float32, bfloat16"),
])
def test_a_bad_flag_is_one_line_naming_it_before_anything_trains(tmp_path, monkeypatch, flags, says):
    def train(*args, **kwargs):
        raise AssertionError("the probe trained before checking its flags")

    monkeypatch.setattr(probe, "layer_gradient_profiles", train)
    with pytest.raises(ValueError) as err:
        probe.run_command(out=str(tmp_path / "probe"), options=ProbeOptions(**flags))
    assert str(err.value).startswith(says) and len(str(err.value).splitlines()) == 1
