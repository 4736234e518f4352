"""analysis/public_shapes/: the committed parts that CI can regenerate. The whole study takes over an
hour (its core refits every law 1,000 times per arm), so CI regenerates the parts that take minutes,
`--parts later` (the later budgets: every law fitted to 100B tokens, asked for 110B–350B) and
`--parts gadre` (the laws on Gadre et al.'s 95 runs under the three N conventions, at the core's
1,000 bootstrap draws: about 2.5 min of CPU),
from the real tables downloaded by name through a local mirror, and compares each CSV and report
section with the committed ones: every word exactly, every number at its printed digits
(text_compare's tolerances)."""
from pathlib import Path

import pytest

from depthdelusion.cli import main
from text_compare import text_differences

from tests.analysis.table.test_published_downloads import PUBLISHED, published_mirror

COMMITTED = Path(__file__).resolve().parents[3] / "analysis" / "public_shapes"
#: the cluster-bootstrap draws of the committed part "huber" (analysis/public_shapes/README.md)
HUBER_BOOTSTRAP = "1000"

pytestmark = pytest.mark.skipif(not PUBLISHED.is_dir(), reason=f"no test copies at {PUBLISHED}")


def _section(report: str, heading: str) -> str:
    """The report's section that opens with ``heading``, up to the next section (or the end)."""
    start = report.index(heading)
    end = report.find("\n## ", start + 1)
    return (report[start:] if end < 0 else report[start:end]).rstrip("\n")


def _regenerated(tmp_path, monkeypatch, flags: list[str], csv: str, committed_report: str, heading: str,
                 bootstrap_columns: tuple = ()) -> list[str]:
    """The differences between the committed ``csv`` and ``heading``'s section of
    ``committed_report`` and what ``public-shapes --parts …`` with ``flags`` writes now."""
    with published_mirror(monkeypatch, tmp_path / "cache"):
        assert main(["public-shapes", "--out", str(tmp_path / "out"), *flags]) == 0
    fresh = tmp_path / "out"
    diffs = text_differences((COMMITTED / csv).read_text(), (fresh / csv).read_text(), csv_file=True,
                             bootstrap_columns=bootstrap_columns)
    # a partial run writes its sections to report_partial.md
    return diffs + text_differences(_section((COMMITTED / committed_report).read_text(), heading),
                                    _section((fresh / "report_partial.md").read_text(), heading))


def test_the_committed_later_budgets_regenerate(tmp_path, monkeypatch):
    # the flags of the command that wrote the committed part (analysis/public_shapes/README.md)
    diffs = _regenerated(tmp_path, monkeypatch, ["--parts", "later"], "later_budgets.csv",
                         "report_partial.md", "## 5b. The later budgets")
    assert not diffs, ("stale (regenerate with the command in analysis/public_shapes/README.md):\n"
                       + "\n".join(diffs[:10]))


def test_the_committed_gadre_laws_regenerate(tmp_path, monkeypatch):
    """The Gadre section of the core's report.md, at the core's default 1,000 bootstrap draws."""
    # its ci95 columns are run-bootstrap percentiles (the section says so): the bootstrap tolerance
    diffs = _regenerated(tmp_path, monkeypatch, ["--parts", "gadre"], "gadre.csv",
                         "report.md", "## Item 2: the robust laws checked on Gadre",
                         bootstrap_columns=("ci95_low", "ci95_high"))
    assert not diffs, ("stale (regenerate with the command in analysis/public_shapes/README.md):\n"
                       + "\n".join(diffs[:10]))


@pytest.mark.slow
def test_the_committed_huber_predictions_regenerate(tmp_path, monkeypatch):
    """The cheap piece of the committed part "huber" (fitting_loss_verdicts.csv and its section of
    report_partial.md): the prediction verdict under least squares and Huber on log-loss, at the
    committed run's bootstrap count and seed, with no tests (``--replicates 0``) and no lr
    comparison; its CSV rows and its section's prediction lines, at their printed digits."""
    flags = ["--parts", "huber", "--replicates", "0", "--no-lr-interaction", "--laws", "chinchilla,gemstones_width_depth",
             "--bootstrap", HUBER_BOOTSTRAP]
    with published_mirror(monkeypatch, tmp_path / "cache"):
        assert main(["public-shapes", "--out", str(tmp_path / "out"), *flags]) == 0
    csv, fresh = "fitting_loss_verdicts.csv", tmp_path / "out"

    def predictions(text: str) -> str:
        lines = text.splitlines()
        return "\n".join(lines[:1] + [line for line in lines[1:] if line.startswith("prediction:")])

    def section_lines(report: str) -> str:
        part = _section(report, "## The fitting loss, every verdict")
        return "\n".join(line for line in part.splitlines() if line.startswith(("| prediction:", "- prediction:")))

    diffs = text_differences(predictions((COMMITTED / csv).read_text()), predictions((fresh / csv).read_text()),
                             csv_file=True)
    diffs += text_differences(section_lines((COMMITTED / "report_partial.md").read_text()),
                              section_lines((fresh / "report_partial.md").read_text()))
    assert not diffs, ("stale (regenerate with the command in analysis/public_shapes/README.md):\n"
                       + "\n".join(diffs[:10]))
