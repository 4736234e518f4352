"""The front page stays a five-minute read and every page under docs/ can be found from it."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 200  # issue 49: a newcomer reads the front page in five minutes


def test_the_readme_is_at_most_200_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= README_MAX_LINES


def test_docs_readme_indexes_every_page():
    index = (ROOT / "docs" / "README.md").read_text()
    pages = [p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")]
    missing = sorted(p for p in pages if p != "README.md" and f"`{p}`" not in index
                     and not any(p in cell for cell in re.findall(r"`([^`]*)`", index)))
    assert not missing, f"docs/README.md does not index {missing}"


def test_every_repository_path_the_readme_names_exists():
    text = (ROOT / "README.md").read_text()
    named = {m for m in re.findall(r"`((?:docs|analysis|experiments|benchmarks|tpu|tests)/[\w./-]*)`", text)}
    named |= {m for m in re.findall(r"\b((?:docs|analysis|experiments|tpu)/[\w/.-]+\.(?:md|yaml|sh))", text)}
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"README.md names paths that do not exist: {missing}"
