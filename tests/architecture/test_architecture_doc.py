"""docs/architecture.md has one line for every module of the package (a study folder's modules: its
package docstring, instead), and names none that is gone."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "depthdelusion"
# A module described at the start of a clause: `name.py` (or a list of them) followed by " — ".
DESCRIBED = re.compile(r"`([\w/]+\.py)`(?=(?:,\s*`[\w/]+\.py`)*\s+—)")


def described_modules() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("## Modules"):text.index("Outside the package")]
    modules, package = set(), ""
    for paragraph in re.split(r"\n(?=\S)", section):  # a bullet with its continuation lines
        line = " ".join(paragraph.split())
        header = re.match(r"`([\w/]+)/` —", line)
        if header:
            package = header.group(1) + "/"
        elif line.startswith("Top level"):
            package = ""
        modules |= {package + name for name in DESCRIBED.findall(line)}
    return modules


def folder_described_modules(studies: Path = PACKAGE / "studies") -> dict[str, set[str]]:
    """What each study folder's package docstring (``studies/<name>/__init__.py``) describes, the
    same way (`name.py` — ...): {folder: its modules, as paths under the package}. studies/common,
    shared by every study, is described in docs/architecture.md."""
    folders = {}
    for init in sorted(studies.glob("*/__init__.py")):
        if init.parent.name != "common":
            text = " ".join((ast.get_docstring(ast.parse(init.read_text())) or "").split())
            folders[init.parent.name] = {f"studies/{init.parent.name}/{name}" for name in DESCRIBED.findall(text)}
    return folders


def undescribed(actual: set[str], in_doc: set[str], in_folders: dict[str, set[str]]) -> list[str]:
    """What is wrong with the modules' descriptions (empty when each module is described once):
    a module described nowhere, a study folder's module in docs/architecture.md (its folder's
    docstring describes it), a description of a module that does not exist."""
    folders = set().union(*in_folders.values())
    in_study_folder = {m for m in actual if m.split("/")[0] == "studies" and m.split("/")[1] in in_folders}
    return ([f"modules without a line in docs/architecture.md or their study folder's docstring: "
             f"{sorted(actual - in_doc - folders)}"] if actual - in_doc - folders else []) + (
        [f"described in docs/architecture.md, not in their study folder's __init__.py: "
         f"{sorted(in_doc & in_study_folder)}"] if in_doc & in_study_folder else []) + (
        [f"descriptions of modules that do not exist: {sorted((in_doc | folders) - actual)}"]
        if (in_doc | folders) - actual else [])


def test_every_module_has_a_line_and_every_line_a_module():
    actual = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
              if p.name not in ("__init__.py", "__main__.py")}
    assert undescribed(actual, described_modules(), folder_described_modules()) == []


def test_a_study_folder_module_missing_from_its_docstring_is_named(tmp_path):
    for name, doc in (("alpha", '"""Alpha.\n\n- `study.py` — the study; `declaration.py` — its STUDIES."""'),
                      ("beta", '"""Beta: `study.py` is mentioned, not described."""'), ("common", "")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(doc)
    folders = folder_described_modules(tmp_path)
    assert folders == {"alpha": {"studies/alpha/study.py", "studies/alpha/declaration.py"}, "beta": set()}
    actual = {"studies/alpha/study.py", "studies/alpha/declaration.py", "studies/beta/study.py",
              "studies/common/spec.py"}
    assert undescribed(actual, {"studies/common/spec.py"}, folders) == [
        "modules without a line in docs/architecture.md or their study folder's docstring: "
        "['studies/beta/study.py']"]
    assert undescribed(actual, {"studies/common/spec.py", "studies/alpha/study.py", "studies/beta/study.py"},
                       folders) == ["described in docs/architecture.md, not in their study folder's "
                                    "__init__.py: ['studies/alpha/study.py', 'studies/beta/study.py']"]


def _layer_table() -> dict[str, set[str]]:
    """docs/architecture.md's layer table: {unit: the units it may import}; a unit is `pkg/`,
    `module.py` or `pkg/module.py` as written there."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("## Layers"):text.index("## Modules")]
    allowed = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit():
            for unit in re.findall(r"`([\w/.]+)`", cells[1]):
                allowed.setdefault(unit, set()).update(re.findall(r"`([\w/.]+)`", cells[2]))
    return allowed


def _unit(module: str, units) -> str | None:
    """The most specific unit of the table a module belongs to (`data/tokenizers.py` before `data/`)."""
    parts = module.split(".")[1:]
    for candidate in ("/".join(parts) + ".py", parts[0] + "/", parts[0] + ".py"):
        if candidate in units:
            return candidate
    return None


def test_the_layer_table_allows_every_import_in_the_package():
    """Every import between two units of the package (grimp: imports inside functions too) is
    one the table's row for the importer names; every module of the package is in a row."""
    import grimp

    allowed = _layer_table()
    assert {"cli/", "train/", "analysis/", "config.py", "data/tokenizers.py"} <= set(allowed)
    graph = grimp.build_graph("depthdelusion")
    unplaced = sorted(m for m in graph.modules if m != "depthdelusion" and _unit(m, allowed) is None)
    assert not unplaced, f"modules in no row of the layer table: {unplaced}"
    breaches = set()
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            if not imported.startswith("depthdelusion.") or importer == "depthdelusion":
                continue
            a, b = _unit(importer, allowed), _unit(imported, allowed)
            package = b.split("/")[0] + "/" if "/" in b and b.endswith(".py") else None
            if a == b or package == a:  # inside a unit, or a package using its own module
                continue
            if b not in allowed[a] and package not in allowed[a]:  # `data/` allows `data/tokenizers.py`
                breaches.add(f"{importer} -> {imported} ({a} may import {sorted(allowed[a])})")
    assert not breaches, "imports the layer table does not allow:\n" + "\n".join(sorted(breaches))


TOP_LEVEL_TEST_MODULES_MAX = 15  # issue 49: tests of the package's top-level modules only


def test_tests_mirror_the_package():
    """Every test folder but helpers/ is named for a subpackage of depthdelusion/ (or for the
    repository's tpu/ scripts, or is architecture/: the structure tests of the whole package),
    and few test modules sit directly in tests/."""
    tests = ROOT / "tests"
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name not in ("helpers", "__pycache__")}
    extra = {"tpu", "architecture"}
    assert not folders - subpackages - extra, f"test folders that mirror nothing: {sorted(folders - subpackages - extra)}"
    top = sorted(p.name for p in tests.glob("test_*.py"))
    assert len(top) <= TOP_LEVEL_TEST_MODULES_MAX, f"{len(top)} test modules directly in tests/: {top}"
    assert not list(tests.glob("*.py")) or {p.name for p in tests.glob("*.py")} - set(top) == {"conftest.py"}, \
        "shared helpers belong in tests/helpers/"
    studies = {p.parent.name for p in (PACKAGE / "studies").glob("*/__init__.py")}
    study_tests = {p.name for p in (tests / "studies").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert studies == study_tests, (f"tests/studies/ mirrors the study folders: missing "
                                    f"{sorted(studies - study_tests)}, mirroring nothing {sorted(study_tests - studies)}")
