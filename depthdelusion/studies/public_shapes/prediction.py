"""The public-shapes study's prediction test (issue 51, item 5) and the later budgets (issue 62 item 7).

:func:`predict`: every law fitted on the shapes up to ``SMALL`` parameters at all but the last
``LAST_BUDGETS`` token budgets, then asked for three held-out sets: the larger shapes (at the
fitted budgets), the small shapes' last budgets, and the larger shapes' last budgets. Each fit is
the bare fit of a rollout step (:mod:`depthdelusion.analysis.fitting.rollout`: no bootstrap, profile or
leave-one-out; same seed), each set's errors a rollout ``Step`` (observed − predicted, nats).
A law's error is set against the shape-agnostic baseline (chinchilla) on the same held-out
checkpoints: the difference of RMSEs, with a cluster-bootstrap interval over the held-out runs
(held-out shapes resampled, the fits held fixed: it measures which runs were held out, not the
fit's own uncertainty), and how many held-out runs the law predicts worse than chinchilla (each
run's RMSE on its own checkpoints). A handful of runs gives a percentile interval no stated
coverage, so a verdict (:func:`verdict`) also needs an exact test over the runs: under "neither
law predicts better", the two laws' predictions of a run may be swapped, so every one of the
2^runs swaps of whole runs gives the difference of squared errors a null value
(:func:`swap_p`, two-sided, at 5%); fewer than 6 runs can never pass it (2/2^5 > 0.05). Where the
interval or the test fails the verdict is "not distinguished from chinchilla", which says no more
than that; "level" is kept for a law whose predictions are chinchilla's (tied fits).

The check on Gadre et al. 2024 is :mod:`.gadre`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from depthdelusion.analysis.fitting.rollout import Step
from depthdelusion.studies.public_shapes.answers import percentile_interval
from depthdelusion.studies.public_shapes.study import Arm, convention_runs, fit_laws, shape_labels

SMALL = 1e9          # parameters (the arm's convention): fitted up to this size
LAST_BUDGETS = 2     # token budgets held out at the end
HELD_OUT = ("larger shapes", "last budgets", "larger shapes, last budgets")
BASELINE = "chinchilla"
#: a verdict's test over the runs (:func:`swap_p`): two-sided, at this level
SWAP_LEVEL = 0.05
#: runs up to which every swap is enumerated; past it this many seeded random swaps
SWAPS_EXACT_TO, SWAP_DRAWS = 16, 2 ** 16


@dataclass(frozen=True)
class Prediction:
    arm: str
    law: str
    held_out: str
    step: object           # rollout.Step: errors on the held-out checkpoints
    runs: int              # held-out runs
    vs_baseline: float     # RMSE − baseline RMSE (nats); < 0: the law predicts better
    vs_ci: tuple
    status: str
    runs_worse: int        # held-out runs whose own RMSE exceeds chinchilla's (to 0.1 millinat)
    runs_tied: int         # held-out runs predicted alike by both (to 0.1 millinat)
    swap_p: float          # :func:`swap_p` over the held-out runs

    @property
    def verdict(self) -> str:
        return verdict(self.vs_ci, self.swap_p, self.runs - self.runs_tied)


def swap_p(per_run) -> float:
    """Two-sided p of the summed squared-error differences ``per_run`` (one a run: Σ err² − Σ
    base² over its checkpoints) against every swap of the two laws' predictions, run by run
    (each run's term negated): exact up to ``SWAPS_EXACT_TO`` runs (the observed sum and its
    negation count among the swaps, so p ≥ 2/2^runs), else Monte Carlo over ``SWAP_DRAWS`` seeded
    random swaps, p = (1 + swaps as far out) / (1 + draws)."""
    d = np.asarray(per_run, float)
    if not len(d):
        return 1.0
    if len(d) <= SWAPS_EXACT_TO:
        signs = 1 - 2 * ((np.arange(2 ** len(d))[:, None] >> np.arange(len(d))) & 1)
        return float(np.mean(np.abs(signs @ d) >= abs(d.sum()) * (1 - 1e-9)))
    # seeded: the same swaps on any machine with the locked numpy
    signs = 1 - 2 * np.random.default_rng(0).integers(0, 2, size=(SWAP_DRAWS, len(d)))
    far = int(np.sum(np.abs(signs @ d) >= abs(d.sum()) * (1 - 1e-9)))
    return (1 + far) / (1 + SWAP_DRAWS)


def verdict(ci, p: float, runs: int) -> str:
    """Worse or better than chinchilla where the interval excludes 0 and the swap test over the
    ``runs`` held-out runs that tell the laws apart passes (p ≤ :data:`SWAP_LEVEL`); "not
    distinguished" where either fails; none where those runs are too few for the test ever to
    pass, or no interval; "level" where no run tells them apart (tied fits)."""
    lo, hi = ci
    if not np.isfinite(lo):
        return "no interval"
    if not runs:  # every run predicted alike (a kink law collapsed to chinchilla)
        return "level with chinchilla (the same predictions)"
    if 2 / 2 ** runs > SWAP_LEVEL:
        return f"too few runs ({runs}) for a verdict"
    if p <= SWAP_LEVEL and (lo > 0 or hi < 0):
        return "worse than chinchilla" if lo > 0 else "better than chinchilla"
    return "not distinguished from chinchilla"


def split(runs, clusters) -> dict:
    """Row masks: ``train`` and one per :data:`HELD_OUT` set. A shape is large when its (one)
    parameter count exceeds :data:`SMALL`; the last budgets are the ``LAST_BUDGETS`` largest
    token counts of the table."""
    large = _large(runs, clusters)
    budgets = np.unique(np.round(np.asarray(runs.tokens, float), -9))
    last = np.round(np.asarray(runs.tokens, float), -9) >= budgets[-LAST_BUDGETS]
    return {"train": ~large & ~last, HELD_OUT[0]: large & ~last, HELD_OUT[1]: ~large & last,
            HELD_OUT[2]: large & last}


def _large(runs, clusters) -> np.ndarray:
    """Rows of the shapes whose (one) parameter count exceeds :data:`SMALL`."""
    params = np.asarray(runs.params, float)
    return np.array([params[clusters == c].mean() > SMALL for c in clusters])


def predict(arm: Arm, laws, *, bootstrap: int, seed: int, loss: str = "ls") -> list[Prediction]:
    """Each law fitted (by ``loss``: ls or huber) on ``split``'s train rows, its errors on each
    held-out set against chinchilla's."""
    masks = split(arm.runs, arm.clusters)
    train = arm.runs.subset(masks["train"])
    fits = fit_laws(train, arm.clusters[masks["train"]], laws, bootstrap=0, seed=seed, loss=loss)
    held = {name: masks[name] for name in HELD_OUT}
    return held_out(arm.label, fits, arm.runs, arm.clusters, held, (int(masks["train"].sum()), SMALL),
                    bootstrap=bootstrap, seed=seed)


