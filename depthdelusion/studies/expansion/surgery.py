"""Depth expansion: insert zero-output residual blocks into a trained model
(docs/depth_expansion.md).

A block inserted after block k (0-based, k = 0 is the bottom block) is drawn like a fresh block
from (seed, k, j), j its rank among blocks inserted after the same k (`inserted_blocks`: the one
code path of `expand --after` and of the probe, so the probe's insertion point k is the block
`expand --after k --seed s` inserts, whatever else is inserted), except its attention output and MLP down projections (`out_kernel`, `down_kernel`; their
biases start at zero anyway), which are zero: the block adds nothing to the residual stream, so
the expanded model computes the parent's function, while its other matrices are random and the
gradient through the zero projections is not (zeroing every matrix would kill it).

Optimizer state: the new blocks' Adam moments start at zero; old blocks keep theirs; the step and
Adam's step counters continue (so the new block's first updates see bias-corrected moments of a
long run: its first step is about (1-β1)/sqrt(1-β2) ≈ 0.45 of a fresh Adam's sign step).

Depth-scaled parameterizations (depth-µP, CompleteP) multiply every branch by m_L^-α with
m_L = D / base_depth, so growing D shrinks every old branch by (D_old/D_new)^α. Expansion
compensates: the old blocks' output projections (and their biases) are multiplied by
c = (D_new/D_old)^α, so the function is unchanged; their Adam moments are rescaled with the
gradient they will see (∂L/∂W scales by 1/c: mu / c, nu / c²), so the Adam direction is unchanged.
From then on the new depth's rules apply: under CompleteP (α = 1) the hidden lr is depth-free and
the block eps falls by 1/c — matching the 1/c gradients of the rescaled projections (the other
block parameters' gradients do not change, so their eps is 1/c smaller than before); under
depth-µP the hidden lr falls by c^-1 (m_L^(α-1)). The old projections' updates move the function
by branch × lr, i.e. 1/c less per step than before the expansion: exactly what the
parameterization prescribes for a model of the new depth.

On disk: `expand_run` writes a new run directory (config.yaml with the new depth, one checkpoint at
the parent's step with the parent's data-iterator state, expansion.json naming the parent). The
run trains and resumes like any other; metrics.jsonl starts after the parent's step.
"""
from __future__ import annotations

# The module's note: JAX, flax, orbax, grain and the model, trainer and data modules are imported
# inside the functions that run them, because the expansion study's tables read run configs and
# probe caches through this module without them (JAX with flax: about 13 s of import, measured).
import copy
import dataclasses
import json
import re
from typing import Any, Callable, Sequence

import numpy as np
from etils import epath

from depthdelusion import rundir
from depthdelusion.analysis.fitting.options import SEED
from depthdelusion.config import Config, MeshConfig, ModelConfig, parse_override, set_field
from depthdelusion.model import parametrization as pz

# Projections that write into the residual stream: zero in an inserted block, rescaled by c in
# the old blocks under a depth-scaled parameterization.
ZERO_PROJECTIONS = ("out_kernel", "down_kernel")
RESIDUAL_WRITERS = ("out_kernel", "down_kernel", "out_b", "down_b")
_NAME = re.compile(r"\['([A-Za-z0-9_]+)'\](?:\.value)?$")


def parse_after(text: str, depth: int) -> tuple[int, ...]:
    """`"0,3"` -> (0, 3): blocks to insert after, sorted; each in 0..depth-1 (repeats insert
    several blocks at the same place)."""
    try:
        after = tuple(sorted(int(part) for part in str(text).split(",") if part.strip()))
    except ValueError:
        raise ValueError(f"--after {text!r}: expected block indices like 0 or 0,3 (comma-separated "
                         "integers)") from None
    if not after:
        raise ValueError(f"--after {text!r}: give at least one block index")
    bad = [k for k in after if not 0 <= k < depth]
    if bad:
        raise ValueError(f"--after {text!r}: block indices must be in 0..{depth - 1} (the parent "
                         f"has {depth} blocks; k inserts after block k, 0 = bottom), got {bad}")
    return after


def layout(depth: int, after: Sequence[int]) -> tuple[list[int], list[int]]:
    """(old_positions, new_positions): where each parent block and each inserted block sits in
    the expanded stack of depth + len(after) blocks."""
    old, new = [], []
    position = 0
    for layer in range(depth):
        old.append(position)
        position += 1
        for _ in range(sum(1 for k in after if k == layer)):
            new.append(position)
            position += 1
    return old, new


def branch_compensation(model: ModelConfig, new_depth: int) -> float:
    """c = (D_new / D_old)^α: the old blocks' output projections are multiplied by c so that
    m_L^-α W is unchanged (1 under SP and µP)."""
    return pz.residual_multiplier(model) / pz.residual_multiplier(dataclasses.replace(model, depth=new_depth))


def expanded_model_config(model: ModelConfig, n_new: int) -> ModelConfig:
    return dataclasses.replace(model, depth=model.depth + n_new)


