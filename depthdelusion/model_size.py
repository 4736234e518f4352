"""Exact parameter counts and matmul FLOPs, in closed form, from a ModelConfig.

The one source of truth for N (fits, reports) and for FLOPs (MFU, plans). No JAX import:
these are plain integer formulas, checked against the parameters the model really creates
(tests/test_model_size.py).
"""
from __future__ import annotations

from depthdelusion.config import ModelConfig


def _require_vocab(cfg: ModelConfig) -> int:
    if cfg.vocab_size is None:
        raise ValueError("model.vocab_size is null: resolve it from the tokenizer before counting")
    return cfg.vocab_size


def block_params(cfg: ModelConfig) -> int:
    """Parameters of one transformer block.

    attention: W x 3W (q, k, v) + W x W (out), biases 3W + W;
    FFN: gelu W x F + F x W, biases F + W; swiglu 2 (W x F) + F x W, biases 2F + W;
    norms: two per block, LayerNorm = scale + bias (2W), RMSNorm = scale (W).
    """
    W, F = cfg.width, cfg.ffn_dim
    n_in = 1 if cfg.ffn == "gelu" else 2  # FFN input projections: up, or gate + up
    n = 4 * W * W + (n_in + 1) * W * F
    if cfg.use_bias:
        n += 4 * W + n_in * F + W
    n += 2 * norm_params(cfg)
    return n


def norm_params(cfg: ModelConfig) -> int:
    return 2 * cfg.width if cfg.norm == "layernorm" else cfg.width


def embedding_params(cfg: ModelConfig) -> int:
    """Input embedding, learned positions (if any) and the untied LM head (with its bias)."""
    V, W = _require_vocab(cfg), cfg.width
    n = V * W + W * V
    if cfg.use_bias:
        n += V
    if cfg.positions == "learned":
        n += cfg.seq_len * W
    return n


def count_params(cfg: ModelConfig) -> int:
    """Total number of parameters the model creates (embeddings and head included)."""
    return non_embedding_params(cfg) + embedding_params(cfg)


def non_embedding_params(cfg: ModelConfig) -> int:
    """Blocks plus the final norm: the N of Kaplan-style laws (≈ 12·D·W²)."""
    return cfg.depth * block_params(cfg) + norm_params(cfg)


def flops_per_token(cfg: ModelConfig) -> float:
    """Matmul FLOPs per trained token, forward + backward (= 3 x forward).

    Forward, per token: 2 FLOPs per weight of every matmul (q, k, v, out, FFN, LM head) and,
    per block, 4·S·W for attention scores and values (QKᵀ and AV), counted half because the
    causal mask leaves half the score matrix unused (MaxText / PaLM convention).
    Embedding lookups, norms, softmax and biases are not counted; remat recompute is not counted
    (this is "model FLOPs", the numerator of MFU).
    """
    V, W, F, S, D = _require_vocab(cfg), cfg.width, cfg.ffn_dim, cfg.seq_len, cfg.depth
    n_ffn_mats = 2 if cfg.ffn == "gelu" else 3
    block_matmul = 2 * (4 * W * W + n_ffn_mats * W * F)
    attention = 4 * S * W / 2
    forward = D * (block_matmul + attention) + 2 * W * V
    return 3.0 * forward
