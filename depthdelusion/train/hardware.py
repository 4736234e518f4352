"""Peak dense bf16 matmul throughput per chip, for MFU. CPU has no entry: FLOP/s only."""
from __future__ import annotations

import jax

# (substring of jax Device.device_kind, lower-cased) -> peak dense bf16 FLOP/s per device.
PEAK_FLOPS = (
    ("h100", 989e12),
    ("h200", 989e12),
    ("tpu v4", 275e12),
    ("tpu v5 lite", 197e12),  # v5e
    ("tpu v5e", 197e12),
    ("tpu v6", 918e12),  # v6e (Trillium)
)


def peak_flops_per_device(device: jax.Device | None = None) -> float | None:
    kind = (device or jax.devices()[0]).device_kind.lower()
    for key, flops in PEAK_FLOPS:
        if key in kind:
            return flops
    return None
