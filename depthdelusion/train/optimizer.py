"""AdamW as in the paper: warmup then cosine decay, global-norm clipping, decoupled weight decay
on matrices and embeddings only (never on norms or biases): each parameter's `weight_decay`
metadata, set where the model creates it, says which. Under µP, depth-µP and CompleteP the
Adam/decay/lr part is split into per-group transforms (model/parametrization.py); clipping
stays global and the schedule multiplies every group."""
from __future__ import annotations

import jax
import optax
from flax import nnx

from depthdelusion.config import ModelConfig, TrainConfig
from depthdelusion.model import parametrization as pz


def lr_schedule(tc: TrainConfig) -> optax.Schedule:
    """Learning rate of update number `count` (0-based): linear warmup reaching `lr` at update
    `warmup_steps`, then cosine to `lr * lr_min_ratio` at update `steps`. Update 0 already
    uses lr / warmup_steps (optax's schedule would waste it at 0)."""
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=tc.lr,
        warmup_steps=tc.warmup_steps,
        decay_steps=max(tc.steps, tc.warmup_steps + 1),
        end_value=tc.lr * tc.lr_min_ratio,
    )
    return lambda count: schedule(count + 1)


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


def make_optimizer(tc: TrainConfig, mc: ModelConfig | None = None) -> optax.GradientTransformation:
    """AdamW for the model `mc` (None or parametrization sp: one AdamW for all parameters)."""
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
    chain.append(optax.scale_by_learning_rate(lr_schedule(tc)))
    return optax.chain(*chain)
