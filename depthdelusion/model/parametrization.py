"""Hyperparameter-transfer parameterizations: SP, µP, depth-µP and CompleteP, as one table.

m_N = width / base_width and m_L = depth / base_depth; α = ½ (depth-µP) or 1 (CompleteP).
Every parameter belongs to one group, set as its `group` metadata where the model creates it;
per group the table gives multipliers of the base model's init std, AdamW learning rate,
decoupled weight decay and epsilon. The model reads the init multipliers and the two forward multipliers
(residual branch m_L^-α, output logits 1/m_N); the optimizer reads the rest. At the base
shape (m_N = m_L = 1) every parameterization is SP. Rules and sources: docs/parametrization.md
(Dey et al. 2025 "Don't be lazy: CompleteP ...", Table 1; Yang et al. 2022, Tensor Programs V).
"""
from __future__ import annotations

import dataclasses

from depthdelusion.config import ModelConfig

# The parameter groups; model/transformer.py sets each parameter's `group` metadata to one of them.
GROUPS = ("embedding", "hidden_matrix", "hidden_bias", "block_norm", "final_norm", "head", "head_bias")
# Groups inside the residual blocks: their gradients carry the branch multiplier m_L^-α.
BLOCK_GROUPS = ("hidden_matrix", "hidden_bias", "block_norm")
# Depth exponent α of the residual-branch multiplier m_L^-α; None: no depth scaling.
ALPHA = {"sp": None, "mup": None, "depth_mup": 0.5, "completep": 1.0}


@dataclasses.dataclass(frozen=True)
class GroupRule:
    """Multipliers of the base model's values for one parameter group."""

    init_std: float = 1.0  # × model.init_std (std, not variance)
    lr: float = 1.0  # × train.lr (and its schedule)
    weight_decay: float = 1.0  # × train.weight_decay (where weight decay applies at all)
    eps: float = 1.0  # × train.eps


def width_multiplier(cfg: ModelConfig) -> float:
    """m_N = width / base_width (1 under SP)."""
    return 1.0 if cfg.parametrization == "sp" else cfg.width / cfg.base_width


def depth_multiplier(cfg: ModelConfig) -> float:
    """m_L = depth / base_depth (1 unless the parameterization scales with depth)."""
    return 1.0 if ALPHA[cfg.parametrization] is None else cfg.depth / cfg.base_depth


def residual_multiplier(cfg: ModelConfig) -> float:
    """x <- x + m_L^-α F(LN x): 1 under SP and µP."""
    alpha = ALPHA[cfg.parametrization]
    return 1.0 if alpha is None else depth_multiplier(cfg) ** -alpha


def logit_multiplier(cfg: ModelConfig) -> float:
    """logits = (h W_head) / m_N: 1 under SP."""
    return 1.0 / width_multiplier(cfg)


def residual_init_depth(cfg: ModelConfig) -> int:
    """GPT-2 starts residual-output projections std/sqrt(2 D) small. Under depth-µP and CompleteP
    the branch multiplier carries the depth scaling, so D is the base depth there."""
    return cfg.depth if ALPHA[cfg.parametrization] is None else cfg.base_depth


def group_rule(cfg: ModelConfig, group: str) -> GroupRule:
    """The multipliers of `group` under cfg.parametrization (Dey et al. 2025, Table 1)."""
    if group not in GROUPS:
        raise ValueError(f"unknown parameter group {group!r}: valid groups are {', '.join(GROUPS)}")
    if cfg.parametrization == "sp":
        return GroupRule()
    m_N, m_L = width_multiplier(cfg), depth_multiplier(cfg)
    alpha = ALPHA[cfg.parametrization] or 0.0
    depth_lr = m_L ** (alpha - 1)  # 1 under µP; m_L^-½ under depth-µP; 1 under CompleteP
    # AdamW eps tracks the gradient RMS of the group: 1/m_N in every group (logits are 1/m_N),
    # times the branch multiplier inside blocks (measured: docs/parametrization.md).
    eps = 1.0 / m_N * (m_L ** -alpha if group in BLOCK_GROUPS else 1.0)
    if group == "hidden_matrix":
        return GroupRule(init_std=m_N ** -0.5, lr=depth_lr / m_N, weight_decay=m_N, eps=eps)
    if group in ("hidden_bias", "block_norm"):
        return GroupRule(lr=depth_lr, eps=eps)
    return GroupRule(eps=eps)  # embedding, final norm, head: base init and lr


def rules_table(cfg: ModelConfig) -> dict[str, GroupRule]:
    return {group: group_rule(cfg, group) for group in GROUPS}

