"""One owner per file format, checked over the whole package's source: YAML files are read by
config.read_yaml alone, CSV is written by analysis/formats/table_text alone."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "depthdelusion"


def test_one_yaml_file_reader():
    """config.read_yaml reads every YAML file (configs, grids, experiments, a run's config.yaml):
    yaml.safe_load appears only there and in the --set value parser."""
    calls = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Attribute) and node.attr in ("safe_load", "load") \
                            and isinstance(node.value, ast.Name) and node.value.id == "yaml":
                        calls.append(f"{path.relative_to(PACKAGE)}:{fn.name}")
    # run_table parses one logged parameter's text (an MLflow param), not a file
    assert sorted(set(calls)) == ["analysis/table/run_table.py:_parse_value", "config.py:parse_scalar",
                                  "config.py:read_yaml"], calls


def test_no_module_writes_csv_itself():
    """Every CSV the package writes goes through write_csv (one format: header, \\n line ends)."""
    writers = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in ("writer", "DictWriter")
                    and isinstance(node.value, ast.Name) and node.value.id == "csv"):
                writers.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert writers == ["analysis/formats/table_text.py:" + str(_csv_writer_line())], writers


def _csv_writer_line() -> int:
    lines = (PACKAGE / "analysis" / "formats" / "table_text.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if "csv.writer(" in line)
