"""A report is written whole or not at all: into a folder beside OUT, moved in when complete."""
import pytest

from depthdelusion.analysis.report.build import staged


def test_an_interrupted_write_leaves_neither_the_folder_nor_a_partial_one(tmp_path):
    out = tmp_path / "a" / "report"
    with pytest.raises(KeyboardInterrupt):
        with staged(out) as stage:
            (stage / "report.md").write_text("half")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_a_complete_write_replaces_its_files_and_keeps_the_others(tmp_path):
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.md").write_text("old")
    (out / "mine.txt").write_text("kept")
    with pytest.raises(OSError):
        with staged(out) as stage:
            (stage / "report.md").write_text("new")
            raise OSError("disk full")
    assert (out / "report.md").read_text() == "old"  # a failed write changes nothing
    with staged(out) as stage:
        (stage / "report.md").write_text("new")
    assert (out / "report.md").read_text() == "new" and (out / "mine.txt").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]
    fresh = tmp_path / "x" / "y"
    with staged(fresh) as stage:
        (stage / "report.md").write_text("made")
    (tmp_path / "plain").mkdir()  # the folder gets the mode any new folder gets, not mkdtemp's 0700
    assert (fresh / "report.md").read_text() == "made"
    assert fresh.stat().st_mode == (tmp_path / "plain").stat().st_mode
