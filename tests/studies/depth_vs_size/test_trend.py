"""The depth-vs-size study's pre-specified tests (issue 60): the seed-effect slope, Holm, the
trend family on the committed runs, the depth and width series and their verdict, the κ-fixed
kink law, and the spec's fixed lrs, arms and unmatched shapes."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from depthdelusion.analysis.laws import get_law
from depthdelusion.analysis.law_types import LawInputs
from depthdelusion.studies.common import laws
from depthdelusion.studies.common.spec import load_spec
from depthdelusion.studies.depth_vs_size import study as dvs
from depthdelusion.studies.depth_vs_size import tests_text, trend

ROOT = Path(__file__).resolve().parents[3]


def test_the_seed_effect_slope_is_ols_with_a_dummy_per_seed():
    rng = np.random.default_rng(0)
    xs = [0.0, 0.7, 1.9, 3.0]
    samples = [[0.02 * x + e + rng.normal(0, 0.01) for e in (0.3, 0.0, -0.2)] for x in xs]
    got = trend.seed_effect_slope(xs, samples)
    design = np.array([[x] + [1.0 * (k == j) for j in range(3)] for x in xs for k in range(3)])
    y = np.array([v for s in samples for v in s])
    coef, rss, *_ = np.linalg.lstsq(design, y, rcond=None)
    df = len(y) - 4
    se = math.sqrt(rss[0] / df * np.linalg.inv(design.T @ design)[0, 0])
    assert got.interval.estimate == pytest.approx(coef[0], abs=1e-12)
    assert got.interval.df == df == 8 and got.interval.se == pytest.approx(se, rel=1e-9)
    assert got.interval.lo < 0.02 < got.interval.hi  # the 0.5-nat seed effects do not widen it


def test_holm_steps_down_and_keeps_the_order():
    assert trend.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def committed_groups() -> dict:
    from types import SimpleNamespace

    groups: dict = {}
    with open(ROOT / "analysis/depth_vs_size/points.csv") as f:
        for r in csv.DictReader(f):
            groups.setdefault((int(r["level"]), r["arm"]), []).append(SimpleNamespace(
                shape={"width": int(r["width"]), "depth": int(r["depth"])},
                losses=tuple(float(x) for x in r["losses"].split())))
    return groups


def test_the_trend_family_reproduces_the_referees_numbers_on_the_committed_runs():
    got = {(t.level, t.arm, t.kind): t for t in trend.trend_family(committed_groups())}
    assert len(got) == 8  # 2 levels x 2 arms x (trend, ends): Holm's family
    ends = got[(1, "SP", "ends")]
    assert ends.shapes == ((16, 16), (64, 1))
    assert (ends.interval.estimate, ends.interval.lo, ends.interval.hi) == pytest.approx((0.147, 0.072, 0.221), abs=5e-4)
    slopes = [got[(lv, arm, "trend")].interval.estimate for lv in (1, 2) for arm in ("SP", "CompleteP")]
    assert min(slopes) == pytest.approx(0.018, abs=5e-4) and max(slopes) == pytest.approx(0.034, abs=5e-4)
    assert got[(2, "SP", "trend")].p == pytest.approx(5e-8, rel=0.2)
    assert all(t.p_holm >= t.p for t in got.values()) and all(t.p_holm <= 0.05 for t in got.values())


def test_below_the_papers_critical_depth_sp_level_2_is_not_free():
    got = {(t.level, t.arm): t for t in trend.below_critical(committed_groups(), 2.43)}
    sp2 = got[(2, "SP")]
    assert sp2.shapes == ((32, 8), (64, 2))  # both below D_crit = 2.43 ln W
    assert (sp2.interval.estimate, sp2.interval.lo, sp2.interval.hi) == pytest.approx((0.060, 0.028, 0.093), abs=1e-3)  # the referee rounded unrounded losses
    assert sp2.p_holm <= 0.05 and got[(2, "CompleteP")].p_holm > 0.05


def series_cells(loss_of) -> list:
    """Level 1, both arms: W = 32 at D = 4, 8, 16 and W = 24, 40 at D = 8, losses loss_of(w, d)
    plus a shared seed effect and small noise."""
    rng = np.random.default_rng(3)
    out = []
    for arm in ("SP", "CompleteP"):
        for w, d in ((32, 4), (32, 8), (32, 16), (24, 8), (40, 8)):
            out.append(dvs.Cell(1, arm, {"width": w, "depth": d, "params": 1, "steps": 1, "tokens": 1}, 0.01,
                                tuple(loss_of(w, d) + e + rng.normal(0, 0.003) for e in (0.05, 0.0, -0.04))))
    return out


@pytest.mark.parametrize("loss_of, head", [
    (lambda w, d: 1.0 - 0.05 * math.log(w), "Narrowness carries the rise"),
    (lambda w, d: 1.0 + 0.05 * math.log(d), "Depth carries the rise"),
    (lambda w, d: 1.0, "Neither series rises"),
    # a loss that falls with depth at fixed width is said as such, not as "no rise"
    (lambda w, d: 1.0 - 0.05 * math.log(w) - 0.05 * math.log(d),
     "Narrowness carries the rise; depth at fixed width lowers the loss beyond the seed noise (deeper is better at width 32)"),
    (lambda w, d: 1.0 - 0.05 * math.log(d),
     "Neither series rises beyond the seed noise after Holm; depth at fixed width lowers the loss")])
def test_the_series_verdict_says_which_of_depth_and_narrowness_carries_the_rise(loss_of, head):
    got = series_cells(loss_of)
    found = trend.series_family([s for arm in ("SP", "CompleteP") for s in
                                 trend.series(1, arm, [c for c in got if c.arm == arm], (32, 8))])
    assert sorted((s.test.arm, s.test.kind, s.fixed) for s in found) == [
        ("CompleteP", "depth", 32), ("CompleteP", "width", 8), ("SP", "depth", 32), ("SP", "width", 8)]
    assert all(len(s.to_base) == 2 for s in found)  # each other shape against 32x8
    for arm in ("SP", "CompleteP"):
        assert tests_text.verdict(found, arm).startswith(head)
        # a series still missing shapes: the verdict says so first, and says "so far"
        partial = tests_text.verdict(found, arm, ["depth at width 32 has 2 of 3 shapes"])
        assert partial.startswith(f"PARTIAL (depth at width 32 has 2 of 3 shapes): so far, {head[0].lower()}{head[1:]}")


def test_the_kappa_fixed_law_is_the_kink_law_at_that_kappa():
    x = LawInputs.of([1, 4, 8, 16, 31], [64, 32, 32, 16, 16], [5e4, 5e4, 1e5, 5e4, 1e5])
    fixed = laws.kappa_fixed_law(2.43)
    assert "kappa" not in fixed.param_names and fixed.shape == "kink"
    kw = {"A": 30.0, "alpha": 0.3, "lam": 0.01, "gamma": 0.2, "E": 0.1}
    np.testing.assert_allclose(fixed.func(x, **kw), get_law(laws.KINK).func(x, kappa=2.43, **kw))
    # its roles kept: the penalty λ, no free kink location, D_crit = 2.43·ln W
    assert fixed.penalty == "lam" and fixed.kink == "" and fixed.has_critical_depth
    np.testing.assert_allclose(fixed.critical_depth({}, [64, 512]), 2.43 * np.log([64, 512]))
    assert fixed.critical_depth_text({}) == "D_crit = 2.43·ln W"


def write(tmp_path: Path, source: str, **changes) -> Path:
    spec = yaml.safe_load((ROOT / source).read_text())
    spec.update(changes)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_the_long_study_plans_12_sp_runs_at_the_committed_lrs_and_80_tokens_per_parameter():
    exp = load_spec(dvs.DepthVsSizeSpec, ROOT / "experiments/depth_vs_size_long.yaml")
    runs = dvs.plan(exp, {})
    with open(ROOT / "analysis/depth_vs_size/points.csv") as f:
        committed = {(int(r["width"]), int(r["depth"])): float(r["lr"]) for r in csv.DictReader(f)
                     if r["level"] == "1" and r["arm"] == "SP"}
    assert len(runs) == 12 and {r.parametrization for r in runs} == {"sp"}
    assert {(r.width, r.depth): r.lr for r in runs} == committed
    assert sorted({r.seed for r in runs}) == [1, 2, 3]
    for r in runs:
        cfg = dvs.run_config(exp, r)
        assert cfg.train.steps * 16 * 64 == pytest.approx(80 * dvs.shape_of(exp, r.width, r.depth)["params"], rel=0.01)
        assert cfg.train.eval_batches == 64


@pytest.mark.parametrize("level_changes, field", [
    ({"sp_lrs": [[64, 1, 0.032], [32, 4, 0.032], [24, 7, 0.064]]}, "sp_lrs"),  # a shape missing
    ({"sp_lrs": [[64, 1, 0.032], [32, 4, 0.032], [24, 7, -1], [16, 16, 0.032]]}, "sp_lrs"),
    ({"unmatched": [[32, 5]]}, "unmatched")])  # matchable with some F
def test_bad_fixed_lrs_or_a_matchable_unmatched_shape_is_one_line_naming_the_field(tmp_path, level_changes, field):
    spec = yaml.safe_load((ROOT / "experiments/depth_vs_size_long.yaml").read_text())
    spec["levels"][0].update(level_changes)
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ValueError, match=rf"levels\[0\]\.{field}") as err:
        load_spec(dvs.DepthVsSizeSpec, path)
    assert "\n" not in str(err.value)


def test_an_unknown_arm_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"arms=\['SP', 'muP'\]"):
        load_spec(dvs.DepthVsSizeSpec, write(tmp_path, "experiments/depth_vs_size_long.yaml", arms=["SP", "muP"]))


def test_the_depth_at_width_level_says_why_depth_24_is_not_in_it():
    exp = load_spec(dvs.DepthVsSizeSpec, ROOT / "experiments/depth_at_width.yaml")
    (u,) = exp.resolved_levels[0]["unmatched"]
    assert (u["width"], u["depth"]) == (32, 24) and u["off"] > exp.match_tolerance
    assert "32×24 is not in the level: even with F = 1" in "\n".join(tests_text.unmatched_lines(exp, 0))


def test_a_seed_draws_the_corpus_only_when_it_is_the_built_in_one():
    builtin = load_spec(dvs.DepthVsSizeSpec, ROOT / "experiments/depth_vs_size.yaml")
    text = load_spec(dvs.DepthVsSizeSpec, ROOT / "experiments/natural_text/depth_vs_size_level1.yaml")
    assert "built-in corpus" in tests_text.seed_draws(builtin)
    assert "the same at every seed" in tests_text.seed_draws(text) and "built-in" not in tests_text.seed_draws(text)


def test_the_total_n_of_every_committed_shape_is_what_its_runs_counted():
    import json

    exp = load_spec(dvs.DepthVsSizeSpec, ROOT / "experiments/depth_vs_size.yaml")
    counted = {}
    for path in (ROOT / "analysis/depth_vs_size/runs").glob("*/summary.json"):
        s = json.loads(path.read_text())
        counted[(s["model"]["width"], s["model"]["depth"])] = (s["params_non_embedding"], s["params"])
    shapes = [s for level in exp.resolved_levels for s in level["shapes"]]
    assert len(shapes) == 9
    assert all(counted[(s["width"], s["depth"])] == (s["params"], s["params_total"]) for s in shapes)


def synthetic_train(loss_of):
    """A trainer stand-in: loss_of(width, depth) + a quadratic in ln lr around 0.01 + a shared seed
    effect + small noise; writes what the study reads."""
    from depthdelusion import rundir

    def train(cfg, run_dir) -> dict:
        m, t = cfg.model, cfg.train
        rng = np.random.default_rng([t.seed, m.depth, m.width, int(round(t.lr * 1e6))])
        loss = (loss_of(m.width, m.depth) + 0.05 * math.log(0.01 / t.lr) ** 2
                + {1: 0.05, 2: 0.0, 3: -0.04}.get(t.seed, 0.0) + rng.normal(0, 0.003))
        run_dir.mkdir(parents=True, exist_ok=True)
        summary = {"status": "finished", "eval_loss": loss, "final_loss": 0.0, "wall_time_s": 1.0,
                   "steps": t.steps, "params": 1, "tokens": t.steps * t.batch_size * m.seq_len}
        rundir.write_config(run_dir, cfg)
        rundir.write_summary(run_dir, summary)
        return summary
    return train


def test_a_study_with_a_depth_and_a_width_series_reports_the_verdict_and_the_ffn_nuisance(tmp_path):
    from depthdelusion.studies.depth_vs_size import report

    path = write(tmp_path, "experiments/depth_at_width.yaml", law_replicates=0)
    exp = load_spec(dvs.DepthVsSizeSpec, path)
    out = tmp_path / "study"
    dvs.train(exp, str(path), out, train_fn=synthetic_train(lambda w, d: 1.0 - 0.05 * math.log(w)), log=lambda t: None)
    text = report.sections(dvs.measure(exp, str(path), out / "runs"))
    assert "## Level 1: depth at fixed width and width at fixed depth" in text
    assert "- SP: Narrowness carries the rise" in text and "- CompleteP: Narrowness carries the rise" in text
    assert "32×4 F/W = 10" in text and "32×16 F/W = 1" in text and "32×4 lie(s) outside that range" in text
    assert "32×24 is not in the level" in text and "PARTIAL" not in text


def test_the_depth_free_law_counts_the_seed_centring_in_its_pure_error():
    """Seed-centred rows of C cells x S seeds per level have (C − 1)(S − 1) pure-error dof per
    level, not C·(S − 1): centring used S − 1 per level. The committed study: 3·2 + 4·2 = 14."""
    cells_ = []
    for (level, arm), group in committed_groups().items():
        if arm == "SP":
            cells_ += [dvs.Cell(level, arm, {**c.shape, "params": 50_000 * level + 100 * c.shape["depth"]}, 0.01,
                                c.losses) for c in group]
    got = dvs.depth_free(dvs.law_records("SP", cells_, "params"), "non-embedding", 3)
    assert (got.lack_of_fit.df_lack, got.lack_of_fit.df_pure) == (9 - 3, 14)
    assert got.lack_of_fit.p < 1e-4


def test_a_study_with_fixed_lrs_and_one_arm_reports_that_arm_only_and_no_grid(tmp_path):
    from depthdelusion.studies.depth_vs_size import report

    path = write(tmp_path, "experiments/depth_vs_size_long.yaml", law_replicates=0)
    exp = load_spec(dvs.DepthVsSizeSpec, path)
    out = tmp_path / "study"
    dvs.train(exp, str(path), out, train_fn=synthetic_train(lambda w, d: 1.0 + 0.02 * math.log(d / w)), log=lambda t: None)
    got = dvs.measure(exp, str(path), out / "runs")
    assert got.runs == 12 and got.todo == () and got.curves == ()
    text = report.sections(got)
    assert "**SP** SP, lr fixed per shape by the spec (`sp_lrs`)" in text and "CompleteP" not in text
    assert "every lr fixed by the spec (`sp_lrs`): no lr grid ran." in text and "learning-rate grids" not in text
    assert [(t.arm, t.kind) for t in got.trends] == [("SP", "trend"), ("SP", "ends")]
