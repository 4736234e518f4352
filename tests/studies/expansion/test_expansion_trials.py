"""The trained tests of depth expansion: the rank statistic and the paired difference on known
inputs (power and the seed requirement), and a miniature of the prediction study end to end."""
import dataclasses
import json

import numpy as np
import pytest

from depthdelusion.studies.expansion import trials
from tests.studies.expansion.test_expansion import RUN


def test_rank_agreement_detects_agreement_and_its_absence():
    rng = np.random.default_rng(0)
    agree = [(list(x), list(2 * x + 0.01 * rng.normal(size=6))) for x in rng.normal(size=(4, 6))]
    out = trials.rank_agreement(agree)
    assert out["rho_mean"] > 0.95 and out["rho_ci95"][0] > 0.9 and out["p_permutation"] < 0.01
    noise = [(list(rng.normal(size=6)), list(rng.normal(size=6))) for _ in range(4)]
    out = trials.rank_agreement(noise)
    assert -1 <= out["rho_ci95"][0] <= out["rho_mean"] <= out["rho_ci95"][1] <= 1
    assert out["p_permutation"] > 0.05
    with pytest.raises(ValueError, match="at least 3 seeds"):
        trials.rank_agreement(agree[:2])


def test_paired_difference_interval():
    out = trials.paired_difference([1.0, 1.1, 1.2], [0.9, 1.0, 1.15])
    assert out["diff_mean"] == pytest.approx(np.mean([0.1, 0.1, 0.05]))
    lo, hi = out["diff_ci95"]
    assert lo < out["diff_mean"] < hi
    with pytest.raises(ValueError, match="at least 3 paired seeds"):
        trials.paired_difference([1.0, 1.1], [0.9, 1.0])


def test_prediction_study_miniature(tmp_path):
    """One tiny parent (depth 2, 4 steps), a child per insertion point trained 2 more steps: the
    table has a row per k with the probe's signal and the realised drop; one seed is reported as
    not tested rather than given a correlation."""
    from depthdelusion.train.loop import train

    cfg = dataclasses.replace(RUN, train=dataclasses.replace(RUN.train, eval_batches=3, eval_every=100))
    train(cfg, tmp_path / "parents" / "d2_seed0")
    spec = trials.PredictionSpec(runs=str(tmp_path / "parents"), steps=2, probe_batches=3)
    results = trials.measure_prediction(spec, tmp_path / "out", log=lambda _: None)
    trials.write_outputs(results, tmp_path / "out")
    summary = results.summary
    with pytest.raises(dataclasses.FrozenInstanceError):
        results.summary = {}
    assert (tmp_path / "out" / "prediction.md").read_text() == trials.sections(results)
    assert "at least 3 seeds" in summary["not_tested"]
    rows = (tmp_path / "out" / "prediction.csv").read_text().splitlines()
    assert rows[0].startswith("parent,seed,after,signal_train") and len(rows) == 1 + cfg.model.depth
    assert json.loads((tmp_path / "out" / "prediction_summary.json").read_text())["steps_after_expansion"] == 2


def test_three_seeds_interval_is_the_t_interval_not_the_seeds_range():
    """ρ = 0.4, 0.4, 0.8 over 4 insertion points: a bootstrap over the three values stays inside
    [0.4, 0.8]; the seed-to-seed spread allows far more (t with 2 df: 0.533 ± 0.574)."""
    per_seed = [([1, 2, 3, 4], r) for r in ([1, 3, 4, 2], [1, 3, 4, 2], [2, 1, 3, 4])]
    out = trials.rank_agreement(per_seed)
    assert out["rho_per_seed"] == [0.4, 0.4, 0.8]
    lo, hi = out["rho_ci95"]
    assert lo == pytest.approx(0.5333 - 0.5737, abs=1e-3) and hi == 1.0


def test_a_best_lr_on_the_grids_edge_is_said_to_be_untuned():
    rows = [{"arm": "grown", "lr": lr, "seed": s, "eval_loss": loss + 0.01 * s}
            for lr, loss in ((1e-3, 1.8), (3e-3, 1.5), (1e-2, 1.3)) for s in (0, 1, 2)]
    lr, picked, edge, fit = trials.best_lr(rows, "grown")
    assert lr == 1e-2 and len(picked) == 3 and edge
    assert fit["vertex_lr"] is None and "edge" in fit["note"]
    rows += [{"arm": "grown", "lr": 3e-2, "seed": s, "eval_loss": 1.4} for s in (0, 1, 2)]
    assert trials.best_lr(rows, "grown")[::2] == (1e-2, False)


