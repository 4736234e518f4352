"""The depth-vs-size study: its experiment file (shapes matched in non-embedding parameters, tokens
20 N, a tuning seed apart from the test seeds), its planner (grids on the tuning seed, extended
while the best is at an edge; every reported point at every test seed), its report on a synthetic
world whose answer is known, then the real trainer on two tiny runs."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from depthdelusion import rundir
from depthdelusion.model_size import non_embedding_params
from depthdelusion.studies.depth_vs_size import study as dvs
from depthdelusion.studies.depth_vs_size import report
from depthdelusion.studies.common.spec import load_spec

# Two levels of two shapes each, N within 4% (W 32 D 1 ≈ 12.7k vs W 16 D 4 ≈ 13.1k; twice that).
EXPERIMENT = {
    "base": {"model": {"head_dim": 8, "seq_len": 16},
             "data": {"builtin_documents": 200},
             "train": {"batch_size": 8, "log_every": 1, "layer_stats_every": 2, "eval_batches": 1,
                       "checkpoint_every": 1000}},
    "levels": [{"shapes": [[32, 1], [16, 4]], "completep_base": [32, 1]},
               {"shapes": [[32, 2], [16, 8]], "completep_base": [16, 8]}],
    "tokens_per_param": 20,
    "warmup_fraction": 0.1,
    "match_tolerance": 0.05,
    "lrs": [4.0e-3, 8.0e-3, 1.6e-2],
    "lr_bounds": [5.0e-4, 0.128],
    "tuning_seed": 0,
    "seeds": [1, 2, 3],
    "metric": "eval_loss",
    "law_replicates": 0,
}


def write_experiment(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({**EXPERIMENT, **changes}))
    return path


def best_lr(w: int, d: int) -> float:
    """The synthetic world's SP optimum: 0.02 at 32 x 1, falling as 1/sqrt(depth) and with width."""
    return 0.02 * math.sqrt(1 / d) * (32 / w) ** 0.5


def synthetic_loss(cfg, bump: tuple[int, int] | None = None, noise_sd: float = 0.002) -> float:
    """A smooth bowl in ln(D/W) plus a quadratic in ln lr around the shape's optimum (CompleteP's
    optimum is its base shape's), seed noise, and optionally a bump of 0.05 at one shape."""
    m, t = cfg.model, cfg.train
    w, d = (m.base_width, m.base_depth) if m.parametrization == "completep" else (m.width, m.depth)
    rng = np.random.default_rng([t.seed, m.depth, m.width, int(round(t.lr * 1e6))])
    shape = 0.01 * (math.log(m.depth / m.width) + 2.0) ** 2
    extra = 0.05 if bump == (m.width, m.depth) else 0.0
    return 2.0 + shape + extra + 0.05 * math.log(best_lr(w, d) / t.lr) ** 2 + noise_sd * rng.standard_normal()


def synthetic_train(bump=None):
    def train(cfg, run_dir) -> dict:
        run_dir.mkdir(parents=True, exist_ok=True)  # as the trainer does
        summary = {"status": "finished", "eval_loss": synthetic_loss(cfg, bump), "final_loss": 0.0,
                   "wall_time_s": 1.0, "steps": cfg.train.steps, "params": 1,
                   "tokens": cfg.train.steps * cfg.train.batch_size * cfg.model.seq_len}
        rundir.write_config(run_dir, cfg)
        rundir.write_summary(run_dir, summary)
        return summary
    return train


def test_each_shape_trains_20_tokens_per_non_embedding_parameter_and_a_level_is_matched(tmp_path):
    exp = load_spec(dvs.DepthVsSizeSpec, write_experiment(tmp_path))
    for level in exp.resolved_levels:
        ns = [s["params"] for s in level["shapes"]]
        assert max(ns) / min(ns) - 1 < 0.05
        for s in level["shapes"]:
            cfg = dvs.run_config(exp, dvs.run(exp, "sp", s["width"], s["depth"], 4e-3, 1))
            assert s["params"] == non_embedding_params(cfg.model)
            assert s["tokens"] == cfg.train.steps * 8 * 16
            assert abs(s["tokens"] - 20 * s["params"]) <= 8 * 16 / 2  # T = 20 N to half a step
            assert cfg.train.warmup_steps == round(0.1 * cfg.train.steps)


