"""The own-run studies' laws per arm (studies/common/laws.py)."""
import dataclasses

import pytest

from depthdelusion.studies.common.laws import fit_arm


def test_an_arm_s_laws_are_built_once_and_frozen():
    """fit_arm returns a finished ArmLaws (here: too few cells, so its note and no fits); nothing
    fills it afterwards."""
    records = [{"depth": 2, "width": 64, "params": 1e5, "tokens": 1e6, "loss": 3.0},
               {"depth": 4, "width": 64, "params": 2e5, "tokens": 1e6, "loss": 2.9}]
    arm = fit_arm("A", records, 1, replicates=0, seed=0)
    assert (arm.rows, arm.diverged, arm.fits, arm.penalty) == (2, 1, {}, None)
    assert arm.note.startswith("fewer than 3 cells")
    with pytest.raises(dataclasses.FrozenInstanceError):
        arm.note = ""
