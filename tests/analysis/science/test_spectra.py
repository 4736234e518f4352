"""Tail-index fits of covariance spectra, and their section of the analysis report."""
import math

import numpy as np
import pytest

from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.analysis.report.options import ReportOptions
from depthdelusion.analysis.report import spectra_text
from depthdelusion.analysis.science import spectra
from depthdelusion.analysis.science.redundancy import predicted_exponent


def _eig(x_NxW):
    return np.linalg.eigvalsh(np.cov(x_NxW, rowvar=False))[::-1]


def _synthetic_fit(beta, width=64, groups=8, per_group=2000, seed=0):
    """Gaussian samples with population spectrum i^(−β): the fit as the command makes it."""
    rng = np.random.default_rng(seed)
    x_GxNxW = rng.standard_normal((groups, per_group, width)) * np.arange(1, width + 1) ** (-beta / 2)
    full = _eig(x_GxNxW.reshape(-1, width))
    halves = (_eig(x_GxNxW[:groups // 2].reshape(-1, width)), _eig(x_GxNxW[groups // 2:].reshape(-1, width)))
    jack = [_eig(np.delete(x_GxNxW, g, axis=0).reshape(-1, width)) for g in range(groups)]
    return spectra.tail_fit(3, full, halves, jack, groups * per_group)


def test_exact_power_law_gives_its_exponent():
    lam = np.arange(1, 257, dtype=float) ** -1.3
    assert spectra.fit_tail_index(lam, 2, 128) == pytest.approx(1.3, abs=1e-12)
    assert spectra.fit_range(lam, lam, lam) == (4, 128)  # ⌈256/64⌉ to W/2


@pytest.mark.parametrize("beta", [0.8, 1.5])
def test_sampled_spectrum_recovers_beta_within_its_jackknife_interval(beta):
    fit = _synthetic_fit(beta)
    lo, hi = fit.rank_range
    assert lo == 2 and 10 <= hi <= 32
    assert fit.ci[0] < beta < fit.ci[1] and fit.ci[1] - fit.ci[0] < 0.2
    assert all(abs(b - beta) < 0.1 for b in fit.beta_halves)
    assert fit.half_max_rel_diff < 0.3 and fit.top_k == 32


def _no_fit(layer):
    full = np.sort(np.random.default_rng(1).uniform(0.5, 1.0, 64))[::-1]
    return spectra.tail_fit(layer, full, (full, full * 1.5), [full] * 4, 100)


def test_no_stable_range_is_no_fit():
    fit = _no_fit(0)
    assert fit.rank_range is None and math.isnan(fit.beta)


def test_report_section_lists_layers_and_predicted_exponents(tmp_path):
    runs = tmp_path / "runs"
    (runs / "d2w64" / "spectrum").mkdir(parents=True)
    fits = [_synthetic_fit(1.5, seed=s) for s in range(2)]
    fits[1].layer = 4
    spectra.write_tail_csv(fits + [_no_fit(5)], runs / "d2w64" / "spectrum" / "tail.csv")
    lines = spectra_text.spectrum_section(runs)
    text = "\n".join(lines)
    assert text.startswith("## Representation spectra")
    rows = [line for line in lines if line.startswith("| d2w64 |")]
    assert [r.split(" | ")[1] for r in rows] == ["3", "4", "5"]
    assert "no fit" in rows[2] and len({r.count("|") for r in rows + [lines[4]]}) == 1
    beta = round(fits[0].beta, 3)
    assert f"{predicted_exponent(beta, 0.5):.3f}" in rows[0]
    assert spectra_text.spectrum_section(tmp_path / "nothing") == [] == spectra_text.spectrum_section("")


def test_bad_tail_csv_names_the_file(tmp_path):
    (tmp_path / "r" / "spectrum").mkdir(parents=True)
    (tmp_path / "r" / "spectrum" / "tail.csv").write_text("layer,beta\n0,1.0\n")
    with pytest.raises(ValueError, match="tail.csv.*missing columns"):
        spectra_text.spectrum_section(tmp_path)


def test_report_on_run_directories_includes_the_spectrum_section(run_factory, tmp_path):
    from depthdelusion.analysis.report.build import build_report

    for i, (d, w) in enumerate([(d, w) for w in (128, 256) for d in (2, 4, 8)]):
        n = d * 12 * w * w + 2 * 50257 * w
        run_factory(f"d{d}w{w}", d, w, float(1.8 + 30 * n ** -0.15 + 0.01 * i), seed=i)
    (tmp_path / "runs" / "d2w128" / "spectrum").mkdir()
    spectra.write_tail_csv([_synthetic_fit(1.2)], tmp_path / "runs" / "d2w128" / "spectrum" / "tail.csv")
    _, md, _ = build_report(str(tmp_path / "runs"), ReportOptions(fit=FitOptions(bootstrap=0), laws=("kaplan",), shape_draws=0))
    assert "## Representation spectra" in md and "| d2w128 | 3 |" in md


def test_report_section_shows_the_exponent_predicted_with_measured_smoothness(tmp_path):
    from depthdelusion.analysis.science import readout

    run = tmp_path / "runs" / "w64" / "t1280" / "spectrum"
    run.mkdir(parents=True)
    spectra.write_tail_csv([_synthetic_fit(1.5)], run / "tail.csv")
    fit = readout.SourceFit(2.0, (1.9, 2.1), 3.0, (2.8, 3.2), 0.5, (0.45, 0.55), 2 / 3, (0.64, 0.69),
                            (2, 32), 1000, np.ones(64))
    readout.write_readout_csv(fit, run / "readout.csv")
    text = "\n".join(spectra_text.readout_section(tmp_path / "runs"))
    assert "source smoothness s measured" in text
    assert "| w64/t1280 | 2.000 [1.900, 2.100] | 0.500 [0.450, 0.550] | 0.667 [0.640, 0.690] | 2–32 |" in text
    (run / "readout.csv").write_text("beta,s\n1,2\n")
    with pytest.raises(ValueError, match="readout.csv.*missing columns"):
        spectra_text.readout_section(tmp_path / "runs")
