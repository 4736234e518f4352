"""The public-shapes study: the paper's critical-depth law tested on runs nobody here trained.

Reads the Gemstones suite (McLeish et al. 2025) by name — ``gemstones`` (no cool-down, "hot"),
``gemstones_cooldown`` and ``gemstones_lr_half`` (the same shapes at half the learning rate) —
through the package's table download and cache (``DEPTHDELUSION_TABLES_URL``,
``DEPTHDELUSION_CACHE``). For the hot and cooldown tables and each parameter-count convention
(:data:`CONVENTIONS`: N = N_nonemb + ε·N_emb with ε = 1 total, ε = 0 Kaplan's non-embedding N, ε
fitted, ε = 1/2 the authors' one-matrix ``--no_embeds``) it fits every law of :data:`LAWS` by least squares, with a cluster
bootstrap over whole runs (a shape's checkpoints are one run), and runs the calibrated tests of
:mod:`depthdelusion.analysis.report.verdict` with a per-run random effect in the parametric bootstrap.
The answers (critical depth, learning-rate interaction, the paper's audit) are in
:mod:`.answers`, the compute-optimal shape in :mod:`.optimal`, the
prediction test and the check on Gadre et al. in :mod:`.prediction`, the figures in
:mod:`.figures`, the report in :mod:`.report` (its later sections in :mod:`.sections`).

The study's shape: its spec (:class:`PublicShapesSpec`, from the command's flags by
:func:`spec_from_flags`), ``results.measure`` to a frozen ``PublicShapesResults``,
whose report, CSVs and figures ``report`` writes.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from depthdelusion.analysis import fit
from depthdelusion.analysis.fitting.embedding_weight import fit_embedding_weight
from depthdelusion.analysis.fitting.options import BOOTSTRAP
from depthdelusion.analysis.fitting.result import parameter_status
from depthdelusion.analysis.report.verdict import critical_depth_verdict, penalty_verdicts
from depthdelusion.analysis.table.param_count import param_pieces
from depthdelusion.analysis.table.published import load_table
from depthdelusion.config import bounded
from depthdelusion.studies.common.spec import from_flags, spec_error
from depthdelusion.studies.public_shapes.options import (
    DEFAULT_CONVENTIONS,
    FITTED_TABLES,
    PARTS,
    PublicShapesOptions,
)

BASELINES = ("kaplan", "chinchilla")
KINKS = ("depth_delusion", "depth_delusion_relative", "depth_delusion_power")
SMOOTH = ("shape_quadratic", "depth_softplus", "gemstones_width_depth")
LAWS = BASELINES + KINKS + SMOOTH
#: the kink law whose critical depth D_crit = c·W^p has an exponent to set against the paper's
POWER_KINK = "depth_delusion_power"
#: N conventions, each N = N_nonemb + ε·N_emb with N_emb the two untied 50,304×W vocabulary
#: matrices (issue 62): ε = 1 total, ε = 0 Kaplan's non-embedding N, ε fitted (profile), and the
#: authors' ``--no_embeds`` (one matrix removed, the LM head still counted: ε = 1/2)
CONVENTIONS = ("total", "nonembedding", "fitted", "no_embeds")
EMBEDDING_WEIGHT = {"total": 1.0, "nonembedding": 0.0, "no_embeds": 0.5}
#: the law whose least-squares profile fits ε: the shape-agnostic one, so that ε is the count
#: that best makes loss a function of N and T alone (a shape law would trade ε for its shape terms)
EPSILON_LAW = "chinchilla"
CONVENTION_TEXT = {
    "total": "total N: params_active_precise, both untied 50,304×W vocabulary matrices counted (ε = 1)",
    "nonembedding": "Kaplan's non-embedding N: both vocabulary matrices removed (ε = 0)",
    "fitted": f"N = N_nonemb + ε·N_emb with ε fitted per table (least-squares profile of {EPSILON_LAW})",
    "no_embeds": "the authors' --no_embeds N: one vocabulary matrix removed, the LM head still counted "
                 "(ε = 1/2)"}
FLOP_CONVENTION = ("C = 6·N·T, N in the arm's convention, T tokens (the table gives no FLOP "
                   "column; Gemstones' own plots use 6·N·T with N = params_active_precise)")


@dataclass(frozen=True)
class PublicShapesSpec:
    """What one run of the study does: the flags of `depthdelusion public-shapes`
    (:func:`spec_from_flags`), each field checked as a study spec's (`spec.from_flags`)."""

    bootstrap: int = bounded(BOOTSTRAP, ge=0, note=" (cluster-bootstrap refits per law)")
    replicates: int = bounded(PublicShapesOptions.replicates, ge=0, note=" (parametric-bootstrap replicates per test)")
    seed: int = bounded(0, ge=0)
    tables: list[Literal[FITTED_TABLES]] = field(default_factory=lambda: list(FITTED_TABLES))
    conventions: list[Literal[CONVENTIONS]] = field(default_factory=lambda: list(DEFAULT_CONVENTIONS))
    laws: list[Literal[LAWS]] = field(default_factory=lambda: list(LAWS))
    lr_interaction: bool = True   # gemstones against gemstones_lr_half (4.3)
    parts: list[Literal[PARTS]] = field(default_factory=lambda: list(PARTS))
    workers: int = bounded(1, ge=1, note=" (processes for the part huber)")

    def validate(self) -> None:
        for name, known in (("tables", FITTED_TABLES), ("conventions", CONVENTIONS), ("laws", LAWS),
                            ("parts", PARTS)):
            if not getattr(self, name):
                raise spec_error(name, getattr(self, name), f"need at least one of {', '.join(known)}")
        if "chinchilla" not in self.laws:
            raise spec_error("laws", self.laws, "must include chinchilla: the tests and the audit are against it")

    @property
    def core(self) -> bool:
        """Whether the core (part "laws") runs: report.md, else report_partial.md."""
        return "laws" in self.parts

    @property
    def arms(self) -> list[tuple[str, str]]:
        """(table, N convention) of every arm, in the report's order."""
        return [(t, c) for t in self.tables for c in self.conventions]


