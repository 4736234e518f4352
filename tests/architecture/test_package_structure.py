"""Structure of the package as a whole: every argument parser lives in depthdelusion/cli/, and no
module imports itself through a chain of the package's modules (deferred imports count)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "depthdelusion"


def _package_files():
    return sorted((ROOT / PACKAGE).rglob("*.py"))


def test_argument_parsing_only_in_cli():
    offenders = []
    for path in _package_files():
        if path.parent == ROOT / PACKAGE / "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names) or (
                    isinstance(node, ast.ImportFrom) and node.module == "argparse") or (
                    isinstance(node, ast.Attribute) and node.attr in ("add_argument", "add_parser")):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders


def module_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, from every import statement in the source
    (inside functions too: a deferred import is still a dependency)."""
    files = {}
    for path in _package_files():
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in files.items():
        base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = node.module
                if node.level:
                    module = ".".join(base[:len(base) - node.level + 1] + ([module] if module else []))
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in files else module
                           for a in node.names]
            else:
                continue
            for target in targets:
                while target not in files and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in files and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def test_no_import_cycles():
    graph = module_graph()

    def reaches(start, goal):
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                if nxt == goal:
                    return True
                seen.add(nxt)
                todo.append(nxt)
        return False

    assert [m for m in graph if reaches(m, m)] == []
    # The bundled paper data is read by analysis.runs; reference itself depends on nothing.
    assert graph["depthdelusion.analysis.reference"] == set()
