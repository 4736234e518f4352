"""The depth-confound study's laws: per arm, the critical-depth law, a smooth shape law and the
shape-agnostic baseline fitted to every finished seed at equal tokens, with the calibrated tests
of the fitting package (a parametric-bootstrap null for λ = 0; the kink against the smooth law).

Rows are seeds, not seed means: the replicates carry the noise the tests simulate, and a cell
with a diverged seed keeps its finite seeds (the diverged ones are counted, not fitted). N is the
total parameter count (embeddings included, as the trainer counts it); the token budget is the
same for every row, so the laws' token terms are absorbed into E.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from depthdelusion.analysis import fit
from depthdelusion.analysis.fitting.result import (
    AT_BOUND,
    NOT_IDENTIFIED,
    bound_reached,
    format_estimate,
    parameter_status,
)
from depthdelusion.analysis.fitting.seed_intervals import lack_of_fit
from depthdelusion.analysis.formats.table_text import markdown_table
from depthdelusion.analysis.law_types import Law, Roles
from depthdelusion.analysis.laws import get_law
from depthdelusion.analysis.report.cells import estimate_with_interval, supported_ends
from depthdelusion.analysis.report.verdict import critical_depth_verdict, penalty_verdicts
from depthdelusion.analysis.table.load import load_runs

KINK, SMOOTH, BASELINE = "depth_delusion", "shape_quadratic", "kaplan"
LAWS = (BASELINE, KINK, SMOOTH)


@dataclass(frozen=True)
class ArmLaws:
    """One arm's fits and verdicts (``fits`` empty when there were too few rows to fit), built
    once by :func:`fit_arm`."""

    arm: str
    rows: int
    diverged: int
    replicates: int  # parametric-bootstrap replicates of each test (0: Davies' bound, no kink test)
    fits: dict = field(default_factory=dict)
    penalty: object = None   # verdict.PenaltyVerdict of the kink law against the baseline
    critical: object = None  # verdict.CriticalDepthVerdict of the kink against the smooth law
    note: str = ""


def fit_arm(arm: str, records: list[dict], diverged: int, *, replicates: int, seed: int) -> ArmLaws:
    """Fit :data:`LAWS` (no bootstrap intervals; profile-likelihood intervals) and run the two
    calibrated tests with ``replicates`` parametric-bootstrap replicates (0: Davies' bound for
    λ = 0 and no kink-vs-smooth test)."""
    if len({(r["depth"], r["width"]) for r in records}) < 3:
        return ArmLaws(arm, len(records), diverged, replicates,
                       note="fewer than 3 cells with a finished seed: nothing fitted")
    runs = load_runs(records)
    fits = {law: fit(runs, law, bootstrap=0, profile=True, leave_one_out=False) for law in LAWS}
    penalty = next(v for v in penalty_verdicts(fits, runs, replicates=replicates, seed=seed) if v.law == KINK)
    critical = critical_depth_verdict(fits, runs, KINK, penalty, replicates=replicates, seed=seed)
    return ArmLaws(arm, len(records), diverged, replicates, fits, penalty, critical)


def csv_rows(results: list[ArmLaws]) -> list[dict]:
    """laws.csv: one row per arm × law × parameter, with its status and profile interval (its
    ends as the data support them: `analysis.report.cells.supported_ends`)."""
    rows = []
    for a in results:
        for law, f in a.fits.items():
            for name, value in f.params.items():
                status = parameter_status(f, name)
                lo, hi = supported_ends(f, name, (f.ci_profile or {}).get(name, (math.nan, math.nan)))
                rows.append({"arm": a.arm, "law": law, "rows": f.n, "k": f.k, "aicc": f"{f.aicc:.2f}",
                             "rmse": f"{f.rmse:.4f}", "parameter": name,
                             "value": "" if status == NOT_IDENTIFIED else
                                      f"{bound_reached(f, name) if status == AT_BOUND else value:.4g}",
                             "ci_lo": f"{lo:.4g}", "ci_hi": f"{hi:.4g}", "status": status})
    return rows


def report_lines(results: list[ArmLaws], setting: str | None = None) -> list[str]:
    """The report's section: per arm the three fits (value or status, profile interval) and the
    two verdict sentences, then the assumptions they rest on. `setting` says what N and T are
    (by default the depth-confound study's: total parameters, one token budget)."""
    lines = ["## Laws per arm" + ("" if setting else " (equal tokens)"), "",
             "Fitted to every finished seed of the arm's reported points (rows = seeds), least squares; "
             + (setting or "N = total parameters (embeddings included); one token budget, so the token term "
                "is absorbed into E") + ". "
             f"Intervals: profile likelihood (F-calibrated at these sizes). Tests: λ = 0 by a "
             f"parametric bootstrap from the `{BASELINE}` fit and the kink (`{KINK}`) against the smooth "
             f"`{SMOOTH}` by a parametric bootstrap from the smooth fit"
             + (f", {results[0].replicates} replicates each, seed 0" if results else "") + ". n.i. = not identified (no estimate printed; its interval is the range the data allow).", ""]
    for a in results:
        head = f"### Arm {a.arm}: {a.rows} rows" + (f" ({a.diverged} diverged seeds left out)" if a.diverged else "")
        lines += [head, ""]
        if not a.fits:
            lines += [a.note, ""]
            continue
        rows = []
        for law, f in a.fits.items():
            params = "; ".join(f"{nm} {estimate_with_interval(f, nm, format_estimate(f, nm), (f.ci_profile or {}).get(nm))}"
                               for nm in f.params)
            rows.append([law, f.k, f"{f.rmse:.4f}", f"{f.aicc:.2f}", params])
        lines += [markdown_table(["law", "K", "RMSE", "AICc", "parameters: value [95% profile]"], rows), "",
                  f"- λ = 0: {a.penalty.sentence()}",
                  f"- Critical depth: {a.critical.sentence()}", ""]
    return lines


NO_DEPTH = "chinchilla"  # E + A·N^(−α) + B·T^(−β): parameters and tokens, no depth term


def no_depth_term(records: list[dict]):
    """The law with parameters and tokens only (:data:`NO_DEPTH`) fitted to seed rows, tested
    against the seed noise by the lack-of-fit F test (:func:`..analysis.seed_intervals.lack_of_fit`):
    a small p says the cell means leave the no-depth law by more than their seeds scatter, i.e.
    depth (or shape) matters beyond N and T. (fit, LackOfFit); None when too few cells."""
    cells = [(r["params"], r["tokens"]) for r in records]
    if len(set(cells)) <= 5:
        return None
    f = fit(load_runs(records), NO_DEPTH, bootstrap=0, profile=False, leave_one_out=False)
    y = [r["loss"] for r in records]
    return f, lack_of_fit(y, f.predict(load_runs(records)), cells, f.k)


def kappa_fixed_law(kappa: float) -> Law:
    """The kink law (:data:`KINK`) with its critical-depth slope fixed, D_crit = ``kappa``·ln W:
    a law of its own (not registered), so that the bootstrap's refits keep κ fixed too (the
    refits take a law, not the fit's fixed values)."""
    kink = get_law(KINK)

    def law(x, A, alpha, lam, gamma, E, B=0.0, beta=0.0):
        return kink.func(x, A, alpha, lam, kappa, gamma, E, B, beta)

    return Law(f"{KINK}_kappa{kappa:g}", law, tuple(p for p in kink.params if p.name != kink.roles.kink),
               kink.formula.replace("κ", f"{kappa:g}"), f"{KINK} with κ fixed at {kappa:g}", kink.source,
               dict(kink.token_params), kink.needs_tokens, "kink",
               Roles(penalty=kink.penalty, capacity_exponent=kink.roles.capacity_exponent,
                     d_crit=lambda W: kappa * np.log(W), d_crit_text=f"{kappa:g}·ln W"))


def kappa_fixed_test(records: list[dict], kappa: float, *, replicates: int, seed: int):
    """The kink law with κ fixed (:func:`kappa_fixed_law`) fitted to seed rows, and its λ = 0
    verdict against :data:`BASELINE` (the calibrated test of ``verdict.penalty_verdicts``: a
    parametric bootstrap from the baseline fit, γ unidentified under the null; Davies' bound at
    ``replicates=0``). (fit, PenaltyVerdict)."""
    runs, law = load_runs(records), kappa_fixed_law(kappa)
    fits = {BASELINE: fit(runs, BASELINE, bootstrap=0, profile=False, leave_one_out=False),
            law.name: fit(runs, law, bootstrap=0, profile=True, leave_one_out=False)}
    verdict = next(v for v in penalty_verdicts(fits, runs, replicates=replicates, seed=seed) if v.law == law.name)
    return fits[law.name], verdict
