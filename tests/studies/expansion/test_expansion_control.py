"""The growth claim's static control (`expansion-growth --static-control`): the grown arm against a
model that never grew, at equal FLOPs, on held-out seeds, each arm at the lr its tuning seeds
chose; labelled PARTIAL while runs of the control's grid are unfinished. On run directories
written as the sweep writes them (config.yaml of the grid's own configs, metrics.jsonl,
summary.json) and a growth_matched.csv as `expansion-growth --runs` writes it."""
import csv
import json

import pytest
from scipy import stats

from depthdelusion import model_size
from depthdelusion.cli import main
from depthdelusion.rundir import write_config
from depthdelusion.sweep import load_grid

TEST_SEEDS = (3, 4, 5)
# the static arm: tuning seeds 0-2 give a parabola in ln lr with its vertex at 1e-2 (lrs a factor
# 2 apart, equal losses on both sides); the test seeds at each lr
STATIC_TUNING = {5e-3: 1.20, 1e-2: 1.10, 2e-2: 1.20}
STATIC_TEST = {5e-3: (1.25, 1.22, 1.24), 1e-2: (1.10, 1.13, 1.12), 2e-2: (1.21, 1.23, 1.20)}
GROWN_TEST = (1.30, 1.33, 1.31)  # at the grown arm's lr, 2e-2
SCRATCH_TEST = (1.40, 1.36, 1.41)  # at the scratch arm's lr, 1e-2

GRID = """name: tiny_static_control
description: a miniature of experiments/depth_expansion_static_control.yaml
name_format: "d{depth}_w{width}_steps{train_steps}_lr{train_lr}_seed{train_seed}"
fixed:
  model: {depth: 2, head_dim: 16, seq_len: 16, width: 32}
  data: {builtin_documents: 50, seed: 42}
  train: {batch_size: 4, steps: 6, warmup_steps: 1, eval_every: 3, eval_batches: 2}
grid:
  train.lr: [5.0e-3, 1.0e-2, 2.0e-2]
  train.seed: [0, 1, 2, 3, 4, 5]
"""


def write_growth_table(out):
    """growth_matched.csv: grown lrs 1e-2, 2e-2, 3e-2 (best 2e-2), scratch 5e-3, 1e-2, 2e-2 (best 1e-2)."""
    rows = []
    for arm, losses, best, test in (("grown", {1e-2: 1.35, 2e-2: 1.28, 3e-2: 1.35}, 2e-2, GROWN_TEST),
                                    ("scratch", {5e-3: 1.45, 1e-2: 1.38, 2e-2: 1.45}, 1e-2, SCRATCH_TEST)):
        rows += [[arm, lr, s, loss + 0.01 * (s - 1), 1.0e6] for lr, loss in losses.items() for s in (0, 1, 2)]
        rows += [[arm, best, s, v, 1.0e6] for s, v in zip(TEST_SEEDS, test)]
    out.mkdir(parents=True)
    with open(out / "growth_matched.csv", "w", newline="") as f:
        csv.writer(f).writerows([["arm", "lr", "seed", "eval_loss", "flops"], *rows])


def static_loss(lr, seed):
    if seed in TEST_SEEDS:
        return STATIC_TEST[lr][TEST_SEEDS.index(seed)]
    return STATIC_TUNING[lr] + 0.01 * (seed - 1)


def write_control(tmp_path, *, skip=()):
    """The control sweep's directory: every run of the grid finished, except those in `skip`,
    which are left as the sweep leaves a run it has started (config and metrics, no summary)."""
    grid_file = tmp_path / "static_control.yaml"
    grid_file.write_text(GRID)
    control = tmp_path / "static_control_runs"
    for name, cfg in load_grid(grid_file).runs:
        run = control / name
        run.mkdir(parents=True)
        write_config(run, cfg)
        (run / "metrics.jsonl").write_text(json.dumps({"step": 3, "loss": 2.0, "eval_loss": 2.1}) + "\n")
        if name in skip:
            continue
        tokens = cfg.train.steps * cfg.train.batch_size * cfg.model.seq_len
        loss = static_loss(cfg.train.lr, cfg.train.seed)
        (run / "summary.json").write_text(json.dumps({
            "name": name, "status": "finished", "tokens": tokens,
            "flops": model_size.flops_per_token(cfg.model) * tokens, "final_loss": loss + 0.01,
            "eval_loss": loss, "steps": cfg.train.steps, "wall_time_s": 1.0}, indent=2) + "\n")
    return control, grid_file


def run(tmp_path, control, grid_file, *extra):
    return main(["expansion-growth", "--out", str(tmp_path / "out"), "--test-seeds", "3,4,5",
                 "--static-control", str(control), "--static-grid", str(grid_file), *extra])


