"""lr-transfer experiment file: validated before any run; the U-shape verdict rule."""
import csv
import dataclasses

import pytest
import yaml

from depthdelusion.studies.lr_transfer import study as lr_transfer
from depthdelusion.studies.common.spec import load_spec


def test_committed_experiment_loads_and_builds_valid_run_configs():
    exp = load_spec(lr_transfer.LrTransferSpec, "experiments/lr_transfer.yaml")
    cfg = lr_transfer.run_config(exp, "completep", 128, 4, 1e-2)
    assert (cfg.model.width, cfg.model.depth, cfg.model.parametrization, cfg.train.lr) == (128, 4, "completep", 1e-2)
    assert cfg.model.base_width == exp.widths[0]  # the smallest shape is the tuning proxy


def test_bad_experiment_names_the_problem(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({"base": {}, "parametrizations": ["mu"], "widths": [32],
                                    "depths": [2], "lrs": [1e-2], "depth_sweep": {}}))
    with pytest.raises(ValueError, match=r"x.yaml: parametrizations\[0\]='mu': valid values are sp, mup"):
        load_spec(lr_transfer.LrTransferSpec, path)
    path.write_text(yaml.safe_dump({"base": {}}))
    with pytest.raises(ValueError, match="missing keys parametrizations"):
        load_spec(lr_transfer.LrTransferSpec, path)


def test_an_unknown_key_is_named_as_in_every_study_file(tmp_path):
    path = tmp_path / "x.yaml"
    raw = yaml.safe_load(open("experiments/lr_transfer.yaml"))
    path.write_text(yaml.safe_dump({**raw, "widthz": [32]}))
    with pytest.raises(ValueError, match="x.yaml: unknown key widthz; valid keys are base, "):
        load_spec(lr_transfer.LrTransferSpec, path)


def test_edge_optimum_is_a_bound_and_report_uses_validation_loss(tmp_path):
    lrs = [1e-3, 3e-3, 1e-2, 3e-2]
    assert [lr_transfer.optimum_label(lr, lrs) for lr in lrs] == ["≤ 0.001", "0.003", "0.01", "≥ 0.03"]
    exp = load_spec(lr_transfer.LrTransferSpec, "experiments/lr_transfer.yaml")
    exp = dataclasses.replace(exp, widths=[32, 64], depths=[2], depth_sweep=lr_transfer.DepthSweepSpec(32, [1, 2, 4]))
    # sp: W=32 best at the interior 3e-3 by eval loss (final_loss would say 3e-2); W=64 at the lower edge
    evals = {("sp", 32): [2.5, 2.1, 2.2, 2.3], ("sp", 64): [2.0, 2.1, 2.2, 2.3],
             ("completep", 32): [2.5, 2.1, 2.2, 2.3], ("completep", 64): [2.5, 2.3, 2.2, 2.1]}
    rows = [{"parametrization": p, "width": w, "depth": 2, "lr": lr, "eval_loss": e,
             "final_loss": 1.0 if lr == 3e-2 else 3.0}
            for (p, w), es in evals.items() for lr, e in zip(lrs, es)]
    depth_rows = [{"parametrization": p, "width": 32, "depth": d, "lr": 3e-3, "eval_loss": e, "final_loss": 0.0}
                  for p, es in [("sp", [2.0, 2.1, 2.2]), ("completep", [2.3, 2.1, 2.2])]
                  for d, e in zip([1, 2, 4], es)]
    results = lr_transfer.measure(exp, str(tmp_path / "x.yaml"), rows, depth_rows)
    with pytest.raises(dataclasses.FrozenInstanceError):  # measured once; the report only reads it
        results.optima = {}
    text = lr_transfer.sections(results)
    assert "| sp | 2 | 0.003 (2.100, +0.100) | ≤ 0.001 (edge) (2.000, +0.100) |" in text
    assert "| completep | 2 | 0.003 (2.100, +0.100) | ≥ 0.03 (edge) (2.100, +0.100) |" in text
    assert "8 fixed validation batches × 8 sequences × 64 tokens (4096 tokens" in text
    assert "**sp**: 2 distinct optima over 2 shapes (≤ 0.001, 0.003); 1 of 2 interior" in text
    assert "| sp | 0.003 | 2.000 | 2.100 | 2.200 | no |" in text
    assert "| completep | 0.003 | 2.300 | 2.100 | 2.200 | yes |" in text


