"""The two import contracts about studies in pyproject.toml name the study folders by a wildcard
(`depthdelusion.studies.*`), so a new folder is under both without editing pyproject.toml. These
tests hold the contracts to that: evaluated as lint-imports evaluates them (import-linter's own
expression matching on the package's graph), the independence contract covers every folder and
exempts only imports of studies/common, and common is forbidden every other folder."""
import tomllib
from pathlib import Path

import grimp
import pytest
from importlinter.domain.helpers import module_expressions_to_modules
from importlinter.domain.imports import ModuleExpression

ROOT = Path(__file__).resolve().parents[2]
STUDIES = ROOT / "depthdelusion" / "studies"
COMMON = "depthdelusion.studies.common"
INDEPENDENT = "study folders are independent: what two studies share lives in studies/common"
COMMON_CONTRACT = "studies/common imports no study"


def study_folders(studies: Path = STUDIES) -> set[str]:
    """Every study package (a folder with an __init__.py), as a dotted module name."""
    return {f"depthdelusion.studies.{p.parent.name}" for p in studies.glob("*/__init__.py")}


def contract(name: str, pyproject: Path = ROOT / "pyproject.toml") -> dict:
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["name"] == name)


def unmatched(expressions: list[str], folders: set[str], graph) -> list[str]:
    """The folders none of the contract's module expressions names, as lint-imports reads them."""
    matched = {m.name for m in module_expressions_to_modules(graph, [ModuleExpression(e) for e in expressions])}
    return sorted(folders - matched)


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("depthdelusion")


def test_the_independence_contract_covers_every_study_folder(graph):
    independent = contract(INDEPENDENT)
    assert independent["type"] == "independence"
    assert unmatched(independent["modules"], study_folders(), graph) == []


def test_the_independence_contract_exempts_only_imports_of_common():
    for ignored in contract(INDEPENDENT).get("ignore_imports", []):
        imported = ignored.split("->")[1].strip()
        assert imported in (COMMON, f"{COMMON}.**"), f"{ignored!r} exempts more than imports of studies/common"


def test_common_is_forbidden_every_study_folder(graph):
    common = contract(COMMON_CONTRACT)
    assert common["type"] == "forbidden" and common["source_modules"] == [COMMON]
    assert unmatched(common["forbidden_modules"], study_folders() - {COMMON}, graph) == []


def test_a_folder_the_expressions_miss_is_reported(tmp_path):
    for name in ("common", "alpha", "beta"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / "not_a_package").mkdir()
    toy = grimp.ImportGraph()
    for name in ("depthdelusion", "depthdelusion.studies", "depthdelusion.studies.alpha",
                 "depthdelusion.studies.alpha.study", "depthdelusion.studies.beta",
                 "depthdelusion.studies.common"):
        toy.add_module(name)
    folders = study_folders(tmp_path)
    assert unmatched(["depthdelusion.studies.alpha"], folders, toy) == ["depthdelusion.studies.beta",
                                                                        "depthdelusion.studies.common"]
    assert unmatched(["depthdelusion.studies.*.study"], folders, toy) == ["depthdelusion.studies.alpha",
                                                                          "depthdelusion.studies.beta",
                                                                          "depthdelusion.studies.common"]
    assert unmatched(["depthdelusion.studies.*"], folders, toy) == []
