"""model.residual_dtype: under bf16 compute a float32 residual stream (scan carry) and float32
logit accumulation track the float32 model more closely than a bf16 carry, at depth."""
import jax.numpy as jnp
import numpy as np
from flax import nnx

from depthdelusion.config import ModelConfig
from depthdelusion.model.transformer import Transformer


def _logits(**kw):
    mc = ModelConfig(depth=24, width=32, head_dim=16, seq_len=32, vocab_size=257, **kw)
    tokens = (jnp.arange(64).reshape(2, 32) * 7) % 257
    return np.asarray(Transformer(mc, rngs=nnx.Rngs(params=0))(tokens), np.float64)


def test_float32_residual_is_closer_to_float32_than_a_bf16_carry():
    ref = _logits(compute_dtype="float32")
    f32_carry = _logits(compute_dtype="bfloat16", residual_dtype="float32")
    bf16_carry = _logits(compute_dtype="bfloat16", residual_dtype="compute")
    err_f32 = np.abs(f32_carry - ref).mean()
    err_bf16 = np.abs(bf16_carry - ref).mean()
    assert err_f32 < 0.5 * err_bf16, (err_f32, err_bf16)


def test_residual_dtype_changes_nothing_under_float32_compute():
    np.testing.assert_array_equal(_logits(compute_dtype="float32", residual_dtype="float32"),
                                  _logits(compute_dtype="float32", residual_dtype="compute"))
