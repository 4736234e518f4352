"""experiments/natural_text/: the specs repeat their synthetic originals with only the data (and
the eval set) changed, and prepare.py's R reader and chunker work (no network, no package)."""
from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

import pytest
import yaml

from depthdelusion.studies.depth_vs_size import study as depth_vs_size
from depthdelusion.studies.common.spec import load_spec

ROOT = Path(__file__).resolve().parents[3]
HERE = ROOT / "experiments" / "natural_text"
TEXT_DATA = {"path": "data/natural_text", "format": "text", "holdout_files": 49, "tokenizer": "bytes", "epochs": 1}


def _prepare():
    spec = importlib.util.spec_from_file_location("natural_text_prepare", HERE / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_natural_text_specs_are_their_originals_on_the_prepared_corpus():
    for name, original, levels in (("depth_vs_size_level1.yaml", "depth_vs_size.yaml", slice(0, 1)),
                                   ("depth_at_width.yaml", "depth_at_width.yaml", slice(None))):
        new, old = (yaml.safe_load(p.read_text()) for p in (HERE / name, ROOT / "experiments" / original))
        assert new["base"]["data"] == TEXT_DATA
        assert new["base"]["train"] == {**old["base"]["train"], "eval_batches": 64}
        assert new["base"]["model"] == old["base"]["model"] and new["levels"] == old["levels"][levels]
        assert {k: v for k, v in new.items() if k not in ("base", "levels")} == \
            {k: v for k, v in old.items() if k not in ("base", "levels")}
        exp = load_spec(depth_vs_size.DepthVsSizeSpec, HERE / name)  # validates without the data
        per_row = max(s["steps"] for level in exp.resolved_levels for s in level["shapes"]) * 65
        assert per_row < 213_000  # the fewest byte tokens prepare.py deals a batch row at seeds 0-3
        header = (HERE / name).read_text().split("\nbase:")[0]
        assert "python3 experiments/natural_text/prepare.py data/natural_text" in header
        assert "r-cran-janeaustenr 1.0.0-1" in header and _prepare().DEB_SHA256 in header


def _xdr(*ints: int) -> bytes:
    return struct.pack(f">{len(ints)}i", *ints)


def _charsxp(text: str) -> bytes:
    data = text.encode()
    return _xdr(9 | (1 << 15), len(data)) + data  # CHARSXP, UTF-8 flag


def test_prepare_reads_an_r_character_vector_and_cuts_it_into_whole_paragraphs():
    prepare = _prepare()
    # R serialization version 3 of c(a = "It is a truth", b = NA): a named STRSXP
    names = _xdr(16, 2) + _charsxp("a") + _charsxp("b")
    # the attribute pairlist (LISTSXP with a tag): SYMSXP "names", its value, then NULL
    attrs = _xdr(2 | (1 << 10)) + _xdr(1) + _charsxp("names") + names + _xdr(254)
    blob = (b"X\n" + _xdr(3, 0x40201, 0x30500, 5) + b"UTF-8" + _xdr(16 | (1 << 9), 2)
            + _charsxp("It is a truth") + _xdr(9, -1) + attrs)
    assert prepare.unserialize(blob) == {"a": "It is a truth", "b": None}

    text = prepare.clean(["TITLE", "", "", "", "First  ", "para.", "", "Second."] * 3000, "emma")
    assert "\n\n\n" not in text and "  \n" not in text and text.endswith("Second.\n")
    pieces = prepare.chunks(text)
    assert "".join(pieces) == text and len(pieces) > 5
    assert all(p.endswith("\n\n") and len(p.encode()) >= prepare.CHUNK_BYTES for p in pieces[:-1])
    assert len(pieces[-1].encode()) >= prepare.CHUNK_BYTES // 2


@pytest.mark.parametrize("study, spec", [("level1", "depth_vs_size_level1.yaml"), ("depth_at_width", "depth_at_width.yaml")])
def test_the_committed_natural_text_study_regenerates_from_its_runs(tmp_path, study, spec):
    """analysis/natural_text/STUDY: `depth-vs-size --report-only` on the committed runs (no corpus
    needed) writes the committed report.md and CSVs at their printed digits, as every other
    depth-vs-size study's test checks; from the last commit, as a runner may be adding runs."""
    from committed_study import regenerate_planned_study

    rel = f"analysis/natural_text/{study}"
    diffs = regenerate_planned_study(
        rel, f"natural_text/{spec}",
        ["depth-vs-size", f"experiments/natural_text/{spec}", "--out", rel, "--report-only"],
        tmp_path, from_git=True, exact=False)
    assert not diffs, "stale (regenerate with the command in its report.md):\n" + "\n".join(diffs)
