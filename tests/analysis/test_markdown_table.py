"""One Markdown table renderer (analysis/tables.markdown_table) behind every table we write."""
import pytest

from depthdelusion.analysis.tables import Table, markdown_table


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
