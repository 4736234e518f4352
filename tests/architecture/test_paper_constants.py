"""The paper's fitted numbers have one home, analysis/reference.py: no other module of the package
writes them as literals (a second copy would silently disagree after a correction)."""
import re
from pathlib import Path

import depthdelusion
from depthdelusion.analysis.reference import PAPER_FIT, PAPER_KAPPA, PAPER_PERSISTENCE_EXPONENT

PACKAGE = Path(depthdelusion.__file__).parent


def test_paper_fit_values_appear_as_literals_only_in_reference():
    assert (PAPER_KAPPA, PAPER_PERSISTENCE_EXPONENT) == (2.43, 0.44)
    values = {str(PAPER_FIT[k][0]) for k in ("kappa", "persistence_exponent")}
    pattern = re.compile(r"(?<![\w.])(" + "|".join(re.escape(v) for v in values) + r")(?![\d])")
    copies = [f"{path.relative_to(PACKAGE)}:{n}" for path in PACKAGE.rglob("*.py")
              if path.name != "reference.py"
              for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert not copies, f"paper constants written outside analysis/reference.py: {copies}"