def held_out(label: str, fits: dict, runs, clusters, masks: dict, fitted: tuple, *, bootstrap: int,
             seed: int) -> list[Prediction]:
    """Per held-out set (name -> row mask) and law of ``fits`` its errors and its RMSE against
    chinchilla's; ``fitted``: (rows fitted, the size or budget they go up to)."""
    out = []
    for name, mask in masks.items():
        held = runs.subset(mask)
        labels = clusters[mask]
        errors = {law: np.asarray(held.loss, float) - f.predict(held) for law, f in fits.items()}
        for law, f in fits.items():
            step = Step(1, fitted[0], fitted[1], np.nan, len(held.loss), errors[law])
            diff, ci = _vs_baseline(errors[law], errors[BASELINE], labels, bootstrap, seed)
            status = "not identified (tied fits)" if f.ridge_solutions else "ok"
            worse, tied, p = _by_run(errors[law], errors[BASELINE], labels)
            out.append(Prediction(label, law, name, step, len(set(labels.tolist())), diff, ci, status, worse, tied, p))
    return out


def _by_run(err, base, labels) -> tuple[int, int, float]:
    """(runs whose RMSE exceeds the baseline's on their own checkpoints, runs the two predict
    alike, both to 0.1 millinat, the printed digit; :func:`swap_p` over the other runs)."""
    worse, tied, terms = 0, 0, []
    for c in sorted(set(labels.tolist())):
        rows = labels == c
        gap = float(np.sqrt(np.mean(err[rows] ** 2)) - np.sqrt(np.mean(base[rows] ** 2)))
        worse, tied = worse + (gap >= 5e-5), tied + (abs(gap) < 5e-5)
        if abs(gap) >= 5e-5:
            terms.append(float(np.sum(err[rows] ** 2 - base[rows] ** 2)))
    return worse, tied, swap_p(terms)


