"""analysis/public_shapes/: the committed parts that CI can regenerate. The whole study takes over an
hour (its core refits every law 1,000 times per arm), so CI regenerates the part that takes seconds,
`--parts later` (the later budgets: every law fitted to 100B tokens, asked for 110B–350B), from the
real tables downloaded by name through a local mirror, and compares its CSV and its report section
with the committed ones: every word exactly, every number at its printed digits (text_compare's
tolerances)."""
from pathlib import Path

import pytest

from depthdelusion.cli import main
from text_compare import text_differences

from tests.analysis.table.test_published_downloads import PUBLISHED, published_mirror

COMMITTED = Path(__file__).resolve().parents[3] / "analysis" / "public_shapes"

pytestmark = pytest.mark.skipif(not PUBLISHED.is_dir(), reason=f"no test copies at {PUBLISHED}")


def _section(report: str, heading: str) -> str:
    """The report's section that opens with ``heading``, up to the next section (or the end)."""
    start = report.index(heading)
    end = report.find("\n## ", start + 1)
    return (report[start:] if end < 0 else report[start:end]).rstrip("\n")


def test_the_committed_later_budgets_regenerate(tmp_path, monkeypatch):
    # the flags of the command that wrote the committed part (analysis/public_shapes/README.md)
    with published_mirror(monkeypatch, tmp_path / "cache"):
        assert main(["public-shapes", "--out", str(tmp_path / "out"), "--parts", "later"]) == 0
    fresh = tmp_path / "out"
    diffs = text_differences((COMMITTED / "later_budgets.csv").read_text(),
                             (fresh / "later_budgets.csv").read_text(), csv_file=True)
    heading = "## 5b. The later budgets"
    diffs += text_differences(_section((COMMITTED / "report_partial.md").read_text(), heading),
                              _section((fresh / "report_partial.md").read_text(), heading))
    assert not diffs, ("stale (regenerate with the command in analysis/public_shapes/README.md):\n"
                       + "\n".join(diffs[:10]))
