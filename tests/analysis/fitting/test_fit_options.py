"""`fit` and `report` options of issue 63 (items 5–7): a parameter held from the command line
(--fix), the depth penalty free in sign (--signed-penalty), the bootstrap's clusters named and
chosen (--cluster), the profile stage chosen (--profile), and the search's fallback said."""
import json

import numpy as np
import pytest

from depthdelusion.analysis import Runs, fit, get_law
from depthdelusion.analysis.fitting.clusters import cluster_labels
from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.analysis.fitting.setup import options_for_law
from depthdelusion.analysis.laws import LawInputs
from depthdelusion.cli import main

from ..conftest import params_of

BARE = dict(bootstrap=0, leave_one_out=False, diagnostics=False)


def _deeper_is_better(seed: int = 0) -> Runs:
    """35 shapes (depths 2–32 × widths 64–1024) whose loss falls by 0.02 nats per layer past
    D_crit = 2·ln W: the kink law with λ = −0.02, noise 0.003 nats."""
    rng = np.random.default_rng(seed)
    D, W = map(np.ravel, np.meshgrid([2, 4, 8, 12, 16, 24, 32], [64, 128, 256, 512, 1024]))
    N = np.array([params_of(d, w) for d, w in zip(D, W)], float)
    loss = get_law("depth_delusion")(LawInputs.of(D, W, N), A=40.0, alpha=0.2, lam=-0.02,
                                     kappa=2.0, gamma=0.0, E=1.6)
    return Runs(D, W, N, loss + 0.003 * rng.standard_normal(len(D)))


def test_a_signed_penalty_shows_deeper_is_better_where_the_bounded_law_cannot():
    runs = _deeper_is_better()
    bounded = fit(runs, "depth_delusion", profile="none", **BARE)
    signed = fit(runs, "depth_delusion", signed_penalty=True, profile="none", **BARE)
    assert bounded.params["lam"] >= 0  # λ ≥ 0 by the law's bounds: a negative effect is unseen
    lo, hi = signed.ci_jacobian["lam"]
    assert -0.025 < lo < hi < -0.015, (lo, hi)  # the planted −0.02, and 0 excluded
    assert "λ free in sign" in signed.law.formula


def test_signed_penalty_on_a_law_without_a_penalty_names_the_laws_that_have_one():
    with pytest.raises(ValueError, match=r"--signed-penalty: law 'kaplan' has no depth penalty .*"
                                         r"laws with one: .*depth_delusion"):
        fit(_deeper_is_better(), "kaplan", signed_penalty=True, profile="none", **BARE)


def _table(tmp_path, runs: Runs, name: str = "runs.csv", run_labels=None):
    head = "depth,width,params,loss" + (",run" if run_labels is not None else "")
    rows = [f"{d},{w},{n:.0f},{y:.6f}" + (f",{run_labels[i]}" if run_labels is not None else "")
            for i, (d, w, n, y) in enumerate(zip(runs.depth, runs.width, runs.params, runs.loss))]
    path = tmp_path / name
    path.write_text(head + "\n" + "\n".join(rows) + "\n")
    return path


