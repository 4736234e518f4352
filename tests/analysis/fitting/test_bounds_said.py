"""Bounds said: a parameter within tolerance of its physical bound, fitted or fixed, is in
``at_bound`` and printed as such, in the API and the CLI (issue 63, item 3). The tables: the
Chinchilla law with a depth effect of the wrong sign for a kink law (deeper past
D_crit = 2.43·ln W is *better*), so the bounded λ ≥ 0 goes to 0."""
import json

import numpy as np

from depthdelusion.analysis import Runs, fit
from depthdelusion.analysis.fitting.status import format_estimate
from depthdelusion.analysis.report.cells import value
from depthdelusion.cli import main

QUICK = dict(bootstrap=0, leave_one_out=False)


def deeper_is_better(seed=0):
    rng = np.random.default_rng(seed)
    depth = np.repeat([4, 8, 16, 32, 48], 6)
    width = np.tile([256, 512, 768, 1024, 1536, 2048], 5)
    params = 12.0 * depth * width.astype(float) ** 2
    loss = 1.8 + 480 * params ** -0.35 + 0.003 * rng.standard_normal(len(depth))
    loss -= 0.5 * np.maximum(0, depth - 2.43 * np.log(width)) * width ** -0.35
    return Runs(depth=depth, width=width, params=params, loss=loss)


def test_a_penalty_scale_gone_to_zero_with_kappa_and_gamma_fixed_is_at_its_bound():
    r = fit(deeper_is_better(), "depth_delusion", fixed={"kappa": 2.43, "gamma": 0.35}, **QUICK)
    assert r.params["lam"] < 1e-9  # the premise: the data want λ below 0
    assert r.at_bound == ["lam"] and r.status["lam"] == "at_bound"
    assert json.loads(r.to_json())["at_bound"] == ["lam"]
    lam_row = next(x for x in r.summary().splitlines() if x.startswith("lam "))
    # the bound itself, not the solver's last bits (1.6e-30 on one CPU, 0 on another)
    assert lam_row.split()[1:4] == ["at", "bound", "0"], lam_row
    assert format_estimate(r, "lam") == "at bound 0" and value(r, "lam") == "at bound 0"
    assert any(f.startswith("lam = ") and "is at its bound" in f for f in r.flags)


def test_a_parameter_fixed_on_its_bound_is_flagged_and_a_dropped_token_term_is_not():
    r = fit(deeper_is_better(), "depth_delusion", fixed={"kappa": 0.0, "gamma": 0.35}, **QUICK)
    assert "kappa" in r.at_bound and "gamma" not in r.at_bound
    assert not {"B", "beta"} & set(r.at_bound)  # fixed at 0 by the fit (no tokens), said in notes
    kappa_row = next(x for x in r.summary().splitlines() if x.startswith("kappa "))
    assert "at bound 0" in kappa_row and "(fixed)" in kappa_row
    assert "kappa = 0 (fixed) is at its bound (allowed: [0, inf])" in r.flags


def test_the_cli_says_lambda_is_at_its_bound(tmp_path, capsys):
    """κ and γ held, as in the API's test: with them free the fit also moves κ past every run, the
    penalty is dead whatever λ is, and λ is then not identified (uncertainty.at_bound), not at 0."""
    runs = deeper_is_better()
    held = ["--fix", "kappa=2.43", "--fix", "gamma=0.35"]
    path = tmp_path / "deeper.csv"
    path.write_text("depth,width,params,loss\n" + "".join(
        f"{d},{w},{float(n)!r},{float(y)!r}\n" for d, w, n, y in zip(runs.depth, runs.width, runs.params, runs.loss)))
    assert main(["fit", str(path), "--law", "depth_delusion", "--bootstrap", "0", *held, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "lam" in doc["at_bound"] and doc["status"]["lam"] == "at_bound"
    assert main(["fit", str(path), "--law", "depth_delusion", "--bootstrap", "0", *held]) == 0
    text = capsys.readouterr().out
    assert next(x for x in text.splitlines() if x.startswith("lam ")).split()[1:3] == ["at", "bound"]
    # free, κ goes past the data and takes the penalty with it: λ's value there decides nothing
    assert main(["fit", str(path), "--law", "depth_delusion", "--bootstrap", "0", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"]["lam"] == "not_identified" and "lam" not in doc["at_bound"]


def test_a_fixed_value_outside_the_allowed_range_is_refused_naming_it():
    """`--fix gamma=-1` was accepted and called "at its bound"; it is outside the range."""
    import pytest

    from depthdelusion.analysis import fit

    from ..test_laws_and_fitting import synthetic_runs

    with pytest.raises(ValueError, match=r"--fix gamma=-1: outside gamma's allowed range \[0, inf\]"):
        fit(synthetic_runs(), "depth_delusion", fixed={"gamma": -1.0}, bootstrap=0, profile=False)


def test_a_dead_scale_is_at_its_bound_only_where_its_term_revives_by_a_margin():
    """A·N^−α dead at the optimum (A at 1e-8): A "collapsed by itself" (at its bound 0) only where
    putting A back at its smallest start revives the term by ``REVIVE_MARGIN`` above the dead
    floor; where the revived term sits just above the floor, α (on the same flat direction) holds
    it down, and where α stopped decided the status (Gadre's A on Kaplan's N: at_bound under
    OpenBLAS Haswell, not identified under SkylakeX). Then A has vanished: not identified."""
    import math

    from depthdelusion.analysis.fitting import uncertainty
    from depthdelusion.analysis.fitting.problem import Problem
    from depthdelusion.analysis.law_types import LawInputs
    from depthdelusion.analysis.laws import get_law

    runs = deeper_is_better()
    law = get_law("kaplan")
    problem = Problem(law, dict(law.token_params), LawInputs.from_runs(runs), runs.loss, "lm")
    names = problem.names
    a, al, e = names.index("A"), names.index("alpha"), names.index("E")
    log_n = np.log(np.asarray(runs.params, float))
    start = math.log(problem.free[a].init[0])

    def vanished_with(alpha):
        theta = np.zeros(problem.k)
        theta[a], theta[al], theta[e] = math.log(1e-8), alpha, 1.8
        jac = uncertainty._jacobian(problem, theta)
        col = np.linalg.norm(jac, axis=0)
        dead = col < 1e-9 * col.max()
        assert dead[a]  # the premise: A's term is dead at the optimum
        floor = 1e-9 * col.max()
        revived = math.exp(start) * np.linalg.norm(np.exp(-alpha * log_n))  # ∂pred/∂ln A at A's start
        return uncertainty._vanished_by_others(problem, theta, dead, floor), revived / floor

    # α where the revived column is 10× the floor: inside the margin, A vanished (not at its bound)
    lo_alpha = next(x for x in np.arange(0.5, 20, 0.01) if 1 < vanished_with(x)[1] < 30)
    got, ratio = vanished_with(lo_alpha)
    assert 1 < ratio < uncertainty.REVIVE_MARGIN and got == ("A",), (lo_alpha, ratio, got)
    # a smaller α: the term revives by far more than the margin, A collapsed by itself
    got, ratio = vanished_with(lo_alpha - 1.0)
    assert ratio > uncertainty.REVIVE_MARGIN and got == (), (ratio, got)
