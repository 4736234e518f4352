"""The report's design-aware parts: pooled token budgets flagged first, group offsets by
default, N conventions, shape sections only from a significant penalty, and the committed
paper report's verdict table."""
import csv
from pathlib import Path

import numpy as np
import pytest

from depthdelusion.analysis import fit, load_reference
from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.analysis.report.build import (
    build_report,
    design_forms,
    mixed_budgets,
    size_classes,
)
from depthdelusion.analysis.report.consistency import with_param_convention
from depthdelusion.analysis.report.options import ReportOptions
from depthdelusion.analysis.table.runs import Runs

from ..conftest import params_of

COMMITTED = Path(__file__).resolve().parents[3] / "analysis" / "paper_refit"
QUICK = {"leave_one_out": False, "profile": False}  # the report's structure, not its intervals


def two_budget_runs(penalty: float = 0.0, seed: int = 0, widths=(128, 256, 512, 1024),
                    depths=(2, 6, 12, 24, 48)) -> Runs:
    """Two groups on one grid of shapes; the second trained longer (unknown tokens), so its loss
    is 0.3 nats lower at every shape. ``penalty``: λ of a planted depth penalty (κ = 2.5)."""
    rng = np.random.default_rng(seed)
    rows = []
    for group, offset, tokens in (("short", 0.3, 1e9), ("long", 0.0, np.nan)):
        for w in widths:
            for d in depths:
                n = params_of(d, w)
                loss = (1.8 + offset + 30 * n ** -0.15 + penalty * max(0.0, d - 2.5 * np.log(w))
                        + 0.003 * rng.standard_normal())
                rows.append((d, w, n, loss, tokens, group))
    D, W, N, L, T, G = map(np.array, zip(*rows))
    return Runs(D, W, N, L, T, np.full(len(D), np.nan), G, [f"{g}_{d}x{w}" for d, w, g in zip(D, W, G)])


def _first_paragraph(md: str) -> str:
    return md.split("\n\n")[1]


def test_pooling_different_token_budgets_is_flagged_in_the_first_lines():
    runs = two_budget_runs()
    assert mixed_budgets(runs) == "long: unknown; short: 1e+09 tokens"
    report, md, tex = build_report(runs, ReportOptions(fit=FitOptions(bootstrap=0, **QUICK), laws=("depth_delusion", "kaplan"), groups="pooled", design=False, runs_label="synthetic"))
    assert _first_paragraph(md).startswith("WARNING: this fit pools groups trained on different token budgets")
    assert tex.index("WARNING") < tex.index(r"\begin{table}")
    # The default fits one offset per group instead, and says so before any number.
    report, md, _ = build_report(runs, ReportOptions(fit=FitOptions(bootstrap=0, **QUICK), laws=("depth_delusion", "kaplan"), design=False, runs_label="synthetic"))
    assert "WARNING" not in md
    # own runs open with what they show ("In short: ..."), then the method, before any table
    paragraphs = md.split("\n\n")
    assert paragraphs[1].startswith("In short:")
    assert paragraphs[2].startswith("Groups are fitted with their own offset")
    assert report.fits["kaplan"].r2 > 0.99  # the offsets absorb the budget gap


def test_design_forms_of_a_two_budget_table():
    runs = two_budget_runs()
    labels = [f[0] for f in design_forms(runs)]
    assert labels[0] == "all runs, group offsets"
    assert [f[3] for f in design_forms(runs)][1].startswith("mixes token budgets")
    assert "short alone" in labels
    assert any(lbl.startswith("long alone, size-class offsets") for lbl in labels)
    assert size_classes([1e8, 1.1e8, 3e8, 3.2e8, 9e8]).tolist() == [0, 0, 1, 1, 2]


@pytest.mark.slow  # whole reports through the CLI
def test_shape_sections_need_a_significant_penalty_and_a_kink_that_beats_smooth_laws():
    laws = ("depth_delusion", "shape_quadratic", "kaplan")
    _, md, _ = build_report(two_budget_runs(penalty=0.0), ReportOptions(fit=FitOptions(bootstrap=0, **QUICK), laws=laws, design=False, lr_replicates=19))
    assert "Not shown: the depth_delusion fit does not establish a critical depth" in md
    assert "| GPT-3 175B |" not in md and "Optimal shape" not in md
    # without a smooth law to beat, the kink has won nothing: no D/D_crit table
    _, md, _ = build_report(two_budget_runs(penalty=0.05), ReportOptions(fit=FitOptions(bootstrap=0, **QUICK), laws=("depth_delusion", "kaplan"), design=False, lr_replicates=19))
    assert "| GPT-3 175B |" not in md and "the kink does not beat" not in md
    # 19 replicates: the smallest p, 1/20, rejects at 5%
    report, md, _ = build_report(two_budget_runs(penalty=0.05), ReportOptions(fit=FitOptions(bootstrap=0, **QUICK), laws=laws, design=False, lr_replicates=19))
    assert report.verdicts[0].significant
    assert "Is there a critical depth" in md and "Yes: the kink of depth_delusion" in md
    assert "| GPT-3 175B |" in md
    # No vocabulary stated by these runs: the shape search says so instead of assuming one.
    assert "do not state one vocabulary size" in md


