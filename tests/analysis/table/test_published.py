"""Published tables by name (depthdelusion/analysis/table/published.py) and pooled fits."""
import csv
import dataclasses
import fnmatch
import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from depthdelusion.analysis.fitting.engine import fit
from depthdelusion.analysis.table.published import TABLES, PublishedTable, load_table, pool
from depthdelusion.analysis.fitting.pooled import fit_pooled
from depthdelusion.analysis.table.published_files import REGISTRY
from depthdelusion.analysis.table.load import load_runs
from depthdelusion.cli import main

# The published numbers are reproduced from downloaded files in test_published_downloads.py.
#: The Gemstones authors' released optimum at full precision (parameters_delta-3/approach_3_parameters_
#: grid_search_0_hot.json: exponents, log coefficients, log E) and its Huber objective.
GEMSTONES_OPTIMUM = dict(E=math.exp(0.7622636901), A=math.exp(5.3613398367), alpha=0.2928686863,
                         B=math.exp(15.415994531), beta=0.712872206)
GEMSTONES_OBJECTIVE = 0.0019816129


def test_the_paper_table_by_name_is_the_bundled_paper_data_with_provenance():
    table, paper = load_table("depth_delusion"), load_runs("paper")
    assert len(table) == 30 and np.array_equal(table.loss, paper.loss) and list(table.group) == list(paper.group)
    text = TABLES["depth_delusion"].describe()
    assert "arXiv 2601.20994" in text and "license:" in text and "shipped in the package" in text
    with pytest.raises(ValueError, match="unknown published table 'chinchila'; known: depth_delusion, epoch_chinchilla, gemstones"):
        load_table("chinchila")
    with pytest.raises(ValueError, match="'depth_delusion' ships in the package; it takes no path"):
        load_table("depth_delusion", path="elsewhere.csv")


def test_a_registered_table_without_a_license_is_not_shipped_and_says_where_it_is_downloaded_from():
    table = TABLES["epoch_chinchilla"]
    assert not table.shipped and not table.redistributable
    text = table.describe()
    assert "license: none stated" in text and "downloaded from its source on first use" in text
    assert ("file: https://raw.githubusercontent.com/epoch-research/analyzing-chinchilla/"
            "92258837425e1b5f2851d624287f0120583a3d0e/data/svg_extracted_data.csv") in text
    assert "sha256 193478df4e90f040016431996c45682659306840ecdadf83cfb9cd5ca0aa1b30" in text


def test_epoch_format_tokens_from_flops_and_the_five_highest_losses_left_out(tmp_path):
    path = tmp_path / "svg_extracted_data.csv"
    losses = [2.0 + 0.1 * i for i in range(8)]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["x", "y", "color", "Model Size", "Training FLOP", "hex_color", "loss"])
        for i, loss in enumerate(losses):
            w.writerow([0, 0, "#000", 1e8 * (i + 1), 6e17 * (i + 1), "#000", loss])
    runs = load_table("epoch_chinchilla", path=path, allow_modified=True)  # not Epoch's file: its own rows
    assert list(runs.loss) == pytest.approx(losses[:3])  # 8 points, the 5 highest out of fits
    every = load_table("epoch_chinchilla", path=path, all_rows=True, allow_modified=True)
    assert list(every.extra["status"]) == ["finished"] * 3 + ["excluded"] * 5
    assert list(runs.tokens) == pytest.approx([1e9, 1e9, 1e9])  # FLOP / (6 N)
    (tmp_path / "other.csv").write_text("params,loss\n1,2\n")
    with pytest.raises(ValueError, match="not Epoch AI's svg_extracted_data.csv"):
        load_table("epoch_chinchilla", path=tmp_path / "other.csv")


def test_the_epoch_registration_carries_the_papers_isoflop_exponents():
    text = TABLES["epoch_chinchilla"].describe()
    assert "published exponents, Approach 2 (isoFLOP profiles)" in text
    assert "a 0.49 [0.462, 0.534], b 0.51 [0.483, 0.529]" in text and "license: none stated" in text


