"""``shape_answer`` and ``depthdelusion shape`` (issue 58): the pooled shape fit recovers a known
bowl, its intervals cover the truth, an offset suite changes nothing, an extrapolation is said
first, and a table without depth or width is refused."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from depthdelusion.analysis import Runs, shape_answer
from depthdelusion.analysis.fitting.shape_optimum import shape_point, suite_counts
from depthdelusion.analysis.fitting.shape_checks import cluster_resample_weights
from depthdelusion.analysis.fitting.shape_pool import Pooled, PooledFit
from depthdelusion.analysis.report.shape_answer_text import check_lines, first_lines, summary, to_json
from depthdelusion.analysis.table.shape_suites import suite_from_runs
from depthdelusion.cli import main

VOCAB = 50_000
#: The known bowl: curvature q (nats per unit ln(D/W) squared) around D/W = 24/1536.
BOWL_Q, BOWL_CENTRE = 0.02, float(np.log(24 / 1536))
EPS_TRUE = 0.1
#: Per suite (E, A, α, B, β): different data, tokenizers, so different scales and exponents.
SUITE_TERMS = {"alpha_suite": (1.8, 0.5, 0.30, 0.6, 0.30), "beta_suite": (2.2, 0.4, 0.35, 0.5, 0.28),
               "gamma_suite": (2.6, 0.6, 0.25, 0.7, 0.35)}
SHAPES = [(d, w) for d in (4, 8, 16, 32, 64) for w in (256, 512, 1024, 2048)]
CHECKPOINTS = np.array([2e9, 4e9, 6e9, 8e9, 1e10])
BUDGET = 1e19  # inside the synthetic runs' compute (≈ 3e17 – 2e20 FLOPs)

PUBLISHED = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "published"
GEMSTONES = (PUBLISHED / "mcleish7/gemstone-scaling-laws/5f420478f6057b0cbb4d13405fb10ca64675bccb/"
             "wandb_dfs/wandb_df_for_fitting_hot.jsonl")


def synthetic_suites(seed: int, *, run_sd=0.01, noise_sd=0.003, bowl_q=BOWL_Q, offsets=None,
                     kink=None, relative=False) -> dict:
    """Three suites with the known bowl, their own Chinchilla terms, a random effect per run
    (shared by its checkpoints) and checkpoint noise; N_nonemb = 12·D·W², N_emb = 2·V·W.
    ``kink``: (λ, κ, γ) of the paper's penalty λ·max(0, D − κ·ln W)·W^−γ, added (``relative``:
    the excess divided by D_crit = κ·ln W)."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, (name, (E, A, alpha, B, beta)) in enumerate(SUITE_TERMS.items()):
        rows = []
        for d, w in SHAPES:
            run_effect = rng.normal(0, run_sd)
            nonemb, emb = 12.0 * d * w * w, 2.0 * VOCAB * w
            for t in CHECKPOINTS:
                n = (nonemb + EPS_TRUE * emb) / 1e9
                loss = (E + A * n ** -alpha + B * (t / 1e10) ** -beta
                        + bowl_q * (np.log(d / w) - BOWL_CENTRE) ** 2 + run_effect + rng.normal(0, noise_sd))
                if kink:
                    d_crit = kink[1] * np.log(w)
                    loss += kink[0] * max(0.0, d - d_crit) / (d_crit if relative else 1.0) * w ** -kink[2]
                rows.append((d, w, nonemb + emb, t, loss + (offsets or {}).get(name, 0.0)))
        d, w, n, t, loss = map(np.array, zip(*rows))
        out[name] = Runs(depth=d, width=w, params=n, tokens=t, loss=loss, vocab_size=np.full(len(d), VOCAB),
                         source=name)
    return out


def true_point(suites: dict, tolerance=0.01):
    """The optimum and band of the generating law on the first suite's scale."""
    E, A, alpha, B, beta = SUITE_TERMS["alpha_suite"]
    one = lambda v: np.array([float(v)])  # noqa: E731
    law = PooledFit("bowl", ("alpha_suite",), one(EPS_TRUE), one(E + BOWL_Q * BOWL_CENTRE ** 2), one(A),
                    one(alpha), one(B), one(beta), one(BOWL_Q), one(-2 * BOWL_Q * BOWL_CENTRE), 0.0, 0, 0)
    counts = suite_counts(suite_from_runs(suites["alpha_suite"], "alpha_suite"))
    return shape_point(law, 0, counts, BUDGET, tolerance)


