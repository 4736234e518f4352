"""Studies and analysis outputs on gs:// against a real GCS server (tests/gcs_emulator.py): the
depth-expansion study trains its two sweeps, grows the growth parent and trains it on, probes,
and writes its tables and figures, with --runs and --out both in the bucket; the prediction
study; `fit --out` and `isoflop --out`; the report's spectrum sections. Nothing lands on the
local disk as ./gs:/...; the commands that write local directories only refuse a gs:// --out."""
import json
import subprocess

import pytest
import yaml
from etils import epath

from depthdelusion import rundir
from gcs_emulator import PYTHON, bucket, cli_env, gcs_server  # noqa: F401 (fixtures)

# The miniature: one depth-grid run, one growth parent (depth 1, 2 steps) and its scratch
# twin (depth 2, 4 steps); every run evaluates, so the study's tables have their losses.
TRAIN = {"batch_size": 8, "lr": 3.0e-3, "warmup_steps": 2, "log_every": 1, "eval_batches": 3,
         "checkpoint_minutes": 0}
MODEL = {"head_dim": 16, "seq_len": 32, "width": 32}
DEPTH_GRID = {
    "name": "depth_expansion", "name_format": "d{depth}_w{width}",
    "fixed": {"model": MODEL, "data": {"builtin_documents": 400},
              "train": {**TRAIN, "steps": 4, "layer_stats_every": 4, "eval_every": 4, "checkpoint_every": 4}},
    "runs": [{"model.depth": 2}],
}
GROWTH_GRID = {
    "name": "depth_expansion_growth", "name_format": "d{depth}_w{width}_steps{train_steps}_seed{train_seed}",
    "fixed": {"model": MODEL, "data": {"builtin_documents": 400},
              "train": {**TRAIN, "lr_min_ratio": 1.0, "layer_stats_every": 2, "eval_every": 2,
                        "checkpoint_every": 2}},
    "runs": [{"model.depth": 1, "train.steps": 2, "train.seed": 0},
             {"model.depth": 2, "train.steps": 4, "train.seed": 0}],
}