def test_skip_must_name_grid_runs_and_bounds_the_optimum(tmp_path):
    raw = yaml.safe_load(open("experiments/lr_transfer.yaml"))
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({**raw, "skip": ["sp_w32_d2_lr0.5"]}))
    with pytest.raises(ValueError, match="skip names runs not in the lr grid: sp_w32_d2_lr0.5"):
        load_spec(lr_transfer.LrTransferSpec, path)
    rows = [{"parametrization": "sp", "width": 32, "depth": 2, "lr": lr, "eval_loss": e, "final_loss": e}
            for lr, e in [(3e-3, 2.0), (1e-2, 2.1)]]  # 1e-3 skipped: 3e-3 is only an upper bound
    grid = lr_transfer.shape_lrs(rows, "sp", 32, 2)
    assert lr_transfer.optimum_label(lr_transfer.best_lr(rows, "sp", 32, 2)[0], grid) == "≤ 0.003"


def test_runs_follow_the_sweep_rules_failed_runs_retried_interrupted_runs_kept(tmp_path):
    """Two tiny real runs through the sweep runner: a run that failed (its summary.json says
    "failed") is not done and is trained again by the next invocation; an interrupted run's
    directory is resumed in place, never deleted; finished runs are not trained again."""
    from depthdelusion.train.loop import train

    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({
        "base": {"model": {"head_dim": 16, "seq_len": 16, "base_width": 16, "base_depth": 1},
                 "train": {"steps": 3, "batch_size": 8, "warmup_steps": 1, "log_every": 1,
                           "layer_stats_every": 1000, "eval_every": 3, "eval_batches": 1}},
        "parametrizations": ["sp"], "widths": [16], "depths": [1], "lrs": [1e-3, 1e-2],
        "depth_sweep": {"width": 16, "depths": [1]}}))
    out = tmp_path / "out"
    interrupted = out / "runs" / "sp_w16_d1_lr0.001"
    interrupted.mkdir(parents=True)
    (interrupted / "notes.txt").write_text("left by an earlier, interrupted invocation")
    trained = []

    def crash_once(cfg, run_dir):
        trained.append(run_dir.name)
        if run_dir.name == "sp_w16_d1_lr0.01" and trained.count(run_dir.name) == 1:
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "summary.json").write_text('{"status": "failed", "final_loss": 0.0}')
            raise RuntimeError("the machine fell over")
        return train(cfg, run_dir)

    first = lr_transfer.run_experiment(path, out, log=lambda _: None, train_fn=crash_once)
    assert first.failed == ["sp_w16_d1_lr0.01"] and not first.preempted
    assert (interrupted / "notes.txt").exists()  # resumed in place
    assert "RuntimeError: the machine fell over" in (out / "runs" / "sp_w16_d1_lr0.01" / "error.txt").read_text()
    assert "**Failed (1;" in first.report.read_text()
    lr_rows = {r["lr"]: r for r in csv.DictReader((out / "lr_sweep.csv").open())}
    assert lr_rows["0.01"]["eval_loss"] == "nan" and float(lr_rows["0.001"]["eval_loss"]) > 0

    second = lr_transfer.run_experiment(path, out, log=lambda _: None, train_fn=crash_once)
    assert second.failed == [] and "Failed" not in second.report.read_text()
    assert trained == ["sp_w16_d1_lr0.001", "sp_w16_d1_lr0.01", "sp_w16_d1_lr0.01"]
    lr_rows = {r["lr"]: r for r in csv.DictReader((out / "lr_sweep.csv").open())}
    assert all(float(r["eval_loss"]) > 0 for r in lr_rows.values())


def test_the_committed_study_regenerates_from_its_runs(tmp_path, monkeypatch):
    """analysis/lr_transfer: the command on the committed runs (every one finished, so nothing
    trains) writes the committed report.md and CSVs, character for character (the figures' bytes
    are not compared)."""
    import shutil

    from committed_study import ROOT, committed_copy, differences, text_files

    def train_nothing(cfg, run_dir):
        raise AssertionError(f"{run_dir.name}: not among the committed runs")

    committed = committed_copy("analysis/lr_transfer", tmp_path / "committed")
    (tmp_path / "experiments").mkdir()
    shutil.copy(ROOT / "experiments" / "lr_transfer.yaml", tmp_path / "experiments")
    shutil.copytree(committed / "runs", tmp_path / "analysis" / "lr_transfer" / "runs")
    monkeypatch.chdir(tmp_path)
    outcome = lr_transfer.run_experiment("experiments/lr_transfer.yaml", "analysis/lr_transfer",
                                         log=lambda text: None, train_fn=train_nothing)
    assert outcome.failed == [] and not outcome.preempted
    names = text_files(committed)
    assert text_files(tmp_path / "analysis" / "lr_transfer") == names
    diffs = differences(committed, tmp_path / "analysis" / "lr_transfer", names)
    assert not diffs, "stale (regenerate with the command in its report.md):\n" + "\n".join(diffs)
