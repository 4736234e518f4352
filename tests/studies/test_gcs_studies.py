"""Studies and analysis outputs on gs:// against a real GCS server (tests/helpers/gcs_emulator.py): the
depth-expansion study trains its two sweeps, grows the growth parent and trains it on, probes,
and writes its tables and figures, with --runs and --out both in the bucket; the prediction
study; `fit --out` and `isoflop --out`; the report's spectrum sections; the other studies
(persistence-study, persistence-probe, data-exponent and its refit, data-exponent-ridge,
lr-transfer, coord-check, depth-confound, redundancy-study) with their inputs and --out in the
bucket, at the sizes of their local tests or smaller. Nothing lands on the local disk as ./gs:/..."""
import json
import subprocess

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


def test_the_expansion_study_trains_grows_probes_and_reports_on_gs(gcs_server, bucket, tmp_path, capsys):
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

    # Again with nothing to train, in this process (the command line on gs:// is checked above; a
    # process more would only import JAX again): the probe comes from its cache on gs://, the tables again.
    from depthdelusion.cli import main

    before = (out / "results.md").read_text()
    (out / "results.md").unlink()
    capsys.readouterr()
    assert main([*command[3:], "--train", "none"]) == 0
    assert "probing" not in capsys.readouterr().out
    assert (out / "results.md").read_text() == before

    # A cache made by an older version (another inserted block) is probed again, not reused.
    stale = json.loads((out / "probes" / "d2_w32.json").read_text())
    del stale["inserted"]
    (out / "probes" / "d2_w32.json").write_text(json.dumps(stale))
    assert main([*command[3:], "--train", "none"]) == 0
    assert "probing d2_w32 (its cached probe was made by an older version)" in capsys.readouterr().out
    assert "inserted" in json.loads((out / "probes" / "d2_w32.json").read_text())


def test_the_probe_tables_rerender_from_the_caches_on_gs(bucket, tmp_path):
    """`rerender_probe_tables` reads the cached probes and the committed tables from gs:// and
    writes the regenerated ones back there (the committed study, copied into the bucket)."""
    from pathlib import Path

    from depthdelusion.studies.expansion import study

    committed = Path(__file__).resolve().parents[2] / "analysis" / "depth_expansion"
    out = epath.Path(f"{bucket}/depth_expansion")
    rundir.copy_tree(committed, out)
    study.rerender_probe_tables(str(out))
    for name in ("signal.csv", "runs.csv", "results.md"):
        assert (out / name).read_text() == (committed / name).read_text(), name


def test_the_expansion_prediction_study_runs_on_gs(bucket):
    """`expansion-prediction` in miniature (tests/studies/test_expansion_trials.py's) with the parents,
    the children it expands and trains, and its tables in the bucket."""
    import dataclasses

    from depthdelusion.studies.expansion import trials
    from depthdelusion.train.loop import train
    from tests.studies.expansion.test_expansion import RUN

    cfg = dataclasses.replace(RUN, train=dataclasses.replace(RUN.train, eval_batches=3, eval_every=100))
    parents, out = epath.Path(f"{bucket}/parents"), epath.Path(f"{bucket}/prediction")
    train(cfg, parents / "d2_seed0")
    spec = trials.PredictionSpec(runs=str(parents), steps=2, probe_batches=3)
    results = trials.measure_prediction(spec, str(out), log=lambda _: None)
    trials.write_outputs(results, str(out))
    assert "at least 3 seeds" in results.summary["not_tested"]
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
    from tests.analysis.fitting.test_diagnostics import BAD, table, write
    from tests.analysis.fitting.test_isoflop import _csv, sweep

    path = write(tmp_path / "t.csv", table(bad=BAD))
    out = epath.Path(f"{bucket}/fit")
    assert main(["fit", str(path), "--bootstrap", "0", "--json", "--out", str(out)]) == 0
    rows = (out / "rows.csv").read_text().splitlines()
    assert rows[0].startswith("row,name,params,tokens,loss,fitted") and len(rows) == 91
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
    from depthdelusion.analysis.report.spectra_text import readout_section, spectrum_section
    from depthdelusion.analysis.science.readout import READOUT_COLUMNS
    from depthdelusion.analysis.science.spectra import TAIL_COLUMNS
    from depthdelusion.analysis.formats.table_text import write_csv

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


PNG = b"\x89PNG\r\n\x1a\n"


