
import numpy as np
import pytest

from depthdelusion.analysis import load_runs
from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.analysis.report.options import ReportOptions
from depthdelusion.analysis.science.persistence import (
    persistence_length,
    persistence_lengths,
    persistence_scaling,
    windowed_fit,
)
from depthdelusion.analysis.table.runs import GradientProfile


def test_persistence_length_is_recovered_from_run_directories(run_factory, tmp_path):
    run_factory("d24w512", 24, 512, 3.4, ell=6.0, act_ell=9.0, steps=(0, 900, 2000))
    (f,) = persistence_lengths(tmp_path / "runs", step=1000)
    assert f.status == "decay" and f.steps == (900,) and f.requested_step == 1000
    assert f.ci[0] < 6.0 < f.ci[1] and abs(f.length - 6.0) < 0.5 and f.r2 > 0.95
    (a,) = persistence_lengths(tmp_path / "runs", step=1000, kind="activation")
    assert abs(a.length - 9.0) < 1.0
    assert "step 900" in f.describe() and "only 1 logged step" in f.warning


def test_window_averages_every_logged_step_and_bootstraps_over_them(run_factory, tmp_path):
    steps = tuple(range(0, 1401, 50))
    run_factory("d16", 16, 256, 3.0, ell=5.0, noise=0.2, steps=steps)
    (f,) = persistence_lengths(tmp_path / "runs", step=1000, window=0.2)
    assert f.steps == tuple(range(800, 1201, 50)) and f.window == (800, 1200)
    assert f.ci_method == "moving-block bootstrap over 9 steps, blocks of 3" and f.warning is None
    assert f.rate_ci[0] < 1 / 5.0 < f.rate_ci[1]
    # the average over 9 steps is tighter than one step's fit
    (one,) = persistence_lengths(tmp_path / "runs", step=1000, window=0.0)
    assert one.steps == (1000,) and (f.rate_ci[1] - f.rate_ci[0]) < (one.rate_ci[1] - one.rate_ci[0])


def test_warning_when_no_logged_step_is_near_the_requested_one(run_factory, tmp_path):
    run_factory("d8", 8, 64, 3.0, ell=4.0, steps=(0, 300))
    (f,) = persistence_lengths(tmp_path / "runs", step=1000)
    assert f.steps == (300,) and "no per-layer norms logged in the window [800, 1200]" in f.warning
    assert "WARNING" in f.describe()


def test_growth_towards_the_input_is_reported_as_growth_and_flat_as_flat():
    rng = np.random.default_rng(0)
    growing = np.exp(-0.05 * np.arange(16)) * np.exp(0.01 * rng.standard_normal(16))  # larger at the input
    g = persistence_length(growing, name="x", width=512)
    assert g.status == "growth" and g.rate < 0 and g.length < 0 and g.ci[0] < g.length < g.ci[1]
    assert abs(g.length + 20) < 3 and "growth towards the input" in g.describe()
    flat = persistence_length(np.exp(0.02 * rng.standard_normal(16)), name="y")
    assert flat.status == "flat" and flat.length is None and flat.rate_ci[0] < 0 < flat.rate_ci[1]


def test_too_few_layers_and_bad_norms():
    assert persistence_length([1.0, 2.0]).status == "too few layers"
    with pytest.raises(ValueError, match="must be positive"):
        persistence_length([1.0, 0.0, 2.0], name="r")


def test_power_law_in_width_beats_log_form_when_data_follow_a_power_law(run_factory, tmp_path):
    for i, w in enumerate((256, 512, 1024, 2048, 4096)):
        run_factory(f"w{w}", 40, w, 3.0, ell=0.5 * w ** 0.44, noise=0.01, seed=i)
    scaling = persistence_scaling(persistence_lengths(tmp_path / "runs"))
    assert abs(scaling.p - 0.44) < 0.05 and scaling.p_ci[0] < 0.44 < scaling.p_ci[1]
    assert scaling.r2_power > 0.98 and scaling.r2_power > scaling.r2_log
    assert "power law" in scaling.summary() and "none excluded" in scaling.summary()


def test_rates_at_or_below_zero_are_fitted_not_dropped(run_factory, tmp_path):
    """No selection on the outcome: growing and flat runs enter the ℓ(W) fit."""
    for i, (w, ell) in enumerate(((64, -30.0), (128, -60.0), (256, 40.0), (512, 20.0), (1024, 12.0))):
        run_factory(f"w{w}", 32, w, 3.0, ell=ell, noise=0.01, seed=i)
    fits = persistence_lengths(tmp_path / "runs")
    assert sorted(f.status for f in fits) == ["decay"] * 3 + ["growth"] * 2
    scaling = persistence_scaling(fits)
    assert len(scaling.widths) == 5 and scaling.n_growth == 2
    # rates rise with W here, so ℓ falls with W: the fit must say p < 0, not the decay-only p
    assert scaling.p < 0 and "2 growth" in scaling.summary()


