"""model.attention=splash: the Pallas splash-attention kernel (TPU).

On this CPU host the kernel runs in the Pallas interpreter (`splash_interpret_mode`), which
executes the same kernel body, block masks and custom VJP, so its numbers are checked against
XLA attention here; that it compiles for a TPU (Mosaic) is checked by the ahead-of-time plan.
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from depthdelusion.config import Config, MeshConfig, ModelConfig, TrainConfig
from depthdelusion.model.transformer import attention, splash_interpret_mode
from depthdelusion.parallel.mesh import make_mesh
from depthdelusion.parallel.rules import activation_sharding
from depthdelusion.train.step import build_trainer

# seq 384 = three 128-token blocks: blocks on, below and above the diagonal (skipped) all occur.
MODEL = ModelConfig(depth=1, width=128, head_dim=64, seq_len=384, vocab_size=97, compute_dtype="float32")


def test_splash_kernel_equals_xla_attention_forward_and_backward_on_a_mesh():
    mesh = make_mesh(MeshConfig(2, 2, 2))  # batch over data x fsdp, the 2 heads over tensor
    q, k, v = (jax.random.normal(jax.random.key(i), (4, MODEL.seq_len, MODEL.heads, MODEL.head_dim))
               for i in range(3))
    cotangent = jax.random.normal(jax.random.key(3), q.shape)

    def run(kind):
        cfg = dataclasses.replace(MODEL, attention=kind)

        @jax.jit
        def out_and_grads(q, k, v):
            with activation_sharding(mesh):
                out, vjp = jax.vjp(lambda *qkv: attention(*qkv, cfg), q, k, v)
            return out, vjp(cotangent)

        with splash_interpret_mode():
            return jax.device_get(out_and_grads(q, k, v))

    (out, grads), (ref, ref_grads) = run("splash"), run("xla")
    # float32 both ways; the kernel's online softmax sums in another order. Measured (2026-11-23):
    # at most 5e-7 on outputs of size ~3, 3e-6 on gradients of size ~3-6; allowed 10-20x that.
    np.testing.assert_allclose(out, ref, atol=1e-5)
    for name, g, g_ref in zip("qkv", grads, ref_grads):
        np.testing.assert_allclose(g, g_ref, atol=3e-5, err_msg=f"d{name}")
    assert np.abs(ref).max() > 0.5 and min(np.abs(g).max() for g in ref_grads) > 0.5  # not vacuous


def test_splash_on_a_cpu_is_a_config_error_naming_the_field():
    cfg = Config(model=dataclasses.replace(MODEL, attention="splash"), train=TrainConfig(batch_size=8))
    with pytest.raises(ValueError, match="model.attention=splash: .* TPU only, these devices are cpu"):
        build_trainer(cfg, make_mesh(MeshConfig(8, 1, 1)))
    odd = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, seq_len=100))
    with splash_interpret_mode(), pytest.raises(ValueError, match="model.seq_len to be a multiple of 128"):
        build_trainer(odd, make_mesh(MeshConfig(8, 1, 1)))


def test_splash_train_step_compiles_for_a_tpu_v5e_slice_with_grad_accumulation():
    """One ahead-of-time compile by libtpu (no TPU needed): the real train step with splash
    attention inside the microbatch scan, heads split over tensor=2, batch over fsdp=2."""
    pytest.importorskip("libtpu", reason="TPU plans need the tpu extra (pip install -e '.[test,tpu]')")
    from depthdelusion.plan import plan_config, resolve_topology, topology_devices

    cfg = Config(model=dataclasses.replace(MODEL, attention="splash", seq_len=256, compute_dtype="bfloat16",
                                           vocab_size=1024),
                 train=TrainConfig(batch_size=16, grad_accum_steps=2)).validate()
    devices = topology_devices(resolve_topology("v5e-4"))
    plan = plan_config(cfg, "v5e-4", mesh=(1, 2, 2), remat="none", devices=devices)
    assert plan.fits and not plan.chosen.error, plan.describe()
    # The compiled program runs the kernel: its forward and both backward kernels are in it.
    trainer = build_trainer(dataclasses.replace(cfg, mesh=MeshConfig(1, 2, 2)),
                            make_mesh(MeshConfig(1, 2, 2), devices))
    tokens = jax.ShapeDtypeStruct((16, 257), jnp.int32, sharding=trainer.batch_sharding)
    hlo = trainer.step.lower(jax.eval_shape(trainer.init), tokens).as_text()
    for kernel in ("splash_mha_fwd", "splash_mha_dq", "splash_mha_dkv"):
        assert kernel in hlo
