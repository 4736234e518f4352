"""Likelihood-ratio tests with a calibrated reference distribution.

The statistic is LR = n·ln(RSS_null / RSS_alt) (Gaussian errors of unknown variance). χ²₁ is its
reference only when the null is an interior point of the alternative with every other parameter
identified. The architecture laws break both: λ = 0 lies on λ's bound, and at λ = 0 the kink's
location (κ, or c and p) and γ do not affect the fit — a test with parameters unidentified
under the null, whose LR is the supremum of a process over the kink's location and is
stochastically larger than χ²₁ (Davies 1977, 1987; Andrews 2001). A smooth law against the kink
is not even nested. So p-values here come from:

- ``"parametric bootstrap"`` (the default): simulate the runs' losses from the null fit —
  its predictions plus Gaussian noise of its maximum-likelihood variance RSS/n (for a Huber fit,
  lognormal noise of the log residuals' variance) — refit the null and the alternative(s) to each
  replicate and count replicates with LR* ≥ LR: p = (1 + count) / (1 + B), with Monte-Carlo
  error √(p(1 − p)/B). Seeded (numpy PCG64), so the replicates are the same on any machine.
  It needs no asymptotics, holds for boundaries, unidentified parameters and non-nested laws
  alike, and costs B refits of each law.
- ``"Davies bound"`` (fast, nested one-sided nulls only): P(sup Z > √u) ≤ Φ(−√u) +
  V·e^(−u/2)/(2π), with V the total variation of √LR(κ) along the unidentified parameter's
  profile (Davies 1987, eq. 3.4 for one degree of freedom). An upper bound on p asymptotically
  (a Gaussian LR process); not guaranteed in small samples: on the paper's 30 runs it gives
  0.098 where the parametric bootstrap of the same fit gives 0.24 ± 0.03.
- ``"chi-bar-squared"`` (fastest): the ½χ²₀ + ½χ²₁ mixture of a single parameter on its bound
  (Self & Liang 1987). It ignores unidentified parameters, so it is anti-conservative for the
  kink laws; used only when neither of the above is available, and then says so.

Every :class:`LRTest` describes its method in its text.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import stats

from .clusters import cluster_index
from .options import SEED
from .workers import in_this_process

LEVEL = 0.05
DEFAULT_REPLICATES = 200


@dataclass
class LRTest:
    """One test: the observed LR, its p-value and how the p-value was obtained."""

    null: str
    alt: str
    lr: float
    p: float
    method: str
    replicates: int = 0
    seed: int | None = None
    failed: int = 0          # replicates whose refits failed (left out of the count)
    note: str = ""

    @property
    def mc_error(self) -> float:
        if self.method != "parametric bootstrap" or self.replicates <= 0:
            return math.nan
        return math.sqrt(self.p * (1 - self.p) / self.replicates)

    def rejects(self, level: float = LEVEL) -> bool:
        # p ≤ level: with (1 + count)/(1 + B) and level·(1 + B) an integer the Monte-Carlo test
        # has size exactly ``level`` (Davison & Hinkley 1997, §4.2)
        return bool(np.isfinite(self.p) and self.p <= level + 1e-12)

    def p_text(self) -> str:
        """'p = 0.16 ± 0.03 (parametric bootstrap from the kaplan fit, 200 replicates, seed 0)'."""
        if not np.isfinite(self.p):
            return "p = — (not computed)"
        if self.method == "parametric bootstrap":
            value = f"p = {self.p:.2g}"  # (1 + count)/(1 + B): never 0
            how = (f"parametric bootstrap from the {self.null} fit, {self.replicates} replicates, "
                   f"seed {self.seed}; ± is its Monte-Carlo error"
                   + (f"; {self.failed} replicate refits failed and are left out" if self.failed else "")
                   + (f"; {self.note}" if self.note else ""))
            return f"{value} ± {self.mc_error:.1g} ({how})"
        words = {"Davies bound": "Davies' upper bound, unidentified kink location",
                 "chi-bar-squared": "½χ²₀ + ½χ²₁ boundary mixture; ignores the unidentified kink "
                                    "location, so it is too small",
                 "chi-squared": "χ²₁, no boundary or unidentified parameter"}[self.method]
        return f"p {'≤' if self.method == 'Davies bound' else '='} {self.p:.2g} ({words})"


def lr_statistic(n: int, rss_null: float, rss_alt: float, nested: bool = True) -> float:
    """n·ln(RSS_null / RSS_alt); clipped at 0 for nested laws (the alternative contains the null,
    so a negative value is a refit that missed the null's solution)."""
    lr = n * math.log(max(rss_null, 1e-300) / max(rss_alt, 1e-300))
    return max(0.0, lr) if nested else lr


def chibar_p(lr: float) -> float:
    """½χ²₀ + ½χ²₁: one parameter on its bound, every other identified (Self & Liang 1987)."""
    return 1.0 if lr <= 0 else 0.5 * float(stats.chi2.sf(lr, 1))


def davies_p(lr: float, lr_path) -> float:
    """Davies' (1987) upper bound on P(sup LR ≥ lr) for a one-sided test whose alternative has a
    one-dimensional parameter unidentified under the null; ``lr_path`` is LR along that
    parameter (ordered). The path returns to 0 where the alternative becomes the null (the kink
    leaves the data), which its last point's √LR adds to the variation."""
    z = np.sqrt(np.clip(np.asarray(lr_path, float)[np.isfinite(lr_path)], 0, None))
    if lr <= 0:
        return 1.0
    v = float(np.abs(np.diff(z)).sum() + (z[-1] if len(z) else 0.0))
    return float(min(1.0, stats.norm.sf(math.sqrt(lr)) + v * math.exp(-lr / 2) / (2 * math.pi)))


def davies_test(alt_fit, null_fit, nuisance: str) -> LRTest:
    """The Davies bound from the alternative's profile of ``nuisance``: LR(ψ) = LR − Λ(ψ)."""
    lr = lr_statistic(alt_fit.n, null_fit.rss, alt_fit.rss)
    prof = (getattr(alt_fit, "profiles", None) or {}).get(nuisance)
    if prof is None or len(prof.values) < 3 or getattr(prof, "method", "walk") != "walk":
        # root-finding's few points would understate the path's variation, and so p
        why = "" if prof is None or len(prof.values) < 3 else " (--profile fast: no walked path)"
        note = (f"no profile of {nuisance} for Davies' bound{why}" if nuisance else
                "the law fixes its kink's location: no nuisance parameter for Davies' bound")
        return LRTest(null_fit.law.name, alt_fit.law.name, lr, chibar_p(lr), "chi-bar-squared", note=note)
    return LRTest(null_fit.law.name, alt_fit.law.name, lr, davies_p(lr, lr - prof.statistic),
                  "Davies bound")


def run_effect(null_fit, clusters) -> tuple[float, float, np.ndarray]:
    """(between-run sd, within-run sd, cluster number per row) of the null fit's residuals (log
    residuals for a Huber fit), by the one-way ANOVA method of moments: within = the pooled
    variance about each run's mean residual, between = the variance of the run means less
    within × mean(1/rows per run), floored at 0."""
    pred, obs = np.asarray(null_fit.predicted, float), np.asarray(null_fit.observed, float)
    r = np.log(obs / pred) if null_fit.method == "huber" else obs - pred
    idx, _ = cluster_index(clusters, len(r))
    k = int(idx.max()) + 1
    sizes = np.bincount(idx, minlength=k)
    means = np.bincount(idx, weights=r, minlength=k) / sizes
    within = float(np.sum((r - means[idx]) ** 2) / max(len(r) - k, 1))
    between = float(np.var(means, ddof=1)) - within * float(np.mean(1.0 / sizes)) if k > 1 else 0.0
    return math.sqrt(max(between, 0.0)), math.sqrt(within), idx


def simulate(null_fit, rng: np.random.Generator, effect=None) -> np.ndarray:
    """One replicate of the losses under the null fit; with ``effect`` (:func:`run_effect`) each
    run's rows share one Gaussian run effect on top of independent noise."""
    pred = np.asarray(null_fit.predicted, float)
    if effect is not None:
        between, within, idx = effect
        noise = between * rng.standard_normal(int(idx.max()) + 1)[idx] + within * rng.standard_normal(len(pred))
        return pred * np.exp(noise) if null_fit.method == "huber" else pred + noise
    if null_fit.method == "huber":
        sd = float(np.sqrt(np.mean(np.log(null_fit.observed / pred) ** 2)))
        return pred * np.exp(sd * rng.standard_normal(len(pred)))
    return pred + math.sqrt(null_fit.rss / null_fit.n) * rng.standard_normal(len(pred))


def _refit_law(refit, runs, losses_BxN, law):
    return refit(runs, law, losses_BxN)


def bootstrap_tests(runs, null_fit, alt_fits: dict, *, replicates: int = DEFAULT_REPLICATES,
                    seed: int = SEED, nested: bool | dict = True, refit: Callable | None = None,
                    clusters=None, map_units: Callable = in_this_process) -> dict:
    """Parametric-bootstrap tests of ``null_fit`` against each of ``alt_fits`` ({name: fit}),
    all on the same replicates (the null refitted once per replicate). ``runs``: the runs the
    fits were made on (the replicate replaces their losses). ``nested``: per alternative (or for
    all) whether it contains the null (then LR is clipped at 0). ``refit(runs, law,
    losses_BxN) -> rss_B``: the refits (NaN for a failed one), needed when ``replicates`` > 0;
    :func:`.refits.default_refit` refits like the null fit.
    ``clusters`` (a label per row: the rows of one training run) simulates a per-run random
    effect (:func:`run_effect`), so that checkpoints of one run are not treated as independent.
    ``map_units(fn, items)``: how the null's and each alternative's refits are made (in worker
    processes: ``workers.Workers.map``, with a ``refit`` that pickles).
    Returns {name: LRTest}."""
    from ..table.load import load_runs

    runs = load_runs(runs)
    if refit is None and replicates:
        raise TypeError("bootstrap_tests needs refit= for its replicates: e.g. "
                        "fitting.refits.default_refit(null_fit), which refits like the null fit")
    refit = refit or (lambda runs, law, losses_BxN: np.full(len(losses_BxN), np.nan))
    nested_of = (lambda a: nested.get(a, True)) if isinstance(nested, dict) else (lambda a: nested)
    observed = {a: lr_statistic(f.n, null_fit.rss, f.rss, nested_of(a)) for a, f in alt_fits.items()}
    rng = np.random.default_rng(seed)
    # every replicate drawn first, in order: a failed refit does not shift later replicates
    effect = run_effect(null_fit, clusters) if clusters is not None else None
    losses_BxN = np.array([simulate(null_fit, rng, effect)
                           for _ in range(replicates)]).reshape(replicates, null_fit.n)
    rss_null, *rss_alts = map_units(functools.partial(_refit_law, refit, runs, losses_BxN),
                              [null_fit.law, *(f.law for f in alt_fits.values())])
    tests = {}
    for (a, f), rss_alt in zip(alt_fits.items(), rss_alts):
        done = np.isfinite(rss_null) & np.isfinite(rss_alt)
        lr = [lr_statistic(f.n, r0, r1, nested_of(a)) for r0, r1 in zip(rss_null[done], rss_alt[done])]
        # a relative tolerance: the same replicate may land a hair either side on another CPU
        exceed = int(np.sum(np.array(lr) >= observed[a] - 1e-9 * max(1.0, abs(observed[a]))))
        n_done = int(done.sum())
        tests[a] = LRTest(null_fit.law.name, a, observed[a], (1 + exceed) / (1 + n_done),
                          "parametric bootstrap", n_done, seed, replicates - n_done,
                          note="" if effect is None else
                          f"with a per-run random effect (between-run sd {effect[0]:.3g}, within-run sd "
                          f"{effect[1]:.3g}, method of moments)")
    return tests
