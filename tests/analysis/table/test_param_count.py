"""The parameter count N as a stated choice (analysis/table/param_count.py): total as published,
Kaplan's non-embedding N from the table's registration, the pieces of N = N_nonemb + ε·N_emb,
and one count per table whichever command reads it (issue 62 item 1, issue 63 item 11)."""
import csv
import dataclasses
import json
import re

import numpy as np
import pytest

from depthdelusion.analysis.report.consistency import with_param_convention
from depthdelusion.analysis.table.param_count import EmbeddingCount, param_pieces, with_params
from depthdelusion.analysis.table.published import GEMSTONES_VOCAB, TABLES, load_table
from depthdelusion.analysis.table.published_readers import GADRE_VOCAB
from depthdelusion.analysis.table.load import load_runs
from depthdelusion.analysis.table.runs import Runs
from depthdelusion.cli import main

from .test_published_downloads import mirror_cache, no_proxy_for_the_local_mirror  # noqa: F401 (fixtures)

DEPTH, WIDTH = np.array([4, 8, 16]), np.array([256, 256, 512])
V = 1000


def shaped_runs(matrices: int, tied) -> Runs:
    total = 12.0 * DEPTH * WIDTH ** 2 + matrices * V * WIDTH
    return Runs(depth=DEPTH, width=WIDTH, params=total, loss=[3.0, 2.9, 2.8], tokens=[1e9, 1e9, 1e9],
                embeddings=EmbeddingCount(V, matrices, tied, "synthetic"))


@pytest.mark.parametrize("matrices, tied", [(2, False), (1, True)])
def test_nonembedding_removes_every_vocabulary_matrix_the_total_counts(matrices, tied):
    runs = shaped_runs(matrices, tied)
    kaplan, notes = with_params(runs, "nonembedding")
    assert np.array_equal(kaplan.params, 12.0 * DEPTH * WIDTH ** 2)
    assert f"N − {matrices}·1,000·W" in notes[0] and ("untied" if not tied else "tied") in notes[0]
    n_nonemb, n_emb, _ = param_pieces(runs)  # the pieces of N = N_nonemb + ε·N_emb
    assert np.array_equal(n_nonemb + n_emb, runs.params) and np.array_equal(n_emb, matrices * V * WIDTH)
    same, notes = with_params(runs, "total")
    assert same.params is runs.params and "as published" in notes[0]


def test_the_registered_count_survives_row_selection_and_replacement():
    runs = shaped_runs(2, False)
    for kept in (runs.subset(runs.depth > 4), load_runs(runs, where="depth > 4"),
                 dataclasses.replace(runs, loss=runs.loss + 1)):
        assert kept.embeddings == runs.embeddings
        assert np.array_equal(with_params(kept, "nonembedding")[0].params, 12.0 * kept.depth * kept.width ** 2)


def test_a_table_without_a_registration_uses_its_own_column_or_is_refused_naming_it():
    own = Runs(depth=DEPTH, width=WIDTH, params=[3e6, 5e6, 9e6], params_non_embedding=[1e6, 2e6, 4e6],
               loss=[3.0, 2.9, 2.8])
    assert list(with_params(own, "nonembedding")[0].params) == [1e6, 2e6, 4e6]
    bare = Runs(depth=DEPTH, width=WIDTH, params=[3e6, 5e6, 9e6], loss=[3.0, 2.9, 2.8])
    with pytest.raises(ValueError, match="give a params_non_embedding column .*valid without it: --params total"):
        with_params(bare, "nonembedding")
    with pytest.raises(ValueError, match="unknown parameter-count convention 'kaplan'; valid: total, nonembedding"):
        with_params(bare, "kaplan")
    too_big = dataclasses.replace(shaped_runs(2, False), params=np.array([1e5, 1e5, 1e5]))
    with pytest.raises(ValueError, match=r"non-embedding N of row 0 \(4Lx256\) is .*larger than its total N"):
        with_params(too_big, "nonembedding")


