"""Outlying and influential rows named, the refit without them, and groups never pooled in
silence: synthetic tables with known contaminated rows and a hidden group."""
import json

import numpy as np
import pytest

from depthdelusion.analysis import Runs, fit
from depthdelusion.analysis.fitting.diagnostics import robust_z
from depthdelusion.analysis.fitting.outlier_rows import without_outliers
from depthdelusion.cli import main

# Epoch AI's refit of Chinchilla (Besiroglu et al. 2024): the truth of the synthetic tables.
E, A, ALPHA, B, BETA = 1.82, 482.0, 0.3478, 2085.0, 0.3658
BARE = dict(bootstrap=0, profile=False, leave_one_out=False)
BAD = [3, 17, 29]  # rows pushed up by 0.4 nats (a diverged run, a digitising slip)


def table(n=90, seed=0, noise=0.01, bad=(), shift=0.4, group_gap=0.0):
    rng = np.random.default_rng(seed)
    N = np.exp(rng.uniform(np.log(1e7), np.log(1e10), n))
    T = np.exp(rng.uniform(np.log(1e8), np.log(1e11), n))
    dataset = np.array(["web", "code", "books"])[np.arange(n) % 3]
    loss = E + A * N ** -ALPHA + B * T ** -BETA + noise * rng.standard_normal(n)
    loss = loss + np.where(dataset == "code", group_gap, 0.0)
    loss[list(bad)] += shift
    names = [f"r{i}" for i in range(n)]
    return Runs(params=N, tokens=T, loss=loss, name=names, extra={"dataset": dataset})


def test_contaminated_rows_are_named_and_the_refit_without_them_recovers_the_truth():
    runs = table(bad=BAD)
    r = fit(runs, "chinchilla", **BARE, diagnostics=True)
    d = r.diagnostics
    assert sorted(d.outlier_rows) == BAD and sorted(d.outliers) == sorted(f"r{i} (row {i + 1})" for i in BAD)
    assert np.all(np.abs(np.delete(d.robust_z, BAD)) < 4)
    np.testing.assert_allclose(d.residual, runs.loss - r.predicted)
    # the fit keeps every row; the refit without the outliers is near the truth, the fit is not
    assert r.n == 90 and d.without_outliers["n"] == 87
    clean = d.without_outliers["params"]
    assert abs(clean["E"] - E) < 0.02 and abs(clean["alpha"] - ALPHA) < 0.01
    assert abs(clean["beta"] - BETA) < 0.01
    assert abs(r.params["E"] - E) > 0.05  # the contamination did move the full fit
    # the warm-started refit is the optimum a full multi-start fit finds on the other rows
    cold = fit(runs.subset(~np.isin(np.arange(90), BAD)), "chinchilla", **BARE)
    for nm, v in cold.params.items():
        assert clean[nm] == pytest.approx(v, rel=1e-4)
    assert d.moved.startswith("Without the 3 outlying rows: E 1.886 → 1.828 (-1.3 s.e.)")
    out = json.loads(r.to_json())
    assert sorted(out["outliers"]) == sorted(d.outliers) and out["without_outliers"]["n"] == 87
    assert set(out["without_outliers"]["params"]) == {"E", "A", "alpha", "B", "beta"}
    assert list(out["diagnostics"]["robust_z"]) == [f"{nm} (row {i + 1})" for i, nm in enumerate(runs.name)]
    summary = r.summary()
    assert "Outlying rows (|robust z| > 4; z = residual / (1.4826·MAD)" in summary
    assert "Without the 3 outlying rows:" in summary


def test_a_clean_table_has_no_outliers_and_says_so():
    r = fit(table(), "chinchilla", **BARE, diagnostics=True)
    assert r.diagnostics.outliers == [] and r.diagnostics.without_outliers is None
    assert "Outlying rows (|robust z| > 4; z = residual / (1.4826·MAD) of the loss residuals " \
           "(nats) of a Huber refit (δ = 1.345·σ̂ = " in r.summary()
    assert "that outlying rows cannot pull): none" in r.summary()


