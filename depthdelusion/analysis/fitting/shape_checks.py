"""Held-out checks of the pooled shape laws (issue 58): leave-one-suite-out, leave-runs-out,
rollout to larger compute, the pick of ``--law auto`` from them, and the cluster resampling of whole
runs (and of whole suites where there are enough)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .clusters import cluster_index
from .shape_pool import LAWS, Pooled, PooledFit, fit_shape_law

#: Rollout: each suite's rows up to this fraction of its ln-compute range are fitted, the rest predicted.
ROLLOUT_FRACTION = 0.7
#: Leave-runs-out: each suite's runs dealt round-robin into this many folds, each fold predicted
#: by the law fitted without it.
RUN_FOLDS = 10
#: Laws whose held-out score is within this factor of the best count as tied; the one with the
#: fewest parameters is picked among them.
SCORE_MARGIN = 1.02


@dataclass(frozen=True)
class LawCheck:
    """One law's held-out errors (RMSE, nats; NaN where the check does not apply): leave one
    suite out, leave runs out (unseen shapes of a seen suite), rollout to larger compute; its
    score (mean over the checks of its error / the best law's error), parameters, in-sample RSS."""

    law: str
    loso: float
    runs_out: float
    rollout: float
    score: float
    n_params: int
    rss: float
    #: the full fit's shape parameters on their search bound (a degenerate form: not picked)
    at_bound: tuple = ()


def leave_one_suite_out(data: Pooled, law: str, start: PooledFit | None = None, eps: float | None = None) -> float:
    """RMSE over every suite's rows predicted from the others: what the law shares (the shape
    term, ε; everything under ``shared``) comes from the other suites, the suite's own E, A, α,
    B, β are refitted on it (under ``separate`` nothing is shared: Chinchilla refitted on it).
    ``start``: the full fit, each refit's one (warm) start; cold searches without it. ``eps``: ε
    held at this value in every refit (None: fitted)."""
    if len(data.names) < 2:
        return float("nan")
    errors = []
    for s in range(len(data.names)):
        others = fit_shape_law(data.rows(data.suite != s), law, eps=eps, start=start)
        held = data.rows(data.suite == s)
        if law == "shared":
            pred = others.suite_loss(0, held.depth, held.width, held.nonemb, held.emb, held.tokens)
        else:
            pred = own_terms_refit(held, others, law, eps).predict(held)
        errors.append(held.loss - pred)
    return float(np.sqrt(np.mean(np.square(np.concatenate(errors)))))


def own_terms_refit(held: Pooled, shared_from: PooledFit, law: str, eps: float | None = None) -> PooledFit:
    """``held``'s own E, A, α, B, β fitted with what ``law`` shares held at ``shared_from``'s
    (``separate`` shares nothing, not even ε: its Chinchilla refit holds ``eps``, None: fitted)."""
    if law == "separate":
        return fit_shape_law(held, "chinchilla", eps=eps)
    if law == "chinchilla":
        return fit_shape_law(held, "chinchilla", eps=float(shared_from.eps[0]))
    return fit_shape_law(held, law, eps=float(shared_from.eps[0]), shape_fixed=shared_from)


def leave_runs_out(data: Pooled, law: str, folds: int = RUN_FOLDS, start: PooledFit | None = None,
                   eps: float | None = None) -> float:
    """RMSE over every run predicted by the law fitted without its fold (each suite's runs dealt
    round-robin into ``folds`` folds): how well the law predicts a shape it has not seen. Rows
    of a suite that a fold empties are not predicted. ``start``, ``eps``: as for
    :func:`leave_one_suite_out`."""
    fold = np.zeros(len(data.loss), int)
    for s in range(len(data.names)):
        m = data.suite == s
        _, ranks = np.unique(data.run[m], return_inverse=True)
        fold[m] = ranks % folds
    errors = []
    for k in range(folds):
        held = fold == k
        if not held.any():
            continue
        fitted = fit_shape_law(data.rows(~held), law, eps=eps, start=start)
        seen = held & np.isin(data.suite, [data.names.index(n) for n in fitted.names])
        test = data.rows(seen)
        errors.append(test.loss - fitted.predict(test))
    return float(np.sqrt(np.mean(np.square(np.concatenate(errors))))) if errors else float("nan")


def rollout(data: Pooled, law: str, fraction: float = ROLLOUT_FRACTION, eps: float | None = None) -> float:
    """RMSE on each suite's larger-compute rows (above ``fraction`` of its ln C range) of the law
    fitted on the smaller ones (NaN when a suite has fewer than 5 rows to fit or none to predict);
    ``eps``: as for :func:`leave_one_suite_out`."""
    lnc = np.log(data.compute)
    train = np.zeros(len(lnc), bool)
    for s in range(len(data.names)):
        m = data.suite == s
        lo, hi = lnc[m].min(), lnc[m].max()
        train |= m & (lnc <= lo + fraction * (hi - lo))
    if any(np.sum(train & (data.suite == s)) < 5 or not np.any(~train & (data.suite == s))
           for s in range(len(data.names))):
        return float("nan")
    fitted = fit_shape_law(data.rows(train), law, eps=eps)
    test = data.rows(~train)
    return float(np.sqrt(np.mean(np.square(test.loss - fitted.predict(test)))))


def candidate_laws(n_suites: int) -> tuple:
    """With one suite, separate and shared are the bowl itself: only bowl, kink, chinchilla and
    inverse_depth differ."""
    return tuple(LAWS) if n_suites > 1 else ("bowl", "kink", "kink_relative", "chinchilla", "inverse_depth")


def check_laws(data: Pooled, laws=None, eps: float | None = None) -> list[LawCheck]:
    """Every candidate law's held-out errors and score (see :class:`LawCheck`); ``eps``: ε held at
    this value in every fit and refit (None: fitted)."""
    laws = laws or candidate_laws(len(data.names))
    # The held-out refits start from the full fit (a fold drops a tenth of the runs, a suite
    # changes only its own terms' start): the kink's 12 cold starts per refit cost 10× more.
    full = {law: fit_shape_law(data, law, eps=eps) for law in laws}
    raw = [(law, leave_one_suite_out(data, law, full[law], eps), leave_runs_out(data, law, start=full[law], eps=eps),
            rollout(data, law, eps=eps), full[law]) for law in laws]
    ratios = []
    for col in (1, 2, 3):
        errs = np.array([r[col] for r in raw])
        ratios.append(errs / np.nanmin(errs) if np.any(np.isfinite(errs)) else np.full(len(raw), np.nan))
    ratios = np.array(ratios)
    counted = ratios[np.any(np.isfinite(ratios), axis=1)]
    score = counted.mean(axis=0) if len(counted) else np.full(len(raw), np.nan)
    return [LawCheck(law, loso, runs_out, roll, float(sc), f.n_params, f.rss, f.at_bound())
            for (law, loso, runs_out, roll, f), sc in zip(raw, score)]


def pick_law(checks: list[LawCheck]) -> tuple[str, str]:
    """(law, why): the lowest held-out score; among laws within :data:`SCORE_MARGIN` of it, the
    one with the fewest parameters. A law whose shape parameters sit on their bounds is not
    picked while another is scored (its errors are a degenerate form's; said). Without any
    held-out error: bowl (said)."""
    scored = [c for c in checks if np.isfinite(c.score)]
    if not scored:
        return "bowl", "no held-out check applies (one suite, too few rows to roll out): the default bowl"
    degenerate = [c for c in scored if c.at_bound]
    if len(degenerate) < len(scored):
        scored = [c for c in scored if not c.at_bound]
    skipped = "".join(f"; {c.law} not picked: its {', '.join(c.at_bound)} on the search bound"
                      for c in degenerate if c not in scored)
    best = min(c.score for c in scored)
    tied = [c for c in scored if c.score <= best * SCORE_MARGIN]
    pick = min(tied, key=lambda c: (c.n_params, c.score))
    why = (f"lowest held-out score ({pick.score:.3f}: the mean over the checks of its RMSE over "
           "the best law's)")
    if len(tied) > 1:
        why = (f"held-out scores within {SCORE_MARGIN - 1:.0%} of the best: "
               f"{', '.join(c.law for c in tied)}; the one with the fewest parameters")
    return pick.law, why + skipped


#: Suites are resampled (drawn with replacement) only when at least this many are pooled: with
#: fewer, a draw that repeats one suite and drops the others is a different question, not a
#: resample of the same one.
MIN_SUITES_RESAMPLED = 5


def cluster_resample_weights(data: Pooled, n_resamples: int, seed: int, *, kept_suite: int | None = None,
                             resample_suites: bool = False) -> np.ndarray:
    """(n_resamples, n) counts: per resample, each suite's clusters (``data.run``: whole runs or
    shapes) drawn with replacement (as many as it has), each row weighted by how often its
    cluster was drawn. ``resample_suites``: the suites other than ``kept_suite`` (the reference,
    on whose scale the answer is given, always in) are first drawn with replacement, as many as
    there are, and a suite drawn twice has its clusters drawn twice."""
    idx, run_suite = cluster_index(data.run, len(data.loss), data.suite)
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(run_suite == s) for s in range(len(data.names))]
    others = np.array([s for s in range(len(groups)) if s != kept_suite])
    out = np.zeros((n_resamples, len(data.loss)))
    for b in range(n_resamples):
        drawn = range(len(groups)) if not resample_suites else [kept_suite, *rng.choice(others, len(others))]
        counts = np.zeros(len(run_suite))
        for s in drawn:
            members = groups[s]
            counts += np.bincount(rng.choice(members, len(members)), minlength=len(run_suite))
        out[b] = counts[idx]
    return out