COVERED = ("depth", "width", "band_depth_low", "band_depth_high", "band_width_low", "band_width_high")


def coverage(draws: int, resamples: int, first_seed: int = 0) -> dict:
    """Per quantity of :data:`COVERED`, the fraction of draws whose 95% interval holds the truth."""
    hits = {k: 0 for k in COVERED}
    for seed in range(first_seed, first_seed + draws):
        suites = synthetic_suites(seed)
        truth = true_point(suites)
        truth_values = dict(zip(("depth", "width", "band_depth_low", "band_depth_high",
                                 "band_width_low", "band_width_high"),
                                (truth.depth, truth.width, *truth.band_depth, *truth.band_width)))
        a = shape_answer(suites, [BUDGET], law="bowl", resamples=resamples, seed=seed, compare=False)
        ci = a.budgets[0].intervals
        for k in COVERED:
            hits[k] += ci[k][0] <= truth_values[k] <= ci[k][1]
    return {k: v / draws for k, v in hits.items()}


def test_the_known_bowl_is_recovered_and_its_intervals_cover_the_truth():
    """A CI-sized version of the 200-draw benchmark (benchmarks/RESULTS.md): 12 draws, each
    quantity covered in at least 10 (a row bootstrap, blind to the run effect, covers far less)."""
    cover = coverage(draws=12, resamples=60)
    assert all(v >= 10 / 12 for v in cover.values()), cover


def test_a_suite_shifted_by_a_constant_leaves_the_shape_answer_unchanged():
    plain = shape_answer(synthetic_suites(3), [BUDGET], law="bowl", resamples=20, compare=False)
    shifted = shape_answer(synthetic_suites(3, offsets={"beta_suite": 0.37}), [BUDGET], law="bowl",
                           resamples=20, compare=False)
    p, q = plain.budgets[0].point, shifted.budgets[0].point
    for field in ("depth", "width", "params", "loss"):
        assert getattr(q, field) == pytest.approx(getattr(p, field), rel=1e-4), field
    assert q.band_depth == pytest.approx(p.band_depth, rel=1e-6)
    assert plain.fit.E[1] + 0.37 == pytest.approx(shifted.fit.E[1], abs=1e-4)


def test_the_point_estimate_finds_the_known_optimum_and_epsilon():
    a = shape_answer(synthetic_suites(5, run_sd=0.0, noise_sd=0.0005), [BUDGET], law="bowl", resamples=0,
                     compare=False)
    truth = true_point(synthetic_suites(5))
    assert a.budgets[0].point.depth == pytest.approx(truth.depth, rel=0.03)
    assert a.budgets[0].point.width == pytest.approx(truth.width, rel=0.03)
    assert a.fit.centre() == pytest.approx(BOWL_CENTRE, abs=0.05)
    assert float(a.fit.eps[0]) == pytest.approx(EPS_TRUE, abs=0.03)


def test_auto_picks_the_bowl_when_there_is_one_and_prints_the_errors_behind_it():
    a = shape_answer(synthetic_suites(7), [BUDGET], resamples=0)
    assert a.law == "bowl", [(c.law, c.score) for c in a.checks]
    text = summary(a)
    assert "Laws by held-out prediction" in text and "<- used" in text
    assert {c.law for c in a.checks} == {"bowl", "kink", "kink_relative", "chinchilla", "separate", "shared", "inverse_depth"}
    shared = next(c for c in a.checks if c.law == "shared")
    bowl = next(c for c in a.checks if c.law == "bowl")
    assert shared.loso > 5 * bowl.loso  # losses of different suites are not comparable


PAPER_KINK = (0.01, 2.43, 0.35)  # λ, κ (the paper's), γ: 0.07 nats at 64 × 256


