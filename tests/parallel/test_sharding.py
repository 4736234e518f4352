"""The sharded train step gives the same numbers on every mesh as on one device."""
import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from depthdelusion.config import Config, MeshConfig, ModelConfig, TrainConfig
from depthdelusion.parallel.mesh import make_mesh, mesh_shape
from depthdelusion.train.step import build_trainer

CFG = Config(
    model=ModelConfig(depth=2, width=64, head_dim=16, vocab_size=257, seq_len=32, compute_dtype="float32"),
    train=TrainConfig(steps=3, batch_size=8, lr=1e-2, warmup_steps=1),
)
STEPS = 3
# Float32 summation order differs between meshes. Losses agree to 1e-5 relative. Adam divides
# each gradient by its own RMS, so an element whose gradient is ~0 can move by a visible part of
# a step on one mesh and not on another: elementwise we allow 5% of one step (lr), and require the
# mean absolute difference over all parameters to stay below 1e-6.
LOSS_RTOL = 1e-5
PARAM_ATOL = 0.05 * CFG.train.lr
PARAM_MEAN_ATOL = 1e-6


def run(mesh):
    trainer = build_trainer(CFG, mesh)
    state = trainer.init()
    rng = np.random.default_rng(0)
    losses, layer_norms = [], []
    for _ in range(STEPS):
        batch = rng.integers(0, 257, (CFG.train.batch_size, CFG.model.seq_len + 1), dtype=np.int32)
        state, metrics = trainer.step_with_layer_stats(state, jax.device_put(batch, trainer.batch_sharding))
        losses.append(float(metrics["loss"]))
        layer_norms.append(np.asarray(metrics["per_layer_act_grad_norm"]))
    return losses, np.array(layer_norms), jax.device_get(state.params), state


@pytest.fixture(scope="module")
def single_device():
    return run(make_mesh(MeshConfig(data=1, fsdp=1, tensor=1), devices=jax.devices()[:1]))


def test_eight_simulated_devices_are_available():
    assert jax.device_count() == 8, "tests/conftest.py sets XLA_FLAGS before jax is imported"


@pytest.mark.parametrize("shape", [(8, 1, 1), (2, 2, 2), (1, 4, 2)], ids=lambda s: "x".join(map(str, s)))
def test_sharded_step_matches_single_device(shape, single_device):
    mesh = make_mesh(MeshConfig(*shape))
    assert tuple(mesh.shape.values()) == shape
    losses, norms, params, state = run(mesh)
    ref_losses, ref_norms, ref_params, _ = single_device
    np.testing.assert_allclose(losses, ref_losses, rtol=LOSS_RTOL)
    np.testing.assert_allclose(norms, ref_norms, rtol=1e-4)
    diffs = [np.abs(a - b) for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(ref_params))]
    assert max(d.max() for d in diffs) < PARAM_ATOL
    assert np.concatenate([d.ravel() for d in diffs]).mean() < PARAM_MEAN_ATOL
    up = state.params["blocks"]["params"]["up_kernel"][...]
    fsdp = "fsdp" if shape[1] > 1 else None
    tensor = "tensor" if shape[2] > 1 else None
    assert up.sharding.spec == P(None, fsdp, tensor)
    # 257 is not divisible by the tensor axis: the vocabulary stays whole.
    assert state.params["embed"][...].sharding.spec == P(None, fsdp)


def test_mesh_shape_errors_are_clear():
    assert mesh_shape(MeshConfig(data=-1, fsdp=2, tensor=2), 8) == (2, 2, 2)
    with pytest.raises(ValueError, match="data\\*fsdp\\*tensor = 2\\*2\\*1 = 4 but 8 devices"):
        mesh_shape(MeshConfig(data=2, fsdp=2, tensor=1), 8)
    with pytest.raises(ValueError, match="cannot be split"):
        mesh_shape(MeshConfig(data=-1, fsdp=3, tensor=1), 8)


def test_batch_not_divisible_by_data_parallel_size_is_rejected():
    cfg = Config(model=CFG.model, train=TrainConfig(batch_size=6))
    with pytest.raises(ValueError, match="train.batch_size=6 is not divisible by the data-parallel size"):
        build_trainer(cfg, make_mesh(MeshConfig(data=4, fsdp=2, tensor=1)))