def test_the_arms_lr_follows_the_depth_confound_rule():
    """The lr is the grid point nearest the vertex of the parabola in ln lr through the best mean
    loss and its neighbours (depth_confound.fit_lr_curve); the vertex is reported with a Fieller
    interval from the seeds' spread, which holds the true optimum."""
    import math

    true_lr = 0.015
    noise = (-0.002, 0.0, 0.002)
    rows = [{"arm": "scratch", "lr": lr, "seed": s,
             "eval_loss": 1.0 + 0.05 * (math.log(lr / true_lr)) ** 2 + noise[s]}
            for lr in (5e-3, 1e-2, 2e-2, 4e-2) for s in (0, 1, 2)]
    lr, picked, edge, fit = trials.best_lr(rows, "scratch")
    assert lr == 2e-2 and [r["seed"] for r in picked] == [0, 1, 2] and not edge
    assert fit["vertex_lr"] == pytest.approx(true_lr, rel=1e-6)  # the noise is the same at every lr
    lo, hi = fit["vertex_lr_ci95"]
    assert lo < true_lr < hi and hi / lo < 2


@pytest.mark.slow  # trains 18 tiny runs
def test_growth_study_measures_the_difference_on_seeds_that_did_not_choose_the_lr(tmp_path):
    """Growth miniature (depth 1 grown to 2 at step 2 of 4; depth 2 from scratch): seeds 0-2
    choose each arm's lr, seeds 3-5 at that lr give the difference; the tuning seeds' difference
    is kept beside it, and a test seed missing at the chosen lr is named, not silently skipped."""
    from depthdelusion.train.loop import train

    runs = tmp_path / "growth"
    for depth, steps in ((1, 4), (2, 3)):
        for seed in range(6):
            cfg = dataclasses.replace(
                RUN, model=dataclasses.replace(RUN.model, depth=depth, parametrization="sp"),
                train=dataclasses.replace(RUN.train, steps=steps, seed=seed, eval_batches=2, eval_every=100,
                                          checkpoint_every=2))
            train(cfg, runs / f"d{depth}_w32_steps{steps}_lr0.003_seed{seed}")
    def growth(test_seeds):
        results = trials.measure_growth(trials.GrowthSpec(runs=str(runs), switch_step=2, test_seeds=test_seeds),
                                        log=lambda _: None)
        trials.write_outputs(results, tmp_path / "out")
        return results.summary

    summary = growth([3, 4, 5])
    rows = [r.split(",") for r in (tmp_path / "out" / "growth_matched.csv").read_text().splitlines()[1:]]
    loss = {(arm, int(seed)): float(v) for arm, _, seed, v, _ in rows}
    held_out = [loss["grown", s] - loss["scratch", s] for s in (3, 4, 5)]
    assert summary["test_seeds"] == [3, 4, 5] and summary["seeds"] == 3
    assert summary["diff_mean"] == pytest.approx(float(np.mean(held_out)), rel=1e-4)
    tuning = [loss["grown", s] - loss["scratch", s] for s in (0, 1, 2)]
    assert summary["tuning_seeds_difference"]["diff_mean"] == pytest.approx(float(np.mean(tuning)), rel=1e-4)

    summary = growth([3, 4, 5, 6])
    assert "grown lr 0.003 seeds 6" in summary["not_tested"] and "diff_mean" not in summary


def test_a_diverged_run_makes_its_lr_unchosen_and_an_unbounded_vertex_is_said():
    rows = [{"arm": "grown", "lr": lr, "seed": s, "eval_loss": loss + 0.01 * s}
            for lr, loss in ((1e-3, 1.8), (3e-3, 1.5), (1e-2, 1.3), (3e-2, 1.29)) for s in (0, 1, 2)]
    rows[-1]["eval_loss"] = float("nan")  # 3e-2, seed 2 diverged
    lr, picked, edge, fit = trials.best_lr(rows, "grown")
    # 3e-2 (a diverged seed) is not chosen; next to it the parabola has no finite neighbour
    assert lr == 1e-2 and fit["vertex_lr"] is None and "edge" in fit["note"]
    flat = [{"arm": "grown", "lr": lr, "seed": s, "eval_loss": loss + (0.05 if s == 1 else 0.0)}
            for lr, loss in ((5e-3, 1.3001), (1e-2, 1.3), (2e-2, 1.3001)) for s in (0, 1, 2)]
    assert trials.best_lr(flat, "grown")[3]["vertex_lr_ci95"].startswith("unbounded")