#: The later budgets (issue 62 item 7): the hot runs read on to 350B tokens, fitted on their
#: checkpoints to 100B (the ``gemstones`` table's rows), asked for the later ones.
LATER_TABLE = "gemstones_100b_plus"
LATER_FITTED_TO = 100.1e9
LATER_HELD_OUT = (("110B–200B tokens", LATER_FITTED_TO, 200.1e9), ("210B–350B tokens", 200.1e9, np.inf))
LATER_LAWS = ("chinchilla", "gemstones_width_depth", "shape_quadratic", "depth_delusion_relative")
#: the prediction's hardest case carried to the later budgets: fitted on the shapes up to SMALL
#: at their checkpoints to 100B, asked for the larger shapes' checkpoints past it
LATER_HARDEST = "larger shapes, 110B–350B tokens"


def predict_later(convention: str, epsilon: float | None, laws, *, bootstrap: int, seed: int) -> list[Prediction]:
    """Each of ``laws`` (those of :data:`LATER_LAWS`) fitted on :data:`LATER_TABLE`'s checkpoints to
    100B tokens in ``convention`` (fitted: ``epsilon``, the hot table's), its errors on the later
    checkpoints against chinchilla's; then fitted on the small shapes alone, its errors on the
    larger shapes' later checkpoints (:data:`LATER_HARDEST`)."""
    runs = convention_runs(LATER_TABLE, convention, epsilon if convention == "fitted" else None)[0]
    clusters, label = shape_labels(runs), f"{LATER_TABLE} ({convention} N)"
    tokens = np.asarray(runs.tokens, float)
    train, large = tokens <= LATER_FITTED_TO, _large(runs, clusters)
    chosen = [law for law in LATER_LAWS if law in laws]
    out = []
    for rows, masks in ((train, {name: (tokens > lo) & (tokens <= hi) for name, lo, hi in LATER_HELD_OUT}),
                        (train & ~large, {LATER_HARDEST: large & ~train})):
        fits = fit_laws(runs.subset(rows), clusters[rows], chosen, bootstrap=0, seed=seed)
        out += held_out(label, fits, runs, clusters, masks, (int(rows.sum()), LATER_FITTED_TO),
                        bootstrap=bootstrap, seed=seed)
    return out


def _vs_baseline(err, base, labels, bootstrap: int, seed: int):
    """RMSE(err) − RMSE(base) and its 95% cluster-bootstrap interval over the held-out runs."""
    rmse = lambda e: float(np.sqrt(np.mean(e ** 2)))  # noqa: E731
    diff = rmse(err) - rmse(base)
    groups = [np.flatnonzero(labels == c) for c in sorted(set(labels.tolist()))]
    if len(groups) < 2 or not bootstrap:
        return diff, (np.nan, np.nan)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(bootstrap):
        idx = np.concatenate([groups[i] for i in rng.integers(0, len(groups), len(groups))])
        draws.append(rmse(err[idx]) - rmse(base[idx]))
    return diff, percentile_interval(draws)


def prediction_rows(preds: list[Prediction]) -> list[dict]:
    """prediction.csv: per arm, held-out set and law its errors and its RMSE against chinchilla's."""
    return [{"arm": p.arm, "held_out": p.held_out, "law": p.law, "runs": p.runs,
             "checkpoints": p.step.n_test, "mean_error": _nats(p.step.mean_error),
             "rmse": _nats(p.step.rmse), "max_abs_error": _nats(p.step.max_abs),
             "rmse_minus_chinchilla": _nats(p.vs_baseline), "ci95_low": _nats(p.vs_ci[0]),
             "ci95_high": _nats(p.vs_ci[1]), "runs_worse": p.runs_worse, "runs_tied": p.runs_tied,
             "swap_p": round(p.swap_p, 4), "verdict": p.verdict, "status": p.status} for p in preds]


def _nats(v):
    """A loss error to 0.1 millinat: far below the runs' own noise (≈ 0.02 nats), and the
    same on any machine (tied fits differ in the 8th decimal)."""
    return None if not np.isfinite(v) else round(float(v), 4) + 0.0