def test_the_grown_arm_is_compared_with_the_static_control_on_held_out_seeds(tmp_path, capsys):
    write_growth_table(tmp_path / "out")
    control, grid_file = write_control(tmp_path)
    assert run(tmp_path, control, grid_file) == 0
    summary = json.loads((tmp_path / "out" / "static_control_summary.json").read_text())
    assert summary["finished_of_planned"] == [18, 18]
    assert {arm: c["lr"] for arm, c in summary["arms"].items()} == {"grown": 0.02, "scratch": 0.01, "static": 0.01}
    rows = {r["comparison"]: r for r in csv.DictReader(open(tmp_path / "out" / "static_control_comparison.csv"))}
    # Welch's interval, checked against scipy's own; the static arm's values are its lr 1e-2 test seeds
    for name, first in (("grown - static", GROWN_TEST), ("scratch - static", SCRATCH_TEST)):
        welch = stats.ttest_ind(first, STATIC_TEST[1e-2], equal_var=False).confidence_interval(0.95)
        paired = stats.ttest_rel(first, STATIC_TEST[1e-2]).confidence_interval(0.95)
        diff = sum(first) / 3 - sum(STATIC_TEST[1e-2]) / 3
        got = rows[name]
        assert float(got["diff"]) == pytest.approx(diff, rel=1e-5)
        assert [float(got["welch_lo"]), float(got["welch_hi"])] == pytest.approx([welch.low, welch.high], rel=1e-5)
        assert [float(got["paired_lo"]), float(got["paired_hi"])] == pytest.approx([paired.low, paired.high], rel=1e-5)
    text = (tmp_path / "out" / "static_control.md").read_text()
    assert "PARTIAL" not in text and "| grown - static | 0.02 / 0.01 |" in text
    static_rows = list(csv.DictReader(open(tmp_path / "out" / "static_control.csv")))
    assert len(static_rows) == 18 and {r["tokens"] for r in static_rows} == {str(6 * 4 * 16)}


def test_a_control_with_unfinished_runs_is_labelled_partial_and_a_missing_test_seed_not_tested(tmp_path, capsys):
    write_growth_table(tmp_path / "out")
    control, grid_file = write_control(tmp_path, skip={"d2_w32_steps6_lr0.01_seed4", "d2_w32_steps6_lr0.02_seed0"})
    assert run(tmp_path, control, grid_file) == 0
    label = "**PARTIAL RESULT**: 16 of the 18 runs planned so far have finished"
    text = (tmp_path / "out" / "static_control.md").read_text()
    assert text.splitlines()[2].startswith(label) and label in capsys.readouterr().out
    assert "`d2_w32_steps6_lr0.01_seed4`" in text
    summary = json.loads((tmp_path / "out" / "static_control_summary.json").read_text())
    assert summary["finished_of_planned"] == [16, 18]
    grown = summary["comparisons"][0]
    assert "diff" not in grown and "static lr 0.01 seeds 4" in grown["not_tested"]


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_a_missing_or_empty_control_directory_is_one_line_naming_it(tmp_path, capsys, make):
    write_growth_table(tmp_path / "out")
    _, grid_file = write_control(tmp_path)
    control = tmp_path / "nothing_here"
    if make == "empty":
        control.mkdir()
    assert run(tmp_path, control, grid_file) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"--static-control {control}:" in err
    assert ("no such directory" if make == "missing" else "no run directories") in err


def test_the_control_needs_held_out_seeds_and_the_growth_table(tmp_path, capsys):
    control, grid_file = write_control(tmp_path)
    assert run(tmp_path, control, grid_file) == 2  # no OUT/growth_matched.csv yet
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "growth_matched.csv: not found" in err
    write_growth_table(tmp_path / "out")
    assert main(["expansion-growth", "--out", str(tmp_path / "out"), "--static-control", str(control),
                 "--static-grid", str(grid_file)]) == 2
    assert "--static-control needs --test-seeds" in capsys.readouterr().err


def test_the_committed_control_regenerates_from_its_runs(tmp_path, monkeypatch, capsys):
    """analysis/depth_expansion/growth_matched: the static control's comparison, from the
    committed growth_matched.csv and control runs (the command in analysis/depth_expansion/README.md),
    writes the committed tables and summary, character for character."""
    import shutil

    from committed_study import ROOT, differences

    committed = ROOT / "analysis" / "depth_expansion"
    names = ["static_control.csv", "static_control.md", "static_control_comparison.csv",
             "static_control_summary.json"]
    out = tmp_path / "analysis" / "depth_expansion"
    (out / "growth_matched").mkdir(parents=True)
    shutil.copy(committed / "growth_matched" / "growth_matched.csv", out / "growth_matched")
    shutil.copytree(committed / "static_control_runs", out / "static_control_runs")
    (tmp_path / "experiments").mkdir()
    shutil.copy(ROOT / "experiments" / "depth_expansion_static_control.yaml", tmp_path / "experiments")
    monkeypatch.chdir(tmp_path)
    assert main(["expansion-growth", "--out", "analysis/depth_expansion/growth_matched", "--test-seeds",
                 "3,4,5", "--static-control", "analysis/depth_expansion/static_control_runs"]) == 0
    diffs = differences(committed / "growth_matched", out / "growth_matched", names)
    assert not diffs, "stale (regenerate with the command in analysis/depth_expansion/README.md):\n" + "\n".join(diffs)