def test_a_known_kink_is_found_when_present_and_not_made_up_when_absent():
    with_kink = shape_answer(synthetic_suites(11, bowl_q=0.0, kink=PAPER_KINK), [BUDGET], resamples=30)
    # either form of the paper's kink (absolute or relative: at one κ they differ by 1/ln W)
    assert with_kink.law in ("kink", "kink_relative"), [(c.law, round(c.score, 3)) for c in with_kink.checks]
    fitted = with_kink.fit.shape_parameters()
    assert 1.8 <= fitted["kappa"] <= 3.2 and fitted["lambda"] > 0, fitted
    assert with_kink.shape_intervals["kappa"][0] <= PAPER_KINK[1] <= with_kink.shape_intervals["kappa"][1]
    bowl_only = shape_answer(synthetic_suites(11), [BUDGET], resamples=0)
    assert bowl_only.law == "bowl", [(c.law, round(c.score, 3)) for c in bowl_only.checks]


def test_a_budget_outside_the_data_is_said_in_the_first_line():
    a = shape_answer(synthetic_suites(1), [BUDGET, 1e23], law="bowl", resamples=0, compare=False)
    line = first_lines(a)[0]
    assert line.startswith("EXTRAPOLATION")
    assert "C = 1e+23: EXTRAPOLATION: 2.69 decades beyond" in line  # 1e23 / 2.06e20 FLOPs
    inside = shape_answer(synthetic_suites(1), [BUDGET], law="bowl", resamples=0, compare=False)
    assert first_lines(inside)[0].startswith("Inside the data")
    assert summary(a).splitlines()[0] == line


def test_the_relative_kink_is_recovered_from_data_made_with_it():
    a = shape_answer(synthetic_suites(12, bowl_q=0.0, kink=(0.2, PAPER_KINK[1], PAPER_KINK[2]), relative=True),
                     [BUDGET], law="kink_relative", resamples=20, compare=False)
    fitted = a.fit.shape_parameters()
    assert a.shape_intervals["kappa"][0] <= PAPER_KINK[1] <= a.shape_intervals["kappa"][1], (fitted, a.shape_intervals)
    assert fitted["lambda"] > 0


def test_the_extrapolation_is_measured_against_the_suite_whose_terms_give_the_answer():
    """C inside the pooled suites' compute but beyond the reference suite's is an extrapolation
    (its N and T terms split C), said first; so is an optimum deeper or larger than its runs."""
    suites = synthetic_suites(1)
    b = suites["beta_suite"]
    suites["beta_suite"] = Runs(depth=b.depth, width=b.width, params=b.params, tokens=b.tokens * 100, loss=b.loss,
                                vocab_size=b.vocab_size, source=b.source)
    a = shape_answer(suites, [1e21], law="bowl", resamples=0, compare=False)
    line = first_lines(a)[0]
    assert line.startswith("EXTRAPOLATION — C = 1e+21: EXTRAPOLATION: 0.69 decades beyond the largest compute of the runs "
                           "of suite alpha_suite (inside the pooled suites' range)"), line
    assert a.budgets[0].decades_outside_pooled == 0


def test_under_separate_the_answer_says_it_is_the_reference_suites_alone():
    a = shape_answer(synthetic_suites(2), [BUDGET], law="separate", resamples=0, compare=False)
    text = summary(a)
    assert "which suites constrain D*: only suite alpha_suite (law separate" in text
    assert set(a.budgets[0].own_suite_depth) == {"alpha_suite", "beta_suite", "gamma_suite"}
    assert "the ε of suite alpha_suite (every suite fits its own)" in first_lines(a)[1]


def test_a_suite_whose_tokens_do_not_vary_is_warned_of_in_the_third_line():
    suites = synthetic_suites(2)
    suites["gamma_suite"] = suites["gamma_suite"].subset(suites["gamma_suite"].tokens == CHECKPOINTS[-1])
    a = shape_answer(suites, [BUDGET], law="bowl", resamples=0, compare=False)
    assert "WARNING: suite gamma_suite: tokens vary by 0.00" in first_lines(a)[2]
    assert "alpha_suite" not in first_lines(a)[2].split("WARNING")[1]


