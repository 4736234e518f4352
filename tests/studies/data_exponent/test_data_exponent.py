"""The data-exponent study in miniature: a 5-budget token sweep of a tiny model on the built-in
corpus (the real sweep, training and checkpoints), then `depthdelusion data-exponent` on it."""
import csv

import jax
import numpy as np
import pytest

from depthdelusion.cli import main
from depthdelusion.studies.data_exponent import study as data_exponent
from depthdelusion.studies.common import spectrum
GRID = """
name: mini_data_exponent
fixed:
  model: {depth: 1, width: 16, head_dim: 8, seq_len: 16}
  data: {builtin_documents: 200, builtin_zipf_exponent: 1.6}
  train: {batch_size: 8, lr: 1.0e-2, warmup_steps: 1, eval_every: 100000, eval_batches: 2,
          checkpoint_every: 0, checkpoint_minutes: 0, layer_stats_every: 1}
runs:
  - {train.steps: 2}
  - {train.steps: 4}
  - {train.steps: 8}
  - {train.steps: 16}
  - {train.steps: 32}
name_format: "t{train_steps}"
"""
TOKENS = 2048  # 16 batches of 8 x 16 tokens: 8 groups of 2
# layer_stats_every: 1 makes every step the layer-stats step: one train-step compile per run
# instead of two (step 1 is always a layer-stats step), which is most of this module's time.


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("de")
    (tmp / "grid.yaml").write_text(GRID)
    assert main(["sweep", str(tmp / "grid.yaml"), "--out", str(tmp / "runs" / "z16"), "--no-report"]) == 0
    assert main(["data-exponent", str(tmp / "runs"), "--out", str(tmp / "out"),
                 "--tokens", str(TOKENS), "--largest-only"]) == 0
    return tmp


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_study_writes_measured_and_predicted_exponents(study):
    (row,) = _rows(study / "out" / "exponents.csv")
    assert (row["sweep"], row["depth"], row["width"], float(row["zipf"]), row["runs"]) == ("z16", "1", "16", 1.6, "5")
    assert int(row["tokens_min"]) == 2 * 8 * 16 and int(row["tokens_max"]) == 32 * 8 * 16
    assert row["b_measured"] != "" and row["verdict"] in (
        "consistent", "measured > predicted", "measured < predicted", "no prediction")
    runs = _rows(study / "out" / "runs.csv")
    assert [r["run"] for r in runs] == ["t2", "t4", "t8", "t16", "t32"]
    losses = [float(r["eval_loss"]) for r in runs]
    assert losses[-1] < losses[0]  # more tokens, lower held-out loss
    assert [r["run"] for r in _rows(study / "out" / "spectra.csv")] == ["t32"]  # --largest-only
    spec = study / "runs" / "z16" / "t32" / "spectrum"  # the spectrum command's files, and readout.csv
    assert (spec / "tail.csv").is_file() and (spec / "readout.csv").is_file()
    assert not (study / "runs" / "z16" / "t2" / "spectrum").exists()
    readme = (study / "out" / "tables.md").read_text()
    assert "| z16 | 1 × 16 | 1.6 | 5 (256–4,096) |" in readme and "## Wall time" in readme
    assert (study / "out" / "learning_curves.png").stat().st_size > 0
    assert (study / "out" / "exponents.png").stat().st_size > 0


def test_head_input_covariance_maps_to_the_logits_covariance(study):
    """Cov(logits) = Kᵀ·Cov(h)·K exactly when h is the LM head's input: checks that the features
    whose spectrum predicts the exponent are what the head reads, against a plain forward pass."""
    run = study / "runs" / "z16" / "t32"
    cfg, _, graphdef, params = spectrum.load_run(run)
    batches = spectrum.validation_tokens(cfg, TOKENS, 16)
    parts = data_exponent.head_input_moments(graphdef, params, cfg, batches, 2)
    moments = spectrum.total_moments([m for m, _ in parts])
    from flax import nnx

    model = nnx.merge(graphdef, params)
    logits = np.concatenate([np.asarray(jax.device_get(model(b[:, :-1]))).reshape(-1, cfg.model.vocab_size)
                             for b in batches]).astype(np.float64)
    head = np.asarray(params["head_kernel"][...], np.float64)
    expected = head.T @ moments.covariance()[0] @ head
    np.testing.assert_allclose(np.cov(logits, rowvar=False), expected, rtol=1e-3, atol=1e-6)
    counts = np.sum([c for _, c in parts], axis=0)
    assert counts.sum() == moments.n == sum(b.shape[0] * (b.shape[1] - 1) for b in batches)


def test_sweep_mixing_corpora_is_refused(study, tmp_path):
    import shutil

    mixed = tmp_path / "runs" / "mixed"
    shutil.copytree(study / "runs" / "z16" / "t2", mixed / "t2")
    shutil.copytree(study / "runs" / "z16" / "t4", mixed / "t4")
    cfg = (mixed / "t4" / "config.yaml").read_text().replace("builtin_zipf_exponent: 1.6",
                                                              "builtin_zipf_exponent: 1.1")
    (mixed / "t4" / "config.yaml").write_text(cfg)
    with pytest.raises(ValueError, match=r"mixed: one sweep must hold one shape and corpus"):
        data_exponent.discover(tmp_path / "runs")


def test_a_root_without_finished_runs_is_one_clear_line(tmp_path, capsys):
    assert main(["data-exponent", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "no finished runs in ROOT/SWEEP/RUN/summary.json" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit:  # refused by the parser, before any work
        main(["data-exponent", str(tmp_path), "--out", str(tmp_path / "out"), "--tokens", "0"])
    assert exit.value.code == 2
    assert "argument --tokens: 0: must be an integer >= 1" in capsys.readouterr().err


def test_a_run_without_its_config_or_summary_fields_is_named(tmp_path):
    from depthdelusion import rundir

    run = tmp_path / "runs" / "w64" / "t40"
    run.mkdir(parents=True)
    summary = {"status": "finished", "eval_loss": 2.5, "steps": 40, "tokens": 20480, "wall_time_s": 1.0}
    rundir.write_summary(run, summary)
    with pytest.raises(FileNotFoundError, match=r"t40: no config.yaml beside its summary.json"):
        data_exponent.discover(tmp_path / "runs")
    rundir.write_summary(run, {k: v for k, v in summary.items() if k != "tokens"})
    with pytest.raises(ValueError, match=r"t40/summary.json: missing tokens"):
        data_exponent.discover(tmp_path / "runs")

