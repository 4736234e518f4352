"""The scripts under analysis/open_points/ run against today's package (on a tiny corpus)."""
import importlib.util
import math
from pathlib import Path

import pytest

from depthdelusion.config import DataConfig

SCRIPTS = Path(__file__).resolve().parents[2] / "analysis" / "open_points"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow  # compiles and differentiates a model
def test_grad_rms_by_group_measures_every_group():
    script = load("grad_rms_by_group")
    rms, mc = script.group_grad_rms(32, 2, DataConfig(builtin_documents=200))
    assert mc.parametrization == "completep" and (mc.width, mc.depth) == (32, 2)
    assert set(rms) == {"block_norm", "hidden_bias", "hidden_matrix", "embedding", "final_norm", "head"}
    assert all(math.isfinite(v) and v > 0 for v in rms.values())
