"""Variable projection: the linear parameters solved exactly on a grid over the others, as a
named search that reaches the full nonlinear optimum, and the default search that is never
worse than the multi-start on the tables the tests use."""
import json

import numpy as np
import pytest

from depthdelusion.analysis import Runs, fit
from depthdelusion.analysis.fitting.search import SEARCH_ROWS
from depthdelusion.analysis.laws import LawInputs
from depthdelusion.analysis.fitting.problem import Problem
from depthdelusion.analysis.fitting.solver import objective
from depthdelusion.cli import main

from ..test_laws_and_fitting import synthetic_runs

BARE = dict(bootstrap=0, profile=False, leave_one_out=False)
EPOCH = dict(E=1.82, A=482.0, alpha=0.3478, B=2085.0, beta=0.3658)  # Besiroglu et al. 2024


def chinchilla_runs(n, seed=0, noise=0.02, **law):
    p = {**EPOCH, **law}
    rng = np.random.default_rng(seed)
    N, T = 10 ** rng.uniform(7, 10, n), 10 ** rng.uniform(8, 11, n)
    loss = p["E"] + p["A"] * N ** -p["alpha"] + p["B"] * T ** -p["beta"] + noise * rng.standard_normal(n)
    return Runs(params=N, tokens=T, loss=loss)


def objective_of(result, runs) -> float:
    """The fit's own objective (least squares, Huber on log-loss or asymmetric) at its optimum."""
    problem = Problem(result.law, result.fixed, LawInputs.from_runs(runs), runs.loss, result.method)
    r = problem.residuals(result.theta[None])
    return float(objective(r, np.ones_like(r), problem.huber, problem.overestimate_weight)[0])


def test_variable_projection_reaches_the_full_nonlinear_least_squares_optimum():
    runs = chinchilla_runs(300)
    vp = fit(runs, "chinchilla", search="varpro", **BARE)
    full = fit(runs, "chinchilla", search="multistart", **BARE)  # 64 starts, every parameter free
    assert objective_of(vp, runs) <= objective_of(full, runs) * (1 + 1e-9)
    for name, value in full.params.items():
        assert vp.params[name] == pytest.approx(value, rel=1e-5), name
    assert "variable projection (E, A, B solved by NNLS for each (alpha, beta)" in vp.summary()
    assert vp.to_dict()["starts"]["search"] == vp.search and "multi-start: 64 starts" in full.search


def test_variable_projection_finds_the_global_optimum_where_one_cold_start_does_not():
    # losses from 5 to 2 nats, a weak data term: from the centre of the start ranges the
    # solver ends in another basin; the grid over (alpha, beta) sees the global one
    runs = chinchilla_runs(60, seed=1, E=1.0, A=100.0, alpha=0.2, B=100.0, beta=0.45)
    one = fit(runs, "chinchilla", search="multistart", max_starts=1, **BARE)
    vp = fit(runs, "chinchilla", search="varpro", **BARE)
    many = fit(runs, "chinchilla", search="multistart", **BARE)
    assert objective_of(one, runs) > 1.2 * objective_of(vp, runs)
    assert objective_of(vp, runs) <= objective_of(many, runs) * (1 + 1e-9)


TABLES = {
    "paper": lambda: "paper",
    "synthetic_depth_width": synthetic_runs,
    "chinchilla_300": lambda: chinchilla_runs(300),
    "chinchilla_weak_data_term": lambda: chinchilla_runs(60, seed=1, E=1.0, A=100.0, alpha=0.2, B=100.0, beta=0.45),
}


@pytest.mark.parametrize("table,law,method", [
    ("paper", "kaplan", "lm"), ("paper", "kaplan", "huber"), ("paper", "shape_quadratic", "lm"),
    ("synthetic_depth_width", "kaplan", "lm"),
    ("chinchilla_300", "chinchilla", "lm"), ("chinchilla_300", "chinchilla", "huber"),
    ("chinchilla_300", "chinchilla", "asymmetric"), ("chinchilla_weak_data_term", "chinchilla", "huber"),
])
def test_the_default_search_is_never_worse_than_the_multistart(table, law, method):
    from depthdelusion.analysis import load_runs

    runs = load_runs(TABLES[table]())
    default = fit(runs, law, method, **BARE)
    assert default.search.startswith("variable projection")
    multistart = fit(runs, law, method, search="multistart", **BARE)
    assert objective_of(default, runs) <= objective_of(multistart, runs) * (1 + 1e-9)


def test_on_a_large_table_the_subsampled_grid_is_never_worse_than_the_subsampled_multistart():
    runs = chinchilla_runs(SEARCH_ROWS + 1000, seed=3)
    default = fit(runs, "chinchilla", "huber", **BARE)
    multistart = fit(runs, "chinchilla", "huber", search="multistart", **BARE)
    assert objective_of(default, runs) <= objective_of(multistart, runs) * (1 + 1e-9)


def test_refits_start_from_the_optimum_where_one_basin_was_found_and_give_the_same_intervals():
    runs = chinchilla_runs(200, seed=2)
    warm = fit(runs, "chinchilla", bootstrap=50, leave_one_out=False)
    cold = fit(runs, "chinchilla", bootstrap=50, leave_one_out=False, search="multistart")
    assert "Gauss–Newton step off the full fit" in warm.bootstrap_scheme and "best starts" in cold.bootstrap_scheme
    for name in warm.params:  # the staged, warm profile walk finds the same interval ends
        assert warm.ci_profile[name] == pytest.approx(cold.ci_profile[name], rel=1e-4), name
        assert warm.ci_bootstrap[name] == pytest.approx(cold.ci_bootstrap[name], rel=1e-3), name


def test_the_cli_selects_the_search(tmp_path, capsys):
    runs = chinchilla_runs(80)
    csv = tmp_path / "runs.csv"
    csv.write_text("params,tokens,loss\n" + "".join(f"{n:.17g},{t:.17g},{l:.17g}\n" for n, t, l in
                                                      zip(runs.params, runs.tokens, runs.loss)))
    for flag, start in (("varpro", "variable projection"), ("multistart", "multi-start")):
        # no profile: the search that found the optimum is checked, not the intervals
        assert main(["fit", str(csv), "--law", "chinchilla", "--bootstrap", "0", "--profile", "none", "--json",
                     "--search", flag]) == 0
        assert json.loads(capsys.readouterr().out)["starts"]["search"].startswith(start)
    assert main(["fit", str(csv), "--law", "chinchilla", "--bootstrap", "0", "--profile", "none", "--json",
                 "--starts", "8"]) == 0
    assert json.loads(capsys.readouterr().out)["starts"]["n_starts"] == 8  # --starts: the multi-start


def test_a_grid_minimum_on_the_grid_edge_falls_back_to_the_multistart():
    # beta = 0.6 lies beyond beta's start range [0.1, 0.5] and the A term is thousands of nats:
    # the grid's best point is on its edge, and polishing it ended in another basin (0.75 vs
    # 0.006); the default search then takes the multi-start
    runs = chinchilla_runs(100, noise=0.01, E=1.8, A=3e4, alpha=0.08, B=3e4, beta=0.6)
    default = fit(runs, "chinchilla", **BARE)
    multistart = fit(runs, "chinchilla", search="multistart", **BARE)
    assert default.search.startswith("multi-start")
    assert objective_of(default, runs) <= objective_of(multistart, runs) * (1 + 1e-9)