def test_scaling_needs_several_widths(run_factory, tmp_path):
    run_factory("a", 12, 256, 3.0, ell=4.0)
    with pytest.raises(ValueError, match="at least 3 runs"):
        persistence_scaling(persistence_lengths(load_runs(tmp_path / "runs")))


@pytest.mark.slow  # fits a whole report
def test_an_expansion_probe_beside_a_run_reaches_the_persistence_figure(tmp_path):
    # `depthdelusion expand RUN --probe` writes RUN/expansion_probe/probe.json; the report's
    # persistence figure draws that first-order signal beside g_l, and says for which runs.
    import json

    from depthdelusion.analysis.report.build import write_report
    from depthdelusion.analysis.table.run_dirs import INSERTION_PROBE

    from ..conftest import write_run

    for i, (d, w) in enumerate([(4, 64), (8, 64), (4, 128), (8, 128), (16, 128), (4, 256),
                                (8, 256), (16, 256), (2, 64)]):
        write_run(tmp_path / "runs", f"d{d}_w{w}", d, w, 3.0 - 0.1 * i, ell=3.0, seed=i)
    probe_dir = tmp_path / "runs" / "d8_w128" / INSERTION_PROBE
    probe_dir.mkdir()
    signal = [{"after": l, "signal_train": 0.1 * (l + 1)} for l in range(8)]
    (probe_dir / "probe.json").write_text(json.dumps({"depth": 8, "signal": signal}))
    runs = load_runs(tmp_path / "runs")
    probed = {str(n): p.insertion_signal for n, p in zip(runs.name, runs.profiles)
              if p is not None and p.insertion_signal is not None}
    assert list(probed) == ["d8_w128"]
    np.testing.assert_allclose(probed["d8_w128"], 0.1 * np.arange(1, 9))
    # one law: the persistence section and its figure do not depend on the laws fitted
    write_report(tmp_path / "runs", tmp_path / "rep", ReportOptions(fit=FitOptions(bootstrap=0), laws=("kaplan",)),
                 figures=True)
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "first-order signal of a zero-output block inserted after block l" in md
    assert "runs: d8_w128" in md and (tmp_path / "rep" / "gradient_profiles.png").exists()


def test_one_windowed_fit_for_the_report_and_the_study_leaving_out_bottom_blocks():
    """windowed_fit picks the steps (window, else nearest) once; skip_bottom drops the blocks
    nearest the input from the same steps' mean profile."""
    rng = np.random.default_rng(1)
    table = {s: np.exp(-np.arange(12)[::-1] / 4.0 + 0.01 * rng.standard_normal(12)) for s in (700, 900, 1100, 1500)}
    profile = GradientProfile(weight=table)
    f = windowed_fit(profile, step=1000, window=0.2, kind="weight", name="r", width=64, seed=0)
    assert f.steps == (900, 1100) and f.step == 1000 and f.window == (800, 1200)
    cut = windowed_fit(profile, step=1000, window=0.2, kind="weight", name="r", width=64, seed=0, skip_bottom=3)
    ref = persistence_length(np.stack([table[900], table[1100]])[:, 3:], name="r", width=64, kind="weight",
                             requested_step=1000, seed=0)
    assert cut.steps == f.steps and cut.rate == ref.rate and cut.rate_ci == ref.rate_ci
    far = windowed_fit(profile, step=3000, window=0.1, kind="weight", name="r", width=64, seed=0)
    assert far.steps == (1500,) and "used step 1500 instead" in far.warning


