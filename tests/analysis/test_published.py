"""Published tables by name (depthdelusion/analysis/published.py) and pooled fits."""
import csv
import fnmatch
import json
import math
import os
import tomllib
from pathlib import Path

import numpy as np
import pytest

from depthdelusion.analysis import published
from depthdelusion.analysis.fitting import fit
from depthdelusion.analysis.published import TABLES, fit_pooled, load_table, pool
from depthdelusion.analysis.runs import load_runs
from depthdelusion.cli import main

# Epoch AI's CSV is not redistributable (its repository states no license): the reproduction
# test reads it where a copy is given, e.g.
# DEPTHDELUSION_EPOCH_CSV=svg_extracted_data.csv (github.com/epoch-research/analyzing-chinchilla).
EPOCH_CSV = os.environ.get("DEPTHDELUSION_EPOCH_CSV")
# The Gemstones table's license (MIT) allows shipping it: the reproduction runs on the bundled
# file, or on a downloaded copy given as DEPTHDELUSION_GEMSTONES_JSONL=wandb_df_for_fitting_hot.jsonl
# (github.com/mcleish7/gemstone-scaling-laws) while it is not bundled.
# On a machine with the project's reference mirror (shared/reference/published, the raw-file
# host's layout) the file is read from there.
_GEMSTONES_MIRROR = Path("/work/shared/reference/published/mcleish7/gemstone-scaling-laws/"
                         "5f420478f6057b0cbb4d13405fb10ca64675bccb/wandb_dfs/wandb_df_for_fitting_hot.jsonl")
GEMSTONES_JSONL = os.environ.get("DEPTHDELUSION_GEMSTONES_JSONL") or (
    str(_GEMSTONES_MIRROR) if _GEMSTONES_MIRROR.is_file() else None)
#: The authors' released optimum at full precision (parameters_delta-3/approach_3_parameters_
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


def test_the_epoch_registration_carries_the_papers_isoflop_exponents():
    text = TABLES["epoch_chinchilla"].describe()
    assert "published exponents, Approach 2 (isoFLOP profiles)" in text
    assert "a 0.49 [0.462, 0.534], b 0.51 [0.483, 0.529]" in text and "not shipped: its license" in text


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
    runs = load_table("gemstones", path=path)
    assert len(runs) == 12 and list(runs.depth[:5]) == [23, 23, 23, 23, 28]
    assert list(runs.width[4:8]) == [1024] * 4 and runs.params[4] == 5.43e8
    assert list(runs.tokens[:4]) == [1e10, 2e10, 4e10, 8e10]
    assert runs.loss[0] == pytest.approx(rows[0]["final_loss"]) and runs.name[1] == "PyGemma-256x23_pretrain@20B"
    assert "12 checkpoints of 3 shapes" in runs.notes[0] and "not independent runs" in runs.notes[0]


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


def test_a_licensed_table_is_shipped_once_its_file_is_bundled(tmp_path, monkeypatch):
    table = TABLES["gemstones"]
    assert table.redistributable
    if not table.shipped:
        with pytest.raises(ValueError, match="not bundled in this installation.*MIT.*gemstone-scaling-laws"):
            load_table("gemstones")
        assert "though its license allows it" in table.describe()
    monkeypatch.setattr(published, "REFERENCE_DIR", tmp_path)
    write_gemstones(tmp_path / published.GEMSTONES_FILE, gemstones_rows())
    assert table.shipped and "shipped in the package" in table.describe()
    assert len(load_table("gemstones")) == 12


def test_every_bundled_table_file_is_in_the_package_data():
    """A file in reference/ that the package-data globs miss would be absent from a wheel."""
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["depthdelusion"]
    for table in TABLES.values():
        if table.file:
            path = f"analysis/reference/{table.file}"
            assert any(fnmatch.fnmatch(path, g) for g in globs), (table.name, path, globs)


def gemstones_source():
    if TABLES["gemstones"].shipped:
        return None
    if not GEMSTONES_JSONL:
        pytest.skip("the Gemstones file is not bundled: set DEPTHDELUSION_GEMSTONES_JSONL")
    return GEMSTONES_JSONL


def test_gemstones_reproduces_the_authors_huber_fit():
    """The authors' optimum (Huber δ = 1e-3 on log-loss, L-BFGS-B from a grid) is reproduced:
    every parameter within the optimiser's tolerance, and our optimum is no worse under their own
    objective (scipy's huber summed over all 220 rows)."""
    from scipy.special import huber

    runs = load_table("gemstones", path=gemstones_source())
    assert len(runs) == 220 and len({(w, d) for w, d in zip(runs.width, runs.depth)}) == 22
    published_fit = TABLES["gemstones"].fit
    result = fit(runs, published_fit.law, published_fit.method, bootstrap=0, profile=False, leave_one_out=False)
    for name, (value, tolerance) in published_fit.values.items():
        assert abs(result.params[name] - value) <= tolerance, (name, result.params[name])
    for name in ("A", "B"):  # weakly identified (r = 1 with their exponent), yet the same optimum
        assert result.params[name] == pytest.approx(GEMSTONES_OPTIMUM[name], rel=0.01)

    def objective(p):
        predicted = p["E"] + p["A"] * runs.params ** -p["alpha"] + p["B"] * runs.tokens ** -p["beta"]
        return float(huber(1e-3, np.log(runs.loss) - np.log(predicted)).sum())

    assert objective(GEMSTONES_OPTIMUM) == pytest.approx(GEMSTONES_OBJECTIVE, rel=1e-6)
    assert objective(result.params) <= GEMSTONES_OBJECTIVE * (1 + 1e-6)


def test_fit_command_takes_a_registered_table_from_a_file(tmp_path, capsys):
    path = tmp_path / "hot.jsonl"
    write_gemstones(path, gemstones_rows())
    assert main(["fit", "--table", f"gemstones={path}", "--law", "chinchilla", "--method", "huber",
                 "--bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    assert "Law 'chinchilla'" in out and "12 runs" in out and "12 checkpoints of 3 shapes" in out


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
