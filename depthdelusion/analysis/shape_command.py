"""``depthdelusion shape``: how deep and how wide for C FLOPs (issue 58), from published tables
by name and our own runs, each one suite of the pooled shape fit. A plain function of the parsed
arguments (the parser is ``depthdelusion.cli``); bad input raises ValueError (one line, exit 2)."""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from depthdelusion import exit_codes

from .fitting.options import ShapeOptions, column_mapping


def load_suites(runs=None, table_names=None, column=None) -> dict:
    """{suite name: Runs}: every ``--table NAME[=PATH]`` (named by NAME) and every RUNS path
    (named by its file or folder name; a folder named runs by the folder that holds it), in the
    order given, tables first."""
    from .table.published import load_table, parse_table_arg
    from .table.load import load_runs

    tables = {}
    for text in table_names or ():
        name, path = parse_table_arg(text)
        tables[name] = load_table(name, path)
    mapping = column_mapping(column=column)
    for path in runs or ():
        where = Path(str(path).rstrip("/"))
        # a study's runs live in STUDY/runs: the suite is named for the study
        name = (where.parent.name if where.name == "runs" and where.parent.name else where.stem) or str(path)
        if name in tables:
            raise ValueError(f"RUNS {path}: a suite named {name!r} is already given; rename the file")
        tables[name] = load_runs(path, columns=mapping)
    if not tables:
        raise ValueError("shape: give RUNS or --table NAME (at least one suite)")
    return tables


def run_shape(*, compute, runs=None, table_names=None, column=None, json_output: bool = False,
              out: str | None = None, options: ShapeOptions = ShapeOptions()) -> int:
    from .fitting.shape_answer import shape_answer
    from .report.shape_answer_text import summary, to_json

    if out is not None:  # before the fits, not after them
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ValueError("--out: the figure needs matplotlib, which is not installed") from None
    tables = load_suites(runs, table_names, column)
    answer = shape_answer(tables, compute, **dataclasses.asdict(options))
    print(json.dumps(to_json(answer), indent=2) if json_output else summary(answer))
    if out is not None:
        from .report.shape_answer_plot import write_figures

        for path in write_figures(answer, Path(out)):
            print(f"wrote {path}", file=sys.stderr)
    return exit_codes.OK


run_shape.option_groups = {"options": ShapeOptions}
