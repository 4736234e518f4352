"""The public-shapes study: the paper's critical-depth law tested on runs nobody here trained.

Reads the Gemstones suite (McLeish et al. 2025) by name — ``gemstones`` (no cool-down, "hot"),
``gemstones_cooldown`` and ``gemstones_lr_half`` (the same shapes at half the learning rate) —
through the package's table download and cache (``DEPTHDELUSION_TABLES_URL``,
``DEPTHDELUSION_CACHE``). For the hot and cooldown tables and both parameter-count conventions
(total: ``params_active_precise``, embeddings included; non-embedding: that less 50,304·W, the
authors' own subtraction) it fits every law of :data:`LAWS` by least squares, with a cluster
bootstrap over whole runs (a shape's checkpoints are one run), and runs the calibrated tests of
:mod:`depthdelusion.analysis.report.verdict` with a per-run random effect in the parametric bootstrap.
The answers (critical depth, learning-rate interaction, the paper's audit) are in
:mod:`.public_shapes_answers`, the compute-optimal shape in :mod:`.public_shapes_optimal`, the
prediction test and the check on Gadre et al. in :mod:`.public_shapes_prediction`, the figures in
:mod:`.public_shapes_figures`, the report in :mod:`.public_shapes_report` (its later sections in
:mod:`.public_shapes_sections`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

BASELINES = ("kaplan", "chinchilla")
KINKS = ("depth_delusion", "depth_delusion_relative", "depth_delusion_power")
SMOOTH = ("shape_quadratic", "depth_softplus", "gemstones_width_depth")
LAWS = BASELINES + KINKS + SMOOTH
#: the kink law whose critical depth D_crit = c·W^p has an exponent to set against the paper's
POWER_KINK = "depth_delusion_power"
FITTED_TABLES = ("gemstones", "gemstones_cooldown")
LR_TABLES = ("gemstones", "gemstones_lr_half")
CONVENTIONS = ("total", "non_embedding")
FLOP_CONVENTION = ("C = 6·N·T, N in the arm's convention, T tokens (the table gives no FLOP "
                   "column; Gemstones' own plots use 6·N·T with N = params_active_precise)")


@dataclass
class Arm:
    """One table in one N convention: its fits and the calibrated tests."""

    table: str
    convention: str
    runs: object
    clusters: np.ndarray
    fits: dict = field(default_factory=dict)
    penalties: list = field(default_factory=list)   # verdict.PenaltyVerdict per kink law
    critical: dict = field(default_factory=dict)    # kink law -> verdict.CriticalDepthVerdict
    seconds: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.table} ({self.convention} N)"

    @property
    def n_shapes(self) -> int:
        return len(set(self.clusters.tolist()))


def shape_labels(runs) -> np.ndarray:
    """One label per row naming its run: the shape WIDTHxDEPTH (one run per shape in Gemstones)."""
    return np.array([f"{int(w)}x{int(d)}" for w, d in zip(runs.width, runs.depth)])


def table_runs(name: str, convention: str):
    """The published table ``name`` with N in ``convention`` (total: as the table gives it)."""
    from depthdelusion.analysis.report.consistency import with_param_convention
    from depthdelusion.analysis.table.published import load_table

    runs = load_table(name)
    if convention == "total":
        return runs
    return with_param_convention(runs, convention)[0]


def fit_laws(runs, clusters, laws, *, bootstrap: int, seed: int) -> dict:
    """Every law by least squares, its intervals from ``bootstrap`` cluster resamples (whole runs).
    Profile-likelihood intervals are not computed: they would treat each checkpoint as an
    independent run."""
    from depthdelusion.analysis import fit

    return {law: fit(runs, law, bootstrap=bootstrap, seed=seed, profile=False, leave_one_out=False,
                     diagnostics=False, clusters=clusters) for law in laws}


def fit_arm(table: str, convention: str, laws=LAWS, *, bootstrap: int, replicates: int,
            seed: int) -> Arm:
    """Fit ``laws`` to one table in one convention and test each kink law: λ = 0 against
    chinchilla, and the kink against the best smooth law, both by a parametric bootstrap with a
    per-run random effect (``replicates``; 0: Davies' bound for λ = 0, no kink test)."""
    import time

    from depthdelusion.analysis.report.verdict import (
        critical_depth_verdict,
        penalty_verdicts,
    )

    start = time.perf_counter()
    runs = table_runs(table, convention)
    arm = Arm(table, convention, runs, shape_labels(runs))
    arm.fits = fit_laws(runs, arm.clusters, laws, bootstrap=bootstrap, seed=seed)
    arm.penalties = penalty_verdicts(arm.fits, runs, replicates=replicates, seed=seed, clusters=arm.clusters)
    for v in arm.penalties:
        arm.critical[v.law] = critical_depth_verdict(arm.fits, runs, v.law, v, replicates=replicates,
                                                     seed=seed, clusters=arm.clusters)
    arm.seconds = time.perf_counter() - start
    return arm


def parameter_rows(arms: list[Arm]) -> list[dict]:
    """laws.csv: one row per arm × law × parameter: value, status, cluster-bootstrap interval."""
    from depthdelusion.analysis.fitting.result import parameter_status

    rows = []
    for arm in arms:
        for law, f in arm.fits.items():
            for name, value in f.params.items():
                lo, hi = (f.ci_bootstrap or {}).get(name, (np.nan, np.nan))
                rows.append({"table": arm.table, "n_convention": arm.convention, "law": law,
                             "parameter": name, "value": significant(value), "status": parameter_status(f, name),
                             "ci95_low": significant(lo), "ci95_high": significant(hi), "rows": f.n, "runs": arm.n_shapes,
                             "rss": significant(f.rss), "aicc": round(f.aicc, 1),
                             "bootstrap_kept": f.n_bootstrap})
    return rows


def significant(v, digits: int = 4):
    """A committed number to ``digits`` significant digits (the data support no more; the last
    bits would differ between BLAS builds)."""
    v = float(v)
    return v if not np.isfinite(v) or v == 0 else float(f"{v:.{digits}g}")


def verdict_rows(arms: list[Arm]) -> list[dict]:
    """tests.csv: per arm and kink law, λ = 0 against chinchilla and the kink against the best
    smooth law, each with its statistic, p-value, method and answer."""
    rows = []
    for arm in arms:
        for v in arm.penalties:
            rows.append(_test_row(arm, "lambda = 0", v.law, v.baseline, v.test, v.answer, v.d_aicc))
            c = arm.critical[v.law]
            rows.append(_test_row(arm, "kink vs best smooth", v.law, c.smooth, c.test, c.answer, c.d_aicc))
    return rows


def _test_row(arm, test, law, against, t, answer, d_aicc) -> dict:
    return {"table": arm.table, "n_convention": arm.convention, "test": test, "law": law,
            "against": against, "lr": None if t is None else round(t.lr, 2),
            "p": None if t is None else round(t.p, 3), "method": "" if t is None else t.method,
            "replicates": None if t is None else t.replicates, "answer": answer,
            "d_aicc": round(d_aicc, 1)}
