"""No module of the package uses another module's private names (a leading underscore): not by
`from m import _name`, nor as `m._name` on an imported module, nor as `obj._name` on an object
whose class another module defines. A name another module needs is public, documented where it
is defined."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "depthdelusion"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")[:-node.level] if not module.endswith("__init__") else module.split(".")
    return ".".join(base + ([node.module] if node.module else []))


def violations(path: Path, source: str | None = None) -> list[str]:
    module = _module_of(path)
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    found, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            if not source.startswith("depthdelusion") or source == module:
                continue
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{path.name}:{node.lineno} imports {source}.{alias.name}")
                else:  # `from pkg import module`: later `module._x` is another module's private name
                    aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("depthdelusion") and alias.name != module:
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                and node.value.id in aliases and aliases[node.value.id] != module):
            found.append(f"{path.name}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    return found


NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}  # public despite the "_"


def defined_private_names(tree: ast.AST) -> set[str]:
    """The private names a module defines: functions, classes, assigned names and attributes."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if _private(n)}


def attribute_violations(sources: dict[str, str]) -> list[str]:
    """`obj._name` in one module where `_name` is defined only by other modules of the package."""
    trees = {name: ast.parse(source) for name, source in sources.items()}
    defined = {name: defined_private_names(tree) for name, tree in trees.items()}
    found = []
    for name, tree in trees.items():
        elsewhere = set().union(*(d for other, d in defined.items() if other != name)) - defined[name]
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and _private(node.attr) and node.attr in elsewhere
                    and node.attr not in NAMEDTUPLE_API
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                found.append(f"{name}:{node.lineno} uses .{node.attr}, defined in another module")
    return found


def test_no_module_uses_another_modules_private_attributes():
    sources = {str(p.relative_to(PACKAGE.parent)): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}
    found = attribute_violations(sources)
    assert not found, "private attributes used across modules:\n" + "\n".join(found)


def test_the_attribute_scan_sees_a_private_method_called_from_another_module():
    sources = {"a.py": "class P:\n    def _by_kind(self):\n        return self._x\n",
               "b.py": "def f(profile):\n    return profile._by_kind()\n"}
    (found,) = attribute_violations(sources)
    assert found.startswith("b.py:2") and "_by_kind" in found


def test_no_module_uses_another_modules_private_names():
    found = [f"{p.relative_to(PACKAGE.parent)}: {v}" for p in sorted(PACKAGE.rglob("*.py")) for v in violations(p)]
    assert not found, "private names used across modules:\n" + "\n".join(found)


def test_the_scan_sees_both_forms():
    """The checker itself: an import of a private name and an attribute access are both caught,
    a module's own private names are not."""
    source = ("from depthdelusion.model.transformer import _norm\nfrom depthdelusion.analysis import plots\n"
              "plots._save\nfrom depthdelusion.studies.common.spectrum import _own\n")
    found = violations(PACKAGE / "studies" / "common" / "spectrum.py", source)
    assert len(found) == 2 and "_norm" in found[0] and "plots._save" in found[1], found
