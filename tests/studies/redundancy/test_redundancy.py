"""The redundancy study (`depthdelusion redundancy-study`): its committed report regenerates from
its committed tables."""
from pathlib import Path

from depthdelusion import cli, exit_codes

ROOT = Path(__file__).resolve().parents[3]


def test_redundancy_study_command_rewrites_the_committed_report(tmp_path):
    committed = ROOT / "analysis" / "redundancy"
    for path in [*committed.glob("*.csv"), committed / "run.json"]:
        (tmp_path / path.name).write_text(path.read_text())
    assert cli.main(["redundancy-study", "--out", str(tmp_path), "--report-only"]) == exit_codes.OK
    assert (tmp_path / "report.md").read_text() == (committed / "report.md").read_text()
    assert "`depthdelusion redundancy-study --out analysis/redundancy`" in (tmp_path / "report.md").read_text()
