"""The two import contracts about studies in pyproject.toml name their study folders by hand
(import-linter takes no wildcard there); a new folder under depthdelusion/studies/ that is not
listed would escape both contracts silently. These tests hold the lists equal to the folders."""
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STUDIES = ROOT / "depthdelusion" / "studies"
INDEPENDENT = "study folders are independent: what two studies share lives in studies/common"
COMMON = "studies/common imports no study"


def study_folders(studies: Path = STUDIES) -> set[str]:
    """Every study package (a folder with an __init__.py), as a dotted module name."""
    return {f"depthdelusion.studies.{p.parent.name}" for p in studies.glob("*/__init__.py")}


def contract(name: str, pyproject: Path = ROOT / "pyproject.toml") -> dict:
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["name"] == name)


def unlisted(listed: list[str], expected: set[str]) -> str:
    """What a hand-written list misses and what it names that is not a folder; empty when equal."""
    missing, extra = sorted(expected - set(listed)), sorted(set(listed) - expected)
    return (f"missing {missing} " if missing else "") + (f"not a study folder {extra}" if extra else "")


def test_independence_contract_lists_every_study_folder_and_common_is_not_one():
    expected = study_folders() - {"depthdelusion.studies.common"}
    assert not unlisted(contract(INDEPENDENT)["modules"], expected)


def test_common_is_forbidden_every_study_folder():
    common = contract(COMMON)
    assert common["source_modules"] == ["depthdelusion.studies.common"]
    expected = study_folders() - {"depthdelusion.studies.common"}
    assert not unlisted(common["forbidden_modules"], expected)


def test_a_folder_missing_from_the_list_is_reported(tmp_path):
    for name in ("common", "alpha", "beta"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / "not_a_package").mkdir()
    expected = study_folders(tmp_path) - {"depthdelusion.studies.common"}
    assert unlisted(["depthdelusion.studies.alpha"], expected) == "missing ['depthdelusion.studies.beta'] "
    assert "not a study folder" in unlisted(["depthdelusion.studies.alpha", "depthdelusion.studies.beta",
                                             "depthdelusion.studies.gone"], expected)
    assert not unlisted(["depthdelusion.studies.alpha", "depthdelusion.studies.beta"], expected)