def test_leverage_and_cooks_distance_are_the_linearised_leave_one_out():
    runs = table(n=40, seed=3)
    r = fit(runs, "chinchilla", **BARE, diagnostics=True)
    d = r.diagnostics
    assert d.leverage.sum() == pytest.approx(5.0, abs=1e-6)  # trace of the hat matrix = rank
    assert np.all((d.leverage > 0) & (d.leverage < 1))
    # Cook's distance against the actual refit without the row, for the most and least
    # influential rows: Σ (ŷ − ŷ₍ᵢ₎)² / (p s²)
    s2 = r.rss / (r.n - 5)
    for i in (int(np.argmax(d.cooks_distance)), int(np.argmin(d.cooks_distance))):
        keep = np.arange(len(runs)) != i
        r_i = fit(runs.subset(keep), "chinchilla", **BARE)
        exact = float(np.sum((r.predicted - r_i.predict(runs)) ** 2) / (5 * s2))
        assert d.cooks_distance[i] == pytest.approx(exact, rel=0.25, abs=1e-4)


def test_huber_judges_log_residuals_and_the_threshold_is_an_option():
    runs = table(bad=BAD)
    r = fit(runs, "chinchilla", "huber", **BARE, diagnostics=True, outlier_threshold=5)
    assert sorted(r.diagnostics.outlier_rows) == BAD  # r42 has z 4.1
    assert "log-loss residuals" in r.summary()
    strict = fit(runs, "chinchilla", **BARE, diagnostics=True, outlier_threshold=1e6)
    assert strict.diagnostics.outliers == []
    with pytest.raises(ValueError, match="outlier threshold must be a positive robust z"):
        fit(runs, "chinchilla", **BARE, diagnostics=True, outlier_threshold=0)


def contaminated(law, seed, shift=0.3, n=240, noise=0.01):
    """(runs, names of the shifted rows): ``n`` rows drawn from ``law`` with N(0, noise²) noise,
    the 8 smallest models pushed up by ``shift`` nats — where a least-squares fit bends most
    toward them (a slightly better fit of 8 rows bought with a worse fit of the rest)."""
    if law == "kaplan":
        from .test_fit_engine import kaplan_runs

        runs = kaplan_runs(np.geomspace(1e7, 1e10, n), noise=noise, seed=seed)
    else:
        runs = table(n=n, seed=seed, noise=noise)
    bad = np.argsort(runs.params, kind="stable")[:8]
    runs.loss[bad] += shift
    return runs, {str(runs.name[i]) for i in bad}


@pytest.mark.parametrize("law", ["kaplan", "chinchilla"])
def test_outliers_are_judged_from_a_fit_they_cannot_pull(law):
    # 240 rows, noise 0.01 nats, 8 rows + 0.3; four seeds, so that no lucky draw passes. The
    # tolerance (issue 48): at least 7 of the 8 found and at most 3 clean rows named; on the
    # same table without the shift at most 2. A least-squares fit bent by the 8 blamed 1–10
    # clean rows on these tables.
    for seed in range(4):
        runs, bad = contaminated(law, seed)
        d = fit(runs, law, **BARE, diagnostics=True).diagnostics
        found = {d.names[i] for i in d.outlier_rows}
        assert len(found & bad) >= 7 and len(found - bad) <= 3, (seed, sorted(found - bad))
        assert d.judged_by.startswith("a Huber refit (δ = 1.345·σ̂ = ")
        clean, _ = contaminated(law, seed, shift=0.0)
        assert len(fit(clean, law, **BARE, diagnostics=True).diagnostics.outliers) <= 2, seed


