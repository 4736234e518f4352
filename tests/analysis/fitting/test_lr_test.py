"""Calibrated likelihood-ratio tests: under a true null with the alternative's parameter on its
bound and its kink location unidentified, the bootstrap test rejects at its nominal 5%, the
Davies bound at most at 5%, and the χ²₁ reference far more often."""
import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
from scipy import stats

from depthdelusion.analysis.fitting.lr_test import (
    LRTest,
    bootstrap_tests,
    chibar_p,
    davies_p,
    lr_statistic,
)
from depthdelusion.analysis.table.table_readers import runs_from_records

X = np.linspace(0.0, 1.0, 12)
KINKS = X[1:-2]  # candidate kink locations (every one leaves ≥ 3 points beyond it)
H = np.maximum(0.0, X[None, :] - KINKS[:, None])


@dataclass
class LSFit:
    """A least-squares fit with what the tests read: law name, n, RSS, predictions."""
    law: SimpleNamespace
    n: int
    rss: float
    predicted: np.ndarray
    observed: np.ndarray
    method: str = "lm"
    lr_path: np.ndarray | None = None


def fit_null(y):
    """y = μ (a constant)."""
    pred = np.full_like(y, y.mean())
    return LSFit(SimpleNamespace(name="flat"), len(y), float(((y - pred) ** 2).sum()), pred, y)


def fit_kink(y):
    """y = μ + λ·max(0, x − κ), λ ≥ 0, κ on a grid: least squares per κ, λ clipped at 0."""
    hc = H - H.mean(axis=1, keepdims=True)
    yc = y - y.mean()
    lam = np.maximum(0.0, hc @ yc / (hc * hc).sum(axis=1))
    rss = ((yc - lam[:, None] * hc) ** 2).sum(axis=1)
    best = int(np.argmin(rss))
    fit = LSFit(SimpleNamespace(name="kink"), len(y), float(rss[best]), y.mean() + lam[best] * hc[best], y)
    fit.lr_path = np.array([lr_statistic(len(y), float(yc @ yc), r) for r in rss])
    return fit


def _refit(runs, law, losses_BxN):
    return np.array([(fit_null if law.name == "flat" else fit_kink)(y).rss for y in losses_BxN])


def _runs(y):
    return runs_from_records([{"name": f"r{i}", "params": 1e6 * (i + 1), "loss": float(v)}
                              for i, v in enumerate(y)], where="synthetic")


def test_rejection_rate_under_the_null_is_nominal():
    # 400 data sets from the null, each tested with 39 bootstrap replicates: an exact Monte-Carlo
    # test (the LR is location-scale invariant) rejects with probability 2/40 = 5%; the rate's
    # Monte-Carlo standard error over 400 sets is 1.1%, and the assertion allows 3 of them.
    rng = np.random.default_rng(1)
    sets, reject_boot, reject_chi2, reject_davies = 400, 0, 0, 0
    for i in range(sets):
        y = 3.0 + 0.1 * rng.standard_normal(len(X))
        null, alt = fit_null(y), fit_kink(y)
        test = bootstrap_tests(_runs(y), null, {"kink": alt}, replicates=39, seed=i, refit=_refit)["kink"]
        reject_boot += test.rejects()
        reject_chi2 += stats.chi2.sf(test.lr, 1) < 0.05
        reject_davies += davies_p(test.lr, alt.lr_path) <= 0.05
    sd = math.sqrt(0.05 * 0.95 / sets)
    assert abs(reject_boot / sets - 0.05) < 3 * sd, reject_boot
    assert reject_davies / sets < 0.05 + 3 * sd, reject_davies   # an upper bound: conservative
    assert reject_chi2 / sets > 0.05 + 3 * sd, reject_chi2       # the naive χ²₁ is not calibrated


def test_bootstrap_detects_a_real_kink_and_says_how():
    rng = np.random.default_rng(0)
    y = 3.0 + 0.8 * np.maximum(0, X - 0.5) + 0.03 * rng.standard_normal(len(X))
    test = bootstrap_tests(_runs(y), fit_null(y), {"kink": fit_kink(y)}, replicates=99, seed=0,
                           refit=_refit)["kink"]
    assert test.rejects() and test.p == 0.01 and test.replicates == 99
    text = test.p_text()
    assert "parametric bootstrap from the flat fit, 99 replicates, seed 0" in text and "±" in text