def fresh_blocks(model: ModelConfig, n: int, seed: int) -> dict[str, np.ndarray]:
    """{name: [n, ...]}: n blocks drawn like fresh ones (the parameterization's init) with the
    residual-writing projections zero."""
    from flax import nnx  # JAX: see the module's note

    from depthdelusion.model.transformer import Blocks

    blocks = Blocks(dataclasses.replace(model, depth=n), rngs=nnx.Rngs(params=seed))
    values = {name: np.asarray(v[...]) for name, v in blocks.params.items()}
    for name in ZERO_PROJECTIONS:
        values[name] = np.zeros_like(values[name])
    return values


def inserted_blocks(model: ModelConfig, after: Sequence[int], seed: int) -> dict[str, np.ndarray]:
    """{name: [len(after), ...]}: the blocks inserted after each k of sorted(`after`), each drawn
    by `fresh_blocks` from its own seed, a function of (seed, k, j) only (j counts earlier
    insertions after the same k)."""
    after = sorted(after)
    parts = []
    for i, k in enumerate(after):
        own_seed = np.random.SeedSequence([seed, k, after[:i].count(k)]).generate_state(1)[0]
        parts.append(fresh_blocks(model, 1, int(own_seed)))
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


def leaf_name(key: str) -> str:
    """The parameter name at the end of a flat key, e.g. `out_kernel`."""
    match = _NAME.search(key)
    if not match:
        raise ValueError(f"state key {key!r} does not end with a parameter name")
    return match.group(1)


def state_kind(key: str) -> str:
    """What a TrainState flat key holds: a parameter, an Adam moment, or other state."""
    if key.startswith(".params"):
        return "param"
    if ".mu[" in key:
        return "mu"
    if ".nu[" in key:
        return "nu"
    return "other"


def insert_blocks(flat: dict[str, Any], target_shapes: dict[str, tuple], depth: int,
                  after: Sequence[int], fresh: dict[str, np.ndarray], c: float,
                  kind: Callable[[str], str] = state_kind) -> dict[str, np.ndarray]:
    """The expanded flat state. `flat` is the parent's {key: array}; `target_shapes` the child's
    keys and shapes. Leaves under ['blocks'] gain the new layers (fresh values for parameters,
    zeros for optimizer state); everything else is copied."""
    old_pos, new_pos = layout(depth, after)
    new_depth = depth + len(after)
    out: dict[str, np.ndarray] = {}
    for key, shape in target_shapes.items():
        if key not in flat:
            raise ValueError(f"the parent's checkpoint has no {key!r}: is it a run of this code's "
                             "model and optimizer?")
        parent = np.asarray(flat[key])
        if "['blocks']" not in key:
            if parent.shape != tuple(shape):
                raise ValueError(f"{key}: parent shape {parent.shape}, expected {tuple(shape)}")
            out[key] = parent
            continue
        if parent.shape[0] != depth or tuple(shape) != (new_depth, *parent.shape[1:]):
            raise ValueError(f"{key}: parent shape {parent.shape} does not expand to {tuple(shape)}")
        name, what = leaf_name(key), kind(key)
        child = np.zeros(shape, parent.dtype)
        old = parent
        if c != 1.0 and name in RESIDUAL_WRITERS:
            if what == "other":
                raise ValueError(f"{key}: no rule to rescale this optimizer state under the depth "
                                 "compensation")
            old = parent * {"param": c, "mu": 1.0 / c, "nu": 1.0 / c ** 2}[what]
        child[old_pos] = old
        if what == "param":
            child[new_pos] = fresh[name].astype(parent.dtype)
        out[key] = child
    return out


def expand_params(params: Any, model: ModelConfig, after: Sequence[int], seed: int = SEED,
                  fresh: dict[str, np.ndarray] | None = None):
    """In memory: (child ModelConfig, child params nnx.State) for a model's nnx.State of Params.
    `fresh`: the inserted blocks' values ({name: [len(after), ...]}); default `inserted_blocks`."""
    import jax  # JAX: see the module's note
    from flax import nnx

    from depthdelusion.model.transformer import Transformer

    after = tuple(sorted(after))
    child_model = expanded_model_config(model, len(after))
    abstract = nnx.state(nnx.eval_shape(lambda: Transformer(child_model, rngs=nnx.Rngs(0))), nnx.Param)
    flat_parent = {jax.tree_util.keystr(p): v for p, v in jax.tree_util.tree_flatten_with_path(params)[0]}
    leaves, treedef = jax.tree_util.tree_flatten_with_path(abstract)
    shapes = {jax.tree_util.keystr(p): leaf.shape for p, leaf in leaves}
    fresh = inserted_blocks(model, after, seed) if fresh is None else fresh
    flat = insert_blocks(flat_parent, shapes, model.depth, after, fresh,
                         branch_compensation(model, child_model.depth), kind=lambda key: "param")
    return child_model, jax.tree_util.tree_unflatten(treedef, [jax.numpy.asarray(flat[k]) for k in shapes])


# --- run directories -------------------------------------------------------------------------