def test_grids_use_only_the_tuning_seed_and_reported_points_only_the_test_seeds(tmp_path):
    exp = load_spec(dvs.DepthVsSizeSpec, write_experiment(tmp_path))
    losses = finished_study(exp)
    arm_p = {arm: p for arm, p, _ in dvs.ARMS}
    got = dvs.cells(exp, losses)
    assert len(got) == 2 * 4 and all(c.complete and len(c.losses) == 3 for c in got)
    reported = {dvs.run(exp, arm_p[c.arm], c.shape["width"], c.shape["depth"], c.lr, s).name
                for c in got for s in exp.seeds}
    assert reported <= set(losses) and not any("_s0_" in n for n in reported)
    grid_runs = set(losses) - reported
    assert grid_runs and all("_s0_" in n for n in grid_runs)
    # CompleteP at its level's base shape is SP there: trained once, as SP
    assert not any(n.startswith("completep_w32_d1_") or n.startswith("completep_w16_d8_") for n in losses)


def test_an_edge_best_extends_the_grid_by_2x_until_it_is_interior(tmp_path):
    exp = load_spec(dvs.DepthVsSizeSpec, write_experiment(tmp_path))
    name = lambda lr: dvs.run(exp, "sp", 32, 1, lr, 0).name  # noqa: E731
    losses = {name(lr): 2 + math.log(0.04 / lr) ** 2 for lr in exp.lrs}  # best at the top edge
    planned = {r.name for r in dvs.plan(exp, losses)}
    assert name(0.032) in planned and name(0.064) not in planned
    assert dvs.tuned_lr(exp, losses, "sp", 32, 1) is None  # not settled: no test seed planned yet
    assert not any(n.startswith("sp_w32_d1_") and "_s1_" in n for n in planned)
    losses[name(0.032)] = 2 + math.log(0.04 / 0.032) ** 2
    planned = {r.name for r in dvs.plan(exp, losses)}
    assert name(0.064) in planned
    losses[name(0.064)] = 2 + math.log(0.04 / 0.064) ** 2
    assert dvs.grid(exp, losses, 32, 1) == ([0.004, 0.008, 0.016, 0.032, 0.064], True)
    assert dvs.tuned_lr(exp, losses, "sp", 32, 1) == pytest.approx(0.032)  # the grid lr nearest 0.04


