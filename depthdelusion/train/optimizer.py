"""AdamW as in the paper: warmup then cosine decay, global-norm clipping, decoupled weight decay
on matrices and embeddings only (never on norms or biases): each parameter's `weight_decay`
metadata, set where the model creates it, says which. Under µP, depth-µP and CompleteP the
Adam/decay/lr part is split into per-group transforms (model/parametrization.py); clipping
stays global and the schedule multiplies every group."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from depthdelusion.config import ModelConfig, TrainConfig
from depthdelusion.model import parametrization as pz


def schedule_values(tc: TrainConfig) -> dict[str, np.ndarray]:
    """The numbers of the learning-rate schedule (:func:`lr_at`), as the arrays a compiled step
    takes as an argument: one program then serves every lr, warmup and run length of a shape (a
    sweep's runs hit the compilation cache). Each is the float32 number optax's compiled
    warmup_cosine_decay_schedule works with, so the learning rates are the same to the bit."""
    peak, end = tc.lr, tc.lr * tc.lr_min_ratio
    alpha = 0.0 if peak == 0.0 else end / peak
    decay = max(tc.steps, tc.warmup_steps + 1) - tc.warmup_steps
    return {"peak": np.float32(peak), "neg_peak": np.float32(0.0 - peak),
            "warmup": np.int32(tc.warmup_steps), "inv_decay": np.float32(1) / np.float32(decay),
            "decay": np.float32(decay), "one_minus_alpha": np.float32(1 - alpha),
            "alpha": np.float32(alpha)}


def lr_at(count, values: dict):
    """Learning rate of update number `count` (0-based): linear warmup reaching `lr` at update
    `warmup_steps`, then cosine to `lr * lr_min_ratio` at update `steps` (optax's
    warmup_cosine_decay_schedule, written with its numbers as arguments). Update 0 already
    uses lr / warmup_steps (optax's schedule would waste it at 0)."""
    v, step = values, count + 1
    frac = 1 - jnp.clip(step, 0, v["warmup"]) / v["warmup"]
    warmup_lr = v["neg_peak"] * frac + v["peak"]
    # π·s/decay as optax's compiled schedule computes it: XLA turns x / constant into x · (1/constant)
    since = jnp.minimum(step - v["warmup"], v["decay"])
    cosine = 0.5 * (1 + jnp.cos(jnp.pi * since * v["inv_decay"]))
    cosine_lr = v["peak"] * (v["one_minus_alpha"] * cosine + v["alpha"])
    return jnp.where(step < v["warmup"], warmup_lr, cosine_lr)


def lr_schedule(tc: TrainConfig) -> optax.Schedule:
    """:func:`lr_at` with `tc`'s numbers fixed."""
    values = schedule_values(tc)
    return lambda count: lr_at(count, values)


def _metadata(params, key: str, what: str):
    """The tree of `params` (nnx Variables) with each value replaced by its `key` metadata."""
    def read(path, variable):
        value = variable.get_metadata().get(key) if isinstance(variable, nnx.Variable) else None
        if value is None:
            name = "/".join(str(getattr(k, "key", getattr(k, "name", k))) for k in path)
            raise ValueError(f"parameter {name!r} has no {what}: create it as an nnx.Param with "
                             f"{key}=... metadata (see _matrix in depthdelusion/model/transformer.py)")
        return variable.replace(value)

    return jax.tree_util.tree_map_with_path(read, params, is_leaf=lambda x: isinstance(x, nnx.Variable))


def weight_decay_mask(params):
    """True where decoupled weight decay applies, from each parameter's `weight_decay` metadata."""
    return _metadata(params, "weight_decay", "weight-decay flag")


def param_groups(params):
    """The parameterization group of every parameter, from its `group` metadata."""
    groups = _metadata(params, "group", "parameterization group")
    for group in set(jax.tree.leaves(groups)):
        if group not in pz.GROUPS:
            raise ValueError(f"parameter group {group!r} is not one of {', '.join(pz.GROUPS)} "
                             f"(depthdelusion/model/parametrization.py)")
    return groups


def _group_adamw(tc: TrainConfig, rule: pz.GroupRule) -> optax.GradientTransformation:
    """Adam with this group's eps, decoupled decay, then the group's lr multiplier (the schedule
    comes after, shared)."""
    return optax.chain(
        optax.scale_by_adam(b1=tc.beta1, b2=tc.beta2, eps=tc.eps * rule.eps),
        optax.add_decayed_weights(tc.weight_decay * rule.weight_decay, mask=weight_decay_mask),
        optax.scale(rule.lr),
    )


def make_optimizer(tc: TrainConfig, mc: ModelConfig | None = None,
                   schedule: optax.Schedule | None = None) -> optax.GradientTransformation:
    """AdamW for the model `mc` (None or parametrization sp: one AdamW for all parameters);
    `schedule` (default :func:`lr_schedule`) gives the learning rate of each update."""
    chain = []
    if tc.grad_clip > 0:
        chain.append(optax.clip_by_global_norm(tc.grad_clip))
    if mc is None or mc.parametrization == "sp":
        chain += [
            optax.scale_by_adam(b1=tc.beta1, b2=tc.beta2, eps=tc.eps),
            optax.add_decayed_weights(tc.weight_decay, mask=weight_decay_mask),
        ]
    else:
        rules = pz.rules_table(mc)
        chain.append(optax.partition({g: _group_adamw(tc, r) for g, r in rules.items()}, param_groups))
    chain.append(optax.scale_by_learning_rate(schedule or lr_schedule(tc)))
    return optax.chain(*chain)
