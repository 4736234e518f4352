import numpy as np
import pytest

from depthdelusion.analysis import Runs, load_reference, load_runs
from depthdelusion.analysis.reference import REFERENCE_DIR
from ..conftest import write_run


def test_run_directories_load_and_unfinished_runs_are_skipped_and_counted(run_factory, tmp_path):
    run_factory("a", 4, 256, 3.9)
    run_factory("b", 8, 512, 3.5, tokens=1.2e10)
    run_factory("c", 8, 256, 9.9, status="failed")
    runs = load_runs(tmp_path / "runs")
    assert sorted(runs.name) == ["a", "b"]
    assert runs.loss[list(runs.name).index("b")] == 3.5
    assert runs.tokens_vary
    assert any("skipped 1 run" in n and "c" in n for n in runs.notes)
    assert runs.profiles[0] is None  # no per-layer norms were logged


def test_csv_with_params_millions_loads(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("depth,width,params_millions,loss\n2,256,27.5,4.3\n8,256,32.2,4.0\n")
    runs = load_runs(path)
    assert runs.params.tolist() == [27.5e6, 32.2e6]
    assert np.isnan(runs.tokens).all()


def test_csv_without_a_loss_column_names_file_names_looked_for_and_columns_present(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("depth,width,params,val\n2,256,1e7,4.3\n")
    with pytest.raises(ValueError, match=r"bad\.csv: no loss column \(looked for loss, final_loss\); "
                       r"its columns: depth, width, params, val"):
        load_runs(path)
    assert load_runs(path, columns={"loss": "val"}).loss.tolist() == [4.3]


def test_csv_bad_value_names_row_and_field(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("depth,width,params,loss\n2,256,1e7,4.3\n2.5,256,1e7,abc\n")
    with pytest.raises(ValueError, match=r"row 2: field 'depth' = '2.5'; expected a whole number"):
        load_runs(path)


def test_summary_missing_field_is_named(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "summary.json").write_text('{"status": "finished", "model": {"depth": 2, "width": 8}, "params": 10}')
    with pytest.raises(ValueError, match=r"summary\.json: field 'final_loss' is missing"):
        load_runs(tmp_path)


def test_dataframe_is_accepted():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"depth": [2, 4], "width": [64, 64], "params": [1e6, 2e6], "loss": [4.0, 3.8],
                          "group": ["x", "x"]})
    runs = load_runs(frame)
    assert runs.depth.tolist() == [2, 4] and runs.groups == ["x"]


def test_bundled_paper_data_matches_its_description():
    runs = load_reference("depth_delusion")
    assert len(runs) == 30
    assert (runs.group == "baseline").sum() == 18 and (runs.group == "large_scale").sum() == 12
    assert np.all(runs.tokens[runs.group == "baseline"] == 6.4e9)
    assert np.isnan(runs.tokens[runs.group == "large_scale"]).all()
    assert (REFERENCE_DIR / "PROVENANCE.md").read_text().count("arXiv 2601.20994") >= 1
    shapes = load_reference("llm_shapes")
    assert "GPT-3 175B" in shapes.model and len(shapes) == len(shapes.depth)
    with pytest.raises(ValueError, match="known: depth_delusion, llm_shapes"):
        load_reference("nope")


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_runs(tmp_path / "missing")


def test_run_directories_carry_tokenizer_vocabulary_and_loss_unit(run_factory, tmp_path):
    run_factory("a", 4, 256, 1.9, tokenizer="bytes")
    run_factory("b", 8, 256, 1.7, tokenizer="bytes")
    runs = load_runs(tmp_path / "runs")
    assert list(runs.tokenizer) == ["bytes", "bytes"] and runs.vocab_size.tolist() == [257, 257]
    assert list(runs.loss_unit) == ["nats/byte", "nats/byte"]
    paper = load_reference("depth_delusion")
    assert set(paper.tokenizer) == {"gpt2"} and set(paper.loss_unit) == {"nats/token"}
    assert set(paper.vocab_size) == {50257}


def test_mixing_loss_units_is_an_error_naming_the_runs(run_factory, tmp_path):
    run_factory("byte_a", 4, 256, 1.9, tokenizer="bytes")
    run_factory("byte_b", 8, 256, 1.7, tokenizer="bytes")
    run_factory("bpe_c", 4, 512, 3.4, tokenizer="gpt2")
    with pytest.raises(ValueError, match=r"loss_unit differs between runs \(nats/byte: byte_a, byte_b; "
                       r"nats/token: bpe_c\) — losses in different units cannot be fitted together"):
        load_runs(tmp_path / "runs")


def test_tables_and_runs_are_checked_too_and_unrecorded_tokenizers_are_noted(run_factory, tmp_path):
    with pytest.raises(ValueError, match=r"tokenizer differs between runs \(gpt2: x; llama: y\)"):
        load_runs([{"params": 1e6, "loss": 3.0, "tokenizer": "gpt2", "name": "x"},
                   {"params": 2e6, "loss": 2.9, "tokenizer": "llama", "name": "y"}])
    with pytest.raises(ValueError, match=r"loss_unit differs"):
        load_runs(Runs(params=[1e6, 2e6], loss=[3.0, 2.9], loss_unit=["nats/byte", "nats/token"]))
    run_factory("a", 4, 256, 1.9, tokenizer="bytes")
    run_factory("old", 8, 256, 1.7)  # a summary.json written before runs recorded their tokenizer
    runs = load_runs(tmp_path / "runs")
    assert any("1 run(s) do not record their tokenizer" in n and "old" in n for n in runs.notes)
    # ... whose config.yaml does: read from there, and checked like the others.
    (tmp_path / "runs" / "old" / "config.yaml").write_text(
        "model:\n  depth: 8\n  vocab_size: 50257\ndata:\n  tokenizer: gpt2\n")
    with pytest.raises(ValueError, match=r"nats/byte: a; nats/token: old"):
        load_runs(tmp_path / "runs")


def test_runs_export_lists_a_run_once_when_two_sources_hold_it_and_says_which(run_factory, tmp_path,
                                                                             capsys):
    import shutil

    from depthdelusion.analysis.table.run_table import export

    first = run_factory("d2_w64", 2, 64, 3.1)
    run_factory("d4_w64", 4, 64, 3.0)
    copy = tmp_path / "bucket_copy" / "d2_w64"  # the same run, downloaded elsewhere
    shutil.copytree(first, copy)
    other = write_run(tmp_path / "other_sweep", "d2_w64", 2, 64, 3.2)  # same name, another run
    rows = export([str(first.parent), str(first), str(copy), str(other)])
    assert [(r["name"], r["loss"]) for r in rows] == [("d2_w64", 3.1), ("d4_w64", 3.0),
                                                      ("d2_w64", 3.2)]
    assert rows[0]["source"] == f"{first} + {copy}"  # reached twice, found in two places
    assert rows[2]["source"] == str(other)
    err = capsys.readouterr().err
    assert f"runs export: d2_w64: one row from 2 sources (the same run): {first} + {copy}" in err


def test_a_run_table_of_another_schema_version_is_refused_naming_the_file_and_the_version_read(
        run_factory, tmp_path):
    """docs/run_table.md: a reader refuses a table in another schema, whichever reader reads it
    (the row reader of a table with a status column, or the column reader of one without)."""
    import re

    from depthdelusion.analysis.table import run_table

    run_factory("a", 2, 64, 3.1)
    run_factory("b", 4, 64, 3.0)
    rows = run_table.export([str(tmp_path / "runs")])
    path = tmp_path / "runs.csv"
    run_table.write(rows, path)
    assert sorted(load_runs(path).name) == ["a", "b"]
    without_status = [c for c in run_table.COLUMNS if c != "status"]
    for columns in (run_table.COLUMNS, without_status):
        run_table.write([{**rows[0], "schema_version": 2}, rows[1]], path, columns)
        with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}: schema_version '2'; this version reads "
                                             r"schema_version 1 only \(docs/run_table\.md\)$"):
            load_runs(path)
    pd = pytest.importorskip("pandas")
    assert len(load_runs(pd.DataFrame(rows))) == 2  # the version as a number, 1