def test_drop_outliers_leaves_out_exactly_the_rows_the_summary_names(tmp_path, capsys):
    runs, bad = contaminated("chinchilla", 0)
    path = write(tmp_path / "t.csv", runs)
    assert main(["fit", str(path), "--bootstrap", "20", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    named = res["outliers"]
    assert res["diagnostics"]["judged_by"].startswith("a Huber refit (δ = 1.345·σ̂")
    bad = {f"run{int(nm[1:]) + 1} (row {int(nm[1:]) + 1})" for nm in bad}  # CSV rows: run1, ...
    assert set(named) == bad
    assert main(["fit", str(path), "--bootstrap", "0", "--drop-outliers", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert sorted(res["rows"]["dropped"]) == sorted(named) and res["n"] == 232


def test_the_bare_fit_computes_no_diagnostics_unless_asked():
    runs = table()
    assert fit(runs, "chinchilla", **BARE).diagnostics is None
    assert fit(runs, "chinchilla", bootstrap=0, profile=False, leave_one_out="hat").diagnostics is not None


def test_robust_z_ignores_the_wild_row_it_judges():
    e = np.array([-1.0, 0.0, 1.0, -1.0, 1.0, 100.0])
    z, scale = robust_z(e)
    assert scale == pytest.approx(1.4826 * 1.0)
    assert z[-1] == pytest.approx(100 / 1.4826)
    assert robust_z(np.zeros(4))[0].tolist() == [0, 0, 0, 0]


def test_a_hidden_group_is_flagged_with_a_test_and_a_homogeneous_one_is_not():
    r = fit(table(group_gap=0.1), "chinchilla", **BARE)
    (pooled,) = r.pooled_groups
    assert pooled["column"] == "dataset" and pooled["differ"] and pooled["p"] < 1e-6
    assert pooled["values"]["code"]["median_residual"] > 0.04
    flag = next(f for f in r.flags if f.startswith("pooled groups"))
    assert "column 'dataset' holds 3 values fitted as one law" in flag
    assert "the residuals differ between them beyond noise (Kruskal–Wallis" in flag
    assert "--by dataset" in flag
    calm = fit(table(), "chinchilla", **BARE)
    (pooled,) = calm.pooled_groups
    assert not pooled["differ"] and pooled["p"] > 0.01
    assert "do not differ between them beyond noise" in " ".join(calm.flags)
    # the group column fitted with one offset per group is not pooled
    runs = table(group_gap=0.1)
    runs.group = runs.extra["dataset"]
    offsets = fit(runs, "chinchilla", **BARE, group_offsets=True)
    assert [p["column"] for p in offsets.pooled_groups] == ["dataset"]  # the extra column still is
    assert fit(runs.where_group("code"), "chinchilla", **BARE).pooled_groups == []


def test_without_outliers_drops_them_and_says_so():
    kept = without_outliers(table(bad=BAD), "chinchilla")
    assert len(kept) == 87 and not set(kept.name) & {f"r{i}" for i in BAD}
    assert kept.selection["dropped"] == [f"r{i} (row {i + 1})" for i in sorted(BAD)]
    assert any(n.startswith("--drop-outliers: 3 row(s) with |robust z| > 4") for n in kept.notes)


def write(path, runs, with_dataset=True):
    header = "C,N,D,L" + (",dataset" if with_dataset else "")
    lines = [header] + [f"{float(6 * n * t)!r},{float(n)!r},{float(t)!r},{float(l)!r}" + (f",{g}" if with_dataset else "")
                        for n, t, l, g in zip(runs.params, runs.tokens, runs.loss, runs.extra["dataset"])]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_cli_fit_names_outliers_drops_them_on_request_and_writes_rows_and_figure(tmp_path, capsys):
    path = write(tmp_path / "t.csv", table(bad=BAD))
    out = tmp_path / "out"
    assert main(["fit", str(path), "--bootstrap", "0", "--json", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    res = json.loads(captured.out)
    assert sorted(res["outliers"]) == ["run18 (row 18)", "run30 (row 30)", "run4 (row 4)"]
    assert res["without_outliers"]["n"] == 87 and res["rows"] == {"read": 90, "kept": 90}
    assert res["column_readings"]["D"].startswith("column D read as tokens: C ≈ 6·N·D")
    assert "column D read as tokens" in captured.err.splitlines()[0]  # the line naming the law
    rows = (out / "rows.csv").read_text().splitlines()
    assert rows[0] == ("row,name,params,tokens,loss,fitted,residual,robust_z,leverage,cooks_distance,"
                       "outlier,group")
    flagged = [r.split(",")[1] for r in rows[1:] if r.split(",")[-2] == "true"]
    assert sorted(flagged) == ["run18", "run30", "run4"]
    assert {r.split(",")[-1] for r in rows[1:]} == {"web", "code", "books"}
    assert (out / "residuals.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    assert main(["fit", str(path), "--bootstrap", "0", "--drop-outliers", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n"] == 87 and res["outliers"] == []
    assert res["rows"]["dropped"] == ["run4 (row 4)", "run18 (row 18)", "run30 (row 30)"]
    assert abs(res["params"]["alpha"] - ALPHA) < 0.03


def test_cli_group_where_and_by_share_one_meaning(tmp_path, capsys):
    path = write(tmp_path / "t.csv", table(n=90, group_gap=0.1))
    assert main(["fit", str(path), "--bootstrap", "0", "--by", "dataset", "--json",
                 "--where", "N >= 2e7"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["by"] == "dataset" and list(res["groups"]) == ["books", "code", "web"]
    for value, g in res["groups"].items():
        assert g["rows"]["by"] == "dataset" and g["rows"]["value"] == value
        assert g["rows"]["where"] == "N >= 2e7" and g["rows"]["read"] == 90
        assert g["pooled_groups"] == []  # one dataset per fit: nothing pooled
    code = res["groups"]["code"]
    assert code["params"]["E"] == pytest.approx(E + 0.1, abs=0.06)
    assert main(["fit", str(path), "--bootstrap", "0", "--where", "dataset == code and N >= 2e7"]) == 0
    text = capsys.readouterr().out
    assert f"{code['n']} runs (kept {code['n']} of 90 rows where dataset == code and N >= 2e7)" in text
    assert main(["fit", str(path), "--bootstrap", "0", "--where", "N >> 3"]) == 2
    assert "--where 'N >> 3'" in capsys.readouterr().err


def test_on_the_shipped_paper_table_rows_are_named_and_its_groups_are_read():
    from depthdelusion.analysis.table.load import load_reference

    # the Depth Delusion paper's 30 runs (analysis/reference/, provenance in PROVENANCE.md):
    # two token budgets in one `group` column, fitted pooled by a law without a token term
    runs = load_reference("depth_delusion")
    r = fit(runs, "kaplan", **BARE, diagnostics=True)
    d = r.diagnostics
    assert d.names == [str(n) for n in runs.name] and len(d.robust_z) == 30
    assert d.leverage.sum() == pytest.approx(r.k, abs=1e-6)  # kaplan's 3 parameters, all identified
    assert np.all(np.isfinite(d.cooks_distance))
    flagged = [f for f in r.flags if "group" in f and "pooled" in f]
    assert flagged and all(str(g) in flagged[0] for g in set(runs.group))


def test_the_movement_sentence_never_quotes_a_parameter_that_is_not_identified():
    from depthdelusion.analysis.fitting.diagnostics import movement_sentence

    before, after = {"A": 400.0, "B": 56.2}, {"A": 420.0, "B": 1.4e119}
    said = movement_sentence(before, after, {"A": 10.0, "B": 3.0}, "1 outlying row",
                             {"A": "ok", "B": "not_identified"})
    assert "A 400 → 420 (+2.0 s.e.)" in said and "B not identified" in said and "e+119" not in said