def test_fix_holds_a_parameter_from_the_command_line(tmp_path, capsys):
    path = _table(tmp_path, _deeper_is_better())
    assert main(["fit", str(path), "--law", "depth_delusion", "--fix", "kappa=2.43", "--fix", "gamma=0",
                 "--bootstrap", "0", "--profile", "none", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["fixed"]["kappa"] == 2.43 and doc["fixed"]["gamma"] == 0.0
    assert "kappa" not in doc["params"] and "gamma" not in doc["params"]


@pytest.mark.parametrize("item, message", [
    ("kapa=2.43", r"--fix kapa=2.43: no parameter 'kapa'; parameters of law 'depth_delusion': "
                  r"A, alpha, lam, kappa, gamma, E, B, beta$"),
    ("kappa=deep", r"--fix kappa=deep: 'deep' is not a number .*; parameters of law 'depth_delusion': A, "),
    ("kappa", r"--fix kappa: expected NAME=VALUE .*; parameters of law 'depth_delusion': A, "),
])
def test_a_bad_fix_is_one_line_naming_the_flag_and_the_parameters(tmp_path, capsys, item, message):
    path = _table(tmp_path, _deeper_is_better())
    assert main(["fit", str(path), "--law", "depth_delusion", "--fix", item, "--bootstrap", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re_search(message, err), err


def re_search(pattern: str, text: str) -> bool:
    import re

    return re.search(pattern, text) is not None


def _correlated_runs(seed: int = 0):
    """20 runs (one shape each) read at 8 checkpoints: a per-run loss deviation of 0.03 nats
    shared by its checkpoints, 0.002 nats per checkpoint (intra-run correlation 0.996)."""
    rng = np.random.default_rng(seed)
    widths = np.geomspace(64, 1536, 20).round().astype(int)
    D = np.repeat(np.full(20, 8), 8)
    W = np.repeat(widths, 8)
    N = np.array([params_of(d, w) for d, w in zip(D, W)], float)
    loss = get_law("kaplan")(LawInputs.of(D, W, N), E=1.6, A=40.0, alpha=0.2)
    loss = loss + np.repeat(0.03 * rng.standard_normal(20), 8) + 0.002 * rng.standard_normal(len(D))
    return Runs(D, W, N, loss), np.repeat([f"r{i}" for i in range(20)], 8)


def test_the_default_cluster_bootstrap_resamples_whole_runs_and_is_wider_than_rows(tmp_path, capsys):
    runs, labels = _correlated_runs()
    path = _table(tmp_path, runs, run_labels=labels)
    common = ["fit", str(path), "--law", "kaplan", "--bootstrap", "100", "--profile", "none"]
    assert main([*common, "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert main([*common, "--json", "--cluster", "row"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert "cluster = run: 20 clusters, each drawn whole" in whole["bootstrap_scheme"]
    assert "cluster = row: rows drawn one by one" in rows["bootstrap_scheme"]
    width = {k: np.diff(d["ci_bootstrap"]["alpha"])[0] for k, d in (("whole", whole), ("rows", rows))}
    assert width["whole"] > 2 * width["rows"], width
    assert main(common) == 0  # and the text says it
    assert "cluster = run: 20 clusters" in capsys.readouterr().out


def test_without_a_run_column_repeated_shapes_are_the_clusters_and_unique_ones_are_rows():
    runs, _ = _correlated_runs()
    labels, name = cluster_labels(runs)
    assert name == "shape" and len(set(labels)) == 20
    assert cluster_labels(_deeper_is_better()) == (None, "row")  # the paper's case: one row a shape


def test_a_bad_cluster_column_names_it_and_the_columns_that_exist(tmp_path, capsys):
    runs, labels = _correlated_runs()
    path = _table(tmp_path, runs, run_labels=labels)
    assert main(["fit", str(path), "--law", "kaplan", "--cluster", "seed", "--bootstrap", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "--cluster: no column 'seed'" in err and "depth, width, params, loss, run" in err, err


def test_fast_profiles_match_the_grid_walk_where_the_profile_is_smooth_and_stay_open_where_it_is_flat():
    """On the paper's 30 runs, kaplan's three parameters and depth_delusion's A and α: the ends by
    root-finding agree with the grid walk's to 0.5% (the walk interpolates linearly between its
    points; root-finding solves Λ = cut to 1e-5); λ, κ and γ, which the data do not bound on
    one side, stay open."""
    for law, smooth in (("kaplan", ("E", "A", "alpha")), ("depth_delusion", ("A", "alpha"))):
        full = fit("paper", law, profile="full", **BARE)
        fast = fit("paper", law, profile="fast", **BARE)
        for name in smooth:
            assert np.allclose(fast.ci_profile[name], full.ci_profile[name], rtol=5e-3), name
    assert all(not np.isfinite(fast.ci_profile[name][1]) for name in ("kappa", "gamma"))
    assert "root-finding" in fast.profile_statistic


def test_profile_none_skips_the_stage_and_says_which_intervals_remain():
    r = fit("paper", "kaplan", profile="none", **BARE)
    assert r.ci_profile is None
    assert any("profile intervals skipped" in n and "Jacobian's and the bootstrap's" in n for n in r.notes)
    with pytest.raises(ValueError, match="profile must be 'none', 'fast', 'full'"):
        fit("paper", "kaplan", profile="quick", **BARE)


def test_fit_options_carry_the_flags_to_each_law_and_back_to_a_command_line():
    options = FitOptions(fix=["kappa=2.43"], signed_penalty=True, cluster="run", profile="fast")
    assert options.fixed_values() == {"kappa": 2.43} and options.signed_penalty and options.profile == "fast"
    kaplan = options_for_law(options, "kaplan")
    assert kaplan.fixed_values() == {} and not kaplan.signed_penalty and kaplan.profile == "fast"
    assert options_for_law(options, "depth_delusion").fixed_values() == {"kappa": 2.43}
    assert options.interval_flags() == " --fix kappa=2.43 --signed-penalty --cluster run --profile fast"
    assert FitOptions(search="multistart", starts=7).interval_flags() == " --search multistart --starts 7"
    assert FitOptions().interval_flags() == FitOptions(fix=None).interval_flags() == ""  # defaults add nothing


def test_the_search_says_why_it_left_variable_projection():
    """Chinchilla's law on runs whose data exponent (β = 0.8) lies beyond the start range
    (0.1–0.5): the variable-projection grid's best point is on its edge, so the default search
    falls back to the multi-start, and the search's description says so and why."""
    rng = np.random.default_rng(0)
    N = np.repeat(np.geomspace(1e7, 1e10, 12), 5)
    T = np.tile(np.geomspace(1e9, 1e11, 5), 12)
    loss = get_law("chinchilla")(LawInputs.of(1, 1, N, T), E=1.7, A=400.0, alpha=0.34, B=4e6, beta=0.8)
    runs = Runs(params=N, tokens=T, loss=loss + 0.002 * rng.standard_normal(len(N)))
    r = fit(runs, "chinchilla", **BARE, profile="none")
    assert r.search.startswith("multi-start")
    assert "not variable projection, this law's default search: the grid's best point lies on the edge" in r.search


def test_davies_bound_needs_a_walked_profile_and_says_so_under_fast_profiles():
    """Davies' bound sums √LR's variation along κ's profile; the few points root-finding meets
    would understate it (and p), so a fast profile gives the named chi-bar-squared instead."""
    from depthdelusion.analysis.fitting.lr_test import davies_test

    null = fit("paper", "kaplan", profile="none", **BARE)
    walked = davies_test(fit("paper", "depth_delusion", profile="full", **BARE), null, "kappa")
    rooted = davies_test(fit("paper", "depth_delusion", profile="fast", **BARE), null, "kappa")
    assert walked.method == "Davies bound"
    assert rooted.method == "chi-bar-squared" and "--profile fast: no walked path" in rooted.note


def test_report_takes_the_options_says_them_and_regenerates_with_them(tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["report", "paper", "--out", str(out), "--no-figures", "--bootstrap", "10",
                 "--profile", "none", "--fix", "kappa=2.43", "--cluster", "name"]) == 0
    text = (out / "report.md").read_text()
    assert ("Regenerate with `depthdelusion report paper --out DIR --bootstrap 10 --seed 0 --groups "
            "auto --fix kappa=2.43 --cluster name --profile none`") in text
    assert "cluster-bootstrap (whole clusters; cluster = name)" in text
    assert "(skipped: --profile none" in text and "p-values conservative" in text
    rows = (out / "parameters.csv").read_text().splitlines()
    assert not any(r.startswith("depth_delusion,kappa,") for r in rows)  # held, not fitted
    assert any(r.startswith("depth_delusion_power,c,") for r in rows)  # a law without κ: untouched
    capsys.readouterr()
    assert main(["report", "paper", "--out", str(tmp_path / "bad"), "--no-figures", "--fix", "kapa=1"]) == 2
    err = capsys.readouterr().err
    assert "--fix kapa=1: no parameter 'kapa'; parameters of laws depth_delusion, " in err


def test_fast_profiles_on_an_older_scipy_use_brentq_and_agree(monkeypatch):
    """Without scipy.optimize.elementwise (SciPy < 1.15, which pyproject still allows) the ends
    are found one at a time by brentq, to the same tolerance."""
    from depthdelusion.analysis.fitting import profile_roots

    batched = fit("paper", "kaplan", profile="fast", **BARE).ci_profile
    monkeypatch.setattr(profile_roots, "find_root", None)
    one_by_one = fit("paper", "kaplan", profile="fast", **BARE).ci_profile
    for name, ends in batched.items():
        assert np.allclose(one_by_one[name], ends, rtol=1e-4), name


@pytest.mark.parametrize("flags, message", [
    (["--column", "loss"], "--column 'loss': 'loss' is not NAME=COLUMN (e.g. --column loss=final_loss)"),
    (["--column", "loss=a", "--column", "loss=b"], "--column 'loss=b': 'loss' is already mapped to 'a'"),
])
def test_a_bad_column_mapping_is_one_error_naming_the_flag_in_every_command(tmp_path, capsys, flags, message):
    """`--column` has one reader (``options.column_mapping``): `fit`, `report` and `shape` refuse
    the same bad item with the same line, naming --column (not --columns) and NAME=COLUMN."""
    csv = tmp_path / "runs.csv"
    csv.write_text("params,loss\n1e6,3.0\n")
    for command in (["fit", str(csv)], ["report", str(csv), "--out", str(tmp_path / "r"), "--no-figures"],
                    ["shape", str(csv), "--compute", "1e21"]):
        assert main(command + flags) == 2, command
        assert message in capsys.readouterr().err, command
