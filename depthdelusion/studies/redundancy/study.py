"""The synthetic check of the redundancy law, written to a directory:

    depthdelusion redundancy-study --out analysis/redundancy

1. rates: fitted data-scaling exponent of ridge regression against 2βs/(2βs+1) over a (β, s) grid;
2. invariance: the same (β, s) after a boundedly invertible change of features (a random rotation
   after a diagonal rescaling of condition 10) and after a rotation alone;
3. mixture: an equal mixture of two spectra (β = 1.5 and 3), whose exponent should follow the
   heavier tail (β = 1.5).
Files: rates.csv, invariance.csv, mixture.csv, run.json, report.md, learning_curves.png (with
--figures); OUT may be local or gs:// (written to a local directory, then copied up).

The study's shape: its spec (`RedundancySpec`, from the command's flags by `spec.from_flags`),
`measure` to a frozen `RedundancyResults` (or `read_results` from the tables already written, for
--report-only), `sections` to report.md; the tables, run.json and figure from the same results.
The math is numpy in `analysis/science/redundancy.py`.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import shlex
import time
from pathlib import Path

import numpy as np

from depthdelusion import rundir
from depthdelusion.config import bounded
from depthdelusion.option_fields import command_words
from depthdelusion.studies.common.spec import from_flags, spec_error
from depthdelusion.studies.redundancy.options import RedundancyOptions

from depthdelusion.analysis.formats.table_text import markdown_table, write_csv
from depthdelusion.analysis.science.redundancy import (
    Design,
    bounded_transform,
    constant_exponent_power,
    fit_rate,
    learning_curve,
    power_law_spectrum,
    predicted_exponent,
    random_rotation,
    source_target,
)

BETAS = (1.5, 2.0, 3.0)
SOURCES = (0.25, 0.5, 1.0)
NS = (50, 100, 200, 400, 800, 1600)
N_MIN = 100  # the slope is fitted from here: below it the curve is still pre-asymptotic
P = 2000  # feature dimension (the spectrum's truncation)
NOISE = 1.0
INVARIANCE = (2.0, 0.5)  # the (β, s) of the invariance check
MIXTURE = (1.5, 3.0, 0.5)  # the heavier and the lighter tail's β, and s
TABLES = ("rates", "invariance", "mixture")
NUMBERS = ("beta", "s", "predicted", "fitted", "ci_lo", "ci_hi", "predicted_if_lighter_tail")


@dataclasses.dataclass(frozen=True)
class RedundancySpec:
    """What the check measures: the (β, s) grid, the sample sizes n, the feature dimension p,
    the seeds per case and the smallest n of the slope (the command's flags, `spec.from_flags`)."""

    betas: list[float] = dataclasses.field(default_factory=lambda: list(BETAS))
    sources: list[float] = dataclasses.field(default_factory=lambda: list(SOURCES))
    ns: list[int] = dataclasses.field(default_factory=lambda: list(NS))
    p: int = bounded(P, ge=2)
    seeds: int = bounded(RedundancyOptions.seeds, ge=1)
    n_min: int = bounded(N_MIN, ge=1)

    def validate(self) -> None:
        for i, beta in enumerate(self.betas):
            if not beta > 0:
                raise spec_error(f"betas[{i}]", beta, "must be > 0 (a spectral tail i^(−β))")
        for i, s in enumerate(self.sources):
            if not 0 < s <= 1:
                raise spec_error(f"sources[{i}]", s, "must be in (0, 1] (the law's source smoothness)")
        if any(n < 1 for n in self.ns) or list(self.ns) != sorted(set(self.ns)):
            raise spec_error("ns", self.ns, "must be positive and increasing")
        if sum(n >= self.n_min for n in self.ns) < 2:
            raise spec_error("n_min", self.n_min, f"must leave at least 2 of ns {self.ns} for a slope")


@dataclasses.dataclass(frozen=True)
class RedundancyResults:
    """What the check measured (rows as in the CSVs: numbers, within_ci a bool) and what the
    report quotes from them; rendered by `sections`."""

    spec: RedundancySpec
    rates: tuple  # one row per (β, s)
    invariance: tuple  # the identity (from rates), a rotation, a rotation after a rescaling
    mixture: tuple
    timing: dict  # wall seconds of rates, invariance and mixture
    curves: dict | None  # (β, s) -> LearningCurve of rates; None when read from the tables
    hits: int  # rates whose interval contains the formula
    misses: tuple  # (row, "faster" | "slower") where it does not
    constant: tuple  # `constant_exponent_power` of the rates' intervals
    departures: tuple  # (min, max) of fitted − predicted over rates


def results(spec: RedundancySpec, rates, invariance, mixture, timing, curves=None) -> RedundancyResults:
    """The results object: the rows, and the numbers the report quotes from them."""
    intervals = [(r["ci_lo"], r["ci_hi"]) for r in rates]
    departures = [r["fitted"] - r["predicted"] for r in rates]
    return RedundancyResults(
        spec=spec, rates=tuple(rates), invariance=tuple(invariance), mixture=tuple(mixture),
        timing=timing, curves=curves, hits=sum(r["within_ci"] for r in rates),
        misses=tuple((r, "faster" if r["fitted"] > r["predicted"] else "slower")
                     for r in rates if not r["within_ci"]),
        constant=constant_exponent_power(intervals), departures=(min(departures), max(departures)))


def _row(label, beta, s, curve, rate, **extra):
    pred = predicted_exponent(beta, s)
    return {"case": label, "beta": beta, "s": s, "predicted": round(pred, 3),
            "fitted": round(rate.exponent, 3), "ci_lo": round(rate.ci[0], 3),
            "ci_hi": round(rate.ci[1], 3), "within_ci": rate.contains(pred),
            "local_slopes": " ".join(f"{b:.2f}" for _, b in rate.local), **extra}, curve


def _rates(spec: RedundancySpec) -> tuple[list, dict]:
    rates, curves = [], {}
    for beta in spec.betas:
        lam = power_law_spectrum(spec.p, beta)
        for s in spec.sources:
            c = learning_curve(Design([lam]), source_target(lam, s), spec.ns, noise_std=NOISE,
                               seeds=spec.seeds)
            row, curves[(beta, s)] = _row("plain", beta, s, c, fit_rate(c, n_min=spec.n_min))
            rates.append(row)
    return rates, curves


def _invariance(spec: RedundancySpec, rates: list) -> list:
    rng = np.random.default_rng(2026)
    beta, s = INVARIANCE
    lam = power_law_spectrum(spec.p, beta)
    theta = source_target(lam, s)
    invariance = [r for r in rates if (r["beta"], r["s"]) == (beta, s)]
    invariance = [dict(invariance[0], case="identity")] if invariance else []
    for label, A in (("rotation", random_rotation(spec.p, rng)),
                     ("rotation x rescaling (cond 10)", bounded_transform(spec.p, rng, 10.0))):
        c = learning_curve(Design([lam], transform=A), theta, spec.ns, noise_std=NOISE, seeds=spec.seeds)
        invariance.append(_row(label, beta, s, c, fit_rate(c, n_min=spec.n_min))[0])
    return invariance


def _mixture(spec: RedundancySpec) -> list:
    b_heavy, b_light, s = MIXTURE
    mix = Design([power_law_spectrum(spec.p, b_heavy), power_law_spectrum(spec.p, b_light)])
    theta = source_target(mix.covariance_diag, s)
    c = learning_curve(mix, theta, spec.ns, noise_std=NOISE, seeds=spec.seeds)
    row = _row(f"mixture of beta {b_heavy} and {b_light}", b_heavy, s, c, fit_rate(c, n_min=spec.n_min))[0]
    row["predicted_if_lighter_tail"] = round(predicted_exponent(b_light, s), 3)
    return [row]


def measure(spec: RedundancySpec) -> RedundancyResults:
    """The learning curves and fitted exponents of every case, with the wall time of each part."""
    t0 = time.time()
    rates, curves = _rates(spec)
    t_rates = time.time() - t0
    t1 = time.time()
    invariance = _invariance(spec, rates)
    t_inv = time.time() - t1
    t2 = time.time()
    mixture = _mixture(spec)
    t_mix = time.time() - t2
    timing = {"rates_s": round(t_rates), "invariance_s": round(t_inv), "mixture_s": round(t_mix)}
    return results(spec, rates, invariance, mixture, timing, curves)


def write_outputs(r: RedundancyResults, out: Path, figures: bool = True) -> None:
    """The tables, run.json, report.md and (with ``figures``) learning_curves.png in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        rows = getattr(r, name)
        write_csv(out / f"{name}.csv", rows[0], rows)
    if figures:
        _figure(r.curves, out / "learning_curves.png")
    (out / "run.json").write_text(json.dumps({"timing_s": r.timing, "ns": [int(n) for n in r.spec.ns],
                                              "p": r.spec.p, "seeds": r.spec.seeds,
                                              "n_min": r.spec.n_min}, indent=1) + "\n")
    (out / "report.md").write_text(sections(r))


def _read(path) -> list[dict]:
    with io.StringIO(rundir.as_path(path).read_text(encoding="utf-8"), newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r.update({k: float(r[k]) for k in NUMBERS if k in r}, within_ci=r["within_ci"] == "True")
    return rows


def read_results(out) -> RedundancyResults:
    """The results from the tables and run.json already in ``out`` (local or gs://), so the text
    can be revised without recomputing the learning curves (no curves: no figure)."""
    out = rundir.as_path(out)
    meta = json.loads((out / "run.json").read_text())
    rows = {name: _read(out / f"{name}.csv") for name in TABLES}
    spec = RedundancySpec(betas=sorted({r["beta"] for r in rows["rates"]}),
                          sources=sorted({r["s"] for r in rows["rates"]}), ns=meta["ns"], p=meta["p"],
                          seeds=meta["seeds"], n_min=meta["n_min"])
    return results(spec, rows["rates"], rows["invariance"], rows["mixture"], meta["timing_s"])


def write_markdown(out) -> None:
    """report.md from the tables and run.json in ``out`` (local or gs://)."""
    (rundir.as_path(out) / "report.md").write_text(sections(read_results(out)))


def _table(rows, cols):
    return markdown_table(cols, [[r.get(c, "") for c in cols] for r in rows]) + "\n"


def _power_sentence(r: RedundancyResults) -> str:
    """How much the check says about (β, s): the most intervals one constant exponent, blind to
    β and s, lies inside (a grid of 0.01), beside the formula's count."""
    inside, lo, hi = r.constant
    where = f"c = {lo:.2f}" + (f"–{hi:.2f}" if hi > lo else "")
    verdict = ("as many as the formula or more: this check does not tell the law from no dependence "
               "on β and s" if inside >= r.hits else "fewer than the formula")
    return (f"**Power.** One constant exponent, the same for every (β, s), lies inside {inside} "
            f"of {len(r.rates)} intervals ({where}), {verdict}. "
            f"Fitted − predicted ranges from {r.departures[0]:+.3f} to {r.departures[1]:+.3f}. The "
            "check with power is the ridge test's synthetic grid (`tests/analysis/science/test_ridge_exponent.py`, "
            "`analysis/data_exponent/`): measured against the law's expected exponent for the "
            "design (finite n), unbiased with no allowance, a constant exponent is rejected on 6–7 "
            "of its 9 cells.")


def _verdict(r: RedundancyResults) -> str:
    misses = [f"β={m['beta']}, s={m['s']} (fitted {m['fitted']} [{m['ci_lo']}, {m['ci_hi']}], "
              f"predicted {m['predicted']}: {direction})" for m, direction in r.misses]
    return (
        f"**Verdict.** The fitted exponent's interval contains 2βs/(2βs+1) in {r.hits} of "
        f"{len(r.rates)} (β, s) cases"
        + (f"; not in: {'; '.join(misses)}" if misses else "") + ". "
        + ("For a miss, two finite-size effects are candidates and this study does not separate "
           f"them: the truncation at p = {r.spec.p} features removes the target's tail beyond p (largest "
           "for the smallest 2βs, where the tail decays as i^(−1−2βs)), and the crossover from the "
           "noiseless to the noisy regime (Cui et al. 2021) gives faster slopes before the "
           "asymptotic rate sets in. " if misses else "")
        + "Every case uses the same seeds (common random numbers), so the wiggles of the local "
        "slopes repeat from case to case; they are sampling noise shared by the cases, not a "
        "property of the law. At these sizes the intervals are ±0.05–0.15 wide: the check can "
        "tell the formula from rates that differ by more than that (e.g. the noiseless rate "
        "2βs), not finer departures. " + _power_sentence(r) + "\n\n")


def sections(r: RedundancyResults) -> str:
    """report.md: the claim, the method, the verdict and its power, the three tables, the command
    and the wall times (formatting `r`, computing nothing)."""
    spec, timing = r.spec, r.timing
    cols = ["case", "beta", "s", "predicted", "fitted", "ci_lo", "ci_hi", "within_ci", "local_slopes"]
    return (
        "# Redundancy law: a synthetic check\n\n"
        "Kernel (here: linear-feature) ridge regression on Gaussian features whose covariance has "
        "eigenvalues λ_i = i^(−β), target θ* on the borderline of source smoothness s "
        "(λ_i θ*_i² = λ_i^(2s)/i), noise σ = 1. The claim: excess risk ∝ n^(−2βs/(2βs+1)) at the "
        "best ridge strength.\n\n"
        f"**Method.** p = {spec.p} features; n = {', '.join(map(str, spec.ns))}; {spec.seeds} independent "
        "seeds, samples nested within a seed; excess risk computed exactly as (θ̂ − θ*)ᵀΣ(θ̂ − θ*); "
        "ridge λ tuned per n on a log grid (oracle: the λ minimising the mean risk over seeds); "
        f"the exponent is the least-squares slope of log risk on log n for n ≥ {spec.n_min}; interval: "
        "2.5–97.5 percentiles over 400 resamples of the seeds (λ re-tuned in each). "
        "`local_slopes` are the slopes between consecutive n.\n\n"
        + _verdict(r) +
        "## Exponent against the formula\n\n" + _table(r.rates, cols) +
        "\n## Invariance under a boundedly invertible change of features (β = 2, s = 0.5)\n\n"
        "A rotation alone changes nothing ridge regression sees (its risks equal the identity's "
        "to rounding); a rotation after a diagonal rescaling with condition number 10 changes the "
        "constants, and the claim is that the exponent stays.\n\n" + _table(r.invariance, cols) +
        "\n## Mixture of two spectra\n\n"
        "Each sample's features come from one of two Gaussians (β = 1.5 and β = 3) with equal "
        "probability; the target is set on the mixture's covariance. The claim: the heavier tail "
        "(β = 1.5) sets the exponent.\n\n"
        + _table(r.mixture, cols + ["predicted_if_lighter_tail"]) +
        "\n## Reproduce\n\n`" + shlex.join(["depthdelusion", "redundancy-study",
                                            *command_words(RedundancyOptions(seeds=spec.seeds)),
                                            "--out", "analysis/redundancy"]) + "` "
        f"(seeds 0..{spec.seeds - 1} per case, transforms from seed 2026). "
        f"Wall time on the 2-core CPU, shared with other jobs: rates {timing['rates_s']} s, "
        f"invariance {timing['invariance_s']} s, mixture {timing['mixture_s']} s.\n")


def _figure(curves, path: Path) -> None:
    # here, not at the top: only a run that draws pays matplotlib's import (4 s measured), after Agg is chosen
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    betas = sorted({b for b, _ in curves})
    fig, axes = plt.subplots(1, len(betas), figsize=(4 * len(betas), 3.4), squeeze=False)
    for ax, beta in zip(axes[0], betas):
        for (b, s), c in sorted(curves.items()):
            if b != beta:
                continue
            risk, _ = c.oracle()
            line, = ax.loglog(c.ns, risk, "o-", label=f"s={s}")
            pred = predicted_exponent(b, s)
            ax.loglog(c.ns, risk[-1] * (c.ns / c.ns[-1]) ** -pred, "--", color=line.get_color(),
                      alpha=0.6)
        ax.set_title(f"β = {beta} (dashed: n^(−2βs/(2βs+1)))", fontsize=9)
        ax.set_xlabel("n")
        ax.set_ylabel("excess risk at the best ridge λ")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_command(*, out: str, options: RedundancyOptions = RedundancyOptions()) -> int:
    """`depthdelusion redundancy-study` (the parser is `depthdelusion.cli`, from `RedundancyOptions`)."""
    if options.report_only:
        write_markdown(out)
    else:
        spec = from_flags(RedundancySpec, {"seeds": options.seeds})
        with rundir.local_dir(out) as where:  # a gs:// OUT: written here, then copied up
            write_outputs(measure(spec), where, figures=not options.no_figures)
    print((rundir.as_path(out) / "report.md").read_text().split("## Exponent")[0])
    return 0


run_command.option_groups = {"options": RedundancyOptions}
