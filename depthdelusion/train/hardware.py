"""The accelerators we know: peak dense bf16 FLOP/s, HBM per device and, for TPUs, the generation
as slice names spell it. MFU (train loop, bench) and the memory planner read this table only.

A device is one GPU or one TPU chip (JAX's device on v4 and v5p is a megacore chip). Figures
are the vendors' datasheet values without structured sparsity. A device kind not listed (CPU,
an unknown part) has no peak: FLOP/s are reported, MFU is not.
"""
from __future__ import annotations

from typing import NamedTuple

GiB = 1024 ** 3
GB = 10 ** 9


class Chip(NamedTuple):
    name: str  # as users say it: "H100 SXM", "v5e"
    device_kinds: tuple[str, ...]  # jax.Device.device_kind exactly as JAX reports it
    peak_flops: float  # dense bf16 FLOP/s per device
    hbm_bytes: int  # per device
    generation: str | None = None  # TPUs: as in slice names (v4-32, v5e-16); None for GPUs
    cores_in_name: bool = False  # v4-32 / v5p-N count TensorCores (2 per chip); v5e / v6e count chips


CHIPS = (
    # NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100): BF16 Tensor Core 1,979 TFLOPS (SXM)
    # and 1,513 TFLOPS (PCIe) with sparsity, half that dense; 80 GB HBM3 (SXM), 80 GB HBM2e (PCIe).
    Chip("H100 SXM", ("NVIDIA H100 80GB HBM3",), 989e12, 80 * GB),
    Chip("H100 PCIe", ("NVIDIA H100 PCIe",), 756e12, 80 * GB),
    # Same datasheet, H100 NVL column: 1,671 TFLOPS sparse bf16 per GPU, 94 GB HBM3.
    Chip("H100 NVL", ("NVIDIA H100 NVL",), 835e12, 94 * GB),
    # NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200): same Hopper core as the H100 SXM,
    # 1,979 TFLOPS sparse bf16; 141 GB HBM3e.
    Chip("H200", ("NVIDIA H200",), 989e12, 141 * GB),
    # NVIDIA A100 datasheet (nvidia.com/en-us/data-center/a100): BF16 Tensor Core 312 TFLOPS dense,
    # SXM4 and PCIe alike; 40 GB HBM2 or 80 GB HBM2e.
    Chip("A100 40GB", ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"), 312e12, 40 * GB),
    Chip("A100 80GB", ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"), 312e12, 80 * GB),
    # Google Cloud TPU system-architecture pages (cloud.google.com/tpu/docs/v4, v5e, v5p, v6e):
    # peak compute per chip (bf16) and HBM per chip. JAX names v5e "TPU v5 lite", v5p "TPU v5",
    # v6e "TPU v6 lite"; the "v5e"-style spellings are aliases some runtimes report.
    Chip("v4", ("TPU v4",), 275e12, 32 * GiB, "v4", True),
    Chip("v5e", ("TPU v5 lite", "TPU v5e"), 197e12, 16 * GiB, "v5e"),
    Chip("v5p", ("TPU v5", "TPU v5p"), 459e12, 95 * GiB, "v5p", True),
    Chip("v6e", ("TPU v6 lite", "TPU v6e"), 918e12, 32 * GiB, "v6e"),
)
TPU_GENERATIONS = {c.generation: c for c in CHIPS if c.generation}
_BY_KIND = {kind.lower(): chip for chip in CHIPS for kind in chip.device_kinds}


def chip_of(device_kind: str) -> Chip | None:
    """The table's entry for a `jax.Device.device_kind` (case and outer spaces ignored); None if
    the part is not listed. Matched whole: "TPU v5" (v5p) is not a prefix of "TPU v5 lite"."""
    return _BY_KIND.get(device_kind.strip().lower())


def peak_flops_per_device(device=None) -> float | None:
    """Peak dense bf16 FLOP/s of `device` (default: the first JAX device); None when unknown."""
    if device is None:
        import jax

        device = jax.devices()[0]
    chip = chip_of(device.device_kind)
    return chip.peak_flops if chip else None