def test_boundary_and_davies_references():
    assert chibar_p(3.84) == 0.5 * stats.chi2.sf(3.84, 1) and chibar_p(0.0) == 1.0
    # Davies: no variation along the nuisance parameter leaves the one-sided normal tail ...
    assert math.isclose(davies_p(4.0, [4.0]), stats.norm.sf(2.0) + 2 * math.exp(-2) / (2 * math.pi))
    # ... and a wiggling path raises the bound
    assert davies_p(4.0, [0, 4, 0, 4, 1]) > davies_p(4.0, [1, 2, 3, 4, 1])
    t = LRTest("kaplan", "depth_delusion", 4.05, davies_p(4.05, [0.5, 2, 4.05, 3.0, 1.7]), "Davies bound")
    assert t.p_text().startswith("p ≤ ") and "Davies" in t.p_text()


def _synthetic_table(rows: int):
    rng = np.random.default_rng(0)
    recs = []
    for i in range(rows):
        d, w = int(rng.integers(2, 64)), int(rng.choice([256, 512, 1024, 2048]))
        n = 12 * d * w * w
        recs.append({"name": f"r{i}", "depth": d, "width": w, "params": n, "group": "ab"[i % 2],
                     "loss": 1.8 + 400 / n ** 0.3 + 0.002 * d + 0.01 * rng.standard_normal()})
    return runs_from_records(recs, where="synthetic")


def test_batched_replicate_refits_give_each_replicate_the_rss_of_its_own_fit():
    """The default refits solve every replicate's starts in one batch; each replicate's RSS must
    be what fit() finds on that replicate alone — on the paper's runs (least squares, Huber,
    group offsets) and on a table above the search's subsample size (subsample, then polish)."""
    import dataclasses

    from depthdelusion.analysis.fitting.search import SEARCH_ROWS
    from depthdelusion.analysis.fitting.engine import fit
    from depthdelusion.analysis.fitting.refits import refit_rss
    from depthdelusion.analysis.fitting.lr_test import simulate
    from depthdelusion.analysis.table.load import load_runs

    paper, big = load_runs("paper"), _synthetic_table(SEARCH_ROWS + 200)
    for runs, law, method, offsets, count in [(paper, "depth_delusion", "lm", False, 6),
                                              (paper, "depth_delusion", "huber", True, 6),
                                              (big, "kaplan", "huber", True, 2)]:
        opts = dict(bootstrap=0, leave_one_out=False, profile=False, group_offsets=offsets)
        null = fit(runs, "kaplan", method, **opts)
        rng = np.random.default_rng(3)
        losses = np.array([simulate(null, rng) for _ in range(count)])
        losses[1, 0] = -1.0 if method == "huber" else losses[1, 0]  # no Huber fit: log of a negative loss
        one_by_one = []
        for y in losses:
            try:
                one_by_one.append(fit(dataclasses.replace(runs, loss=y), law, method, max_starts=16,
                                      seed=0, **opts).rss)
            except ValueError:
                one_by_one.append(np.nan)
        batched = refit_rss(runs, law, losses, method, group_offsets=offsets, max_starts=16, seed=0)
        np.testing.assert_allclose(batched, one_by_one, rtol=1e-9, err_msg=f"{law} {method} {len(runs)} rows")
        assert np.isnan(batched[1]) == (method == "huber")
    # no Huber fit of any replicate (a negative loss in every row): each is a failed refit
    assert np.isnan(refit_rss(big, "kaplan", -losses, "huber", group_offsets=True, max_starts=16)).all()
    assert refit_rss(paper, "kaplan", np.zeros((0, len(paper))), max_starts=16).shape == (0,)


def test_no_replicates_is_a_p_of_one_from_none():
    from depthdelusion.analysis.fitting.engine import fit

    null, alt = (fit("paper", law, bootstrap=0, leave_one_out=False, profile=False)
                 for law in ("kaplan", "depth_delusion"))
    test = bootstrap_tests("paper", null, {"kink": alt}, replicates=0)["kink"]
    assert test.p == 1.0 and test.replicates == 0 and test.failed == 0