def test_fit_params_nonembedding_without_a_count_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "runs.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["depth", "width", "params", "loss"])
        for d, wd, n, loss in zip(DEPTH, WIDTH, [3e6, 5e6, 9e6], [3.0, 2.9, 2.8]):
            w.writerow([d, wd, n, loss])
    assert main(["fit", str(path), "--law", "kaplan", "--params", "nonembedding", "--bootstrap", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "params_non_embedding column" in err


def test_the_gemstones_registration_is_what_its_counts_measure(mirror_cache):
    """N_total = 15.0·D·W² − 6.6·D·W + 100,525·W by least squares on the 22 shapes; the W term
    is 2V within 0.1%: two vocabulary matrices (untied), as registered."""
    runs = load_table("gemstones")
    D, W = runs.depth.astype(float), runs.width.astype(float)
    coef = np.linalg.lstsq(np.c_[D * W ** 2, D * W, W], runs.params, rcond=None)[0]
    assert (round(coef[0], 1), round(coef[1], 1), round(coef[2])) == (15.0, -6.6, 100525)
    assert coef[2] / GEMSTONES_VOCAB == pytest.approx(2, abs=0.002)
    count = TABLES["gemstones"].embeddings
    assert (count.vocab, count.matrices, count.tied) == (GEMSTONES_VOCAB, 2, False)
    # the table's own column is the authors' --no_embeds count: one matrix out, the LM head still in
    assert np.array_equal(runs.params - runs.params_non_embedding, GEMSTONES_VOCAB * W)
    assert np.array_equal(with_params(runs, "nonembedding")[0].params, runs.params - 2 * GEMSTONES_VOCAB * W)


def open_lm_blocks(depth, width) -> np.ndarray:
    """open_lm's count without the vocabulary: per layer 4·W² attention, a SwiGLU of 3·W·h (h =
    ⌊8W/3⌋ rounded up to a multiple of 256) and two gain-only norms; one final norm."""
    hidden = 256 * ((np.floor(8 * width / 3) + 255) // 256)
    return depth * (4 * width ** 2 + 3 * width * hidden + 2 * width) + width


def test_the_gadre_registration_is_what_its_counts_measure(mirror_cache):
    """Gadre et al.'s params are open_lm's blocks plus 2·50,432·W to the parameter on every shaped
    run, and params − params_no_embed is one 50,432·W matrix: untied, two matrices, so Kaplan's
    N removes both (the files' own column keeps the LM head)."""
    runs = load_table("gadre2024")
    runs = runs.subset(np.isfinite(runs.width))
    D, W = runs.depth.astype(float), runs.width.astype(float)
    count = TABLES["gadre2024"].embeddings
    assert (count.vocab, count.matrices, count.tied) == (GADRE_VOCAB, 2, False) and len(runs) == 95
    assert np.array_equal(runs.params, open_lm_blocks(D, W) + 2 * GADRE_VOCAB * W)
    assert np.array_equal(runs.params - runs.params_non_embedding, GADRE_VOCAB * W)
    kaplan = with_params(runs, "nonembedding")[0].params
    assert np.array_equal(kaplan, open_lm_blocks(D, W)) and np.array_equal(kaplan, runs.params_non_embedding - GADRE_VOCAB * W)


def test_gadre_kaplans_n_on_the_whole_table_names_the_runs_without_a_width(mirror_cache):
    with pytest.raises(ValueError, match=r"needs the width of every run \(column width\): 9 have none "
                                         r"\(c4_original-open_lm_1b-1\.0, c4_original-open_lm_1b-4\.0, "):
        with_params(load_table("gadre2024"), "nonembedding")


def test_tables_show_says_how_each_table_counts_n_and_whether_it_ties(mirror_cache, capsys):
    shown = {}
    for name in ("gemstones", "chinchilla_shapes", "isoflop_marin", "gadre2024"):
        assert main(["tables", "show", name]) == 0
        shown[name] = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("  parameters:"))
    assert "as published. N counts 2 vocabulary matrices (V = 50,304; embeddings untied)" in shown["gemstones"]
    assert "N counts 1 vocabulary matrix (V = 32,000; embeddings tied or not: the source does not say)" in shown["chinchilla_shapes"]
    assert "not registered" in shown["isoflop_marin"]
    assert "as published. N counts 2 vocabulary matrices (V = 50,432; embeddings untied)" in shown["gadre2024"]
    assert "weight_tying false" in shown["gadre2024"]
    assert main(["tables", "show", "gemstones", "--json"]) == 0
    assert "untied" in json.loads(capsys.readouterr().out)["parameters"]


def _fitted_params(out) -> np.ndarray:
    with open(out / "rows.csv", newline="") as fh:
        return np.array([float(r["params"]) for r in csv.DictReader(fh)])


def test_fit_params_nonembedding_fits_kaplans_n_of_the_registered_table(mirror_cache, tmp_path, capsys):
    runs = load_table("gemstones")
    assert main(["fit", "--table", "gemstones", "--law", "kaplan", "--params", "nonembedding",
                 "--bootstrap", "0", "--out", str(tmp_path / "fit")]) == 0
    assert "Kaplan's non-embedding N = N − 2·50,304·W" in capsys.readouterr().out
    expected = runs.params - 2 * GEMSTONES_VOCAB * runs.width
    assert np.allclose(_fitted_params(tmp_path / "fit"), expected, rtol=1e-4)  # rows.csv prints 5 digits


def test_fit_and_report_on_the_same_table_use_the_same_n(mirror_cache, tmp_path):
    """report --table gemstones replaced all 220 published counts with the paper's formula (3.6–18.2%
    lower) while fit used them as published (issue 63 item 11): now both fit the authors' counts."""
    from depthdelusion.analysis.fitting.options import FitOptions
    from depthdelusion.analysis.report.options import ReportOptions
    from depthdelusion.analysis.report.results import compute

    assert main(["fit", "--table", "gemstones", "--law", "kaplan", "--bootstrap", "0", "--out", str(tmp_path / "fit")]) == 0
    table = load_table("gemstones")
    report = compute(table, ReportOptions(fit=FitOptions(bootstrap=0), laws=("chinchilla",), shape_draws=0,
                                          design=False, lr_replicates=0))  # what `report` computes
    assert np.array_equal(report.runs.params, table.params)
    assert np.allclose(_fitted_params(tmp_path / "fit"), report.runs.params, rtol=1e-4)
    assert not any("disagrees with its shape" in n for n in report.notes)
    assert any("total, the table's counts as published" in n for n in report.notes)
    from depthdelusion.analysis.report.markdown import markdown
    from depthdelusion.analysis.report.tables import with_tables

    text = markdown(with_tables(report))  # the report says the counts are fitted as published
    assert "this table's counts are registered and fitted as published" in text and "disagree" not in text
    # and the same holds for the function every command's --params goes through
    assert np.array_equal(with_param_convention(table, "total")[0].params, table.params)


def _kaplan_table(epsilon: float, seed: int = 0) -> Runs:
    """A width × depth grid whose loss follows kaplan on N = N_nonemb + ε·N_emb (V 50,000, untied),
    with 0.002 nats of noise."""
    depth, width = (a.ravel() for a in np.meshgrid([2, 4, 8, 16, 32], [128, 256, 512, 1024]))
    nonemb = 12.0 * depth * width ** 2
    emb = 2 * 50000.0 * width
    loss = 1.8 + 400.0 * (nonemb + epsilon * emb) ** -0.3
    loss = loss + 0.002 * np.random.default_rng(seed).standard_normal(len(loss))
    return Runs(depth=depth, width=width, params=nonemb + emb, loss=loss,
                embeddings=EmbeddingCount(50000, 2, False, "synthetic"))


def test_a_fitted_embedding_weight_recovers_the_one_the_losses_were_made_with():
    from depthdelusion.analysis.fitting.embedding_weight import fit_embedding_weight

    weight = fit_embedding_weight(_kaplan_table(0.3), "kaplan")
    assert weight.low < 0.3 < weight.high and weight.value == pytest.approx(0.3, abs=0.05)
    assert not (weight.low_open or weight.high_open) and weight.rss[weight.value] < min(weight.rss[0.0], weight.rss[1.0])
    total = fit_embedding_weight(_kaplan_table(1.0), "kaplan")  # the data want ε at its range's end
    assert total.high_open and total.high == 1.0 and "≥ 1]" in total.interval_text()
    with pytest.raises(ValueError, match="profiles ε by least squares; --loss huber is not supported"):
        fit_embedding_weight(_kaplan_table(0.3), "kaplan", "huber")


def test_fit_params_fitted_on_gemstones_finds_the_referees_epsilon(mirror_cache, capsys):
    """Issue 62's referee: chinchilla's least-squares RSS 0.282 at ε = 0 (Kaplan's N), 0.475 at
    ε = 1 (total), lower near ε ≈ 0.1 (0.262)."""
    assert main(["fit", "--table", "gemstones", "--law", "chinchilla", "--params", "fitted",
                 "--bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "ε fitted" in x)
    assert "RSS 0.2821 at ε = 0, 0.4752 at ε = 1" in line
    value = float(re.search(r"ε = ([\d.]+) \[", line)[1])
    low, high = (float(x) for x in re.search(r"\[([\d.]+), ([\d.]+)\]", line).groups())
    assert 0.05 < low < value < high < 0.3 and value == pytest.approx(0.146, abs=0.01)


def test_report_params_nonembedding_fits_kaplans_n_of_a_registered_table():
    from depthdelusion.analysis.fitting.options import FitOptions
    from depthdelusion.analysis.report.options import ReportOptions
    from depthdelusion.analysis.report.results import compute

    table = _kaplan_table(0.0)
    report = compute(table, ReportOptions(fit=FitOptions(bootstrap=0), laws=("kaplan",), shape_draws=0,
                                          design=False, lr_replicates=0, params="nonembedding"))
    assert np.array_equal(report.runs.params, 12.0 * table.depth * table.width ** 2)
    assert any("Kaplan's non-embedding N = N − 2·50,000·W" in n for n in report.notes)
