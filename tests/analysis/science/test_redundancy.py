"""The synthetic redundancy-law machinery: exact ridge risks, the source target, the rate fit."""
import numpy as np
import pytest

from depthdelusion.analysis.science.redundancy import (
    Design,
    bounded_transform,
    fit_rate,
    learning_curve,
    power_law_spectrum,
    predicted_exponent,
    random_rotation,
    ridge_excess_risks,
    source_target,
)


def test_dual_ridge_risks_equal_the_primal_solution():
    rng = np.random.default_rng(0)
    lam = power_law_spectrum(30, 2.0)
    theta = source_target(lam, 0.5)
    x = Design([lam]).sample(20, rng)
    y = x @ theta + rng.standard_normal(20)
    regs = np.array([1e-3, 1e-1])
    got = ridge_excess_risks(x, y, theta, lam, regs)
    for reg, risk in zip(regs, got):
        primal = np.linalg.solve(x.T @ x + 20 * reg * np.eye(30), x.T @ y)
        err = primal - theta
        assert risk == pytest.approx(float(err @ (lam * err)), rel=1e-8)


def test_a_rotation_of_the_features_leaves_every_risk_unchanged():
    rng = np.random.default_rng(1)
    lam = power_law_spectrum(40, 1.5)
    theta = source_target(lam, 1.0)
    x = Design([lam]).sample(25, rng)
    y = x @ theta + rng.standard_normal(25)
    regs = np.logspace(-4, 0, 5)
    plain = ridge_excess_risks(x, y, theta, lam, regs)
    rotated = ridge_excess_risks(x, y, theta, lam, regs, random_rotation(40, rng))
    np.testing.assert_allclose(rotated, plain, rtol=1e-8)
    # a rescaling is not invisible: the claim about it is only about the exponent
    rescaled = ridge_excess_risks(x, y, theta, lam, regs, bounded_transform(40, rng, 10.0))
    assert not np.allclose(rescaled, plain, rtol=1e-3)


def test_source_target_sits_on_the_borderline_of_its_smoothness():
    lam = power_law_spectrum(1000, 2.0)
    theta = source_target(lam, 0.5)
    i = np.arange(1, 1001)
    np.testing.assert_allclose(lam * theta**2, i ** -3.0, rtol=1e-12)  # i^(-1-2βs)


@pytest.mark.slow  # learning curves over seeds
def test_fitted_rate_matches_the_formula_on_a_small_problem():
    # Miniature of analysis/redundancy: β = 2, s = 0.5 predicts 2/3. At this size the seed-bootstrap
    # interval is wide (about ±0.25), so the test asks what it can tell apart: the formula is inside
    # it, while the noiseless rate (2βs = 2) and the formula without the +1 (2βs = 1) are outside.
    lam = power_law_spectrum(400, 2.0)
    curve = learning_curve(Design([lam]), source_target(lam, 0.5), [50, 100, 200, 400], seeds=8)
    rate = fit_rate(curve, n_min=50, n_boot=200)
    assert predicted_exponent(2.0, 0.5) == pytest.approx(2 / 3)
    assert rate.contains(2 / 3), rate
    assert not rate.contains(1.0) and not rate.contains(2.0), rate


def test_the_report_says_when_a_constant_exponent_passes_the_check_as_well(tmp_path):
    """The committed check cannot tell the formula from one constant exponent (0.60 lies in 8 of
    9 intervals); with intervals narrow enough to separate the cases, the report says the
    constant does worse."""
    import csv
    import shutil
    from pathlib import Path

    from depthdelusion.studies.redundancy import study as redundancy_study
    committed = Path(__file__).resolve().parents[3] / "analysis" / "redundancy"
    for name in ("rates.csv", "invariance.csv", "mixture.csv", "run.json"):
        shutil.copy(committed / name, tmp_path / name)
    redundancy_study.write_markdown(tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "lies inside 8 of 9 intervals (c = 0.60), as many as the formula or more" in text

    with open(committed / "rates.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:  # the formula's value, known to ±0.01
        r.update(fitted=r["predicted"], ci_lo=float(r["predicted"]) - 0.01,
                 ci_hi=float(r["predicted"]) + 0.01, within_ci="True")
    with open(tmp_path / "rates.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    redundancy_study.write_markdown(tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "fewer than the formula" in text and "does not tell" not in text


def test_the_check_measures_once_and_its_report_is_the_one_rewritten_from_its_tables(tmp_path):
    """The study's shape: a spec from the flags, measure() to frozen results, report.md rendered
    from them; --report-only's results read back from the tables render the same bytes."""
    import dataclasses

    from depthdelusion.studies.redundancy import study
    from depthdelusion.studies.common.spec import from_flags
    from depthdelusion.studies.redundancy.options import RedundancyOptions

    spec = from_flags(study.RedundancySpec, {"betas": [2.0], "sources": [0.5], "ns": [20, 40, 80],
                                             "p": 60, "seeds": 2, "n_min": 20})
    measured = study.measure(spec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        measured.hits = 0
    study.write_outputs(measured, tmp_path, figures=False)
    assert (tmp_path / "report.md").read_text() == study.sections(study.read_results(tmp_path))
    assert "`depthdelusion redundancy-study --seeds 2 --out" in (tmp_path / "report.md").read_text()
    assert [r["case"] for r in measured.invariance] == ["identity", "rotation", "rotation x rescaling (cond 10)"]


def test_a_bad_value_of_the_check_is_one_line_naming_its_flag(tmp_path):
    from depthdelusion.studies.redundancy import study
    from depthdelusion.studies.common.spec import from_flags
    from depthdelusion.studies.redundancy.options import RedundancyOptions

    with pytest.raises(ValueError, match=r"^--seeds=0: must be a positive integer$"):
        study.run_command(out=str(tmp_path), options=RedundancyOptions(seeds=0))
    with pytest.raises(ValueError, match=r"^--sources\[1\]=1.5: must be in \(0, 1\]"):
        from_flags(study.RedundancySpec, {"sources": [0.5, 1.5]})
    with pytest.raises(ValueError, match=r"^--n-min=1600: must leave at least 2 of ns"):
        from_flags(study.RedundancySpec, {"n_min": 1600})
