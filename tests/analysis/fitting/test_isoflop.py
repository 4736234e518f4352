"""isoFLOP profiles (Approach 2) on synthetic sweeps drawn from a known Chinchilla law."""
import csv
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from depthdelusion.analysis.fitting.isoflop import (
    FEW_POINTS,
    FLAT,
    OUTSIDE,
    fit_budget,
    group_budgets,
    isoflop,
)
from depthdelusion.cli import main

# Epoch AI's refit of Chinchilla (Besiroglu et al. 2024)
E, A, ALPHA, B, BETA = 1.82, 482.0, 0.3478, 2085.0, 0.3658
TRUE_A, TRUE_B = BETA / (ALPHA + BETA), ALPHA / (ALPHA + BETA)
G = (ALPHA * A / (BETA * B)) ** (1 / (ALPHA + BETA))  # N*(C) = G·(C/6)^a
BUDGETS = (1e18, 3e18, 1e19, 3e19, 1e20)


def law(N, D):
    return E + A * N ** -ALPHA + B * D ** -BETA


def n_opt(C):
    return G * (C / 6) ** TRUE_A


def sweep(offsets=None, *, half_width=1.0, k=9, noise=0.005, seed=0, budgets=BUDGETS):
    """Rows (params, tokens, loss) of an isoFLOP sweep: per budget, k sizes log-spaced over
    ±half_width decades around N*(C)·10^offset."""
    rng = np.random.default_rng(seed)
    offsets = offsets or [0.0] * len(budgets)
    rows = []
    for C, off in zip(budgets, offsets):
        for N in n_opt(C) * 10 ** (np.linspace(-half_width, half_width, k) + off):
            D = C / (6 * N)
            rows.append({"params": N, "tokens": D, "loss": law(N, D) + rng.normal(0, noise)})
    return rows


def test_exponents_recovered_within_their_intervals():
    res = isoflop(sweep(), bias=False)
    assert len(res.used) == 5 and all(not b.flags for b in res.budgets)
    assert res.a.ci[0] < TRUE_A < res.a.ci[1]
    assert res.b.ci[0] < TRUE_B < res.b.ci[1]
    assert res.a.ci[1] - res.a.ci[0] < 0.05  # an informative interval, not a vacuous one
    # (a budget's vertex interval is for the parabola's vertex: over ±1 decade the loss is not
    # a parabola in ln N, so it need not cover N*(C); its coverage is tested on parabolas below)


def test_fieller_interval_covers_the_vertex_at_its_level():
    """A parabola in ln N with Gaussian noise: the 95% Fieller interval covers the true vertex
    in about 95% of 400 draws (binomial 99.9% band: 0.91–0.98)."""
    rng = np.random.default_rng(3)
    x = np.linspace(-1.5, 1.5, 7)
    N = np.exp(19.0 + x)
    hits = 0
    for _ in range(400):
        loss = 3.0 + 0.05 * (x - 0.3) ** 2 + rng.normal(0, 0.01, len(x))
        b = fit_budget(N, loss, 1e19, np.arange(len(x)))
        hits += b.n_opt_ci[0] < np.exp(19.3) < b.n_opt_ci[1]
    assert 0.91 <= hits / 400 <= 0.98


def test_off_centre_and_sparse_budgets_are_flagged_and_left_out():
    rows = sweep(offsets=[0, 0, -1.6, 0, 0], half_width=0.5)  # budget 3: every N far below N*
    C = BUDGETS[-1] * 3
    rows += [{"params": N, "tokens": C / (6 * N), "loss": law(N, C / (6 * N))} for N in (1e9, 2e9)]
    res = isoflop(rows, bias=False)
    flags = {round(np.log10(b.compute), 2): b.flags for b in res.budgets}
    assert flags[round(np.log10(1e19), 2)] == [OUTSIDE]
    assert FEW_POINTS in flags[round(np.log10(3e20), 2)]
    assert len(res.used) == 4 and abs(res.a.value - TRUE_A) < 0.02
    forced = isoflop(rows, bias=False, include_flagged=True)
    assert len(forced.used) == 5  # the sparse budget has no parabola: never used
    # the extrapolated vertex is far off the line: with it the interval is > 10× wider
    assert np.ptp(forced.a.ci) > 10 * np.ptp(res.a.ci)


