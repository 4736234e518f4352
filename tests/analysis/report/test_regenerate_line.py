"""The report of a table by name: its "Regenerate with" line is a command the CLI accepts and
that reads the same rows, and the report says where the table comes from and whom to cite."""
import dataclasses
import re
import shlex

from depthdelusion.analysis.report import options as report_options
from depthdelusion.cli import build_parser, main


def test_the_regenerate_line_of_a_table_by_name_parses_and_the_report_cites_the_table(tmp_path, monkeypatch):
    # one law, no profiles: the report's text, in seconds rather than minutes (the command line
    # builds the report's options from its arguments; these fields have no flag)
    built = report_options.ReportOptions.from_arguments.__func__
    monkeypatch.setattr(report_options.ReportOptions, "from_arguments", classmethod(
        lambda cls, args: dataclasses.replace(built(cls, args), laws=("kaplan",), lr_replicates=0, design=False)))
    where = "width >= 256 and depth != 3"
    assert main(["report", "--table", "depth_delusion", "--out", str(tmp_path / "r"), "--bootstrap", "0",
                 "--profile", "none", "--no-figures", "--where", where, "--loss", "huber"]) == 0
    text = (tmp_path / "r" / "report.md").read_text()
    (line,) = re.findall(r"Regenerate with `([^`]*)`", text)
    words = shlex.split(line)
    assert words[0] == "depthdelusion"
    args = build_parser().parse_args(words[1:])  # a usage error would exit 2 here
    assert (args.command, args.table_name, args.where, args.loss) == ("report", "depth_delusion", where, "huber")
    assert "Published table: depth_delusion from the paper's Appendix C" in text
    assert "cite The Depth Delusion: Why Transformers Should Be Wider, Not Deeper" in text
    assert "published table: depth_delusion from the paper's Appendix C" in (tmp_path / "r" / "report.tex").read_text()
