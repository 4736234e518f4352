"""analysis/shape_answer/public_suites: `depthdelusion shape` on the two public suites, downloaded
by name from a local mirror of the shared test copies, prints the committed answer.txt (and, with `--params total` / `nonembedding`,
answer_params_total.txt / answer_params_nonembedding.txt): every
word and decision exactly, every number at its printed digits (text_compare's tolerances)."""
from pathlib import Path

import pytest

from depthdelusion.cli import main
from text_compare import text_differences

from tests.analysis.table.test_published_downloads import PUBLISHED, published_mirror

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "analysis" / "shape_answer" / "public_suites"

pytestmark = pytest.mark.skipif(not PUBLISHED.is_dir(), reason=f"no test copies at {PUBLISHED}")


@pytest.mark.parametrize("answer, flags", [("answer.txt", ["--out", "OUT"]),
                                           ("answer_params_total.txt", ["--params", "total"]),
                                           ("answer_params_nonembedding.txt", ["--params", "nonembedding"])])
def test_the_committed_public_answer_regenerates(tmp_path, monkeypatch, capsys, answer, flags):
    """The default answer (fitted ε) with its figures, and the answers with ε held at 1 and 0."""
    argv = ["shape", *[a for c in ("1e19", "1e21", "1e23", "1e25") for a in ("--compute", c)],
            "--table", "gemstones", "--table", "chinchilla_shapes",
            *[str(tmp_path / "out") if f == "OUT" else f for f in flags]]
    with published_mirror(monkeypatch, tmp_path / "cache"):
        assert main(argv) == 0
    diffs = text_differences((COMMITTED / answer).read_text(), capsys.readouterr().out)
    assert not diffs, "stale (regenerate with the command in analysis/shape_answer/README.md):\n" + "\n".join(diffs[:10])