def test_the_expansion_study_trains_grows_probes_and_reports_on_gs(gcs_server, bucket, tmp_path):
    depth_grid, growth_grid = tmp_path / "depth.yaml", tmp_path / "growth.yaml"
    depth_grid.write_text(yaml.safe_dump(DEPTH_GRID))
    growth_grid.write_text(yaml.safe_dump(GROWTH_GRID))
    runs, out = epath.Path(f"{bucket}/runs"), epath.Path(f"{bucket}/depth_expansion")
    command = [PYTHON, "-m", "depthdelusion", "expansion-study", "--depth-grid", str(depth_grid),
               "--growth-grid", str(growth_grid), "--runs", str(runs), "--out", str(out), "--probe-batches", "3"]
    done = subprocess.run(command, env=cli_env(gcs_server), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    growth = runs / "depth_expansion_growth"
    grown = growth / "grown_d1_w32_steps2_seed0_to_d2"
    for run in (runs / "depth_expansion" / "d2_w32", growth / "d1_w32_steps2_seed0", growth / "d2_w32_steps4_seed0",
                grown):
        assert rundir.status(run) == "finished", run
    assert json.loads((grown / "expansion.json").read_text())["after"] == [0]
    assert [r["step"] for r in rundir.read_metrics(grown)] == [3, 4]  # trained on from the parent's step 2

    written = {p.name for p in out.iterdir()}
    assert {"results.md", "runs.csv", "signal.csv", "jumpboard.csv", "covariance.csv", "growth.csv",
            "growth_curves.csv", "growth_summary.json", "signal.png", "alignment.png", "growth.png",
            "study_wall_time.json", "probes"} <= written, written
    probe = json.loads((out / "probes" / "d2_w32.json").read_text())
    assert probe["depth"] == 2 and len(probe["signal"]) == 2
    rows = (out / "runs.csv").read_text().splitlines()
    assert rows[0].startswith("run,depth,width,eval_loss") and rows[1].startswith("d2_w32,2,32,")
    assert (out / "signal.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "growth_summary.json").read_text())["seeds"] == 1

    # Again with nothing to train: the probe comes from its cache on gs://, the tables again.
    before = (out / "results.md").read_text()
    (out / "results.md").unlink()
    done = subprocess.run([*command, "--train", "none"], env=cli_env(gcs_server), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "probing" not in done.stdout
    assert (out / "results.md").read_text() == before


def test_the_probe_tables_rerender_from_the_caches_on_gs(bucket, tmp_path):
    """`rerender_probe_tables` reads the cached probes and the committed tables from gs:// and
    writes the regenerated ones back there (the committed study, copied into the bucket)."""
    from pathlib import Path

    from depthdelusion.studies.expansion import study

    committed = Path(__file__).resolve().parents[1] / "analysis" / "depth_expansion"
    out = epath.Path(f"{bucket}/depth_expansion")
    rundir.copy_tree(committed, out)
    study.rerender_probe_tables(str(out))
    for name in ("signal.csv", "runs.csv", "results.md"):
        assert (out / name).read_text() == (committed / name).read_text(), name


def test_the_expansion_prediction_study_runs_on_gs(bucket):
    """`expansion-prediction` in miniature (tests/test_expansion_trials.py's) with the parents,
    the children it expands and trains, and its tables in the bucket."""
    import dataclasses

    from depthdelusion.studies.expansion import trials
    from depthdelusion.train.loop import train
    from tests.test_expansion import RUN

    cfg = dataclasses.replace(RUN, train=dataclasses.replace(RUN.train, eval_batches=3, eval_every=100))
    parents, out = epath.Path(f"{bucket}/parents"), epath.Path(f"{bucket}/prediction")
    train(cfg, parents / "d2_seed0")
    summary = trials.prediction_study(str(parents), str(out), steps=2, probe_batches=3, log=lambda _: None)
    assert "at least 3 seeds" in summary["not_tested"]
    rows = (out / "prediction.csv").read_text().splitlines()
    assert rows[0].startswith("parent,seed,after,signal_train") and len(rows) == 1 + cfg.model.depth
    assert json.loads((out / "prediction_summary.json").read_text())["steps_after_expansion"] == 2
    children = epath.Path(f"{bucket}/parents_children")
    assert sorted(p.name for p in children.iterdir()) == ["d2_seed0_after0", "d2_seed0_after1"]
    assert all(rundir.status(p) == "finished" for p in children.iterdir())
    assert (out / "probes" / "d2_seed0.json").exists()


def test_fit_and_isoflop_write_their_out_to_gs(bucket, tmp_path, capsys):
    """`fit --out` (rows.csv, residuals.png, rollout.csv) and `isoflop --out` (its figure) on
    gs://: drawn by local-only writers, copied up; nothing written as ./gs:/..."""
    from depthdelusion.cli import main
    from tests.analysis.test_diagnostics import BAD, table, write
    from tests.analysis.test_isoflop import _csv, sweep

    path = write(tmp_path / "t.csv", table(bad=BAD))
    out = epath.Path(f"{bucket}/fit")
    assert main(["fit", str(path), "--bootstrap", "0", "--json", "--out", str(out)]) == 0
    rows = (out / "rows.csv").read_text().splitlines()
    assert rows[0].startswith("name,params,tokens,loss,fitted") and len(rows) == 91
    assert (out / "residuals.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    rows = [{"N": f"{r['params']:.6g}", "loss": f"{r['loss']:.5f}", "flops": f"{6 * r['params'] * r['tokens']:.6g}"}
            for r in sweep(seed=0, k=7)]
    out = epath.Path(f"{bucket}/isoflop")
    assert main(["isoflop", _csv(tmp_path / "iso.csv", rows), "--json", "--no-bias", "--out", str(out)]) == 0
    assert (out / "isoflop.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()


def test_the_reports_spectrum_and_readout_sections_read_runs_on_gs(bucket, tmp_path):
    """The report's sections on `depthdelusion spectrum` and `data-exponent` outputs find
    RUN/spectrum/tail.csv and readout.csv under a gs:// runs root (a remote root was read as a
    missing local directory: the sections silently vanished)."""
    from depthdelusion.analysis.readout import READOUT_COLUMNS, readout_section
    from depthdelusion.analysis.spectra import TAIL_COLUMNS, spectrum_section
    from depthdelusion.analysis.tables import write_csv

    runs = epath.Path(f"{bucket}/runs")
    run = runs / "sweep" / "d2_w32"
    rundir.write_summary(run, {"status": "finished"})
    tail = {c: "" for c in TAIL_COLUMNS} | {"layer": "1", "beta": "1.25", "beta_lo": "1.1", "beta_hi": "1.4",
                                              "beta_half_a": "1.2", "beta_half_b": "1.3", "rank_lo": "3",
                                              "rank_hi": "20"}
    write_csv(run / "spectrum" / "tail.csv", TAIL_COLUMNS, [tail])
    write_csv(run / "spectrum" / "readout.csv", READOUT_COLUMNS,
              [{c: "0.5" for c in READOUT_COLUMNS} | {"rank_lo": "3", "rank_hi": "20"}])
    lines = spectrum_section(str(runs))
    assert any(line.startswith("| sweep/d2_w32 | 1 | 1.250 | [1.100, 1.400]") for line in lines), lines
    lines = readout_section(str(runs))
    assert any(line.startswith("| sweep/d2_w32 |") for line in lines), lines


@pytest.mark.parametrize("argv", [["redundancy-study", "--report-only"], ["persistence-study", "runs"],
                                  ["data-exponent", "runs"], ["coord-check"], ["persistence-probe"]])
def test_a_command_that_writes_local_directories_only_refuses_gs(argv, tmp_path, monkeypatch, capsys):
    """No server needed: a gs:// --out is refused by name before anything is read or written
    (it used to become a local directory ./gs:/...)."""
    from depthdelusion.cli import main

    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--out", "gs://bucket/study"]) == 2
    assert f"{argv[0]} --out=gs://bucket/study: this command reads and writes local directories only" in \
        capsys.readouterr().err
    assert not (tmp_path / "gs:").exists()
