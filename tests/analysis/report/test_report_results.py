"""The report is data, then text: its numbers are computed once into a frozen ReportResults,
read there without parsing text, and the Markdown, LaTeX and CSV renderings only format them."""
import dataclasses

import pytest

from depthdelusion.analysis.fitting import engine
from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.analysis.report import results
from depthdelusion.analysis.formats.table_text import csv_text
from depthdelusion.analysis.report.build import (
    build_report,
    latex,
    markdown,
    write_report,
)
from depthdelusion.analysis.report.options import ReportOptions

from .test_report_design import QUICK, two_budget_runs


@pytest.fixture(scope="module")
def pooled():
    return build_report(two_budget_runs(), ReportOptions(fit=FitOptions(bootstrap=0, **QUICK), laws=("depth_delusion", "kaplan"), groups="pooled", design=False, runs_label="synthetic"))


def test_numbers_and_verdicts_are_read_from_the_results(pooled):
    report, md, _ = pooled
    r = report.results
    assert r.design.pooled_invalid and not r.design.offsets and r.design.mixed.startswith("long:")
    # the fits skipped their profiles (QUICK), and the line that regenerates the report says so
    assert r.settings.command == ("depthdelusion report synthetic --out DIR --bootstrap 0 --seed 0 --groups pooled"
                                  " --profile none")
    assert [v.law for v in r.verdicts] == ["depth_delusion"] and r.verdicts[0].baseline == "kaplan"
    assert set(r.fits) == {"depth_delusion", "kaplan"} and len(r.runs) == 40
    assert len(r.extrapolation.test_rows) + int(r.extrapolation.how.split("fit on the ")[1].split()[0]) == 40
    # the table's cells are the results' numbers, rounded once
    row = next(row for row in r.table("law_comparison").rows if row[0] == "kaplan")
    assert row[3] == f"{r.fits['kaplan'].r2:.3f}" and row[6] == f"{r.fits['kaplan'].aicc:.1f}"
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.fits = {}


def test_renderers_format_the_results_and_compute_nothing(pooled, monkeypatch, tmp_path):
    report, md, tex = pooled
    r = report.results

    def no_fit(*args, **kwargs):
        raise AssertionError("a renderer fitted or tested a law")

    for module, name in ((engine, "fit"), (engine, "fit_with"), (results, "fit_with"), (results, "penalty_verdicts"),
                         (results, "optimal_shape"), (results, "persistence_lengths")):
        monkeypatch.setattr(module, name, no_fit)
    assert markdown(r) == md and latex(r) == tex
    for t in r.tables:
        assert t.markdown() in md and t.latex() in tex
    assert md.split("\n\n")[1].startswith("WARNING: this fit pools groups")
    assert tex.index("WARNING") < tex.index(r"\begin{table}")


def test_each_table_is_written_as_its_csv(tmp_path):
    report = write_report(two_budget_runs(widths=(128, 256), depths=(2, 8, 32)), tmp_path, ReportOptions(fit=FitOptions(bootstrap=0), laws=("kaplan",), design=False), figures=False)
    names = [t.name for t in report.results.tables]
    assert names[:2] == ["law_comparison", "extrapolation"] and [t.name for t in report.tables] == names
    for t in report.results.tables:
        assert (tmp_path / f"{t.name}.csv").read_text() == csv_text(t.columns, t.rows)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{n}.csv" for n in names] + ["report.md", "report.tex", "numerics.md"])


def test_params_fitted_profiles_eps_once_by_the_baseline_and_holds_it_for_every_law():
    """`report --params fitted` (issue 62 item 1): ε in N = N_nonemb + ε·N_emb profiled by the
    shape-agnostic law (kaplan: tokens do not vary per run), with the report's group offsets,
    then every law fitted on that N, said in the notes."""
    import numpy as np

    from depthdelusion.analysis.fitting.embedding_weight import fit_embedding_weight
    from depthdelusion.analysis.table.runs import Runs

    base = two_budget_runs()
    vocab = 256
    emb = 2.0 * vocab * np.asarray(base.width, float)
    nonemb = 12.0 * np.asarray(base.depth, float) * np.asarray(base.width, float) ** 2
    # the loss follows N_nonemb + 0.3·N_emb: between Kaplan's count (ε 0) and the total (ε 1)
    rng = np.random.default_rng(1)
    shift = np.where(np.asarray(base.group) == "short", 0.3, 0.0)
    loss = 1.8 + shift + 30 * (nonemb + 0.3 * emb) ** -0.15 + 0.003 * rng.standard_normal(len(nonemb))
    runs = Runs(depth=base.depth, width=base.width, params=nonemb + emb, loss=loss, tokens=base.tokens,
                group=base.group, source="fitted_eps", params_non_embedding=nonemb,
                vocab_size=np.full(len(nonemb), vocab))
    options = ReportOptions(fit=FitOptions(bootstrap=0, **QUICK), laws=("depth_delusion", "kaplan"),
                            params="fitted", design=False, runs_label="synthetic")
    r = build_report(runs, options)[0].results
    weight = fit_embedding_weight(runs, "kaplan", group_offsets=True)
    held = nonemb + weight.value * emb
    assert np.allclose(r.runs.params, held)
    assert weight.low < 0.3 < weight.high
    note = next(n for n in r.notes if n.startswith("N convention: N = N_nonemb + ε·N_emb with ε fitted"))
    assert f"ε held at {weight.value:.3g} for every law" in note and "law kaplan" in note