def _persistence_runs(root):
    """Three finished runs (one width, depths 4, 8, 16) in the trainer's file format, whose
    weight-gradient norms decay towards the input with ℓ = 20 layers (the synthetic runs of
    tests/studies/test_persistence_study.py, fewer of them)."""
    import numpy as np

    for depth in (4, 8, 16):
        run = root / f"sp_d{depth}_w16_s1"
        run.mkdir(parents=True)
        rundir.write_summary(run, {"status": "finished", "final_loss": 2.0 - 0.01 * depth, "final_loss_se": 0.01,
                                   "params": 1000 * depth, "steps": 1000, "wall_time_s": 1.0,
                                   "model": {"depth": depth, "width": 16, "parametrization": "sp"}})
        (run / rundir.CONFIG).write_text(yaml.safe_dump({"train": {"seed": 1, "lr": 3e-3}, "data": {"seed": 1}}))
        rng = np.random.default_rng(depth)
        norms = np.exp(-(depth - 1 - np.arange(depth)) / 20.0)
        (run / rundir.METRICS).write_text("".join(
            json.dumps({"step": s, "per_layer_grad_norm": (norms * np.exp(0.02 * rng.standard_normal(depth))).tolist()})
            + "\n" for s in range(0, 1001, 50)))


def test_the_persistence_study_reads_runs_on_gs_and_writes_what_it_writes_locally(bucket, tmp_path, capsys):
    """The same runs read from the bucket and from the local disk give the same report and
    tables; the gs:// one lands in the bucket (figures drawn locally, copied up)."""
    from depthdelusion.cli import main

    local_runs = tmp_path / "local" / "persistence_study"
    _persistence_runs(local_runs)
    runs = epath.Path(f"{bucket}/runs/persistence_study")
    rundir.copy_tree(local_runs, runs)
    out = epath.Path(f"{bucket}/persistence")
    assert main(["persistence-study", str(runs), "--out", str(out)]) == 0
    assert main(["persistence-study", str(local_runs), "--out", str(tmp_path / "local" / "out")]) == 0
    for name in ("report.md", "persistence.csv", "cells.csv"):
        assert (out / name).read_text() == (tmp_path / "local" / "out" / name).read_text(), name
    assert "3 finished runs" in (out / "report.md").read_text()
    assert (out / "gradient_profiles_sp.png").read_bytes()[:8] == PNG
    capsys.readouterr()


def test_the_redundancy_report_and_the_data_exponent_refit_read_and_write_gs(bucket, capsys):
    """`redundancy-study --report-only` and `data-exponent --refit-tables` on the committed
    studies copied into the bucket: the report rewritten there is the committed one; the refit's
    tables and figures are written there."""
    from pathlib import Path

    from depthdelusion.cli import main

    analysis = Path(__file__).resolve().parents[2] / "analysis"
    out = epath.Path(f"{bucket}/redundancy")
    for name in ("rates.csv", "invariance.csv", "mixture.csv", "run.json"):
        (out / name).write_text((analysis / "redundancy" / name).read_text())
    assert main(["redundancy-study", "--out", str(out), "--report-only"]) == 0
    assert (out / "report.md").read_text() == (analysis / "redundancy" / "report.md").read_text()

    study, refit = epath.Path(f"{bucket}/data_exponent"), epath.Path(f"{bucket}/refit")
    for name in ("exponents.csv", "runs.csv", "spectra.csv", "run.json"):
        (study / name).write_text((analysis / "data_exponent" / name).read_text())
    assert main(["data-exponent", str(study), "--out", str(refit), "--refit-tables"]) == 0
    rows = (refit / "exponents.csv").read_text().splitlines()
    assert rows[0].startswith("sweep,depth,width") and {r.split(",")[0] for r in rows[1:]} == {
        "w32", "w64", "zipf0.6", "zipf1.6"}
    assert f"depthdelusion data-exponent {study} --out {refit} --refit-tables" in (refit / "tables.md").read_text()
    assert (refit / "exponents.png").read_bytes()[:8] == PNG
    capsys.readouterr()


def test_the_coord_check_and_the_persistence_probe_write_their_out_to_gs(bucket, capsys):
    """The two probes of fresh models with --out in the bucket, each at one shape of its local
    test (tests/studies/test_coord_check.py, tests/studies/test_persistence_probe.py), whose compiled
    programs it shares."""
    from depthdelusion.cli import main

    out = epath.Path(f"{bucket}/coord_check")
    assert main(["coord-check", "--widths", "32", "--depths", "2", "--steps", "10", "--parametrization", "sp",
                 "--lr", "1e-2", "--batch-size", "4", "--seq-len", "32", "--head-dim", "16", "--base-width", "32",
                 "--base-depth", "2", "--out", str(out)]) == 0
    assert len(json.loads((out / "coord_check.json").read_text())["rows"]) == 11  # steps 0 … 10
    assert (out / "coord_check.csv").read_text().startswith("parametrization,width,depth,step")
    assert "| sp | 2 |" in (out / "coord_check.md").read_text()
    assert (out / "coord_check.png").read_bytes()[:8] == PNG

    out = epath.Path(f"{bucket}/probe")
    assert main(["persistence-probe", "--widths", "16", "--depths", "3", "--steps", "1", "--batch-size", "2",
                 "--seq-len", "16", "--head-dim", "16", "--out", str(out)]) == 0
    assert len((out / "profiles.csv").read_text().splitlines()) == 1 + 2 * 2 * 3  # steps x kinds x blocks
    assert "# Persistence probe" in (out / "report.md").read_text()
    assert (out / "gradient_profiles_step1.png").read_bytes()[:8] == PNG
    capsys.readouterr()