def read_run_config(run_dir) -> Config:
    cfg = rundir.read_config(run_dir)
    if cfg is None:
        raise FileNotFoundError(f"{run_dir}: no {rundir.CONFIG} (not a run directory)")
    if cfg.model.vocab_size is None:
        raise ValueError(f"{run_dir}/{rundir.CONFIG}: model.vocab_size is null (the run never started)")
    return cfg.validate()


def latest_step(run_dir) -> int:
    directory = epath.Path(run_dir) / "checkpoints"
    steps = sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.exists() else []
    if not steps:
        raise FileNotFoundError(f"{run_dir}: no checkpoint under checkpoints/ to expand or probe")
    return steps[-1]


def single_device_trainer(cfg: Config):
    """The run's compiled pieces on one device (surgery and probes are single-device tools)."""
    import jax  # JAX: see the module's note

    from depthdelusion.parallel.mesh import make_mesh
    from depthdelusion.train.step import build_trainer

    mesh = make_mesh(MeshConfig(data=1, fsdp=1, tensor=1), devices=jax.devices()[:1])
    return build_trainer(dataclasses.replace(cfg, mesh=MeshConfig(1, 1, 1)), mesh), mesh


def restore_state(run_dir, cfg: Config, step: int | None = None):
    """(step, flat {key: array}, TrainState, trainer) of a run's checkpoint, on one device."""
    import jax  # JAX: see the module's note
    import orbax.checkpoint as ocp

    from depthdelusion.train.checkpoints import absolute, abstract_flat_state

    step = latest_step(run_dir) if step is None else step
    trainer, _ = single_device_trainer(cfg)
    target, treedef = abstract_flat_state(trainer.abstract_state, trainer.state_sharding)
    with ocp.CheckpointManager(absolute(run_dir) / "checkpoints") as manager:
        restored = manager.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(target)))
    flat = dict(restored["state"])
    state = jax.tree_util.tree_unflatten(treedef, [flat[k] for k in target])
    return step, flat, state, trainer


def expand_run(run_dir, after: Sequence[int], out, seed: int = SEED, overrides: Sequence[str] = (),
               step: int | None = None) -> dict:
    """Write the expanded run directory `out` from the parent's checkpoint at `step` (default the
    newest); returns what expansion.json records."""
    import grain  # JAX: see the module's note
    import orbax.checkpoint as ocp
    from depthdelusion.train.checkpoints import (
        FrozenIteratorState,
        absolute,
        abstract_flat_state,
    )

    run_dir, out = epath.Path(run_dir), epath.Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"--out {out}: exists and is not empty; choose a new run directory")
    cfg = read_run_config(run_dir)
    after = tuple(sorted(after))
    child = copy.deepcopy(cfg)
    child.model = expanded_model_config(cfg.model, len(after))
    for text in overrides:
        key, value = parse_override(text)
        if not key.startswith("train.") or key == "train.batch_size":
            raise ValueError(f"--set {text}: only train.* fields other than train.batch_size may change "
                             "at expansion (the model shape comes from --after, the data position "
                             "from the parent)")
        set_field(child, key, value)
    child.validate()

    step, flat, _, _ = restore_state(run_dir, cfg, step)
    if child.train.steps < step:
        raise ValueError(f"train.steps={child.train.steps} is before the parent's step {step}: "
                         "pass --set train.steps=N with N >= the parent's step to train on")
    data_dir = run_dir / "checkpoints" / str(step) / "data"
    data_files = sorted(p.name for p in data_dir.iterdir() if p.name.endswith(".json"))
    if data_files != ["process_0-of-1.json"]:
        raise ValueError(f"{data_dir}: expansion supports single-process runs (found {data_files})")
    data_state = json.loads((data_dir / "process_0-of-1.json").read_text())

    trainer, _ = single_device_trainer(child)
    target, _ = abstract_flat_state(trainer.abstract_state, trainer.state_sharding)
    c = branch_compensation(cfg.model, child.model.depth)
    new_flat = insert_blocks({k: np.asarray(v) for k, v in flat.items()},
                             {k: v.shape for k, v in target.items()}, cfg.model.depth, after,
                             inserted_blocks(cfg.model, after, seed), c)

    out.mkdir(parents=True, exist_ok=True)
    rundir.write_config(out, child)
    with ocp.CheckpointManager(absolute(out) / "checkpoints",
                               options=ocp.CheckpointManagerOptions(create=True)) as manager:
        manager.save(step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(new_flat),
            data=grain.checkpoint.CheckpointSave(FrozenIteratorState(data_state))))
        manager.wait_until_finished()
    old_pos, new_pos = layout(cfg.model.depth, after)
    record = {"parent": str(run_dir), "parent_step": step, "parent_depth": cfg.model.depth,
              "after": list(after), "depth": child.model.depth, "seed": seed,
              "old_positions": old_pos, "new_positions": new_pos,
              "parametrization": cfg.model.parametrization, "branch_compensation": c}
    (out / "expansion.json").write_text(json.dumps(record, indent=2) + "\n")
    return record
