"""Published tables by name (depthdelusion/analysis/published.py) and pooled fits."""
import csv
import os

import numpy as np
import pytest

from depthdelusion.analysis.fitting import fit
from depthdelusion.analysis.published import TABLES, fit_pooled, load_table, pool
from depthdelusion.analysis.runs import load_runs
from depthdelusion.cli import main

# Epoch AI's CSV is not redistributable (its repository states no license): the reproduction
# test reads it where a copy is given, e.g.
# DEPTHDELUSION_EPOCH_CSV=svg_extracted_data.csv (github.com/epoch-research/analyzing-chinchilla).
EPOCH_CSV = os.environ.get("DEPTHDELUSION_EPOCH_CSV")


def test_the_paper_table_by_name_is_the_bundled_paper_data_with_provenance():
    table, paper = load_table("depth_delusion"), load_runs("paper")
    assert len(table) == 30 and np.array_equal(table.loss, paper.loss) and list(table.group) == list(paper.group)
    text = TABLES["depth_delusion"].describe()
    assert "arXiv 2601.20994" in text and "license:" in text and "shipped in the package" in text
    with pytest.raises(ValueError, match="unknown published table 'chinchila'; known: depth_delusion, epoch_chinchilla"):
        load_table("chinchila")


def test_a_registered_table_without_a_license_is_not_shipped_and_says_where_to_get_it():
    assert not TABLES["epoch_chinchilla"].shipped
    with pytest.raises(ValueError, match="no license.*github.com/epoch-research/analyzing-chinchilla"):
        load_table("epoch_chinchilla")


def test_epoch_format_tokens_from_flops_and_the_five_highest_losses_left_out(tmp_path):
    path = tmp_path / "svg_extracted_data.csv"
    losses = [2.0 + 0.1 * i for i in range(8)]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["x", "y", "color", "Model Size", "Training FLOP", "hex_color", "loss"])
        for i, loss in enumerate(losses):
            w.writerow([0, 0, "#000", 1e8 * (i + 1), 6e17 * (i + 1), "#000", loss])
    runs = load_table("epoch_chinchilla", path=path)
    assert list(runs.loss) == pytest.approx(losses[:3])  # 8 points, the 5 highest out
    assert list(runs.tokens) == pytest.approx([1e9, 1e9, 1e9])  # FLOP / (6 N)
    (tmp_path / "other.csv").write_text("params,loss\n1,2\n")
    with pytest.raises(ValueError, match="not Epoch AI's svg_extracted_data.csv"):
        load_table("epoch_chinchilla", path=tmp_path / "other.csv")


@pytest.mark.skipif(not EPOCH_CSV, reason="Epoch AI's CSV is not shipped (no license): set DEPTHDELUSION_EPOCH_CSV")
def test_epoch_chinchilla_reproduces_the_published_huber_fit():
    published = TABLES["epoch_chinchilla"].fit
    runs = load_table("epoch_chinchilla", path=EPOCH_CSV)
    assert len(runs) == 240
    result = fit(runs, published.law, published.method, bootstrap=0, profile=False, leave_one_out=False)
    for name, (value, half_width) in published.values.items():
        assert abs(result.params[name] - value) <= half_width, (name, result.params[name])


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

    from depthdelusion.analysis import run_table

    doc = (Path(__file__).parents[2] / "docs" / "run_table.md").read_text()
    assert f"schema_version {run_table.SCHEMA_VERSION}" in doc
    assert run_table.describe_columns() in doc