def spec_from_flags(**flags) -> PublicShapesSpec:
    """The spec from the command's flags (a comma-separated list split here; None: the
    default), every field checked as in a study YAML (`spec.from_flags`); a bad one is a
    ValueError naming its flag."""
    lists = ("tables", "conventions", "laws", "parts")
    raw = {k: [t.strip() for t in v.split(",") if t.strip()] if k in lists and isinstance(v, str) else v
           for k, v in flags.items() if v is not None}
    return from_flags(PublicShapesSpec, raw)


@dataclass(frozen=True)
class Arm:
    """One table in one N convention: its fits and the calibrated tests."""

    table: str
    convention: str
    runs: object
    clusters: np.ndarray
    fits: dict = field(default_factory=dict)
    penalties: tuple = ()                            # verdict.PenaltyVerdict per kink law
    critical: dict = field(default_factory=dict)    # kink law -> verdict.CriticalDepthVerdict
    seconds: float = 0.0
    epsilon: float = 1.0                            # the weight of N_emb in the arm's N
    weight: object = None                           # embedding_weight.EmbeddingWeight when fitted

    @property
    def label(self) -> str:
        return f"{self.table} ({self.convention} N)"

    @property
    def convention_text(self) -> str:
        """The arm's N convention in words, with ε (and its interval when fitted)."""
        if self.weight is None:
            return CONVENTION_TEXT[self.convention]
        return (f"{CONVENTION_TEXT[self.convention]}: ε = {self.weight.value:.3g} "
                f"{self.weight.interval_text()}")

    @property
    def n_shapes(self) -> int:
        return len(set(self.clusters.tolist()))


def shape_labels(runs) -> np.ndarray:
    """One label per row naming its run: the shape WIDTHxDEPTH (one run per shape in Gemstones)."""
    return np.array([f"{int(w)}x{int(d)}" for w, d in zip(runs.width, runs.depth)])


def convention_runs(name: str, convention: str, epsilon: float | None = None):
    """``(runs, ε, weight)``: the published table ``name`` with N = N_nonemb + ε·N_emb in
    ``convention`` (:data:`EMBEDDING_WEIGHT`; "fitted": ε from :data:`EPSILON_LAW`'s profile on
    this table, ``weight`` its EmbeddingWeight, unless ``epsilon`` gives it)."""
    return with_convention(load_table(name), convention, epsilon)


def with_convention(runs, convention: str, epsilon: float | None = None, **fit_kwargs):
    """:func:`convention_runs` for a loaded table ``runs``; ``fit_kwargs`` go to the fits of ε's
    profile (``group_offsets=True`` where the laws fit one offset per group)."""
    if convention == "total":
        return runs, 1.0, None
    weight = None
    if epsilon is None:
        if convention == "fitted":
            weight = fit_embedding_weight(runs, EPSILON_LAW, **fit_kwargs)
            epsilon = weight.value
        else:
            epsilon = EMBEDDING_WEIGHT[convention]
    n_nonemb, n_emb, _ = param_pieces(runs)
    return dataclasses.replace(runs, params=n_nonemb + epsilon * n_emb), float(epsilon), weight


def fit_laws(runs, clusters, laws, *, bootstrap: int, seed: int, loss: str = "ls") -> dict:
    """Every law by least squares (``loss`` "huber": Huber on log-loss), its intervals from
    ``bootstrap`` cluster resamples (whole runs). Profile-likelihood intervals are not computed:
    they would treat each checkpoint as an independent run."""
    return {law: fit(runs, law, bootstrap=bootstrap, seed=seed, profile=False, leave_one_out=False,
                     diagnostics=False, clusters=clusters, loss=loss) for law in laws}


def fit_arm(table: str, convention: str, laws=LAWS, *, bootstrap: int, replicates: int,
            seed: int) -> Arm:
    """Fit ``laws`` to one table in one convention and test each kink law: λ = 0 against
    chinchilla, and the kink against the best smooth law, both by a parametric bootstrap with a
    per-run random effect (``replicates``; 0: Davies' bound for λ = 0, no kink test)."""
    start = time.perf_counter()
    runs, epsilon, weight = convention_runs(table, convention)
    clusters = shape_labels(runs)
    fits = fit_laws(runs, clusters, laws, bootstrap=bootstrap, seed=seed)
    penalties = penalty_verdicts(fits, runs, replicates=replicates, seed=seed, clusters=clusters)
    critical = {v.law: critical_depth_verdict(fits, runs, v.law, v, replicates=replicates, seed=seed,
                                              clusters=clusters) for v in penalties}
    return Arm(table, convention, runs, clusters, fits, tuple(penalties), critical,
               time.perf_counter() - start, epsilon, weight)


def parameter_rows(arms: list[Arm]) -> list[dict]:
    """laws.csv: one row per arm × law × parameter: value, status, cluster-bootstrap interval."""
    rows = []
    for arm in arms:
        for law, f in arm.fits.items():
            for name, value in f.params.items():
                lo, hi = (f.ci_bootstrap or {}).get(name, (np.nan, np.nan))
                rows.append({"table": arm.table, "n_convention": arm.convention,
                             "epsilon": significant(arm.epsilon, 3), "law": law,
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