def test_moving_block_bootstrap_resamples_runs_of_consecutive_steps_and_widens_for_autocorrelated_steps():
    from depthdelusion.analysis.science.persistence import (
        block_length,
        moving_block_indices,
    )

    assert [block_length(n) for n in (3, 8, 9, 27, 28)] == [2, 2, 3, 3, 4]
    idx = moving_block_indices(np.random.default_rng(0), 9, 3, 50)
    assert idx.shape == (50, 9) and idx.min() >= 0 and idx.max() <= 8
    assert np.all(np.diff(idx.reshape(50, 3, 3), axis=2) == 1)  # each block is 3 consecutive steps
    # Steps whose profile drifts slowly (AR(1), φ = 0.9): the iid bootstrap treats 9 steps as 9
    # independent draws and is too narrow; the block bootstrap is wider — by only ≈ 10% with 9
    # steps, which is why a verdict uses the interval over seeds.
    rng = np.random.default_rng(3)
    dist = 15 - np.arange(16)
    widths_block, widths_iid = [], []
    for rep in range(60):
        e = np.zeros(9)
        for s in range(1, 9):
            e[s] = 0.9 * e[s - 1] + 0.01 * rng.standard_normal()
        log_g = -(0.02 + e)[:, None] * dist[None, :] + 0.001 * rng.standard_normal((9, 16))
        f = persistence_length(np.exp(log_g), seed=rep)
        widths_block.append(f.rate_ci[1] - f.rate_ci[0])
        rates = -(log_g - log_g.mean(1, keepdims=True)) @ (dist - dist.mean()) / ((dist - dist.mean()) ** 2).sum()
        boot = rates[np.random.default_rng(rep).integers(0, 9, (400, 9))].mean(1)
        widths_iid.append(np.quantile(boot, 0.975) - np.quantile(boot, 0.025))
    assert np.mean(widths_block) > 1.07 * np.mean(widths_iid)


def test_seed_interval_is_t_based_over_seeds_and_one_run_keeps_its_own_interval():
    from scipy import stats

    from depthdelusion.analysis.science.persistence import seed_interval

    rng = np.random.default_rng(0)
    dist = 7 - np.arange(8)
    fits = [persistence_length(np.exp(-r * dist[None, :] + 0.001 * rng.standard_normal((9, 8))), seed=i)
            for i, r in enumerate((0.01, 0.02, 0.015))]
    iv = seed_interval(fits)
    rates = np.array([f.rate for f in fits])
    half = stats.t.ppf(0.975, 2) * rates.std(ddof=1) / np.sqrt(3)
    assert iv.n == 3 and iv.enough_seeds and abs(iv.sd - rates.std(ddof=1)) < 1e-12
    assert abs(iv.half_width - half) < 1e-12 and abs(iv.lo - (rates.mean() - half)) < 1e-12
    assert "t over 3 seeds (2 df)" == iv.method
    two = seed_interval(fits[:2])
    assert two.n == 2 and not two.enough_seeds
    one = seed_interval(fits[:1])
    assert one.n == 1 and np.isnan(one.sd) and (one.lo, one.hi) == fits[0].rate_ci and "one run" in one.method


def test_paper_implied_length_and_what_an_interval_says_about_it():
    from depthdelusion.analysis.reference import PAPER_KAPPA
    from depthdelusion.analysis.science.persistence import (
        compare_with_paper,
        length_statement,
        paper_implied_length,
    )

    assert abs(paper_implied_length(64, 0.01) - PAPER_KAPPA * np.log(64) / np.log(100)) < 1e-12
    assert abs(paper_implied_length(64, 0.01) - 2.19) < 0.01  # the issue's ≈ 2.2 layers
    with pytest.raises(ValueError, match="eps=1"):
        paper_implied_length(64, 1)
    assert length_statement(-0.004, 0.005) == "no decay or growth seen: |ℓ| > 200 layers at 95%"
    assert length_statement(0.01, 0.02).startswith("ℓ in [50, 100] layers")
    assert length_statement(-0.02, -0.01).startswith("growth towards the input")
    cmp = compare_with_paper(64, 0.01, 0.02)
    assert set(cmp) == {0.1, 0.01, 0.001} and not any(ok for _, ok in cmp.values())
    assert compare_with_paper(64, 0.2, 0.3)[0.1][1]  # 1/4.39 = 0.228 inside


def test_power_law_test_accepts_the_papers_scaling_and_rejects_growth_or_a_wrong_exponent():
    from depthdelusion.analysis.science.persistence import power_law_test

    W = np.array([16, 32, 64, 128, 256])
    noise = np.array([-0.002, 0.0, 0.002])  # three seeds per width, seed SD 0.002
    ok = power_law_test(W, [0.5 * w ** -0.44 + noise for w in W])
    assert ok.consistent and abs(ok.k - 0.5) < 1e-9 and ok.f < 1e-9 and "— consistent" in ok.summary()
    steep = power_law_test(W, [0.5 * w ** -1.0 + noise for w in W])
    assert not steep.consistent and steep.pvalue < 0.05 and "do not scale" in steep.summary()
    growth = power_law_test(W, [-0.5 * w ** -0.44 + noise for w in W])
    assert not growth.consistent and "not a decay" in growth.summary()
    with pytest.raises(ValueError, match="2 or more widths"):
        power_law_test([64, 64], [[0.1, 0.11], [0.1, 0.12]])
    with pytest.raises(ValueError, match="at least 2 seeds"):
        power_law_test([16, 64], [[0.1], [0.1, 0.12]])


