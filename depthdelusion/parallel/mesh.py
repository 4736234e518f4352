"""Build the (data, fsdp, tensor) device mesh from the mesh config."""
from __future__ import annotations

import jax
from jax.sharding import AxisType, Mesh

from depthdelusion.config import MeshConfig
from depthdelusion.parallel.rules import MESH_AXES


def mesh_shape(cfg: MeshConfig, n_devices: int) -> tuple[int, int, int]:
    """Resolve a -1 entry to the remaining devices and check the product equals `n_devices`."""
    sizes = [cfg.data, cfg.fsdp, cfg.tensor]
    known = 1
    for size in sizes:
        if size != -1:
            known *= size
    if -1 in sizes:
        if n_devices % known:
            raise ValueError(
                f"mesh: {n_devices} devices cannot be split with fixed axes of product {known} "
                f"(data={cfg.data}, fsdp={cfg.fsdp}, tensor={cfg.tensor})"
            )
        sizes[sizes.index(-1)] = n_devices // known
    if sizes[0] * sizes[1] * sizes[2] != n_devices:
        raise ValueError(
            f"mesh: data*fsdp*tensor = {sizes[0]}*{sizes[1]}*{sizes[2]} = "
            f"{sizes[0] * sizes[1] * sizes[2]} but {n_devices} devices are available; "
            "set one axis to -1 to take the remaining devices"
        )
    return tuple(sizes)  # type: ignore[return-value]


def make_mesh(cfg: MeshConfig, devices: list | None = None) -> Mesh:
    devices = jax.devices() if devices is None else devices
    shape = mesh_shape(cfg, len(devices))
    # Auto axes: shardings propagate GSPMD-style from the parameters and the batch.
    return jax.make_mesh(shape, MESH_AXES, axis_types=(AxisType.Auto,) * 3, devices=devices)
