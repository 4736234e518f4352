"""The train step: a pure `(state, batch) -> (state, metrics)` function, jitted over a mesh.

Two variants are compiled: the plain step (loss, lr, global grad norm) and the layer-stats step,
which also returns per-layer weight-gradient norms and activation-gradient norms ‖∂L/∂h_l‖ of
the residual stream entering each block (from `grad_probe`, no second backward pass).
With `train.grad_accum_steps` = k > 1 the batch is processed as k microbatches in a `lax.scan`
(activations of one microbatch live at a time) and their gradients averaged before one update.
"""
from __future__ import annotations

import copy
import dataclasses
from collections import OrderedDict
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from depthdelusion.config import Config
from depthdelusion.model.transformer import Transformer, check_splash, splash_interpreted
from depthdelusion.parallel.rules import activation_sharding, constrain, named_sharding
from depthdelusion.train.optimizer import lr_at, make_optimizer, schedule_values


class TrainState(NamedTuple):
    step: jax.Array  # optimizer updates done, int32 scalar
    params: nnx.State
    opt_state: optax.OptState
    # int32[3]: steps whose loss or gradient was not finite (their update was not applied), the
    # first such step (1-based, 0 = none), and its first block with a non-finite gradient norm
    # (-1: the blocks were finite, the non-finite value was in the loss, embeddings or head).
    nonfinite: jax.Array


def shardings_from_metadata(tree: Any, mesh: Mesh) -> Any:
    """NamedShardings for a pytree holding nnx Variables: from each Variable's `logical_axes`;
    plain arrays (step counters, ...) are replicated. Returns a tree prefix of `tree`."""
    replicated = NamedSharding(mesh, PartitionSpec())

    def one(leaf):
        if isinstance(leaf, nnx.Variable):
            axes = leaf.get_metadata().get("logical_axes")
            # hasattr: optax.partition leaves a shapeless MaskedNode in other groups' Adam state
            if axes is not None and hasattr(leaf.get_value(), "shape"):
                return named_sharding(axes, leaf.get_value().shape, mesh)
        return replicated

    return jax.tree.map(one, tree, is_leaf=lambda x: isinstance(x, nnx.Variable))


def batch_sharding(mesh: Mesh, global_batch: int, grad_accum_steps: int = 1) -> NamedSharding:
    n_data = mesh.shape["data"] * mesh.shape["fsdp"]
    if global_batch % n_data:
        raise ValueError(
            f"train.batch_size={global_batch} is not divisible by the data-parallel size "
            f"data*fsdp={n_data} of the mesh: use a multiple of {n_data}"
        )
    if global_batch % (grad_accum_steps * n_data):
        raise ValueError(
            f"train.batch_size={global_batch} is not divisible by train.grad_accum_steps={grad_accum_steps} "
            f"x the data-parallel size data*fsdp={n_data}: every microbatch is split over the "
            f"data-parallel devices; use a multiple of {grad_accum_steps * n_data}"
        )
    return named_sharding(("batch", None), (global_batch, 1), mesh)


