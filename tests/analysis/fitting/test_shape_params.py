"""`shape --params` (issue 62): the parameter-count convention of the pooled shape fit. Under
total or Kaplan's non-embedding N, ε in N = N_nonemb + ε·N_emb is held (1, 0) in every fit and
refit, not profiled, and the text and JSON say so in their first lines; fitted ε stays the
default (the committed answers: test_shape_answer_committed.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from depthdelusion.analysis import Runs, shape_answer
from depthdelusion.analysis.fitting import shape_answer as answer_module
from depthdelusion.analysis.fitting import shape_checks, shape_pool
from depthdelusion.analysis.fitting.options import EPSILON_OF_PARAMS
from depthdelusion.analysis.report.shape_answer_text import CONVENTIONS, HELD, first_lines, summary
from depthdelusion.cli import main

from tests.analysis.fitting.test_shape_answer import BUDGET, synthetic_suites, write_csv


def two_suites(seed: int = 4) -> dict:
    """Two of the synthetic suites (N_emb = 2·V·W, V = 50,000: embeddings are most of N at the
    smaller widths), so that every held-out check has a suite to leave out."""
    suites = synthetic_suites(seed)
    return {name: suites[name] for name in ("alpha_suite", "beta_suite")}


def test_nonembedding_holds_epsilon_at_zero_in_every_fit_and_refit(monkeypatch):
    """Every fit the answer makes (the pooled fit, the bootstrap, each law's leave-one-suite-out,
    leave-runs-out and rollout refits, the leave-a-suite-out answers) is recorded as the real fit
    returns it: each has ε = 0, but the one fit line 2 compares with (the answer under total N,
    ε = 1), and ε is not profiled."""
    real, fits = shape_pool.fit_shape_law, []

    def recorded(*args, **kwargs):
        fit = real(*args, **kwargs)
        fits.append((fit, kwargs))
        return fit

    for module in (shape_pool, shape_checks, answer_module):
        monkeypatch.setattr(module, "fit_shape_law", recorded)
    a = shape_answer(two_suites(), [BUDGET], law="bowl", resamples=3, params="nonembedding")
    with_eps = [(f, kw) for f, kw in fits if f.uses_eps]
    compared = [f for f, kw in with_eps if kw.get("eps") == 1.0 and kw.get("start") is a.fit]
    assert len(compared) == 1 and compared[0].eps[0] == 1.0
    refits = [(f, kw) for f, kw in with_eps if f is not compared[0]]
    assert sum(kw.get("start") is a.fit and kw.get("weights") is not None for _, kw in refits) == 3  # bootstrap
    assert {c.law for c in a.checks} >= {"bowl", "separate", "chinchilla", "kink"}
    assert len(refits) > 40, len(refits)
    assert all(np.all(f.eps == 0.0) for f, _ in refits), sorted({float(f.eps[0]) for f, _ in refits})
    assert np.isnan(a.eps_profile).all() and np.isnan(a.eps_bootstrap).all()
    assert a.budgets[0].point == a.budgets[0].under_nonemb  # the answer is the non-embedding one


def test_the_convention_moves_the_answer_when_the_table_counts_embeddings():
    suites = two_suites()
    total = shape_answer(suites, [BUDGET], law="bowl", resamples=0, compare=False, params="total")
    nonemb = shape_answer(suites, [BUDGET], law="bowl", resamples=0, compare=False, params="nonembedding")
    assert np.all(total.fit.eps == 1.0) and np.all(nonemb.fit.eps == 0.0)
    assert total.fit.rss != nonemb.fit.rss
    assert abs(np.log(total.budgets[0].point.depth / nonemb.budgets[0].point.depth)) > 0.1



def test_without_vocabulary_matrices_in_the_count_kaplans_n_is_refused_and_a_fitted_eps_is_flagged():
    # no vocabulary column, registration or non-embedding column: N_emb would be 0, so Kaplan's
    # N would be total N under another name
    bare = {name: Runs(depth=r.depth, width=r.width, params=r.params, tokens=r.tokens, loss=r.loss, source=name)
            for name, r in two_suites().items()}
    with pytest.raises(ValueError, match=r"--params nonembedding: .* count no vocabulary matrices.*--params total"):
        shape_answer(bare, [BUDGET], law="bowl", resamples=0, compare=False, params="nonembedding")
    fitted = shape_answer(bare, [BUDGET], law="bowl", resamples=0, compare=False, params="fitted")
    third = first_lines(fitted)[2]
    assert "ε does not act on it" in third and "ε is not identified" in third, third
    # one suite with its count: ε acts there, so it is not flagged as unidentified
    mixed = {"alpha_suite": bare["alpha_suite"], "beta_suite": two_suites()["beta_suite"]}
    warned = shape_answer(mixed, [BUDGET], law="bowl", resamples=0, compare=False, params="fitted").warnings
    assert any("suite alpha_suite: no vocabulary matrices counted" in w for w in warned)
    assert not any("not identified" in w for w in warned)


def test_every_convention_has_its_words():
    assert set(CONVENTIONS) == set(EPSILON_OF_PARAMS)
    assert set(HELD) == {c for c, e in EPSILON_OF_PARAMS.items() if e is not None}


def test_the_text_and_json_name_the_held_convention_first(tmp_path, capsys):
    a = shape_answer(two_suites(), [BUDGET], law="bowl", resamples=2, compare=False, params="nonembedding")
    line2 = first_lines(a)[1]
    assert line2.startswith("N = N_nonemb + ε·N_emb with ε held at 0 (Kaplan's non-embedding N"), line2
    assert "profile likelihood" not in summary(a)
    budget_head = summary(a).split("\n\n")[1].splitlines()[0]
    assert budget_head.startswith(f"C = {BUDGET:.3g} FLOPs") and "N: ε held at 0 (Kaplan's" in budget_head
    paths = [str(write_csv(tmp_path / f"{name}.csv", runs)) for name, runs in two_suites().items()]
    assert main(["shape", "--compute", "1e19", "--law", "bowl", "--resamples", "2", "--params", "total",
                 "--json", *paths]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["first_lines"][1].startswith("N = N_nonemb + ε·N_emb with ε held at 1 (total N")
    assert out["eps"] == {"value": 1.0, "profile": [None, None], "bootstrap": [None, None],
                          "params": "total", "held": True}
    assert out["budgets"][0]["params_convention"] == "total"
    assert "ε held at 1" in out["intervals"]


def test_a_bad_convention_is_one_line_naming_params_and_the_choices(tmp_path, capsys):
    csv = write_csv(tmp_path / "alpha.csv", synthetic_suites(0)["alpha_suite"])
    with pytest.raises(SystemExit) as exit_:
        main(["shape", "--compute", "1e19", "--params", "non_embedding", str(csv)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--params" in err and "'total', 'nonembedding', 'fitted'" in err, err
    with pytest.raises(ValueError, match=r"--params.*total, nonembedding, fitted, got 'kaplan'"):
        shape_answer(synthetic_suites(0), [BUDGET], law="bowl", resamples=0, compare=False, params="kaplan")
