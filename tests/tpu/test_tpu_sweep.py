"""Sweeps on pod slices: two slices sharing a sweep directory keep each other's rows in runs.csv;
a grid planned for a slice refuses the built-in toy corpus there."""
import csv
import json

import jax
import pytest
import yaml

from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.sweep import load_grid, run_sweep

GRID = {
    "name": "shared", "topology": "v4-32",
    "fixed": {"model": {"head_dim": 8, "seq_len": 32}, "train": {"steps": 5, "batch_size": 8}},
    "runs": [{"model.depth": 1, "model.width": 16}, {"model.depth": 2, "model.width": 16},
             {"model.depth": 3, "model.width": 16}],
}


def fake_train(cfg, run_dir):  # writes what train() writes for the table: summary.json
    summary = {"status": "finished", "final_loss": 4.0 - cfg.model.depth / 10, "final_loss_se": 0.01,
               "params": 1000 * cfg.model.depth, "tokens": 1280}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return summary


def table(path):
    with open(path) as fh:
        return {r["name"]: r for r in csv.DictReader(fh)}


def test_two_slices_sharing_a_sweep_directory_keep_each_others_rows(tmp_path):
    grid_file = tmp_path / "grid.yaml"
    grid_file.write_text(yaml.safe_dump(GRID))
    grid = load_grid(grid_file)
    out = tmp_path / "sweep"
    run_sweep(grid, out, only="d1_*", train_fn=fake_train, report=False, log=lambda _: None)  # slice A
    rows = table(out / "runs.csv")
    assert {n: r["status"] for n, r in rows.items()} == {
        "d1_w16": "finished", "d2_w16": "not started", "d3_w16": "not started"}
    (out / "d3_w16").mkdir()
    (out / "d3_w16" / "metrics.jsonl").write_text('{"step": 1, "loss": 5.0}\n')  # slice C, mid-run
    run_sweep(grid, out, only="d2_*", train_fn=fake_train, fit=FitOptions(bootstrap=0), log=lambda _: None)  # slice B
    rows = table(out / "runs.csv")
    assert {n: r["status"] for n, r in rows.items()} == {
        "d1_w16": "finished", "d2_w16": "finished", "d3_w16": "unfinished"}
    assert float(rows["d1_w16"]["final_loss"]) == pytest.approx(3.9)
    assert "Runs finished: 2 of 3" in (out / "report" / "report.md").read_text()


def test_a_grid_planned_for_a_slice_refuses_the_toy_corpus_on_a_pod(tmp_path, monkeypatch):
    grid_file = tmp_path / "grid.yaml"
    grid_file.write_text(yaml.safe_dump(GRID))
    grid = load_grid(grid_file)
    monkeypatch.setattr(jax, "process_count", lambda: 4)  # as on a v4-32's 4 workers
    with pytest.raises(ValueError, match=r"planned for v4-32 but data.path is unset for d1_w16, d2_w16, d3_w16"):
        run_sweep(grid, tmp_path / "out", train_fn=fake_train, log=lambda _: None)
    assert not (tmp_path / "out").exists()
    grid = load_grid(grid_file, ["data.path=gs://bkt/sp"])
    rows = run_sweep(grid, tmp_path / "out", train_fn=fake_train, report=False, log=lambda _: None)
    assert [r["status"] for r in rows] == ["finished"] * 3
