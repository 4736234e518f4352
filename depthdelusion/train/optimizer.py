"""AdamW as in the paper: warmup then cosine decay, global-norm clipping, decoupled weight decay
on matrices and embeddings only (never on norms or biases)."""
from __future__ import annotations

import jax
import optax

from depthdelusion.config import TrainConfig

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


def make_optimizer(tc: TrainConfig) -> optax.GradientTransformation:
    chain = []
    if tc.grad_clip > 0:
        chain.append(optax.clip_by_global_norm(tc.grad_clip))
    chain += [
        optax.scale_by_adam(b1=tc.beta1, b2=tc.beta2, eps=tc.eps),
        optax.add_decayed_weights(tc.weight_decay, mask=weight_decay_mask),
        optax.scale_by_learning_rate(lr_schedule(tc)),
    ]
    return optax.chain(*chain)