def test_power_law_test_rejects_a_true_law_at_its_nominal_rate_with_3_seeds():
    """The old χ² took the 3-seed SEs as known and rejected a true W^−0.44 law far above 5%."""
    from depthdelusion.analysis.science.persistence import power_law_test

    rng = np.random.default_rng(5)
    W = np.array([16, 32, 64, 128, 256])
    p = [power_law_test(W, [0.3 * w ** -0.44 + rng.normal(0, 0.01, 3) for w in W]).pvalue
         for _ in range(1000)]
    assert abs(np.mean(np.array(p) < 0.05) - 0.05) < 0.025  # 1000 draws: binomial SE 0.007


def test_primary_fit_leaves_out_the_bottom_block_and_block_ratios_show_it(run_factory, tmp_path):
    """A profile that decays inside the stack but whose bottom block is 4× its neighbour: the
    all-block fit calls it growth, the primary fit (blocks 1 … D−1) decay."""
    import json

    from depthdelusion.analysis.science.persistence import block_ratios

    run_factory("d8", 8, 64, 3.0, ell=20.0, noise=0.001, steps=tuple(range(800, 1001, 25)))
    metrics = tmp_path / "runs" / "d8" / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    for row in rows:
        for key in ("per_layer_grad_norm", "per_layer_act_grad_norm"):
            if key in row:
                row[key][0] = 4 * row[key][1]
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (f,) = persistence_lengths(tmp_path / "runs")
    (a,) = persistence_lengths(tmp_path / "runs", skip_bottom=0)
    assert f.status == "decay" and abs(f.length - 20) < 2 and f.skip_bottom == 1 and f.depth == 8
    assert "(8L×64, weight gradients, blocks 1–7, " in f.describe()
    assert a.status == "growth"
    profile = load_runs(tmp_path / "runs").profiles[0]
    r = block_ratios(np.stack([profile.weight[s] for s in profile.steps("weight")]))
    assert abs(r["bottom"] - 4) < 1e-6 and abs(r["top"] - np.exp(1 / 20)) < 0.01


def test_the_sweep_report_uses_the_study_rules_seeds_per_shape_and_the_papers_implied_length(tmp_path):
    from depthdelusion.analysis.report.build import write_report

    from ..conftest import write_run

    i = 0
    for w in (64, 128, 256):
        for d in (4, 8):
            for rep in range(3 if (d, w) == (8, 64) else 1):
                write_run(tmp_path / "runs", f"d{d}_w{w}_r{rep}", d, w, 3.0 - 0.05 * i, ell=40.0,
                          noise=0.005, seed=i, steps=tuple(range(800, 1001, 25)))
                i += 1
    write_report(tmp_path / "runs", tmp_path / "rep", ReportOptions(fit=FitOptions(bootstrap=0), laws=("kaplan",)), figures=False)
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "over blocks 1 … D−1" in md and "moving-block bootstrap" in md
    assert "- weight gradients per shape (1 shape(s) with ≥ 3 seeds): 1 decay, 0 flat, 0 growth." in md
    assert "- weight gradients, W = 64: the paper's κ implies ℓ = 4.39, 2.19, 1.46 layers" in md
    assert "8L (3 seeds): ℓ in [" in md and "— not consistent." in md


def test_the_gradient_profile_figure_states_the_window_it_averaged(run_factory, tmp_path):
    """Runs of 300 steps (per-layer norms every 10) end before the window around step 1000,
    so the report moves the window to the end of training; the figure's title names the
    logged steps actually averaged, not the requested step."""
    from PIL import Image

    from depthdelusion.analysis.report.plots import gradient_profiles
    from depthdelusion.analysis.report.results import persistence

    for i, (d, w) in enumerate([(4, 16), (8, 16), (4, 32), (8, 32)]):
        run_factory(f"d{d}_w{w}", d, w, 3.0 - 0.1 * i, ell=3.0, steps=tuple(range(0, 301, 10)), seed=i)
    runs = load_runs(tmp_path / "runs")
    measured = persistence(runs, 1000)
    fits = {f.name: f for f in measured.fits["weight"]}
    used = sorted({s for f in fits.values() for s in f.steps})
    assert measured.step == 300  # moved from the requested 1000, which the report passes on
    path = gradient_profiles(runs, fits, tmp_path / "g.png", step=1000)
    title = Image.open(path).text["Title"]
    assert f"steps {used[0]}–{used[-1]}" in title and (used[0], used[-1]) == (240, 300)
    assert "1000" not in title
