"""One Markdown table renderer (analysis/tables.markdown_table) and one CSV writer
(analysis/tables.csv_text, write_csv) behind every table we write (that no module writes CSV
itself: tests/architecture/test_file_format_owners.py)."""
import pytest

from depthdelusion.analysis.formats.table_text import Table, csv_text, markdown_table, write_csv


def test_header_separator_with_alignment_and_rows():
    text = markdown_table(["run", "D", "loss"], [["a", 4, "3.10"], ["b", 16, ""]], align="lrr")
    assert text == "| run | D | loss |\n|---|---:|---:|\n| a | 4 | 3.10 |\n| b | 16 |  |"
    assert markdown_table(["x"], []) == "| x |\n|---|"
    with pytest.raises(ValueError, match="align='lx': one of l, r per column"):
        markdown_table(["a", "b"], [], align="lx")


def test_report_tables_render_through_it():
    t = Table("t", "caption", ["law", "R²"])
    t.add("kaplan", "0.91")
    assert t.markdown() == markdown_table(["law", "R²"], [["kaplan", "0.91"]])


def test_csv_rows_as_sequences_or_dicts_with_unix_line_ends(tmp_path):
    text = csv_text(["run", "D", "note"], [["a", 4, None], {"run": "b", "D": 1.5}, ["c, d", 2, 'say "x"']])
    assert text == 'run,D,note\na,4,\nb,1.5,\n"c, d",2,"say ""x"""\n'
    assert write_csv(tmp_path / "t.csv", ["x"], [[1]]).read_bytes() == b"x\n1\n"
    with pytest.raises(ValueError, match=r"cells for no column: \['y'\]"):
        csv_text(["x"], [{"x": 1, "y": 2}])
    with pytest.raises(ValueError, match="row has 2 cells, expected 1"):
        csv_text(["x"], [[1, 2]])
    t = Table("t", "caption", ["law", "R²"])
    t.add("kaplan", "0.91")
    assert t.csv() == csv_text(["law", "R²"], [["kaplan", "0.91"]])


def test_an_intervals_ends_in_numbers_are_those_the_data_support():
    """A scale parameter's upper end beyond 10³× its lower end is set by numerical flatness (its
    digits differ between machines): unbounded in a table of numbers, as in the Markdown; a
    non-scale parameter keeps its finite ends; an end beyond the drift limit is unbounded, and an
    interval with one open end is written one-sided."""
    import math
    from types import SimpleNamespace

    from depthdelusion.analysis.laws import get_law
    from depthdelusion.analysis.report.cells import param_interval, supported_ends

    f = SimpleNamespace(law=get_law("kaplan"))  # A is fitted on a log scale, E is not
    assert supported_ends(f, "A", (1.249, 8.225e4)) == (1.249, math.inf)
    assert param_interval(f, "A", (1.249, 8.225e4)) == "[spans > 10³×]"
    assert supported_ends(f, "A", (1.611, 1.523e48)) == (1.611, math.inf)
    assert param_interval(f, "A", (1.611, 1.523e48)) == "≥ 1.61"  # an open end, as `fit` writes it
    assert supported_ends(f, "A", (1.759, 61.8)) == (1.759, 61.8)
    assert supported_ends(f, "E", (1e-5, 1.3)) == (1e-5, 1.3)
    assert supported_ends(f, "E", (-2e31, 1.3)) == (-math.inf, 1.3)
    lo, hi = supported_ends(f, "E", (math.nan, math.nan))
    assert math.isnan(lo) and math.isnan(hi)
