"""Rollout validation (fit small, predict the next compute level) and the asymmetric loss."""
import csv

import numpy as np
import pytest

from depthdelusion.analysis.fitting.engine import fit
from depthdelusion.analysis.fitting.rollout import COLUMNS, rollout
from depthdelusion.analysis.table.load import load_runs
from depthdelusion.analysis.fitting.solver import objective
from depthdelusion.cli import main

from .test_isoflop import E, law, n_opt

LEVELS = (1e17, 3e17, 1e18, 3e18, 1e19, 3e19)


def chinchilla_rows(noise=0.005, seed=0, k=6):
    rng = np.random.default_rng(seed)
    rows = []
    for C in LEVELS:
        for N in n_opt(C) * np.geomspace(0.1, 10, k):
            D = C / (6 * N)
            rows.append({"params": N, "tokens": D, "loss": law(N, D) + rng.normal(0, noise)})
    return rows


def test_rollout_predicts_the_next_level_of_the_true_law():
    res = rollout(chinchilla_rows(), "chinchilla")
    assert [s.k for s in res.steps] == [1, 2, 3, 4, 5]
    assert res.steps[0].status.startswith("not fitted")  # 6 runs, 5 free parameters
    fitted = res.steps[1:]
    assert all(s.status == "ok" and s.n_test == 6 for s in fitted)
    assert all(s.rmse < 0.03 for s in fitted)
    assert fitted[-1].rmse < 0.012  # near the noise (0.005) once four levels are fitted


def test_rollout_exposes_a_law_that_cannot_extrapolate():
    """kaplan (no data term) on runs whose token counts matter: interpolation can look fine,
    extrapolation to the next compute level misses by far more than the chinchilla law does."""
    rows = chinchilla_rows()
    good = rollout(rows, "chinchilla").steps[-1].rmse
    bad = rollout(rows, "kaplan").steps[-1].rmse
    assert bad > 5 * good
    # extrapolating is worse than the in-sample fit of the same law to every level
    inside = fit(rows, "kaplan", bootstrap=0, profile=False, leave_one_out=False).rmse
    assert bad > 1.2 * inside


def test_fit_validate_rollout_writes_the_table(tmp_path, capsys):
    path = tmp_path / "runs.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["params", "tokens", "loss"])
        w.writeheader()
        w.writerows(chinchilla_rows())
    out = tmp_path / "val"
    assert main(["fit", str(path), "--law", "chinchilla", "--bootstrap", "0", "--validate",
                 "rollout", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Rollout validation" in text and "predict the next" in text
    with open(out / "rollout.csv") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0]) == list(COLUMNS) and len(table) == 5
    assert float(table[-1]["rmse"]) < 0.012


def test_asymmetric_objective_is_least_squares_at_weight_one():
    r = np.array([[-0.3, 0.1, 0.2]])
    w = np.ones_like(r)
    assert objective(r, w, overestimate_weight=1.0)[0] == pytest.approx(objective(r, w)[0])
    assert objective(r, w, overestimate_weight=3.0)[0] == pytest.approx(0.5 * (0.09 + 3 * 0.05))


def test_asymmetric_loss_fits_the_lower_envelope():
    """Half the runs under-tuned (loss raised by |N(0, 0.05)|): least squares fits their mean,
    the asymmetric loss the clean runs' envelope — closer to the true law, fewer runs below."""
    rng = np.random.default_rng(1)
    rows = chinchilla_rows(noise=0.002, seed=1)
    for r in rows:
        if rng.uniform() < 0.5:
            r["loss"] += abs(rng.normal(0, 0.05))
    runs = load_runs(rows)
    truth = law(runs.params, runs.tokens)
    opts = dict(bootstrap=0, profile=False, leave_one_out=False)
    ls = fit(runs, "chinchilla", "lm", **opts)
    asym = fit(runs, "chinchilla", "asymmetric", overestimate_weight=20.0, **opts)
    err_ls = np.sqrt(np.mean((ls.predict(runs) - truth) ** 2))
    err_asym = np.sqrt(np.mean((asym.predict(runs) - truth) ** 2))
    assert err_asym < 0.5 * err_ls
    below = lambda f: np.mean(runs.loss < f.predict(runs))  # noqa: E731
    assert below(asym) < below(ls) - 0.15
    assert abs(asym.params["E"] - E) < abs(ls.params["E"] - E)
    assert any("expectile" in n and "not their mean" in n for n in asym.notes)
    assert "lower envelope" in asym.summary()


def test_overestimate_weight_needs_the_asymmetric_loss(tmp_path, capsys):
    assert main(["fit", "paper", "--loss", "huber", "--overestimate-weight", "3"]) == 2
    assert "asymmetric" in capsys.readouterr().err
    with pytest.raises(ValueError, match="positive"):
        fit(chinchilla_rows(), "chinchilla", "asymmetric", overestimate_weight=-1.0, bootstrap=0)