def test_n_conventions_flag_and_refit_the_inconsistent_row():
    runs, notes = with_param_convention("paper", "total")
    paper = load_reference("depth_delusion")
    i = int(np.flatnonzero(paper.name == "56Lx2176")[0])
    assert abs(runs.params[i] / paper.params[i] - 1.124) < 0.001
    assert any("56Lx2176" in n and "recomputed" in n for n in notes)
    changed = np.flatnonzero(runs.params != paper.params)
    assert changed.tolist() == [i]
    ne, _ = with_param_convention("paper", "non_embedding")
    assert np.allclose(ne.params, paper.depth * (12.0 * paper.width ** 2 + 13.0 * paper.width))


def test_issue_sanity_figures_on_the_paper_data():
    base = fit(load_reference("depth_delusion").where_group("baseline"), "kaplan", bootstrap=0,
               leave_one_out=False)
    assert abs(base.params["alpha"] - 0.40) < 0.01 and abs(base.params["E"] - 2.63) < 0.02
    # Non-embedding N, all 30 runs: the unbounded fit gave κ ≈ 2.31, R² 0.989 with E ≈ −13
    # (unphysical); bounded (E ≥ 0) it ends at E = 0 with κ ≈ 2.42, R² 0.983.
    ne, _ = with_param_convention("paper", "non_embedding")
    dd = fit(ne, "depth_delusion", bootstrap=0, leave_one_out=False, profile=False)
    assert abs(dd.params["kappa"] - 2.42) < 0.1 and dd.r2 > 0.98 and dd.params["E"] >= 0


def test_committed_paper_report_states_each_verdict_under_each_assumption():
    # The committed report is regenerated and compared by test_committed_paper_report_is_up_to_date.
    with open(COMMITTED / "design_verdicts.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    forms = [r["form"] for r in rows]
    assert "baseline alone" in forms and "all runs, group offsets" in forms
    assert any(f.startswith("large_scale alone, size-class offsets") for f in forms)
    pooled = next(r for r in rows if r["form"] == "all runs pooled")
    assert pooled["caveat"].startswith("mixes token budgets")
    for r in rows:
        for col in ("total N", "non-embedding N"):
            assert r[col].split()[0] in ("Yes", "No", "Not", "Cannot", "Uninformative:"), r
    md = (COMMITTED / "report.md").read_text()
    first = md.split("\n\n")[1]
    assert first.startswith("Which of the paper's conclusions hold depends")
    assert "non-embedding N" in first and "baseline alone" in first


@pytest.mark.slow  # whole reports through the CLI
def test_cli_selects_group_mode_and_n_convention(tmp_path):
    from depthdelusion.cli import command

    csv_path = tmp_path / "runs.csv"
    two_budget_runs(widths=(128, 256, 512), depths=(2, 8, 32)).to_dataframe().to_csv(csv_path, index=False)
    # no profiles: what is checked is the two options reaching the report, not its intervals
    _, run = command(["report", str(csv_path), "--out", str(tmp_path / "rep"), "--bootstrap", "0",
                      "--profile", "none", "--no-figures", "--groups", "pooled", "--params", "non_embedding"])
    report = run.keywords["report"]  # ReportOptions, which declares both flags
    assert (report.groups, report.params) == ("pooled", "non_embedding")
    assert run() == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert _first_paragraph(md).startswith("WARNING: this fit pools groups")
    assert "--groups pooled --params non_embedding" in md
    assert "N convention: non-embedding N = D·(12W² + 13W)" in md


def test_extrapolation_from_a_ridge_is_a_range():
    # Training runs are all shallow (the penalty is inactive for every one), so λ, κ, γ are not
    # determined; the deep test runs' predictions then depend on the point of that ridge.
    rng = np.random.default_rng(0)
    shapes = [(d, w) for w in (256, 384, 512, 768, 1024) for d in (1, 2, 3)] + [(96, w) for w in (256, 512, 1024)]
    D, W = map(np.array, zip(*shapes))
    N = np.array([params_of(d, w) for d, w in shapes], float)
    n = len(D)
    runs = Runs(D, W, N, 1.8 + 30 * N ** -0.15 + 0.003 * rng.standard_normal(n), np.full(n, np.nan),
                np.full(n, np.nan), ["g"] * n, [f"{d}x{w}" for d, w in shapes])
    report, md, _ = build_report(runs, ReportOptions(fit=FitOptions(bootstrap=0, **QUICK), laws=("depth_delusion", "kaplan"), design=False))
    extrap = next(t for t in report.tables if t.name == "extrapolation")
    deep = [r for r in extrap.rows if r[0].startswith("96x")]
    assert deep and all("–" in r[5] and " to " in r[5] for r in deep)  # depth_delusion: a range
    assert all("–" not in r[6] for r in deep)                        # kaplan: one point
    assert extrap.rows[-1][5] == "n.i." and "do not determine lam, kappa, gamma" in md
