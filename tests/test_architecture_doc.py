"""docs/architecture.md has one line for every module of the package, and names none that is gone."""
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "depthdelusion"
# A module described at the start of a clause: `name.py` (or a list of them) followed by " — ".
DESCRIBED = re.compile(r"`([\w/]+\.py)`(?=(?:,\s*`[\w/]+\.py`)*\s+—)")


def described_modules() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("## Modules"):text.index("Outside the package")]
    modules, package = set(), ""
    for paragraph in re.split(r"\n(?=\S)", section):  # a bullet with its continuation lines
        line = " ".join(paragraph.split())
        header = re.match(r"`(\w+)/` —", line)
        if header:
            package = header.group(1) + "/"
        elif line.startswith("Top level"):
            package = ""
        modules |= {package + name for name in DESCRIBED.findall(line)}
    return modules


def test_every_module_has_a_line_and_every_line_a_module():
    actual = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
              if p.name not in ("__init__.py", "__main__.py")}
    described = described_modules()
    assert not actual - described, f"modules without a line in docs/architecture.md: {sorted(actual - described)}"
    assert not described - actual, f"docs/architecture.md describes modules that do not exist: {sorted(described - actual)}"
