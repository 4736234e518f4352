"""The synthetic check of the redundancy law, written to a directory:

    depthdelusion redundancy-study --out analysis/redundancy

1. rates: fitted data-scaling exponent of ridge regression against 2βs/(2βs+1) over a (β, s) grid;
2. invariance: the same (β, s) after a boundedly invertible change of features (a random rotation
   after a diagonal rescaling of condition 10) and after a rotation alone;
3. mixture: an equal mixture of two spectra (β = 1.5 and 3), whose exponent should follow the
   heavier tail (β = 1.5).
Files: rates.csv, invariance.csv, mixture.csv, report.md, learning_curves.png (with --figures);
OUT may be local or gs:// (written to a local directory, then copied up).
"""
from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

import numpy as np

from depthdelusion import rundir

from ..analysis.formats.table_text import markdown_table, write_csv
from ..analysis.science.redundancy import (
    Design,
    bounded_transform,
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
SEEDS = 10
NOISE = 1.0


def _row(label, beta, s, curve, rate, **extra):
    pred = predicted_exponent(beta, s)
    return {"case": label, "beta": beta, "s": s, "predicted": round(pred, 3),
            "fitted": round(rate.exponent, 3), "ci_lo": round(rate.ci[0], 3),
            "ci_hi": round(rate.ci[1], 3), "within_ci": rate.contains(pred),
            "local_slopes": " ".join(f"{b:.2f}" for _, b in rate.local), **extra}, curve


def run(out: Path, *, betas=BETAS, sources=SOURCES, ns=NS, p=P, seeds=SEEDS, n_min=N_MIN,
        figures=True) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    rates, curves = [], {}
    for beta in betas:
        lam = power_law_spectrum(p, beta)
        for s in sources:
            c = learning_curve(Design([lam]), source_target(lam, s), ns, noise_std=NOISE,
                               seeds=seeds)
            row, curves[(beta, s)] = _row("plain", beta, s, c, fit_rate(c, n_min=n_min))
            rates.append(row)
    t_rates = time.time() - t0

    t1 = time.time()
    rng = np.random.default_rng(2026)
    beta, s = 2.0, 0.5
    lam = power_law_spectrum(p, beta)
    theta = source_target(lam, s)
    invariance = [r for r in rates if (r["beta"], r["s"]) == (beta, s)]
    invariance = [dict(invariance[0], case="identity")] if invariance else []
    for label, A in (("rotation", random_rotation(p, rng)),
                     ("rotation x rescaling (cond 10)", bounded_transform(p, rng, 10.0))):
        c = learning_curve(Design([lam], transform=A), theta, ns, noise_std=NOISE, seeds=seeds)
        invariance.append(_row(label, beta, s, c, fit_rate(c, n_min=n_min))[0])
    t_inv = time.time() - t1

    t2 = time.time()
    mixture = []
    b_heavy, b_light = 1.5, 3.0
    mix = Design([power_law_spectrum(p, b_heavy), power_law_spectrum(p, b_light)])
    for s in (0.5,):
        theta = source_target(mix.covariance_diag, s)
        c = learning_curve(mix, theta, ns, noise_std=NOISE, seeds=seeds)
        rate = fit_rate(c, n_min=n_min)
        row = _row(f"mixture of beta {b_heavy} and {b_light}", b_heavy, s, c, rate)[0]
        row["predicted_if_lighter_tail"] = round(predicted_exponent(b_light, s), 3)
        mixture.append(row)
    t_mix = time.time() - t2

    timing = {"rates_s": round(t_rates), "invariance_s": round(t_inv), "mixture_s": round(t_mix)}
    for name, rows in (("rates", rates), ("invariance", invariance), ("mixture", mixture)):
        write_csv(out / f"{name}.csv", rows[0], rows)
    if figures:
        _figure(curves, out / "learning_curves.png")
    (out / "run.json").write_text(json.dumps({"timing_s": timing, "ns": [int(n) for n in ns], "p": p,
                                              "seeds": seeds, "n_min": n_min}, indent=1) + "\n")
    write_markdown(out)
    return {"rates": rates, "invariance": invariance, "mixture": mixture, "timing": timing}


def _read(path) -> list[dict]:
    with io.StringIO(rundir.as_path(path).read_text(encoding="utf-8"), newline="") as fh:
        return list(csv.DictReader(fh))


def write_markdown(out) -> None:
    """report.md from the tables and run.json in ``out`` (local or gs://), so the text can be
    revised without recomputing the learning curves."""
    out = rundir.as_path(out)
    meta = json.loads((out / "run.json").read_text())
    rows = {name: _read(out / f"{name}.csv") for name in ("rates", "invariance", "mixture")}
    for table in rows.values():
        for r in table:
            r["within_ci"] = r["within_ci"] == "True"
    (out / "report.md").write_text(_markdown(rows["rates"], rows["invariance"], rows["mixture"],
                                             meta["timing_s"], meta["ns"], meta["p"],
                                             meta["seeds"], meta["n_min"]))


def _table(rows, cols):
    return markdown_table(cols, [[r.get(c, "") for c in cols] for r in rows]) + "\n"


def _power_sentence(rates) -> str:
    """How much the check says about (β, s): the most intervals one constant exponent, blind to
    β and s, lies inside (a grid of 0.01), beside the formula's count."""
    grid = np.round(np.arange(0.0, 1.0001, 0.01), 2)
    inside = np.array([sum(float(r["ci_lo"]) <= c <= float(r["ci_hi"]) for r in rates) for c in grid])
    best = grid[inside == inside.max()]
    where = f"c = {best.min():.2f}" + (f"–{best.max():.2f}" if best.max() > best.min() else "")
    formula = sum(r["within_ci"] for r in rates)
    departures = [float(r["fitted"]) - float(r["predicted"]) for r in rates]
    verdict = ("as many as the formula or more: this check does not tell the law from no dependence "
               "on β and s" if inside.max() >= formula else "fewer than the formula")
    return (f"**Power.** One constant exponent, the same for every (β, s), lies inside {inside.max()} "
            f"of {len(rates)} intervals ({where}), {verdict}. "
            f"Fitted − predicted ranges from {min(departures):+.3f} to {max(departures):+.3f}. The "
            "check with power is the ridge test's synthetic grid (`tests/analysis/science/test_ridge_exponent.py`, "
            "`analysis/data_exponent/`): measured against the law's expected exponent for the "
            "design (finite n), unbiased with no allowance, a constant exponent is rejected on 6–7 "
            "of its 9 cells.")


def _markdown(rates, invariance, mixture, timing, ns, p, seeds, n_min) -> str:
    hits = sum(r["within_ci"] for r in rates)
    misses = [f"β={r['beta']}, s={r['s']} (fitted {r['fitted']} [{r['ci_lo']}, {r['ci_hi']}], "
              f"predicted {r['predicted']}: {'faster' if float(r['fitted']) > float(r['predicted']) else 'slower'})"
              for r in rates if not r["within_ci"]]
    cols = ["case", "beta", "s", "predicted", "fitted", "ci_lo", "ci_hi", "within_ci", "local_slopes"]
    return (
        "# Redundancy law: a synthetic check\n\n"
        "Kernel (here: linear-feature) ridge regression on Gaussian features whose covariance has "
        "eigenvalues λ_i = i^(−β), target θ* on the borderline of source smoothness s "
        "(λ_i θ*_i² = λ_i^(2s)/i), noise σ = 1. The claim: excess risk ∝ n^(−2βs/(2βs+1)) at the "
        "best ridge strength.\n\n"
        f"**Method.** p = {p} features; n = {', '.join(map(str, ns))}; {seeds} independent seeds, "
        "samples nested within a seed; excess risk computed exactly as (θ̂ − θ*)ᵀΣ(θ̂ − θ*); "
        "ridge λ tuned per n on a log grid (oracle: the λ minimising the mean risk over seeds); "
        f"the exponent is the least-squares slope of log risk on log n for n ≥ {n_min}; interval: "
        "2.5–97.5 percentiles over 400 resamples of the seeds (λ re-tuned in each). "
        "`local_slopes` are the slopes between consecutive n.\n\n"
        f"**Verdict.** The fitted exponent's interval contains 2βs/(2βs+1) in {hits} of "
        f"{len(rates)} (β, s) cases"
        + (f"; not in: {'; '.join(misses)}" if misses else "") + ". "
        + ("For a miss, two finite-size effects are candidates and this study does not separate "
           f"them: the truncation at p = {p} features removes the target's tail beyond p (largest "
           "for the smallest 2βs, where the tail decays as i^(−1−2βs)), and the crossover from the "
           "noiseless to the noisy regime (Cui et al. 2021) gives faster slopes before the "
           "asymptotic rate sets in. " if misses else "")
        + "Every case uses the same seeds (common random numbers), so the wiggles of the local "
        "slopes repeat from case to case; they are sampling noise shared by the cases, not a "
        "property of the law. At these sizes the intervals are ±0.05–0.15 wide: the check can "
        "tell the formula from rates that differ by more than that (e.g. the noiseless rate "
        "2βs), not finer departures. " + _power_sentence(rates) + "\n\n"
        "## Exponent against the formula\n\n" + _table(rates, cols) +
        "\n## Invariance under a boundedly invertible change of features (β = 2, s = 0.5)\n\n"
        "A rotation alone changes nothing ridge regression sees (its risks equal the identity's "
        "to rounding); a rotation after a diagonal rescaling with condition number 10 changes the "
        "constants, and the claim is that the exponent stays.\n\n" + _table(invariance, cols) +
        "\n## Mixture of two spectra\n\n"
        "Each sample's features come from one of two Gaussians (β = 1.5 and β = 3) with equal "
        "probability; the target is set on the mixture's covariance. The claim: the heavier tail "
        "(β = 1.5) sets the exponent.\n\n"
        + _table(mixture, cols + ["predicted_if_lighter_tail"]) +
        f"\n## Reproduce\n\n`depthdelusion redundancy-study --out "
        f"analysis/redundancy` (seeds 0..{seeds - 1} per case, transforms from seed 2026). "
        f"Wall time on the 2-core CPU, shared with other jobs: rates {timing['rates_s']} s, "
        f"invariance {timing['invariance_s']} s, mixture {timing['mixture_s']} s.\n")


def _figure(curves, path: Path) -> None:
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


def run_command(*, out: str, seeds: int = SEEDS, no_figures: bool = False,
                report_only: bool = False) -> int:
    """`depthdelusion redundancy-study` (the parser is `depthdelusion.cli`)."""
    if report_only:
        write_markdown(out)
    else:
        with rundir.local_dir(out) as where:  # a gs:// OUT: written here, then copied up
            run(where, seeds=seeds, figures=not no_figures)
    print((rundir.as_path(out) / "report.md").read_text().split("## Exponent")[0])
    return 0