@pytest.mark.parametrize("changes, key", [
    ({"tuning_seed": 2}, "tuning_seed=2"),
    ({"lrs": [4e-3, 8e-3]}, "lrs="),
    ({"lrs": [4e-3, 1.6e-2, 3.2e-2]}, "lrs="),
    ({"levels": [{"shapes": [[32, 1], [16, 4], [16, 8]], "completep_base": [32, 1]}]}, "levels[0].shapes: [16, 8]"),
    ({"levels": [{"shapes": [[32, 1], [16, 4]], "completep_base": [16, 8]}]}, "levels[0].completep_base"),
    ({"levels": [{"shapes": [[32, 1], [16, 4]], "completep_base": [32, 1]}] * 2}, "levels: shape [16, 4]"),
    ({"base": {**EXPERIMENT["base"], "train": {"steps": 10}}}, "base.train.steps"),
    ({"seeds": [1]}, "seeds="),
    ({"lr_bounds": [5e-3, 0.128]}, "lr_bounds="),
    ({"lr_bounds": 0.1}, "lr_bounds="),
    ({"levels": [{"shapes": [[32, 1], [16, 4]], "completep_base": 32}]}, "levels[0].completep_base=32"),
    ({"base": 3}, "base=3: must be a mapping"),
    ({"levels": [{"shapes": [[30, 1], [16, 4]], "completep_base": [16, 4]}]}, "levels[0].shapes: [30, 1]: model.width=30"),
    ({"warmup": 0.1}, "unknown key warmup"),
])
def test_a_bad_experiment_file_is_one_line_naming_the_key(tmp_path, capsys, changes, key):
    from depthdelusion import cli

    path = write_experiment(tmp_path, **changes)
    assert cli.main(["depth-vs-size", str(path), "--out", str(tmp_path / "o"), "--report-only"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and key in err and "Traceback" not in err


def test_a_missing_key_is_named(tmp_path):
    raw = {k: v for k, v in EXPERIMENT.items() if k != "tokens_per_param"}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ValueError, match="missing key tokens_per_param"):
        load_spec(dvs.DepthVsSizeSpec, path)


def finished_study(exp: dvs.DepthVsSizeSpec, bump=None) -> dict[str, float]:
    losses: dict[str, float] = {}
    while todo := [r for r in dvs.plan(exp, losses) if r.name not in losses]:
        for r in todo:
            losses[r.name] = synthetic_loss(dvs.run_config(exp, r), bump)
    return losses


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One level trained on the synthetic world to the end, and its report written."""
    tmp_path = tmp_path_factory.mktemp("finished")
    path = write_experiment(tmp_path, levels=EXPERIMENT["levels"][:1])
    exp = load_spec(dvs.DepthVsSizeSpec, path)
    out = tmp_path / "study"
    dvs.train(exp, str(path), out, train_fn=synthetic_train(), log=lambda t: None)
    report.write_report(dvs.measure(exp, str(path), out / "runs"), out)
    return exp, path, out


def test_a_finished_study_reports_each_cell_with_its_t_interval_and_records_how_to_rerun_it(finished):
    from scipy import stats

    _, path, out = finished
    text = (out / "report.md").read_text()
    assert "PARTIAL" not in text
    assert f"python -m depthdelusion depth-vs-size {path} --out {out}" in text
    rows = [dict(zip(*(line.split(",") for line in pair))) for pair in
            [((out / "points.csv").read_text().splitlines()[0], line)
             for line in (out / "points.csv").read_text().splitlines()[1:]]]
    assert len(rows) == 2 * 2  # arms x shapes
    for r in rows:
        xs = [float(x) for x in r["losses"].split()]
        lo, hi = stats.t.interval(0.95, len(xs) - 1, loc=np.mean(xs), scale=stats.sem(xs))
        assert (float(r["t95_lo"]), float(r["t95_hi"])) == pytest.approx((lo, hi), abs=1e-4)  # 4 decimals
    assert (out / "loss_vs_depth.png").stat().st_size > 0


def test_the_report_is_sections_of_the_measured_results_which_are_frozen_numbers(finished):
    """measure() computes every number once into a frozen object; sections() only formats it:
    report.md is sections() of what measure() read, and the results hold numbers, not text."""
    import dataclasses

    exp, path, out = finished
    got = dvs.measure(exp, str(path), out / "runs")
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.sigma = 0.0
    assert report.sections(got) == (out / "report.md").read_text()
    assert got.todo == () and got.done == got.runs > 0 and got.wall_s == got.runs * 1.0
    rows = [row for group in got.groups.values() for row in group.rows]
    assert len(rows) == 2 * 2  # arms x shapes
    for row in rows:
        assert row.mean.estimate == pytest.approx(np.mean(row.cell.losses), abs=1e-12)
    assert all(isinstance(lr, float) for c in got.curves for lr in c["lrs"])


def test_the_command_trains_a_real_run_and_labels_a_partial_study(tmp_path, capsys):
    from depthdelusion import cli

    path = write_experiment(tmp_path, tokens_per_param=0.04)  # 4 steps
    out = tmp_path / "study"
    assert cli.main(["depth-vs-size", str(path), "--out", str(out), "--max-runs", "1"]) == 0
    (run_dir,) = [p for p in (out / "runs").iterdir() if p.is_dir()]
    assert rundir.status(run_dir) == "finished" and "_s0_" in run_dir.name  # a grid run, tuning seed
    summary = rundir.read_summary(run_dir)
    assert math.isfinite(summary["eval_loss"]) and summary["tokens"] == 4 * 8 * 16
    text = (out / "report.md").read_text()
    assert "PARTIAL RESULT" in text and "1 of the" in text


def test_a_run_that_fails_is_tried_once_per_invocation_not_again_and_again(tmp_path):
    path = write_experiment(tmp_path, levels=EXPERIMENT["levels"][:1])
    exp = load_spec(dvs.DepthVsSizeSpec, path)
    ok, attempts = synthetic_train(), []

    def train(cfg, run_dir):  # one grid run fails as bad input would (not a divergence)
        attempts.append(run_dir.name)
        if run_dir.name == dvs.run(exp, "sp", 32, 1, 8e-3, 0).name:
            raise RuntimeError("out of data")
        return ok(cfg, run_dir)

    trained, preempted = dvs.train(exp, str(path), tmp_path / "study", max_runs=12, train_fn=train,
                                   log=lambda t: None)
    failing = dvs.run(exp, "sp", 32, 1, 8e-3, 0).name
    assert attempts.count(failing) == 1 and not preempted
    # the shape whose grid it blocks gets no test seed; the other shape's study goes on
    assert not any(n.startswith("sp_w32_d1_") and "_s1_" in n for n in attempts)
    assert any(n.startswith("sp_w16_d4_") and "_s1_" in n for n in attempts)


def test_a_shape_gets_its_test_seeds_before_the_next_deeper_shape_starts_its_grid(tmp_path):
    exp = load_spec(dvs.DepthVsSizeSpec, write_experiment(tmp_path))
    losses, order = {}, []
    while todo := [r for r in dvs.plan(exp, losses) if r.name not in losses]:
        order.append(todo[0].name)  # one run at a time, as the runner takes them
        losses[todo[0].name] = synthetic_loss(dvs.run_config(exp, todo[0]))
    first = lambda prefix, seed: next(i for i, n in enumerate(order) if n.startswith(prefix) and f"_s{seed}_" in n)  # noqa: E731
    assert first("sp_w32_d1_", 1) < first("sp_w16_d4_", 0)  # a partial level has whole shallow cells
    assert first("sp_w16_d4_", 3) < first("sp_w32_d2_", 0)  # and level 1 is whole before level 2


SEED_EFFECT = (0.06, 0.0, -0.05)  # what each test seed's corpus does to every shape alike


def cells_with_a_seed_effect(shape_loss: dict) -> list:
    noise = np.random.default_rng(1).normal(0, 0.002, (len(shape_loss), 3))
    return [dvs.Cell(1, "SP", {"width": w, "depth": d, "params": 1000, "steps": 1, "tokens": 1}, 0.01,
                        tuple(loss + e + z for e, z in zip(SEED_EFFECT, noise[i])))
            for i, ((w, d), loss) in enumerate(shape_loss.items())]


def test_seed_centring_removes_the_shared_seed_effect_and_keeps_the_shape_differences():
    shape_loss = {(64, 2): 1.50, (48, 4): 1.53, (32, 8): 1.50, (24, 14): 1.51}
    got = cells_with_a_seed_effect(shape_loss)
    centred = dvs.seed_centred(got)
    for (c, xs), loss in zip(centred, shape_loss.values()):
        assert np.std(xs, ddof=1) < 0.005  # the 0.055 seed SD is gone; the 0.002 noise stays
        assert np.mean(xs) == pytest.approx(np.mean(c.losses))  # each cell's mean is kept


def test_a_cell_with_a_diverged_seed_is_shown_as_such_and_left_out_of_the_comparisons(tmp_path):
    exp = load_spec(dvs.DepthVsSizeSpec, write_experiment(tmp_path, levels=EXPERIMENT["levels"][:1]))
    sp = cells_with_a_seed_effect({(32, 1): 1.50, (16, 4): 1.53})
    sp[1] = sp[1]._replace(losses=(sp[1].losses[0], math.inf, sp[1].losses[2]))
    groups = {(1, "SP"): dvs.compare(sp, 3),
              (1, "CompleteP"): dvs.compare([c._replace(arm="CompleteP") for c in sp], 3)}
    text = "\n".join(report.level_lines(exp, groups))
    assert "diverged at 1 of 3 seeds" in text
    assert groups[(1, "SP")].rows[0].welch is None and "fewer than 2 shapes with every test seed" in text


@pytest.mark.slow  # fits the laws of both arms with 200-replicate parametric bootstraps: a minute
def test_the_committed_study_regenerates_from_its_runs(tmp_path):
    """analysis/depth_vs_size: `depth-vs-size --report-only` on the committed runs writes the
    committed report.md and CSVs, every word and decision exactly and every number at its printed
    digits (text_compare's tolerances; the figure's bytes are not compared), on any CPU: the kink
    is also tried at every row's break, so the optimum no longer turns on the BLAS kernel
    (benchmarks/RESULTS.md, 2026-12-02 fifth session: identical text under OpenBLAS's Haswell and
    Sandybridge kernels)."""
    from committed_study import regenerate_planned_study

    diffs = regenerate_planned_study(
        "analysis/depth_vs_size", "depth_vs_size.yaml",
        ["depth-vs-size", "experiments/depth_vs_size.yaml", "--out", "analysis/depth_vs_size", "--report-only"],
        tmp_path, exact=False)
    assert not diffs, "stale (regenerate with the command in its report.md):\n" + "\n".join(diffs)


def test_the_committed_depth_at_width_study_regenerates_from_its_runs(tmp_path):
    """analysis/depth_at_width: the same, from the runs and text of the last commit (a sweep may be
    adding runs to the working tree's folder, and rewriting its report, while the suite runs)."""
    from committed_study import regenerate_planned_study

    diffs = regenerate_planned_study(
        "analysis/depth_at_width", "depth_at_width.yaml",
        ["depth-vs-size", "experiments/depth_at_width.yaml", "--out", "analysis/depth_at_width", "--report-only"],
        tmp_path, from_git=True, exact=False)
    assert not diffs, "stale (regenerate with the command in its report.md):\n" + "\n".join(diffs)


def test_the_committed_width_512_series_regenerates_from_its_runs(tmp_path):
    """analysis/depth_at_width_w512 (partial, trained on a GPU): the same, from the runs and text of
    the last commit; its report says where its runs trained (one NVIDIA H200), not the CPU's line."""
    from committed_study import regenerate_planned_study

    diffs = regenerate_planned_study(
        "analysis/depth_at_width_w512", "depth_at_width_w512.yaml",
        ["depth-vs-size", "experiments/depth_at_width_w512.yaml", "--out", "analysis/depth_at_width_w512",
         "--report-only"], tmp_path, from_git=True, exact=False)
    assert not diffs, "stale (regenerate with the command in its report.md):\n" + "\n".join(diffs)


def test_the_report_says_where_the_runs_trained():
    """The wall-time line names the device kinds of the runs' summaries and the devices a run
    used: the own-run studies' CPU keeps its words; a GPU's runs are not called CPU runs; a
    summary that records no kind adds nothing."""
    summaries = [{"device_kind": "NVIDIA H200", "devices": 1}, {"device_kind": "NVIDIA H200", "devices": 1},
                 {"device_kind": "cpu", "devices": 1}, {"wall_time_s": 3.0}]
    assert dvs._devices(summaries) == (("NVIDIA H200", 1), ("cpu", 1))
    assert report._where_trained(dvs._devices(summaries[2:])) == ", niced on a shared 2-core CPU"
    assert report._where_trained(dvs._devices(summaries[:2])) == ", each on one NVIDIA H200"
    assert report._where_trained(dvs._devices(summaries)) == (", each on one NVIDIA H200 and niced on a "
                                                              "shared 2-core CPU")
    assert report._where_trained((("NVIDIA H200", 8),)) == ", each on 8 NVIDIA H200s"
    assert report._where_trained(dvs._devices(summaries[3:])) == ""


@pytest.mark.slow  # the level's laws with 200-replicate parametric bootstraps: ~15 CPU-s
def test_the_committed_long_training_study_regenerates_from_its_runs(tmp_path):
    """analysis/depth_vs_size_long (level 1 at T = 80 N): the same, from the committed runs."""
    from committed_study import regenerate_planned_study

    diffs = regenerate_planned_study(
        "analysis/depth_vs_size_long", "depth_vs_size_long.yaml",
        ["depth-vs-size", "experiments/depth_vs_size_long.yaml", "--out", "analysis/depth_vs_size_long",
         "--report-only"], tmp_path, exact=False)
    assert not diffs, "stale (regenerate with the command in its report.md):\n" + "\n".join(diffs)
