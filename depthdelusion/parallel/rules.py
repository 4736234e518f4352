"""Logical axis -> mesh axis rules: the one table that decides how tensors are sharded.

Model code names logical axes only (`embed`, `mlp`, `heads`, ...); this table maps them onto the
mesh axes (data, fsdp, tensor). A dimension that does not divide evenly by its mesh axes is
replicated instead (e.g. the GPT-2 vocabulary, 50,257, is odd).
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor")

# (logical axis, mesh axes it is split over). Anything not listed is replicated.
LOGICAL_AXIS_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("batch", ("data", "fsdp")),  # activations: batch over every data-parallel axis
    ("embed", ("fsdp",)),  # parameters: ZeRO-3 style sharding of the model dimension
    ("mlp", ("tensor",)),  # Megatron-style column/row split of the FFN
    ("heads", ("tensor",)),  # and of attention heads
    ("vocab", ("tensor",)),
    ("layers", ()),  # the scanned axis stays whole on every device
)
_RULES = dict(LOGICAL_AXIS_RULES)

_active_mesh: contextvars.ContextVar[Mesh | None] = contextvars.ContextVar("active_mesh", default=None)


def partition_spec(
    logical_axes: Sequence[str | None], shape: Sequence[int], mesh: Mesh
) -> PartitionSpec:
    """PartitionSpec for a tensor of `shape` whose dimensions carry `logical_axes`."""
    if len(logical_axes) != len(shape):
        raise ValueError(f"logical axes {tuple(logical_axes)} do not match shape {tuple(shape)}")
    used: set[str] = set()
    spec = []
    for axis, size in zip(logical_axes, shape):
        mesh_axes = tuple(a for a in _RULES.get(axis, ()) if mesh.shape[a] > 1 and a not in used)
        if mesh_axes and size % int(np.prod([mesh.shape[a] for a in mesh_axes])) == 0:
            used.update(mesh_axes)
            spec.append(mesh_axes if len(mesh_axes) > 1 else mesh_axes[0])
        else:
            spec.append(None)
    return PartitionSpec(*spec)


def named_sharding(logical_axes: Sequence[str | None], shape: Sequence[int], mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, partition_spec(logical_axes, shape, mesh))


@contextlib.contextmanager
def activation_sharding(mesh: Mesh) -> Iterator[None]:
    """While tracing under this context, `constrain` pins activations to the mesh."""
    token = _active_mesh.set(mesh)
    try:
        yield
    finally:
        _active_mesh.reset(token)


def active_mesh() -> Mesh | None:
    """The mesh of the enclosing `activation_sharding`, if any."""
    return _active_mesh.get()


def constrain(x: jax.Array, logical_axes: Sequence[str | None]) -> jax.Array:
    """Sharding constraint by logical axes; a no-op outside `activation_sharding`."""
    mesh = _active_mesh.get()
    if mesh is None:
        return x
    return jax.lax.with_sharding_constraint(x, named_sharding(logical_axes, x.shape, mesh))
