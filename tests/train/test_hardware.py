"""The one accelerator table: device kinds as JAX reports them map to the right part."""
from types import SimpleNamespace

import jax
import pytest

from depthdelusion.train.hardware import CHIPS, GB, GiB, TPU_GENERATIONS, chip_of, peak_flops_per_device


@pytest.mark.parametrize("device_kind, name, tflops, hbm", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989, 80 * GB),
    ("NVIDIA H100 PCIe", "H100 PCIe", 756, 80 * GB),
    ("NVIDIA H200", "H200", 989, 141 * GB),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB", 312, 40 * GB),
    ("NVIDIA A100-PCIE-40GB", "A100 40GB", 312, 40 * GB),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB", 312, 80 * GB),
    ("NVIDIA A100 80GB PCIe", "A100 80GB", 312, 80 * GB),
    ("TPU v4", "v4", 275, 32 * GiB),
    ("TPU v5 lite", "v5e", 197, 16 * GiB),
    ("TPU v5", "v5p", 459, 95 * GiB),
    ("TPU v6 lite", "v6e", 918, 32 * GiB),
])
def test_device_kinds_as_jax_reports_them_map_to_their_part(device_kind, name, tflops, hbm):
    chip = chip_of(device_kind)
    assert (chip.name, chip.peak_flops, chip.hbm_bytes) == (name, tflops * 1e12, hbm)
    assert peak_flops_per_device(SimpleNamespace(device_kind=device_kind)) == tflops * 1e12


def test_unknown_parts_and_cpu_have_no_peak_and_names_match_whole():
    assert peak_flops_per_device(jax.devices()[0]) is None  # the test host's CPU
    assert chip_of("NVIDIA H100 80GB HBM3e") is None and chip_of("TPU v7") is None
    assert chip_of("tpu v5 lite ").name == "v5e"  # case and outer spaces do not matter


def test_every_kind_names_one_part_and_tpu_generations_are_the_plans_topologies():
    kinds = [k.lower() for c in CHIPS for k in c.device_kinds]
    assert len(kinds) == len(set(kinds))
    assert sorted(TPU_GENERATIONS) == ["v4", "v5e", "v5p", "v6e"]
    assert all(TPU_GENERATIONS[g].generation == g for g in TPU_GENERATIONS)