def microbatches(tokens_BxS1: jax.Array, k: int) -> jax.Array:
    """[B, S+1] -> [k, B/k, S+1]; microbatch i holds rows i, i+k, i+2k, ... A device's
    contiguous block of batch rows is spread evenly over the microbatches, so splitting needs no
    communication and every microbatch keeps the batch sharding."""
    B = tokens_BxS1.shape[0]
    tokens_KxMxS1 = jnp.swapaxes(tokens_BxS1.reshape(B // k, k, -1), 0, 1)
    return constrain(tokens_KxMxS1, (None, "batch", None))


def per_layer_sq_norm(stacked_grads: Any) -> jax.Array:
    """‖g‖² per layer from stacked [D, ...] gradient leaves: a reduction over non-layer axes."""
    return sum(
        jnp.sum(jnp.square(g.astype(jnp.float32)), axis=tuple(range(1, g.ndim)))
        for g in jax.tree.leaves(stacked_grads)
    )


def _tree_sq_norm(tree: Any) -> jax.Array:
    return sum(jnp.sum(jnp.square(g.astype(jnp.float32))) for g in jax.tree.leaves(tree))


def cross_entropy(logits_BxSxV: jax.Array, targets_BxS: jax.Array) -> jax.Array:
    """Mean next-token cross-entropy, nats per token."""
    return optax.softmax_cross_entropy_with_integer_labels(logits_BxSxV, targets_BxS).mean()


class Trainer(NamedTuple):
    """Everything compiled for one run: the initial state and the two step variants."""

    init: Any  # () -> TrainState, sharded
    abstract_state: Any  # TrainState of ShapeDtypeStructs
    step: Any  # (state, tokens) -> (state, metrics)
    step_with_layer_stats: Any
    eval_loss: Any  # (state, tokens) -> mean loss, no update
    state_sharding: Any
    batch_sharding: NamedSharding


class _Bound:
    """A jitted function — or its lowered or compiled form — with its last arguments bound to
    values it takes as arguments, not as constants: the seed, the schedule's numbers. One
    program then serves every seed, lr, warmup and run length of a shape, so the runs of a sweep
    reuse it from the compilation cache. Called, lowered and compiled like the function; its
    other attributes are the function's own (they do not know the bound arguments)."""

    def __init__(self, fn, *bound):
        self.fn, self.bound = fn, bound

    def __call__(self, *args):
        return self.fn(*args, *self.bound)

    def lower(self, *args):
        return _Bound(self.fn.lower(*args, *self.bound), *self.bound)

    def compile(self, *args, **kwargs):
        return _Bound(self.fn.compile(*args, **kwargs), *self.bound)

    def __getattr__(self, name):  # as_text, memory_analysis, cost_analysis, ...
        return getattr(self.fn, name)


# A run's own numbers: arguments of its programs (_Bound), not part of them — exactly the fields
# optimizer.schedule_values and the seed read. A field missing here only widens the shape key;
# one listed here that a program reads would let a run reuse another's program.
_RUN_ARGUMENTS = frozenset({"seed", "lr", "warmup_steps", "steps", "lr_min_ratio"})
_KEPT_SHAPES = 4
_trainers: OrderedDict = OrderedDict()  # shape key -> its programs (_build_programs)


def _shape_key(cfg: Config, mesh: Mesh) -> tuple:
    """What the programs depend on: the model, the training settings but the run's own numbers,
    the mesh, and whether the splash kernel is interpreted (read when tracing)."""
    train = {k: v for k, v in dataclasses.asdict(cfg.train).items() if k not in _RUN_ARGUMENTS}
    return repr(dataclasses.asdict(cfg.model)), repr(train), mesh, splash_interpreted()


def build_trainer(cfg: Config, mesh: Mesh, *, reuse: bool = True) -> Trainer:
    """The run's trainer. Runs of one shape share the jitted functions of the last few shapes
    built in this process, bound to their own seed and schedule: a sweep's second run of a shape
    is neither traced nor compiled again. `reuse=False` builds afresh and keeps nothing (what
    times or measures a compile: bench, plan)."""
    if reuse:
        key = _shape_key(cfg, mesh)
        programs = _trainers.pop(key, None) or _build_programs(cfg, mesh)
        _trainers[key] = programs
        while len(_trainers) > _KEPT_SHAPES:
            _trainers.popitem(last=False)
    else:
        programs = _build_programs(cfg, mesh)
    values = schedule_values(cfg.train)
    return programs._replace(init=_Bound(programs.init, _seed_data(cfg.train.seed)),
                             step=_Bound(programs.step, values),
                             step_with_layer_stats=_Bound(programs.step_with_layer_stats, values))


def _seed_data(seed: int) -> np.ndarray:
    """nnx.Rngs(params=seed)'s key, as data: every seed jax takes, the same parameters."""
    return np.asarray(jax.random.key_data(jax.random.key(seed)))


def _microbatched_grads(grad_fn, n_micro: int, params_sharding):
    """grad_fn (params, probes_D, tokens) -> (loss, (grads, probe_grads_D)) over k = n_micro
    microbatches in turn: the mean loss, its gradient and the probes' (‖∂L/∂h_l‖²).
    L = (1/k) Σ_i L_i, so ∂L/∂θ = (1/k) Σ_i ∂L_i/∂θ and, as ∂L/∂h_l is (1/k) ∂L_i/∂h_l on
    microbatch i's rows, ‖∂L/∂h_l‖² = (1/k²) Σ_i ‖∂L_i/∂h_l‖². Sums are kept in float32."""
    if n_micro == 1:
        return grad_fn
    f32 = lambda tree: jax.tree.map(lambda x: x.astype(jnp.float32), tree)

    def loss_and_grads(params, probes_D, tokens_BxS1):
        def one(carry, micro_MxS1):
            loss, (grads, probe_grads_D) = grad_fn(params, probes_D, micro_MxS1)
            return jax.tree.map(jnp.add, carry, f32((loss, grads, probe_grads_D))), None

        zeros = jax.tree.map(lambda x: jnp.zeros(x.shape, jnp.float32), (jnp.zeros(()), params, probes_D))
        zeros = (zeros[0], jax.lax.with_sharding_constraint(zeros[1], params_sharding), zeros[2])
        (loss, grads, probe_grads_D), _ = jax.lax.scan(one, zeros, microbatches(tokens_BxS1, n_micro))
        grads = jax.tree.map(lambda g, p: (g / n_micro).astype(p.dtype), grads, params)
        return loss / n_micro, (grads, None if probe_grads_D is None else probe_grads_D / n_micro**2)

    return loss_and_grads


def _drop_nonfinite(state: TrainState, loss, grad_norm, sq_D, params, opt_state):
    """A non-finite loss or gradient never reaches the parameters: the update is dropped, and
    state.nonfinite counts such steps and keeps the first one's step and first bad block."""
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
    keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(finite, n, o), new, old)
    params, opt_state = keep(params, state.params), keep(opt_state, state.opt_state)
    bad_D = ~jnp.isfinite(sq_D)
    bad_layer = jnp.where(bad_D.any(), jnp.argmax(bad_D), -1).astype(jnp.int32)
    count, first_step, first_layer = state.nonfinite
    first = ~finite & (count == 0)
    nonfinite = jnp.stack([
        count + (~finite).astype(jnp.int32),
        jnp.where(first, state.step + 1, first_step),
        jnp.where(first, bad_layer, first_layer),
    ])
    return params, opt_state, nonfinite


def _build_programs(cfg: Config, mesh: Mesh) -> Trainer:
    """The Trainer of a shape with its init and steps not yet bound to a run's seed and
    schedule (build_trainer binds them)."""
    # A copy: the jitted functions outlive the run (build_trainer keeps them) and trace lazily.
    mc, tc = copy.deepcopy(cfg.model), copy.deepcopy(cfg.train)
    tx = make_optimizer(tc, mc)  # the schedule does not change the state it initialises

    def create_state(key_data) -> TrainState:
        model = Transformer(mc, rngs=nnx.Rngs(params=jax.random.wrap_key_data(key_data)))
        params = nnx.state(model, nnx.Param)
        return TrainState(jnp.zeros((), jnp.int32), params, tx.init(params), jnp.array([0, 0, -1], jnp.int32))

    abstract_state = jax.eval_shape(create_state, _seed_data(0))  # shapes: any seed
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: Transformer(mc, rngs=nnx.Rngs(0))))
    state_sharding = shardings_from_metadata(abstract_state, mesh)
    data_sharding = batch_sharding(mesh, tc.batch_size, tc.grad_accum_steps)
    if mc.attention == "splash":
        check_splash(mc, mesh.devices.flat[0].platform)
    n_micro = tc.grad_accum_steps
    replicated = NamedSharding(mesh, PartitionSpec())

    def loss_fn(params, probes_D, tokens_BxS1):
        model = nnx.merge(graphdef, params)
        logits_BxSxV = model(tokens_BxS1[:, :-1], probes_D)
        return cross_entropy(logits_BxSxV, tokens_BxS1[:, 1:])

    loss_and_grads = _microbatched_grads(jax.value_and_grad(loss_fn, argnums=(0, 1)), n_micro,
                                         state_sharding.params)

    def train_step(state: TrainState, tokens_BxS1: jax.Array, values: dict, layer_stats: bool):
        schedule = lambda count: lr_at(count, values)
        step_tx = make_optimizer(tc, mc, schedule)
        probes_D = jnp.zeros((mc.depth,), jnp.float32) if layer_stats else None
        with activation_sharding(mesh):
            loss, (grads, probe_grads_D) = loss_and_grads(state.params, probes_D, tokens_BxS1)
        # The per-layer norms come free with the global norm: one reduction over the gradients.
        sq_D = per_layer_sq_norm(grads["blocks"])
        rest = {k: v for k, v in grads.items() if k != "blocks"}
        grad_norm = jnp.sqrt(jnp.sum(sq_D) + _tree_sq_norm(rest))
        updates, opt_state = step_tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        params, opt_state, nonfinite = _drop_nonfinite(state, loss, grad_norm, sq_D, params, opt_state)
        metrics = {"loss": loss, "lr": schedule(state.step), "grad_norm": grad_norm,
                   "nonfinite": nonfinite}
        if layer_stats:
            metrics["per_layer_grad_norm"] = jnp.sqrt(sq_D)
            metrics["per_layer_act_grad_norm"] = jnp.sqrt(probe_grads_D)
        return TrainState(state.step + 1, params, opt_state, nonfinite), metrics

    def compile_step(layer_stats: bool):
        return jax.jit(
            lambda state, tokens, values: train_step(state, tokens, values, layer_stats),
            in_shardings=(state_sharding, data_sharding, replicated),
            out_shardings=(state_sharding, replicated),
            donate_argnums=0,
        )

    def eval_loss(state: TrainState, tokens_BxS1: jax.Array) -> jax.Array:
        with activation_sharding(mesh):
            if n_micro == 1:
                return loss_fn(state.params, None, tokens_BxS1)
            # In microbatches too: the whole batch's logits may not fit where training's do.
            return jax.lax.map(lambda micro_MxS1: loss_fn(state.params, None, micro_MxS1),
                               microbatches(tokens_BxS1, n_micro)).mean()

    return Trainer(
        init=jax.jit(create_state, in_shardings=replicated, out_shardings=state_sharding),
        abstract_state=abstract_state,
        step=compile_step(False),
        step_with_layer_stats=compile_step(True),
        eval_loss=jax.jit(eval_loss, in_shardings=(state_sharding, data_sharding), out_shardings=replicated),
        state_sharding=state_sharding,
        batch_sharding=data_sharding,
    )