def test_lr_transfer_trains_into_gs_and_writes_its_tables_there(bucket, tmp_path, capsys):
    """`lr-transfer --out gs://…` trains its grids (here one run: the depth sweep's is the lr
    grid's; tests/studies/test_lr_transfer.py's recipe) into the bucket through the sweep runner and
    writes its tables and figures there."""
    from depthdelusion.cli import main

    experiment = tmp_path / "exp.yaml"
    experiment.write_text(yaml.safe_dump({
        "base": {"model": {"head_dim": 16, "seq_len": 16, "base_width": 16, "base_depth": 1},
                 "train": {"steps": 3, "batch_size": 8, "warmup_steps": 1, "log_every": 1,
                           "layer_stats_every": 1000, "eval_every": 3, "eval_batches": 1}},
        "parametrizations": ["sp"], "widths": [16], "depths": [1], "lrs": [1e-2],
        "depth_sweep": {"width": 16, "depths": [1]}}))
    out = epath.Path(f"{bucket}/lr_transfer")
    assert main(["lr-transfer", str(experiment), "--out", str(out)]) == 0
    assert rundir.status(out / "runs" / "sp_w16_d1_lr0.01") == "finished"
    assert (out / "lr_sweep.csv").read_text().splitlines()[1].startswith("sp,16,1,0.01,")
    assert "## Depth sweep at width 16" in (out / "report.md").read_text()
    assert (out / "lr_transfer.png").read_bytes()[:8] == PNG and (out / "depth_sweep.png").read_bytes()[:8] == PNG
    capsys.readouterr()


def test_depth_confound_trains_into_gs_and_the_data_exponent_studies_read_its_run_there(bucket, tmp_path, capsys):
    """`depth-confound --out gs://… --max-runs 1` (tests/studies/test_depth_confound.py's
    miniature) trains its first planned run into the bucket and writes its partial report
    there; `--report-only` reads the runs back from it. Then `data-exponent` finds that run
    under the gs:// ROOT (OUT/runs/RUN: one sweep of one run, too few for a fit), measures its
    spectrum from the checkpoint on gs:// (RUN/spectrum/ written beside it) and writes its
    tables to the bucket; `data-exponent-ridge` reads the same run."""
    from depthdelusion.cli import main
    from tests.studies.depth_confound.test_depth_confound import write_experiment

    experiment = write_experiment(tmp_path, widths=[16], depths=[1, 2], arm_a_depth=1,
                                  completep={"base_width": 16, "base_depth": 1, "tuned_cells": []},
                                  iso_flop={"width": 16, "reference_depth": 1, "depths": [1, 2]})
    out = epath.Path(f"{bucket}/depth_confound")
    assert main(["depth-confound", str(experiment), "--out", str(out), "--max-runs", "1"]) == 0
    (run,) = [p for p in (out / "runs").iterdir() if p.is_dir()]
    assert rundir.status(run) == "finished" and any("per_layer_grad_norm" in r for r in rundir.read_metrics(run))
    report = (out / "report.md").read_text()
    assert "PARTIAL RESULT" in report and "1 of the" in report
    assert (out / "loss_vs_depth.png").read_bytes()[:8] == PNG
    (out / "report.md").unlink()
    assert main(["depth-confound", str(experiment), "--out", str(out), "--report-only"]) == 0
    assert (out / "report.md").read_text() == report

    study = epath.Path(f"{bucket}/data_exponent")
    assert main(["data-exponent", str(out), "--out", str(study), "--tokens", "2048", "--largest-only"]) == 0
    (row,) = (study / "exponents.csv").read_text().splitlines()[1:]
    assert row.startswith("runs,1,16,") and "too few runs" in row
    assert (run / "spectrum" / "readout.csv").exists() and (run / "spectrum" / "tail.csv").exists()
    assert (study / "learning_curves.png").read_bytes()[:8] == PNG

    ridge = epath.Path(f"{bucket}/ridge")
    assert main(["data-exponent-ridge", str(run), "--out", str(ridge), "--tokens", "2048", "--rows", "8",
                 "--n-min", "32", "--n-max", "512", "--reps", "2"]) == 0
    assert len((ridge / "curves.csv").read_text().splitlines()) == 1 + 5  # n = 32 … 512
    assert "depthdelusion data-exponent-ridge" in (ridge / "ridge.md").read_text()
    capsys.readouterr()
