"""The coordinate check on a small grid: CompleteP keeps the last block's output RMS flat across
width and depth after 10 updates; SP lets it grow with width.

Thresholds come from measurement (docs/parametrization.md, "Coordinate check"): on this grid
(widths 32, 128 × depths 2, 8, base 32 × 2, lr 1e-2, batch 4 × 32 bytes) CompleteP's max/min
spread over the four shapes was 2.03 and SP's width growth (W=128 over W=32, depth 2) 21×. The asserts
leave room either side: spread < 3 for CompleteP, width growth > 8 for SP.
"""
import dataclasses
import json

import pytest

from depthdelusion.cli import main
from depthdelusion.studies.coord_check import study as coord_check
SETUP = coord_check.CoordCheckSpec(widths=[32, 128], depths=[2, 8], parametrizations=["sp", "completep"], steps=10,
                                   lr=1e-2, batch_size=4, seq_len=32, head_dim=16, base_width=32, base_depth=2)


@pytest.fixture(scope="module")
def rows():
    quiet = dict(log=lambda _: None)  # SP at depth 2 only: enough to see width growth, half the cost
    return (coord_check.run(dataclasses.replace(SETUP, parametrizations=["sp"], depths=[2]), **quiet)
            + coord_check.run(dataclasses.replace(SETUP, parametrizations=["completep"]), **quiet))


def test_completep_last_block_rms_is_flat_across_width_and_depth(rows):
    (cp,) = [s for s in coord_check.spreads(rows, SETUP.steps) if s.parametrization == "completep"]
    assert cp.spread < 3.0


def test_sp_last_block_rms_grows_with_width(rows):
    sp, cp = sorted(coord_check.spreads(rows, SETUP.steps), key=lambda s: s.parametrization != "sp")
    assert sp.width_growth > 8.0
    assert sp.width_growth > 5 * cp.width_growth


def test_records_every_block_and_step_and_agrees_at_the_base_shape(rows):
    """Rows for steps 0..10 with one RMS per block; at the base shape CompleteP is SP's math
    (to float rounding: its per-group optimizer is a different XLA program)."""
    for r in rows:
        assert len(r.block_rms) == r.depth and r.block_rms[-1] == r.last_block_rms
    assert sorted({r.step for r in rows}) == list(range(11))
    base = {r.parametrization: r for r in rows if (r.width, r.depth, r.step) == (32, 2, 10)}
    assert base["sp"].block_rms == pytest.approx(base["completep"].block_rms, rel=1e-5)


def test_coord_check_command_writes_table_and_png(tmp_path, rows):
    results = coord_check.results_of(SETUP, rows)
    with pytest.raises(dataclasses.FrozenInstanceError):
        results.rows = ()
    paths = coord_check.write_outputs(results, tmp_path)
    assert paths["png"].read_bytes()[:4] == b"\x89PNG"
    assert paths["md"].read_text() == coord_check.sections(results) and "| completep | 8 |" in paths["md"].read_text()
    saved = json.loads(paths["json"].read_text())
    assert len(saved["rows"]) == len(rows) and saved["setup"]["seq_len"] == 32


@pytest.mark.parametrize("flags, says", [
    (["--parametrization", "sp,bogus"],
     "--parametrization[1]='bogus': valid values are sp, mup, depth_mup, completep"),
    (["--widths", "64,abc"], "--widths[1]='abc': must be an integer"),
    (["--widths", "24,64"], "--widths=[24]: not multiples of head_dim=16"),
])
def test_the_flags_build_the_spec_through_the_spec_field_checks_and_a_bad_one_is_named(tmp_path, capsys, flags, says):
    """Before anything trains: one line on stderr naming the flag, the value at fault and what is valid; exit 2."""
    assert main(["coord-check", *flags, "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err