def test_the_n_form_and_its_alternatives_are_in_the_second_line():
    a = shape_answer(synthetic_suites(2), [BUDGET], law="bowl", resamples=0, compare=False)
    line = first_lines(a)[1]
    assert line.startswith("N = N_nonemb + ε·N_emb with ε = 0.")
    assert "(total N)" in line and "(non-embedding N)" in line


def write_csv(path: Path, runs: Runs, columns=("depth", "width", "params", "tokens", "loss")) -> Path:
    value = lambda c: runs.extra[c] if c in runs.extra else getattr(runs, c)  # noqa: E731
    lines = [",".join(columns)] + [",".join(str(value(c)[i]) for c in columns) for i in range(len(runs))]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_table_without_depth_or_width_is_refused_naming_the_columns(tmp_path, capsys):
    runs = synthetic_suites(0)["alpha_suite"]
    csv = write_csv(tmp_path / "flat.csv", runs, ("params", "tokens", "loss"))
    assert main(["shape", "--compute", "1e19", str(csv)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "has no depth, width" in err and "flat" in err


def test_the_command_json_has_plain_keys_with_low_and_high(tmp_path, capsys):
    suites = synthetic_suites(4)
    paths = [str(write_csv(tmp_path / f"{name}.csv", runs)) for name, runs in suites.items()]
    assert main(["shape", "--compute", "1e19", "--law", "bowl", "--resamples", "10", "--json", *paths]) == 0
    out = json.loads(capsys.readouterr().out)
    budget = out["budgets"][0]
    for key in ("depth", "width", "params", "tokens", "loss"):
        assert set(budget[key]) >= {"value", "low", "high"}, key
        assert budget[key]["low"] <= budget[key]["value"] <= budget[key]["high"], key
    for key in ("depth", "width", "aspect"):
        assert budget["band"][key]["low"]["value"] < budget["band"][key]["high"]["value"]
    # whatever the optimum, the first line says whether it lies past the runs, and the JSON says what
    beyond = {b["quantity"] for b in budget["beyond_runs"]}
    assert out["first_lines"][0].startswith("EXTRAPOLATION" if beyond or budget["decades_outside"] else "Inside the data")
    assert beyond <= {"depth", "params"} and "decades_outside_pooled" in budget


@pytest.mark.parametrize("law", ["bowl", "separate"])
def test_the_profile_interval_of_epsilon_ends_where_the_likelihood_ratio_crosses_its_cut(law):
    """Both ends closed and on the χ²₁ cut (not "[—, —]", as a step-0.025 grid printed when the
    interval was narrower than a step, or when ``separate``'s per-suite ε was profiled as one);
    for ``separate`` the reference suite's own ε, on its own rows."""
    from depthdelusion.analysis.fitting.shape_answer import LR_95, as_suites
    from depthdelusion.analysis.fitting.shape_pool import fit_shape_law

    suites = synthetic_suites(4, run_sd=0.0, noise_sd=0.003)
    a = shape_answer(suites, [BUDGET], law=law, resamples=0, compare=False)
    lo, hi = a.eps_profile
    s = a.fit.names.index(a.reference)
    eps_hat = float(a.fit.eps[s])
    assert 0.0 < lo < eps_hat < hi < 1.0, (lo, eps_hat, hi)
    assert hi - lo < 0.1  # narrower than a few steps of the old grid: the root-finder's, not the grid's
    data = Pooled.of(as_suites(suites))
    data = data if law != "separate" else data.rows(data.suite == s)
    best = fit_shape_law(data, "bowl").rss
    for end in (lo, hi):
        ratio = len(data.loss) * np.log(fit_shape_law(data, "bowl", eps=end).rss / best)
        assert ratio == pytest.approx(LR_95, abs=0.05), (end, ratio)

@pytest.mark.skipif(not GEMSTONES.is_file(), reason=f"no test copy at {GEMSTONES}")
def test_gemstones_by_name_gives_a_finite_answer_with_its_n_form(capsys, tmp_path):
    assert main(["shape", "--compute", "1e21", "--table", f"gemstones={GEMSTONES}", "--resamples", "10",
                 "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    first = text.splitlines()
    # 1e21 lies inside Gemstones' compute, but its optimum is deeper and larger than any of its runs
    assert first[0].startswith("EXTRAPOLATION — C = 1e+21: inside the compute range of the runs of suite gemstones")
    assert "is deeper than their deepest run (80)" in first[0], first[0]
    assert first[1].startswith("N = N_nonemb + ε·N_emb")
    assert (tmp_path / "shape_C1e21.png").is_file()


def test_the_figure_of_a_law_without_a_shape_term_draws_no_optimum_shape(tmp_path, monkeypatch):
    """chinchilla has an N*, not a D* and W*: its figure must not mark a shape as the optimum."""
    from depthdelusion.analysis.report import shape_answer_plot

    labels = []
    monkeypatch.setattr(shape_answer_plot, "save_figure",
                        lambda fig, path: labels.extend(t.get_text() for t in fig.axes[0].get_legend().get_texts()) or path)
    a = shape_answer(synthetic_suites(1), [BUDGET], law="chinchilla", resamples=0, compare=False)
    shape_answer_plot.budget_figure(a, a.budgets[0], tmp_path / "f.png")
    assert not any(t.startswith("optimum D*") for t in labels) and any("no shape term" in t for t in labels)


#: Liu et al. 2026's additive law, shared width and depth terms (Aw, aw, Ad, ad); per suite (E, B, β).
INVERSE_DEPTH = {"Aw": 8.0, "aw": 0.5, "Ad": 1.2, "ad": 0.9}
INVERSE_SUITES = {"alpha_suite": (1.8, 0.6, 0.30), "beta_suite": (2.2, 0.5, 0.28), "gamma_suite": (2.6, 0.7, 0.35)}


def inverse_depth_suites(seed: int, run_sd=0.005, noise_sd=0.002) -> dict:
    """Three suites from E_s + Aw·W^−aw + Ad·D^−ad + B_s·(T/1e10)^−β_s, with a run effect."""
    rng = np.random.default_rng(seed)
    p = INVERSE_DEPTH
    out = {}
    for name, (E, B, beta) in INVERSE_SUITES.items():
        rows = []
        for d, w in SHAPES:
            run_effect = rng.normal(0, run_sd)
            for t in CHECKPOINTS:
                loss = (E + p["Aw"] * w ** -p["aw"] + p["Ad"] * d ** -p["ad"] + B * (t / 1e10) ** -beta
                        + run_effect + rng.normal(0, noise_sd))
                rows.append((d, w, 12.0 * d * w * w + 2.0 * VOCAB * w, t, loss))
        d, w, n, t, loss = map(np.array, zip(*rows))
        out[name] = Runs(depth=d, width=w, params=n, tokens=t, loss=loss, vocab_size=np.full(len(d), VOCAB),
                         source=name)
    return out


def test_the_inverse_depth_law_recovers_its_known_exponents_within_their_intervals():
    """10 draws: each exponent inside its 95% cluster-bootstrap interval in at least 7 (percentile
    intervals over 20 runs per suite run a little short of 95%: 8 and 9 of 10 here, one interval
    of margin), the intervals informative (narrower than half the exponent)."""
    hits = {"aw": 0, "ad": 0}
    for seed in range(10):
        a = shape_answer(inverse_depth_suites(seed), [BUDGET], law="inverse_depth", resamples=40, seed=seed,
                         compare=False)
        assert set(a.fit.shape_parameters()) == set(INVERSE_DEPTH)
        for name in hits:
            low, high = a.shape_intervals[name]
            hits[name] += low <= INVERSE_DEPTH[name] <= high
            assert high - low < 0.5 * INVERSE_DEPTH[name], (name, (low, high))
    assert all(v >= 7 for v in hits.values()), hits
    assert not a.fit.uses_eps and "no parameter-count term, so ε does not enter it" in first_lines(a)[1]
    assert to_json(a)["eps"]["value"] is None


def test_the_inverse_depth_law_wins_auto_on_its_own_data():
    a = shape_answer(inverse_depth_suites(1), [BUDGET], resamples=0)
    assert a.law == "inverse_depth", [(c.law, round(c.score, 3)) for c in a.checks]
    assert "inverse_depth" in "\n".join(check_lines(a))


def test_the_resampling_unit_is_named_and_a_cluster_column_is_used(tmp_path, capsys):
    """Default: whole shapes; --cluster COLUMN: that column's values, named in the text and JSON."""
    plain = shape_answer(synthetic_suites(6), [BUDGET], law="bowl", resamples=4, compare=False)
    assert plain.resampling.units == dict.fromkeys(SUITE_TERMS, "shape")
    assert "whole shapes (depth × width" in summary(plain)
    assert "suites not resampled: 3 suites (< 5)" in summary(plain)
    suites = synthetic_suites(6)
    paths = []
    for name, runs in suites.items():
        # two shapes per "node": a coarser cluster than the shape
        runs.extra["node"] = np.array([f"n{i // 10}" for i in range(len(runs))], dtype=object)
        paths.append(str(write_csv(tmp_path / f"{name}.csv", runs,
                                   ("depth", "width", "params", "tokens", "loss", "node"))))
    by_node = shape_answer(suites, [BUDGET], law="bowl", resamples=4, compare=False, cluster="node")
    assert by_node.resampling.units == dict.fromkeys(SUITE_TERMS, "node")
    assert len(np.unique(by_node.suites[0].run)) == len(SHAPES) // 2
    assert "whole clusters of column 'node'" in summary(by_node)
    assert main(["shape", "--compute", "1e19", "--law", "bowl", "--resamples", "4", "--cluster", "node",
                 "--json", *paths]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["resampling"]["unit"] == dict.fromkeys(SUITE_TERMS, "node")
    assert out["resampling"]["suites_resampled"] is False and "column 'node'" in out["intervals"]
    rows = shape_answer(suites, [BUDGET], law="bowl", resamples=4, compare=False, cluster="row")
    assert "whole rows (no clustering" in summary(rows)


def test_a_cluster_column_no_table_has_is_one_line_naming_it_and_the_columns(tmp_path, capsys):
    csv = write_csv(tmp_path / "alpha.csv", synthetic_suites(0)["alpha_suite"])
    assert main(["shape", "--compute", "1e19", "--law", "bowl", "--cluster", "seed_of_run", str(csv)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--cluster: no column 'seed_of_run'" in err and "depth" in err and "loss" in err


def test_suites_are_resampled_only_where_there_are_enough():
    five = {f"suite{k}": runs for k, runs in enumerate(
        list(synthetic_suites(8).values()) + list(synthetic_suites(9).values())[:2])}
    a = shape_answer(five, [BUDGET], law="bowl", resamples=6, compare=False)
    assert a.resampling.suites_resampled and a.resampling.n_suites == 5
    assert "suites resampled: the 4 suites other than the reference drawn with replacement" in summary(a)
    data = Pooled.of(a.suites)
    weights = cluster_resample_weights(data, 20, 0, kept_suite=0, resample_suites=True)
    per_suite = np.array([[w[data.suite == s].sum() for s in range(5)] for w in weights])
    assert np.all(per_suite[:, 0] == np.sum(data.suite == 0))  # the reference is always drawn once
    assert np.any(per_suite[:, 1:] == 0) and np.any(per_suite[:, 1:] >= 2 * np.sum(data.suite == 1))
    assert np.isfinite(a.budgets[0].intervals["depth"]).all()


def test_a_law_whose_shape_exponents_sit_on_their_bound_is_not_picked():
    """A degenerate form (a width or depth term flat over the data) is not the law: it stays in
    the table, marked, and the pick goes to the best law fitted inside its bounds."""
    from depthdelusion.analysis.fitting.shape_checks import LawCheck, pick_law

    checks = [LawCheck("chinchilla", 0.096, 0.104, 0.243, 1.25, 21, 6.1),
              LawCheck("inverse_depth", 0.136, 0.120, 0.144, 1.22, 16, 8.2, ("aw", "ad"))]
    law, why = pick_law(checks)
    assert law == "chinchilla" and "inverse_depth not picked: its aw, ad on the search bound" in why
    assert pick_law(checks[1:])[0] == "inverse_depth"  # the only law scored: picked, flagged in the table