def test_budgets_grouped_by_relative_tolerance():
    C = np.array([1e18, 1.01e18, 0.995e18 * 1.01, 3e18, 3.05e18])
    assert [len(g) for g in group_budgets(C, 0.05)] == [3, 2]
    assert len(group_budgets(C, 0.001)) == 5
    with pytest.raises(ValueError, match="tolerance"):
        group_budgets(C, -0.1)


def test_bias_near_zero_on_a_centred_grid_and_clear_on_a_skewed_one():
    centred = isoflop(sweep(), bias=True, replicates=8)
    assert abs(centred.bias["a"]) < 0.005
    assert centred.bias["a"] == pytest.approx(-centred.bias["b"], abs=1e-9)
    # fresh noise per replicate, seeded: the replicates differ, a seed repeats them exactly
    assert centred.bias["a_mc_se"] > 1e-4 and centred.bias["replicates"] == 8
    assert isoflop(sweep(), bias=True, replicates=8).bias == centred.bias
    assert isoflop(sweep(), bias=True, replicates=8, seed=1).bias["a"] != centred.bias["a"]
    # off-centre by an amount that grows with C: the parabola's vertex shifts with the skew
    skewed = isoflop(sweep(offsets=[-0.6, -0.3, 0.0, 0.3, 0.6]), bias=True, replicates=8)
    assert skewed.bias["a"] > 0.015
    assert skewed.bias["a"] > 5 * skewed.bias["a_mc_se"]
    assert abs(skewed.bias["law_a"]["value"] - TRUE_A) < 0.01


def _csv(path, rows):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return str(path)


