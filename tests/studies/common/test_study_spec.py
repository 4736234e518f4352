"""Every study spec is read by the one loader (studies/common/spec.py) with the field checks of run
configs: the committed experiment file loads; an unknown key (at the top or in a nested
section), a value of the wrong type or out of range is one ValueError naming the file, the
field and what would be valid; `depthdelusion <study>` prints it as one line and exits 2."""
import dataclasses

import pytest
import yaml

from depthdelusion.studies.depth_confound import study as depth_confound

from depthdelusion.studies.depth_vs_size import study as depth_vs_size

from depthdelusion.studies.lr_transfer import study as lr_transfer
from depthdelusion.studies.common.spec import load_spec

STUDIES = [(depth_confound.DepthConfoundSpec, "experiments/depth_confound.yaml", "depth-confound"),
           (lr_transfer.LrTransferSpec, "experiments/lr_transfer.yaml", "lr-transfer"),
           (depth_vs_size.DepthVsSizeSpec, "experiments/depth_vs_size.yaml", "depth-vs-size")]
IDS = [command for _, _, command in STUDIES]


def _write(tmp_path, committed: str, **changes) -> str:
    raw = yaml.safe_load(open(committed))
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({**raw, **changes}))
    return str(path)


@pytest.mark.parametrize("spec_type, committed, _", STUDIES, ids=IDS)
def test_the_committed_file_loads_into_a_frozen_spec(spec_type, committed, _):
    spec = load_spec(spec_type, committed)
    assert isinstance(spec, spec_type)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.lrs = [1.0]


@pytest.mark.parametrize("spec_type, committed, _", STUDIES, ids=IDS)
def test_an_unknown_key_names_the_file_and_the_valid_keys(tmp_path, spec_type, committed, _):
    path = _write(tmp_path, committed, widthz=[32])
    with pytest.raises(ValueError, match=rf"^{path}: unknown key widthz; valid keys are base, "):
        load_spec(spec_type, path)


@pytest.mark.parametrize("spec_type, committed, _", STUDIES, ids=IDS)
def test_a_wrong_type_names_the_file_the_field_and_the_type(tmp_path, spec_type, committed, _):
    path = _write(tmp_path, committed, lrs="many")
    with pytest.raises(ValueError, match=rf"^{path}: lrs='many': must be a list"):
        load_spec(spec_type, path)
    path = _write(tmp_path, committed, base=3)
    with pytest.raises(ValueError, match=rf"^{path}: base=3: must be a mapping"):
        load_spec(spec_type, path)
    path = _write(tmp_path, committed, lrs=[0.001, "fast"])
    with pytest.raises(ValueError, match=rf"^{path}: lrs\[1\]='fast': must be a number"):
        load_spec(spec_type, path)


def test_an_error_ends_with_the_line_of_the_field_at_fault(tmp_path):
    text = open("experiments/depth_confound.yaml").read()
    path = tmp_path / "study.yaml"
    path.write_text(text.replace("widths: [32, 64]", "widths: [32, sixty]"))
    line = 1 + text.splitlines().index("widths: [32, 64]")
    with pytest.raises(ValueError, match=rf"^{path}: widths\[1\]='sixty': must be an integer \(line {line}\)$"):
        load_spec(depth_confound.DepthConfoundSpec, path)
    path.write_text(text.replace("arm_a_depth: 2", "arm_a_depth: 3"))  # a check across fields
    line = 1 + text.splitlines().index("arm_a_depth: 2")
    with pytest.raises(ValueError, match=rf"arm_a_depth=3: must be one of depths \[2, 4, 8, 16, 32\] \(line {line}\)$"):
        load_spec(depth_confound.DepthConfoundSpec, path)


def test_a_nested_section_is_checked_like_the_top(tmp_path):
    committed = "experiments/depth_confound.yaml"
    raw = yaml.safe_load(open(committed))
    path = _write(tmp_path, committed, completep={**raw["completep"], "bogus": 1})
    with pytest.raises(ValueError, match=rf"^{path}: completep: unknown key bogus; valid keys are "
                                         "base_width, base_depth, tuned_cells"):
        load_spec(depth_confound.DepthConfoundSpec, path)
    path = _write(tmp_path, committed, iso_flop={**raw["iso_flop"], "width": 0})
    with pytest.raises(ValueError, match=rf"^{path}: iso_flop.width=0: must be a positive integer"):
        load_spec(depth_confound.DepthConfoundSpec, path)
    path = _write(tmp_path, committed, seeds=3)
    with pytest.raises(ValueError, match=rf"^{path}: seeds=3: must be a list"):
        load_spec(depth_confound.DepthConfoundSpec, path)
    path = _write(tmp_path, "experiments/depth_vs_size.yaml", warmup_fraction=1.5)
    with pytest.raises(ValueError, match=rf"^{path}: warmup_fraction=1.5: must be in \(0, 1\)"):
        load_spec(depth_vs_size.DepthVsSizeSpec, path)


@pytest.mark.parametrize("spec_type, committed, command", STUDIES, ids=IDS)
def test_the_command_prints_one_line_and_exits_2(tmp_path, capsys, spec_type, committed, command):
    from depthdelusion.cli import main

    path = _write(tmp_path, committed, lrs="many")
    assert main([command, path, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{path}: lrs='many'" in err and "Traceback" not in err


def test_the_results_objects_are_frozen():
    for results_type in (depth_confound.DepthConfoundResults, lr_transfer.LrTransferResults,
                         lr_transfer.ShapeOptimum, lr_transfer.TransferSummary):
        assert results_type.__dataclass_params__.frozen, results_type
