"""The depth-confound study: its planner (lr grids extended until the best is interior, every
reported point at every seed), its lr-curve fit and its verdict, on a synthetic world whose
answer is known, then the real trainer on two tiny runs."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from depthdelusion import rundir
from depthdelusion.studies.depth_confound import study as dc
from depthdelusion.studies.depth_confound.report import verdict_lines, write_report
from depthdelusion.studies.common.spec import load_spec

EXPERIMENT = {
    "base": {"model": {"head_dim": 8, "seq_len": 16},
             "data": {"builtin_documents": 200},
             "train": {"steps": 4, "batch_size": 8, "warmup_steps": 1, "log_every": 1,
                       "layer_stats_every": 2, "eval_every": 4, "eval_batches": 1,
                       "checkpoint_every": 1000}},
    "widths": [16, 32],
    "depths": [2, 4, 8, 16],
    "lrs": [1.0e-3, 2.0e-3, 4.0e-3, 8.0e-3, 1.6e-2],
    "lr_bounds": [1.25e-4, 0.128],
    "seeds": [1, 2, 3],
    "arm_a_depth": 2,
    "completep": {"base_width": 16, "base_depth": 2, "tuned_cells": [[32, 16]]},
    "iso_flop": {"width": 16, "reference_depth": 4, "depths": [2, 4, 8]},
    "metric": "eval_loss",
    "law_replicates": 19,  # the smallest count whose Monte-Carlo test has size exactly 5%
}


def write_experiment(tmp_path: Path, **changes) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({**EXPERIMENT, **changes}))
    return path


def sp_optimum(depth: int) -> float:
    """The synthetic world: SP's best lr falls as 1/sqrt(depth); CompleteP's stays at SP's at its
    base shape (depth 2), where the two are the same model."""
    return 0.016 * math.sqrt(2 / depth)


def synthetic_loss(cfg, noise_sd: float = 0.002) -> float:
    m, t = cfg.model, cfg.train
    best = sp_optimum(m.depth if m.parametrization == "sp" else 2)
    rng = np.random.default_rng([t.seed, m.depth, m.width, int(round(t.lr * 1e6))])
    # no depth penalty at the right lr; a quadratic bowl in ln lr around it
    return 2.0 + 0.05 * math.log(best / t.lr) ** 2 + noise_sd * rng.standard_normal()


def synthetic_train(cfg, run_dir) -> dict:
    from depthdelusion.model_size import count_params

    run_dir.mkdir(parents=True, exist_ok=True)  # as the trainer does
    summary = {"status": "finished", "eval_loss": synthetic_loss(cfg), "final_loss": 0.0,
               "wall_time_s": 1.0, "steps": cfg.train.steps, "params": count_params(cfg.model),
               "tokens": cfg.train.steps * cfg.train.batch_size * cfg.model.seq_len}
    rundir.write_config(run_dir, cfg)
    rundir.write_summary(run_dir, summary)
    return summary


def test_an_edge_best_extends_the_grid_by_2x_until_it_is_interior(tmp_path):
    exp = load_spec(dc.DepthConfoundSpec, write_experiment(tmp_path))
    # every initial lr of sp 16 x 2 trained, the best at the top edge (1.6e-2 < optimum 0.032)
    losses = {dc.run_name("sp", 16, 2, lr, 1): 2 + (math.log(0.032 / lr)) ** 2 for lr in exp.lrs}
    names = {r.name for r in dc.plan(exp, losses)}
    assert dc.run_name("sp", 16, 2, 0.032, 1) in names
    assert dc.run_name("sp", 16, 2, 0.064, 1) not in names  # one step at a time
    losses[dc.run_name("sp", 16, 2, 0.032, 1)] = 2.0
    names = {r.name for r in dc.plan(exp, losses)}
    assert dc.run_name("sp", 16, 2, 0.064, 1) in names  # 0.032 is now the edge best
    losses[dc.run_name("sp", 16, 2, 0.064, 1)] = 2.5
    assert dc.tuned_lr(exp, losses, "sp", 16, 2) == pytest.approx(0.032)
    # ... and arm A at width 16 (tuned at depth 2) is now planned at every depth and seed
    assert {dc.run_name("sp", 16, d, 0.032, s) for d in exp.depths for s in exp.seeds} <= \
        {r.name for r in dc.plan(exp, losses)}


def test_fewer_than_five_lrs_or_a_step_above_2x_is_refused(tmp_path):
    with pytest.raises(ValueError, match="at least 5 learning rates spaced by at most 2x"):
        load_spec(dc.DepthConfoundSpec, write_experiment(tmp_path, lrs=[1e-3, 2e-3, 4e-3, 8e-3, 3.2e-2]))


def test_the_lr_fit_recovers_a_known_optimum_within_its_interval():
    rng = np.random.default_rng(0)
    lrs = [1e-3 * 2 ** k for k in range(7)]
    hits = 0
    for _ in range(200):
        curve = [(lr, 2 + 0.05 * math.log(0.006 / lr) ** 2 + 0.003 * rng.standard_normal()) for lr in lrs]
        fit = dc.fit_lr_curve(curve, sigma=0.003, dof=1000)
        assert fit.identified
        hits += fit.log_lr_ci[0] <= math.log(0.006) <= fit.log_lr_ci[1]
    assert 0.90 <= hits / 200 <= 0.99  # 95% nominal; 200 draws: +-3 SE


def test_an_lr_at_the_edge_is_a_bound_not_a_fitted_optimum():
    fit = dc.fit_lr_curve([(lr, 3 - lr) for lr in (1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2)])
    assert not fit.identified and "edge" in fit.note


def test_a_penalty_made_by_mistuning_is_seen_in_arm_a_and_vanishes_in_b_and_c(tmp_path):
    path = write_experiment(tmp_path)
    exp = load_spec(dc.DepthConfoundSpec, path)
    out = tmp_path / "study"
    trained, preempted = dc.train(exp, str(path), out, batch=1000, train_fn=synthetic_train,
                                  log=lambda _: None)
    assert not preempted and trained > 0
    losses, _ = dc.results(exp, out / "runs")
    assert not [r for r in dc.plan(exp, losses) if r.name not in losses]  # the study is complete
    pts = dc.points(exp, losses)
    assert all(len(p.losses) == 3 for p in pts)
    pen = {arm: dc.depth_penalty([p for p in pts if p.arm == arm and p.width == 16]) for arm in "ABC"}
    # A: the lr tuned at depth 2 is 2.8x too high at depth 16: 0.05 ln(2.83)^2 = 0.054 nats
    iv = pen["A"][16]  # Welch's t against the best depth
    assert iv.lo > 0.03 and iv.estimate == pytest.approx(0.05 * math.log(math.sqrt(8)) ** 2, abs=0.015)
    for arm in "BC":  # tuned (B) or transferred by a parametrization whose optimum does not move (C)
        assert pen[arm][16].lo <= 0.005 and pen[arm][16].estimate < 0.015
    results = dc.measure(exp, str(path), out / "runs")
    with pytest.raises(dataclasses.FrozenInstanceError):  # measured once; the report only reads it
        results.points = ()
    report = write_report(results, out).read_text()
    assert "PARTIAL" not in report
    assert "B keeps" in report and "C keeps" in report
    # CompleteP's optimum does not move here, so the tuned cell's lr is the transferred one
    (cell,) = dc.transfer_cost(exp, losses)
    assert (cell["width"], cell["depth"]) == (32, 16) and cell["tuned"].lr == cell["transferred"].lr
    assert cell["cost"] == 0 and "## What transfer loses" in report
    # the laws per arm: A's loss rises with depth while N grows with it, so the shape-agnostic
    # baseline cannot follow it and the parametric bootstrap rejects λ = 0 (p at its floor 1/20)
    arm_a = report[report.index("### Arm A: 24 rows"):report.index("### Arm B")]
    assert "- λ = 0: Yes:" in arm_a and "p = 0.05 ± 0.05 (parametric bootstrap from the kaplan fit, 19 replicates" in arm_a
    statuses = [line.rsplit(",", 1)[1] for line in (out / "laws.csv").read_text().splitlines()[1:]]
    assert len(statuses) == 3 * (3 + 6 + 5) and set(statuses) <= {"ok", "at_bound", "not_identified"}
    assert (out / "points.csv").read_text().count("\n") == 1 + 3 * (2 * 4) + 3 * 3
    assert (out / "loss_vs_depth.png").stat().st_size > 0


def test_the_command_trains_real_runs_and_labels_a_partial_study(tmp_path, capsys):
    from depthdelusion import cli

    path = write_experiment(tmp_path, widths=[16], depths=[1, 2], arm_a_depth=1,
                            completep={"base_width": 16, "base_depth": 1, "tuned_cells": []},
                            iso_flop={"width": 16, "reference_depth": 1, "depths": [1, 2]})
    out = tmp_path / "study"
    assert cli.main(["depth-confound", str(path), "--out", str(out), "--max-runs", "2"]) == 0
    finished = [p for p in (out / "runs").iterdir() if p.is_dir() and rundir.status(p) == "finished"]
    assert len(finished) == 2
    summary = rundir.read_summary(finished[0])
    assert math.isfinite(summary["eval_loss"])
    assert any("per_layer_grad_norm" in r for r in rundir.read_metrics(finished[0]))
    report = (out / "report.md").read_text()
    assert "PARTIAL RESULT" in report and "2 of the" in report


def test_a_curve_with_a_divergent_side_is_flagged_and_bracketed():
    curve = [(0.002, 1.88), (0.004, 1.67), (0.008, 1.53), (0.016, 1.44), (0.032, 2.34)]
    fit = dc.fit_lr_curve(curve, sigma=0.04, dof=40)
    assert fit.identified and "asymmetric" in fit.note
    assert "between 0.008 and 0.032" in fit.note
    symmetric = dc.fit_lr_curve([(0.004, 1.70), (0.008, 1.60), (0.016, 1.56), (0.032, 1.61)],
                                sigma=0.04, dof=40)
    assert symmetric.note == ""


def test_law_replicates_must_be_a_whole_number(tmp_path):
    with pytest.raises(ValueError, match="law_replicates=-1: must be >= 0 \\(a whole number"):
        load_spec(dc.DepthConfoundSpec, write_experiment(tmp_path, law_replicates=-1))


def test_the_penalty_is_a_welch_interval_against_the_best_depth():
    """Three seeds a depth: Welch's t (df from Welch–Satterthwaite), not a percentile bootstrap
    over 3 seeds, which the old code used and which is 2–3× too narrow."""
    from depthdelusion.analysis.fitting.seed_intervals import welch_interval

    pts = [dc.Point("B", 32, d, None, 0.01, losses) for d, losses in (
        (2, (1.50, 1.52, 1.51)), (4, (1.40, 1.41, 1.39)), (8, (1.40, 1.44, 1.38)), (16, (1.9, 1.8, 2.0)))]
    pen = dc.depth_penalty(pts)
    assert pen[4].estimate == 0 and pen[4].se == 0  # the best depth
    assert pen[8] == welch_interval((1.40, 1.44, 1.38), (1.40, 1.41, 1.39))
    assert pen[8].lo < 0 < pen[8].hi  # 8L is not distinguishable from the best
    assert pen[16].lo > 0.2 and pen[2].lo > 0  # 16L and 2L are worse beyond their seeds
    # t on the Welch df: [mean ± t·SE], wider than the plug-in ±1.96·SE a 3-seed bootstrap gives
    assert pen[16].hi - pen[16].estimate > 2.5 * pen[16].se


def test_verdict_gives_the_kept_share_of_as_penalty_with_fiellers_interval():
    pts = [dc.Point(arm, 32, d, None, 0.01, losses) for arm, d, losses in (
        ("A", 2, (1.10, 1.12, 1.14)), ("A", 32, (2.80, 2.90, 2.95)),
        ("B", 2, (1.10, 1.12, 1.14)), ("B", 32, (2.70, 2.80, 2.95)),
        ("C", 2, (1.10, 1.12, 1.14)), ("C", 32, (2.10, 2.40, 2.55)))]
    pen = {(arm, 32): dc.depth_penalty([p for p in pts if p.arm == arm]) for arm in "ABC"}
    kept = {(32, True): dc.kept_shares(dc.penalties_at(pts, pen, 32, 32), 32)}
    (line,) = verdict_lines(pts, pen, kept, [32], 32, iso=True)
    assert line.startswith("- **fixed compute, W = 32**")
    assert "B keeps 96% [77%, 117%] of A's penalty" in line and "C keeps 70% [38%, 104%]" in line


def test_a_two_seed_check_is_called_uninformative_and_the_regime_and_short_cells_are_stated():
    """Held-out seeds 2–3 give Welch intervals on about one degree of freedom: the report must say
    the check cannot confirm anything. Tokens per parameter and the embedding share come from the
    summaries; a point short of its seeds is named with the command that trains it."""
    from types import SimpleNamespace

    from depthdelusion.analysis.fitting.seed_intervals import welch_interval
    from depthdelusion.studies.depth_confound.report import held_out_lines, regime_lines, short_lines

    spec = SimpleNamespace(seeds=[1, 2, 3], depths=[2, 32],
                           base={"train": {"steps": 300, "batch_size": 8}, "model": {"seq_len": 64}})
    wide = welch_interval([1.0, 3.0], [0.9, 1.0])
    summaries = {"a": {"params": 15360, "params_non_embedding": 9216, "tokens": 153600},
                 "b": {"params": 1_536_000, "params_non_embedding": 1_505_280, "tokens": 153600},
                 "c": {"params": 40000, "tokens": 400000}}
    regime = dc.regime(spec, summaries)
    assert regime.tokens_per_param == {"equal tokens": (0.1, 10.0, 2), "iso-FLOP": (10.0, 10.0, 1)}
    assert regime.embedding_share == pytest.approx((0.02, 0.4))
    short = dc.short_points(spec, [dc.Point("C", 32, 2, None, 0.032, (1.5, 1.6)),
                                   dc.Point("B", 32, 2, None, 0.016, (1.5, 1.6, 1.4))])
    r = SimpleNamespace(spec=spec, held_out=(("A", 32, wide),), regime=regime, short=short,
                        source="exp.yaml")
    (line, _) = held_out_lines(r)
    assert f"(df {wide.df:.1f})" in line and "This check is uninformative, not a confirmation" in line
    assert wide.df < 1.5
    text = " ".join(regime_lines(r))
    assert "equal tokens: 0.1–10 tokens per parameter (2 runs)" in text
    assert "2%–40% of total N" in text and "×1.67" in text and "non-embedding N" in text
    assert short_lines(r)[0].startswith("**Short**: C 2L × 32: 2 of 3 seeds. `depthdelusion depth-confound exp.yaml")
    r.short = ()
    assert short_lines(r)[0] == "Every reported point has all 3 seeds (no cell is short)."


def test_the_committed_study_regenerates_from_its_runs(tmp_path):
    """analysis/depth_confound: `depth-confound --report-only` on the committed runs writes the
    committed report.md and CSVs, every word and decision exactly and every number at its printed
    digits (text_compare's tolerances; the figure's bytes are not compared), under any BLAS
    kernel: checked by hand under OpenBLAS's Haswell, SkylakeX and Sandybridge kernels
    (benchmarks/RESULTS.md, 2026-12-02 sixth session)."""
    from committed_study import regenerate_planned_study

    diffs = regenerate_planned_study(
        "analysis/depth_confound", "depth_confound.yaml",
        ["depth-confound", "experiments/depth_confound.yaml", "--out", "analysis/depth_confound", "--report-only"],
        tmp_path, exact=False)
    assert not diffs, "stale (regenerate with the command in analysis/depth_confound/README.md):\n" + "\n".join(diffs)