def test_cli_json_shape_compute_column_and_by(tmp_path, capsys):
    rows = []
    for arch, seed in (("wide", 0), ("deep", 1)):
        for r in sweep(seed=seed, k=7):
            rows.append({"N": f"{r['params']:.6g}", "loss": f"{r['loss']:.5f}", "arch": arch,
                         "flops": f"{6 * r['params'] * r['tokens'] * 1.004:.6g}"})
    path = _csv(tmp_path / "iso.csv", rows)
    assert main(["isoflop", path, "--json", "--replicates", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["a"]) >= {"value", "ci"} and set(doc["b"]) >= {"value", "ci"}
    assert {"a", "b"} <= set(doc["bias"])
    assert len(doc["budgets"]) == 5
    assert set(doc["budgets"][0]) >= {"compute", "points", "n_opt", "d_opt", "loss_opt", "flags"}
    assert doc["budgets"][0]["points"] == 14 and "column" in doc["compute"]
    assert main(["isoflop", path, "--json", "--no-bias", "--by", "arch", "--out",
                 str(tmp_path / "fig")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(doc["groups"]) == ["deep", "wide"]
    assert all("bias" not in g and g["a"]["ci"][0] < TRUE_A < g["a"]["ci"][1]
               for g in doc["groups"].values())
    assert (tmp_path / "fig" / "isoflop_deep.png").stat().st_size > 10_000
    assert doc["groups"]["deep"]["rows"] == {"read": 70, "kept": 35, "by": "arch", "value": "deep"}
    assert main(["isoflop", path, "--no-bias", "--where", "arch == wide"]) == 0
    assert "(kept 35 of 70 rows: arch == wide)" in capsys.readouterr().out


def test_by_reports_the_usable_groups_and_names_the_one_that_is_not(tmp_path, capsys):
    rows = [{"N": f"{r['params']:.6g}", "loss": f"{r['loss']:.5f}", "arch": "wide",
             "flops": f"{6 * r['params'] * r['tokens']:.6g}"} for r in sweep(seed=0, k=7)]
    rows += [{"N": "1e8", "loss": "3.0", "arch": "one", "flops": "6e17"},  # one budget, one point
             {"N": "2e8", "loss": "2.9", "arch": "one", "flops": "6e17"}]
    path = _csv(tmp_path / "iso.csv", rows)
    assert main(["isoflop", path, "--json", "--no-bias", "--by", "arch"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert list(doc["groups"]) == ["wide"] and list(doc["not_fitted"]) == ["one"]
    assert "budget" in doc["not_fitted"]["one"] and "arch = one not fitted" in captured.err
    assert main(["isoflop", path, "--no-bias", "--by", "arch", "--where", "arch == one"]) == 2
    assert "no value of arch has a usable isoFLOP sweep" in capsys.readouterr().err


def test_cli_error_without_compute_or_tokens(tmp_path, capsys):
    path = _csv(tmp_path / "t.csv", [{"params": 1e8, "loss": 3.0}, {"params": 2e8, "loss": 2.9}])
    assert main(["isoflop", path]) == 2
    err = capsys.readouterr().err
    assert "compute column" in err and "C = 6·N·D" in err


def test_disagreement_with_the_parametric_fit_is_said():
    """Grids 0.2 to 0.8 decades above N*, little noise: Approach 2's a is off by its bias
    (about +0.047) while the Chinchilla fit's interval is narrow, so the two do not overlap and
    the output says so; centred, they agree."""
    skewed = isoflop(sweep(offsets=[0.2, 0.35, 0.5, 0.65, 0.8], noise=0.0005), bias=True,
                     replicates=4)
    assert skewed.bias["a"] > 0.03
    assert skewed.bias["disagree"] and "disagree beyond their 95% intervals" in skewed.summary()
    centred = isoflop(sweep(noise=0.0005), bias=True, replicates=4)
    assert not centred.bias["disagree"] and "agree within" in centred.summary()


def test_bias_from_a_huber_fit_simulates_on_log_loss():
    res = isoflop(sweep(), bias=True, method="huber", replicates=4)
    assert res.bias["fit_method"] == "huber" and "on ln loss" in res.summary()
    assert abs(res.bias["a"]) < 0.005 and abs(res.bias["law_a"]["value"] - TRUE_A) < 0.01


def test_too_few_usable_budgets_are_refused_saying_what_approach_2_needs():
    with pytest.raises(ValueError, match=r"1 budget: 1 usable.*needs at least 2 compute budgets"):
        isoflop(sweep(budgets=(1e19,)), bias=True)


def test_cli_refuses_a_table_that_is_not_an_isofLOP_sweep(tmp_path, capsys):
    """Every run at its own compute (a Chinchilla-style grid of N × D): no budget has 3 sizes,
    so there is no exponent to report: exit 2 and what Approach 2 needs, not a = nan."""
    rows = [{"params": N, "tokens": D, "loss": law(N, D)}
            for N in (1e8, 3.3e8, 1.1e9) for D in (2e9, 4.5e9, 1e10)]
    assert main(["isoflop", _csv(tmp_path / "grid.csv", rows)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "grid.csv" in err and "nan" not in err
    assert "9 budgets: 0 usable, 9 with fewer than 3 sizes" in err and "at least 3 distinct sizes" in err


# A budget of the (Mis)Fitting Scaling Laws sweep (Li et al., ICLR 2025; its 9 sizes at 1.1e18
# FLOPs) with the losses of one of the bias diagnostic's simulations, on which it crashed: they
# rise almost linearly in ln N, so the parabola's curvature is 8e-5 and its vertex lies 770
# e-folds below the sampled N.
FLAT_X = np.log([7.68e7, 9.39e7, 1.137e8, 1.424e8, 1.766e8, 2.959e8, 4.188e8, 5.224e8, 1.183e9])
FLAT_LOSS = np.array([3.2014, 3.2867, 3.3128, 3.4217, 3.3225, 3.4574, 3.4006, 3.4766, 3.6213])


@pytest.mark.parametrize("sign", [1, -1])
def test_a_parabola_too_flat_for_a_vertex_is_flagged_never_an_optimum(sign):
    """Curvature 1e-6 against slope ±0.1 puts the vertex about 5·10⁴ e-folds beyond the grid,
    beyond any float N (below: exp underflows to 0; above: it overflows): no N*, no D*, and the
    budget is never used, not even with include_flagged."""
    x = np.linspace(-1.0, 1.0, 5)
    b = fit_budget(np.exp(19.0 + x), 3.0 + sign * 0.1 * x + 1e-6 * x * x, 1e18, np.arange(5))
    assert b.flags == [FLAT] and np.isnan(b.n_opt) and np.isnan(b.d_opt)
    real = fit_budget(np.exp(FLAT_X), FLAT_LOSS, 1.1e18, np.arange(9))
    assert real.flags == [FLAT] and np.isnan(real.n_opt)


def misfitting_shaped(seed=0):
    """Rows shaped like the (Mis)Fitting sweep: few sizes per budget (4–5) on a grid not
    centred on N*, and one budget whose losses are that sweep's nearly linear ones."""
    rows = sweep(offsets=[0.3, 0.1, 0.0, -0.1, -0.3], half_width=0.4, k=5, noise=0.01, seed=seed)
    C = 1.1e18
    rows += [{"params": float(N), "tokens": C / (6 * N), "loss": float(loss)}
             for N, loss in zip(np.exp(FLAT_X), FLAT_LOSS)]
    return rows


def test_a_sweep_with_a_flat_budget_is_fitted_with_the_budget_flagged_and_counted(tmp_path):
    res = isoflop(misfitting_shaped(), bias=True, replicates=20)
    flat = [b for b in res.budgets if FLAT in b.flags]
    assert len(flat) == 1 and not flat[0].used and flat[0].to_dict()["n_opt"] is None
    assert np.isfinite(res.a.value) and len(res.used) >= 2
    assert res.bias is not None and "flat_parabola" in res.summary()
    # a vertex interval open on both sides in ln N prints as such: not "[0, inf]" or "[0.0, None]"
    open_both = [b for b in res.budgets if b.n_opt_ci == (0.0, math.inf)]
    assert open_both and "[0, unbounded]" in res.summary()
    assert not re.search(r"\binf\b|None|nan", res.summary())
    assert main(["isoflop", _csv(tmp_path / "t.csv", misfitting_shaped()), "--replicates", "4"]) == 0


MISFITTING = Path("/work/shared/reference/published/derived/isoflops/misfitting_fineweb_c4.csv")


@pytest.mark.skipif(not MISFITTING.exists(), reason="the published (Mis)Fitting table is not here")
def test_the_misfitting_sweep_runs_with_its_bias(capsys):
    """The published table that crashed the bias diagnostic (176 rows, budgets of 3–10 points):
    it runs to the end, and a simulation's flat budget is counted, not used."""
    assert main(["isoflop", str(MISFITTING), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["a"]["value"] == pytest.approx(0.497, abs=0.01) and doc["bias"]["a"] is not None
    assert doc["bias"]["replicates_short"] >= 1


def test_cli_warns_of_an_unread_column_that_looks_misspelled(tmp_path, capsys):
    rows = [dict(r, loss_sterr=0.01) for r in sweep(k=5)]
    assert main(["isoflop", _csv(tmp_path / "t.csv", rows), "--no-bias"]) == 0
    err = capsys.readouterr().err
    assert "warning: " in err and "column 'loss_sterr' is not read: did you mean 'loss_stderr'" in err


def test_runs_at_compute_values_of_their_own_are_not_an_isoflop_sweep(tmp_path, capsys):
    """Two budgets with 5 sizes each, and 6 runs each at a compute of its own (as in a grid of
    sizes × token counts, where a few budgets hold 3 sizes by coincidence): 2 of 8 budgets have
    3 sizes, so there is no sweep to read an exponent from: refused, exit 2, one line."""
    rows = sweep(budgets=(1e18, 1e19), k=5)
    rows += [{"params": N, "tokens": C / (6 * N), "loss": law(N, C / (6 * N))}
             for N, C in zip((1e8, 2e8, 4e8, 8e8, 1.6e9, 3.2e9), (3e18, 3e19, 3e20, 1e21, 3e21, 1e22))]
    with pytest.raises(ValueError, match=r"not an isoFLOP sweep: of its 8 compute budgets .* 2 have 3 or "
                                         r"more distinct sizes N \(10 of 16 runs\)"):
        isoflop(rows)
    assert main(["isoflop", _csv(tmp_path / "grid.csv", rows), "--no-bias"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "grid.csv: not an isoFLOP sweep" in err and "depthdelusion fit" in err


def test_pooled_datasets_are_said_as_fit_says_them(tmp_path, capsys):
    """Two datasets' sweeps in one table, one 0.05 nats above the other: pooled, the parabolas'
    residuals differ by dataset, and the summary, the JSON and the CLI say so as `fit` does;
    one dataset alone says nothing."""
    rows = [dict(r, dataset=name, loss=r["loss"] + shift)
            for name, shift in (("web", 0.0), ("code", 0.05)) for r in sweep(k=7)]
    res = isoflop(rows)
    (pooled,) = res.pooled_groups
    assert pooled["column"] == "dataset" and pooled["differ"]
    assert "! pooled groups: column 'dataset' holds 2 values" in res.summary()
    assert res.to_dict()["pooled_groups"][0]["column"] == "dataset"
    assert isoflop(rows, where="dataset == web").pooled_groups == []
    assert main(["isoflop", _csv(tmp_path / "two.csv", rows), "--no-bias"]) == 0
    assert "pooled groups: column 'dataset'" in capsys.readouterr().out
