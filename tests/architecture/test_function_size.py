"""No function of the package is longer than a screen: computation, verdicts and rendering each
in their own small function (a report's numbers apart from its text)."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "depthdelusion"
MAX_LINES = 80


def long_functions(root: Path = PACKAGE, limit: int = MAX_LINES) -> dict[str, int]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out[f"{path.relative_to(root)}:{node.name}"] = n
    return out


def test_no_function_in_the_package_is_over_the_limit():
    too_long = long_functions()
    assert not too_long, f"functions over {MAX_LINES} lines (split them): {too_long}"


def test_the_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "m.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n")
    assert long_functions(tmp_path) == {"m.py:long": MAX_LINES + 1}


MAX_PARAMETERS = 12  # issue 49: options travel as one object (FitOptions, ReportOptions), not one by one
PUBLIC_KEYWORDS = {"analysis/fitting/engine.py:fit"}  # the public fit() keeps its keyword arguments
PARAMETERS_NOT_YET: set[str] = set()


def many_parameters(paths, limit: int = MAX_PARAMETERS) -> dict[str, int]:
    out = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs] + [
                    x.arg for x in (a.vararg, a.kwarg) if x]
                n = len([x for x in names if x not in ("self", "cls")])
                if n > limit:
                    out[f"{path.relative_to(PACKAGE).as_posix()}:{node.name}"] = n
    return out


def test_no_function_of_the_analysis_or_the_sweep_takes_more_than_12_parameters():
    paths = [*sorted((PACKAGE / "analysis").rglob("*.py")), PACKAGE / "sweep.py", PACKAGE / "sweep_commands.py"]
    found = many_parameters(paths)
    too_many = {k: n for k, n in found.items() if k not in PUBLIC_KEYWORDS | PARAMETERS_NOT_YET}
    assert not too_many, f"functions with over {MAX_PARAMETERS} parameters (pass an options object): {too_many}"
    assert PARAMETERS_NOT_YET <= set(found), f"take out of PARAMETERS_NOT_YET: {PARAMETERS_NOT_YET - set(found)}"
