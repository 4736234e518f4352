"""AdamW as in the paper: warmup then cosine decay, global-norm clipping, decoupled weight decay
on matrices and embeddings only (never on norms or biases). Under µP, depth-µP and CompleteP the
Adam/decay/lr part is split into per-group transforms (model/parametrization.py); clipping
stays global and the schedule multiplies every group."""
from __future__ import annotations

import jax
import optax

from depthdelusion.config import ModelConfig, TrainConfig
from depthdelusion.model import parametrization as pz

NO_DECAY_SUFFIXES = ("_scale", "_bias", "_b")  # norm scales/biases and linear biases


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


def param_name(path) -> str:
    """The last dictionary key on a pytree path: the parameter's name (e.g. `qkv_kernel`)."""
    names = [k.key for k in path if isinstance(k, jax.tree_util.DictKey)]
    return str(names[-1]) if names else ""


def weight_decay_mask(params):
    return jax.tree_util.tree_map_with_path(
        lambda path, _: not param_name(path).endswith(NO_DECAY_SUFFIXES), params
    )


def param_groups(params):
    """The parameterization group of every leaf, from its name; unknown names raise."""
    return jax.tree_util.tree_map_with_path(lambda path, _: pz.group_of(param_name(path)), params)


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
