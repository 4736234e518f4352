"""--where: a small comparison grammar over a table's columns (no eval), and --by / --group."""
import numpy as np
import pytest

from depthdelusion.analysis import load_runs
from depthdelusion.analysis.table.row_filter import parse_where, row_mask, split_by

ROWS = [
    {"N": 1e7, "T": 1e9, "loss": 3.9, "dataset": "web", "qc_ok": "True", "lr": "0.001"},
    {"N": 1e8, "T": 1e9, "loss": 3.5, "dataset": "web", "qc_ok": "false", "lr": "0.002"},
    {"N": 1e9, "T": 1e9, "loss": 3.1, "dataset": "code base", "qc_ok": "TRUE", "lr": "n/a"},
    {"N": 1e10, "T": 1e9, "loss": 2.9, "dataset": "books", "qc_ok": "true", "lr": "0.001"},
]


def names(runs, expr):
    return [str(n) for n in np.asarray(runs.name)[row_mask(runs, parse_where(expr))]]


def test_numbers_booleans_and_text_compare_as_documented():
    runs = load_runs(ROWS)
    assert names(runs, "N >= 1e8") == ["run2", "run3", "run4"]
    assert names(runs, "params < 1e9 and loss > 3.6") == ["run1"]  # canonical name or the table's
    assert names(runs, "qc_ok == true") == ["run1", "run3", "run4"]  # any case
    assert names(runs, "qc_ok != TRUE") == ["run2"]
    assert names(runs, "dataset == 'code base'") == ["run3"]
    assert names(runs, 'dataset != web and dataset != "code base"') == ["run4"]
    # a cell that is not a number satisfies only != against a number
    assert names(runs, "lr == 0.001") == ["run1", "run4"]
    assert names(runs, "lr != 0.001") == ["run2", "run3"]
    assert names(runs, "lr < 1") == ["run1", "run2", "run4"]
    assert names(runs, "N>1e9") == ["run4"]  # spaces are optional around an operator


@pytest.mark.parametrize("expr, message", [
    ("N >", r"expected COLUMN OP VALUE .* got 'N >'"),
    ("N = 3", r"cannot read '= 3'"),
    ("N > 1 or loss < 3", r"comparisons are joined by 'and', got 'or'"),
    ("N > 1 and", r"nothing after the last 'and'"),
    ("dataset < web", r"dataset < web: < compares numbers; text values take == or !="),
    ("__import__('os').system('true')", r"cannot read|expected COLUMN OP VALUE"),
    ("", r"empty expression"),
])
def test_malformed_expressions_are_one_line_errors(expr, message):
    with pytest.raises(ValueError, match=message):
        parse_where(expr)


def test_every_alias_the_table_reader_reads_is_read_by_where():
    """The README's `--where "N >= 1e8"` on a table whose column is `params`: --where reads the
    names and aliases of the table reader (analysis/table/columns.py), in the alias's own unit."""
    from depthdelusion.analysis.table.columns import FIELDS, scale_of

    rows = [{"params": r["N"], "tokens": r["T"] * (i + 1), "loss": r["loss"], "width": 64 * (i + 1),
             "compute": 6 * r["N"] * r["T"] * (i + 1)} for i, r in enumerate(ROWS)]
    runs = load_runs(rows)
    assert names(runs, "N >= 1e8") == ["run2", "run3", "run4"]
    assert names(runs, "params_billions >= 1") == ["run3", "run4"]  # billions, as the name says
    assert names(runs, "W <= 128 and T >= 2e9 and C > 1e17") == ["run2"]
    for field in ("params", "tokens", "loss", "width", "compute"):
        for alias in FIELDS[field].aliases:  # every alias, each in its own unit
            value = float(getattr(runs, field)[2]) / scale_of(alias)
            assert names(runs, f"{alias} == {value!r}") == ["run3"], alias


def test_unknown_column_is_named_with_the_columns_there_are():
    with pytest.raises(ValueError, match=r"--where: no column 'size' in list of runs; its columns: "
                       r"N, T, loss, .*dataset, qc_ok, lr"):
        load_runs(ROWS, where="size > 3")
    with pytest.raises(ValueError, match=r"no row of list of runs \(4 rows\) satisfies it"):
        load_runs(ROWS, where="N > 1e12")


def test_load_runs_where_then_group_and_split_by_record_what_was_kept():
    rows = [dict(r, group=g) for r, g in zip(ROWS, ["a", "b", "a", "a"])]
    runs = load_runs(rows, where="N >= 1e8", group="a")
    assert list(runs.name) == ["run3", "run4"]
    assert runs.selection == {"where": "N >= 1e8", "rows_read": 4, "rows_kept": 2, "group": "a"}
    assert "--where N >= 1e+08: kept 3 of 4 rows" in runs.notes
    parts = split_by(load_runs(rows), "dataset")
    assert list(parts) == ["books", "code base", "web"]
    assert [len(p) for p in parts.values()] == [1, 1, 2]
    assert parts["web"].selection == {"by": "dataset", "value": "web", "rows_read": 4, "rows_kept": 2}


def test_report_takes_the_same_row_options_and_errors(tmp_path, capsys):
    from depthdelusion.cli import main

    path = tmp_path / "t.csv"
    path.write_text("N,loss,dataset\n" + "".join(f"{r['N']},{r['loss']},{r['dataset']}\n" for r in ROWS))
    for options, message in ((["--where", "size > 3"], "--where: no column 'size'"),
                             (["--where", "N >"], "expected COLUMN OP VALUE"),
                             (["--by", "colour"], "no column 'colour'"),
                             (["--group", "nope"], "no runs in group 'nope'")):
        assert main(["report", str(path), "--out", str(tmp_path / "r"), "--no-figures",
                     "--bootstrap", "0", *options]) == 2
        assert message in capsys.readouterr().err