def write_gemstones(path, rows):
    with open(path, "w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


def gemstones_rows():
    """12 checkpoints of 3 shapes drawn from the authors' fitted law (no noise)."""
    law = GEMSTONES_OPTIMUM
    rows = []
    for width, depth, n in ((256, 23, 5.2e7), (1024, 28, 5.43e8), (2048, 27, 1.6e9)):
        for step, tokens in enumerate((1e10, 2e10, 4e10, 8e10), 1):
            loss = law["E"] + law["A"] * n ** -law["alpha"] + law["B"] * tokens ** -law["beta"]
            rows.append({"run_name": f"PyGemma-{width}x{depth}_pretrain", "params_active_precise": n,
                         "width": width, "depth": depth, "tokens": tokens, "step": step,
                         "num_nodes": 4, "final_loss": loss})
    return rows


def test_gemstones_reader_reads_the_authors_json_lines(tmp_path):
    path = tmp_path / "hot.jsonl"
    rows = gemstones_rows()
    write_gemstones(path, rows)
    runs = load_table("gemstones", path=path, allow_modified=True)
    assert len(runs) == 12 and list(runs.depth[:5]) == [23, 23, 23, 23, 28]
    assert list(runs.width[4:8]) == [1024] * 4 and runs.params[4] == 5.43e8
    assert list(runs.tokens[:4]) == [1e10, 2e10, 4e10, 8e10]
    assert runs.loss[0] == pytest.approx(rows[0]["final_loss"]) and runs.name[1] == "PyGemma-256x23_pretrain@20B"
    assert "12 checkpoints of 3 shapes" in runs.notes[1] and "not independent runs" in runs.notes[1]


@pytest.mark.parametrize("line, message", [
    ("{not json", r"hot.jsonl:2: not a JSON object"),
    ("[1, 2]", r"hot.jsonl:2: expected a JSON object, got list"),
    ('{"run_name": "x", "width": 1}', r"hot.jsonl:2: not the Gemstones fitting table \(no field\(s\) depth, "
                                      r"params_active_precise, tokens, final_loss"),
    ('{"run_name": "x", "width": 1, "depth": 2, "params_active_precise": 3, "tokens": "many", "final_loss": 2}',
     r"hot.jsonl:2: field 'tokens' is 'many', not a number"),
])
def test_gemstones_reader_names_the_line_and_field_of_bad_input(tmp_path, line, message):
    path = tmp_path / "hot.jsonl"
    write_gemstones(path, gemstones_rows()[:1])
    with open(path, "a") as fh:
        fh.write(line + "\n")
    with pytest.raises(ValueError, match=message):
        load_table("gemstones", path=path)


RENAMED = PublishedTable("toy", "a toy", "nobody", "https://example.org", "MIT", False, rows=3,
                         columns={"params": "Model Size", "tokens": "Tokens", "loss": "Loss", "group": "Set"})


def test_a_csv_source_is_read_by_its_declared_columns_with_no_reader_of_its_own(tmp_path):
    (tmp_path / "runs.csv").write_text("Model Size,Tokens,Loss,Set,Other\n1e6,2e7,3.5,a,x\n2e6,4e7,3.25,b,y\n")
    runs = RENAMED.read(tmp_path / "runs.csv")
    assert list(runs.params) == [1e6, 2e6] and list(runs.tokens) == [2e7, 4e7] and list(runs.loss) == [3.5, 3.25]
    assert list(runs.group) == ["a", "b"] and "Other" not in runs.extra


@pytest.mark.parametrize("text, columns, message", [
    ("Model Size,Tokens,Set\n1e6,2e7,a\n", None, r"runs.csv: not the toy table's source \(no column\(s\) Loss"),
    ("Model Size,Tokens,Loss,Set\n1e6,2e7,big,a\n", None, r"runs.csv:2: column 'Loss' is 'big', not a number"),
    ("N,L\n1,2\n", {"parameters": "N", "loss": "L"}, r"parameters is not a run-table column; .*: depth, width, params"),
])
def test_a_declared_column_missing_or_not_a_number_or_unknown_is_named(tmp_path, text, columns, message):
    (tmp_path / "runs.csv").write_text(text)
    table = dataclasses.replace(RENAMED, columns=columns) if columns else RENAMED
    with pytest.raises(ValueError, match=message):
        table.read(tmp_path / "runs.csv")


@pytest.mark.parametrize("reader, columns", [(None, {}), (load_runs, {"loss": "L"})])
def test_a_registration_gives_its_reader_or_its_columns_not_both_nor_neither(reader, columns):
    with pytest.raises(ValueError, match="'toy': give its reader or its columns"):
        dataclasses.replace(RENAMED, reader=reader, columns=columns)


def test_every_bundled_table_file_is_in_the_package_data():
    """A file in reference/ that the package-data globs miss would be absent from a wheel."""
    pyproject = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["depthdelusion"]
    files = [f"analysis/reference/{t.file}" for t in TABLES.values() if t.file]
    for path in files + [f"analysis/reference/{REGISTRY.name}"]:  # and the sha256 registry
        assert any(fnmatch.fnmatch(path, g) for g in globs), (path, globs)


def test_fit_command_takes_a_registered_table_from_a_file_checked_against_its_sha256(tmp_path, capsys):
    """A local copy is the registered file or it is refused, naming the flag that reads it
    anyway; read with that flag, the output says it is a modified copy."""
    path = tmp_path / "hot.jsonl"
    write_gemstones(path, gemstones_rows())  # 12 rows of the authors' law: not their file
    args = ["fit", "--table", f"gemstones={path}", "--law", "chinchilla", "--loss", "huber", "--bootstrap", "0"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--table gemstones={path}: not the registered source (sha256 " in err
    assert "registered 655467b5" in err and "give --allow-modified" in err
    assert main(args + ["--allow-modified"]) == 0
    captured = capsys.readouterr()
    assert "Law 'chinchilla'" in captured.out and "12 runs" in captured.out
    assert "12 checkpoints of 3 shapes" in captured.out and "MODIFIED COPY of gemstones" in captured.out
    assert "warning: MODIFIED COPY of gemstones" in captured.err


def test_a_folder_copy_of_a_table_of_many_files_is_checked_file_by_file(tmp_path):
    """gadre2024 is a folder of 104 registered files: a folder missing them, or holding one
    more, is not the registered source."""
    from depthdelusion.analysis.table.published import local_copy_differences

    table = TABLES["gadre2024"]
    (tmp_path / "extra.json").write_text("{}")
    text = local_copy_differences(table, tmp_path)
    assert text.startswith("104 of its 104 files missing or with another sha256") and "1 unregistered" in text
    assert local_copy_differences(TABLES["gemstones"], tmp_path / "absent.jsonl") == ""  # the reader says it


def test_pooled_fit_has_one_offset_per_source_and_says_what_was_pooled(tmp_path):
    """Our runs = the paper's runs with every loss 0.1 nats higher: pooled with the paper's
    table, the shared parameters are the paper table's own fit and the offsets differ by 0.1."""
    paper = load_runs("paper")
    ours = tmp_path / "ours.csv"
    with open(ours, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["name", "depth", "width", "params", "loss", "tokenizer"])
        for n, d, wd, p, loss in zip(paper.name, paper.depth, paper.width, paper.params, paper.loss):
            w.writerow([f"ours-{n}", d, wd, p, loss + 0.1, "gpt2"])
    options = dict(bootstrap=0, profile=False, leave_one_out=False)
    alone = fit(paper, "kaplan", **options)
    pooled = fit_pooled(str(ours), "depth_delusion", "kaplan", **options)
    assert pooled.n == 60 and pooled.offset_groups == ["depth_delusion", "ours"]
    assert pooled.params["E[ours]"] - pooled.params["E[depth_delusion]"] == pytest.approx(0.1, abs=1e-4)
    assert pooled.params["E[depth_delusion]"] == pytest.approx(alone.params["E"], rel=1e-3)
    for name in ("A", "alpha"):
        assert pooled.params[name] == pytest.approx(alone.params[name], rel=1e-3)
    note = pooled.notes[0]
    assert note.startswith("pooled fit: 30 of our runs") and "30 runs of the published table 'depth_delusion'" in note
    assert "one offset E per source" in note and "license:" in note and note in pooled.summary()


def test_pooling_refuses_losses_in_different_units(tmp_path):
    ours = tmp_path / "ours.csv"
    ours.write_text("params,loss,tokenizer\n1e6,3.0,bytes\n2e6,2.9,bytes\n")
    with pytest.raises(ValueError, match="differs between runs"):
        pool(str(ours), "depth_delusion")


def test_fit_command_takes_a_table_by_name(capsys):
    assert main(["fit", "--table", "depth_delusion", "--law", "kaplan", "--bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    assert "Law 'kaplan'" in out and "30 runs" in out
    assert main(["fit", "--law", "kaplan"]) != 0
    assert "give RUNS or --table NAME" in capsys.readouterr().err


def test_the_run_table_doc_lists_the_schema():
    from pathlib import Path

    from depthdelusion.analysis.table import run_table

    doc = (Path(__file__).parents[3] / "docs" / "run_table.md").read_text()
    assert f"schema_version {run_table.SCHEMA_VERSION}" in doc
    columns = ["| column | holds |", "|---|---|"]
    columns += [f"| `{name}` | {what} |" for name, what in run_table.COLUMNS.items()]
    assert "\n".join(columns) in doc
