"""Rollout validation: fit on the k smallest compute levels, predict the next, for every k.

This tests what a scaling law is for — extrapolation to a larger scale — where leave-one-out
tests interpolation. Levels are compute budgets (a compute column, else C = 6·N·D, grouped
with the relative tolerance of :mod:`.isoflop`); a table without token counts is levelled by
its parameter count N instead (said in the notes). Each step is a bare fit (no bootstrap,
profile or leave-one-out) by the same law, objective and seed; its error is observed −
predicted loss (nats) on the next level's runs. Where starts tie at the best objective with
different parameters (a ridge), the prediction is the range over the tied solutions, and the
step says so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..table.load import load_runs
from .isoflop import TOLERANCE, compute_of, group_budgets
from .options import FitOptions

#: Tied fits whose predictions differ by less than this (nats, far below any run's loss
#: resolution) predict the same.
SAME_PREDICTION = 1e-4
COLUMNS = ("step", "levels_fitted", "runs_fitted", "fitted_up_to", "predicted_level",
           "runs_predicted", "mean_error", "rmse", "max_abs_error", "prediction_range_width",
           "status")


@dataclass
class Step:
    k: int
    n_train: int
    fitted_up_to: float
    level: float
    n_test: int
    errors: np.ndarray = field(default_factory=lambda: np.array([]))
    range_width: float = math.nan
    status: str = "ok"

    @property
    def mean_error(self) -> float:
        return float(np.mean(self.errors)) if len(self.errors) else math.nan

    @property
    def rmse(self) -> float:
        return float(np.sqrt(np.mean(self.errors ** 2))) if len(self.errors) else math.nan

    @property
    def max_abs(self) -> float:
        return float(np.max(np.abs(self.errors))) if len(self.errors) else math.nan

    def row(self) -> list:
        return [self.k, self.k, self.n_train, _r(self.fitted_up_to), _r(self.level), self.n_test,
                _r(self.mean_error), _r(self.rmse), _r(self.max_abs), _r(self.range_width),
                self.status]


@dataclass
class Rollout:
    law: str
    method: str
    level_source: str
    steps: list
    notes: list = field(default_factory=list)

    def rows(self) -> list:
        return [s.row() for s in self.steps]

    def summary(self) -> str:
        lines = [f"Rollout validation ({self.law}, {self.method}; levels: {self.level_source}): "
                 "fit on the k smallest levels, predict the next; error = observed − predicted (nats)",
                 f"{'k':>3} {'runs fit':>8} {'up to':>10} {'predict':>10} {'runs':>5} "
                 f"{'mean err':>9} {'RMSE':>8} {'max|err|':>9}  status"]
        for s in self.steps:
            lines.append(f"{s.k:3d} {s.n_train:8d} {s.fitted_up_to:10.3g} {s.level:10.3g} "
                         f"{s.n_test:5d} {_f(s.mean_error, '+.4f'):>9} {_f(s.rmse, '.4f'):>8} "
                         f"{_f(s.max_abs, '.4f'):>9}  {s.status}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The rollout for ``--json``: per step its errors (observed − predicted, nats, one per
        predicted run) and their mean, RMSE and max |error|; then the same over every predicted
        run of the fitted steps (``summary``). Numbers rounded as in rollout.csv; none is NaN."""
        steps = [dict(zip(COLUMNS, (_json(v) for v in s.row())), errors=[_json(_r(e)) for e in s.errors])
                 for s in self.steps]
        errors = np.concatenate([s.errors for s in self.steps] + [np.array([])])
        summary = {"steps": len(self.steps), "steps_fitted": sum(len(s.errors) > 0 for s in self.steps),
                   "runs_predicted": len(errors),
                   "mean_error": _json(_r(np.mean(errors))) if len(errors) else None,
                   "rmse": _json(_r(np.sqrt(np.mean(errors ** 2)))) if len(errors) else None,
                   "max_abs_error": _json(_r(np.max(np.abs(errors)))) if len(errors) else None}
        return {"law": self.law, "method": self.method, "levels": self.level_source,
                "error": "observed - predicted loss (nats)", "steps": steps, "summary": summary,
                "notes": list(self.notes)}

    def write_csv(self, path):
        from ..formats.table_text import write_csv

        return write_csv(path, COLUMNS, self.rows())


def levels_of(runs, tolerance: float = TOLERANCE):
    """(row indices per level, smallest first; the level's value per level; what it is)."""
    try:
        compute, source = compute_of(runs)
    except ValueError:
        if not runs.has("params"):
            raise ValueError(f"{runs.source}: rollout validation needs compute levels: a compute "
                             "column, params and tokens (C = 6·N·D), or at least params") from None
        compute, source = runs.params.astype(float), "parameter count N (no token counts)"
    groups = group_budgets(compute, tolerance)
    values = [float(np.exp(np.mean(np.log(compute[g])))) for g in groups]
    return groups, values, source


def rollout(runs, law, options: FitOptions = FitOptions(), *, tolerance: float = TOLERANCE) -> Rollout:
    """For k = 1 … L − 1 (L levels), fit ``law`` on the k smallest levels (under ``options``
    without intervals) and predict level k+1. A step whose runs are too few for the law, or
    whose fit fails (e.g. token counts that do not vary yet), is kept with its reason as the
    status."""
    from .engine import fit_with
    from .setup import options_for_law

    runs = load_runs(runs)
    groups, values, source = levels_of(runs, tolerance)
    if len(groups) < 2:
        raise ValueError(f"{runs.source}: rollout validation needs at least 2 compute levels, "
                         f"found {len(groups)} ({source}, tolerance {tolerance:g})")
    name = law if isinstance(law, str) else law.name
    steps = []
    for k in range(1, len(groups)):
        train = np.concatenate(groups[:k])
        test = groups[k]
        step = Step(k, len(train), values[k - 1], values[k], len(test))
        try:
            result = fit_with(runs.subset(train), law, options_for_law(options, law).without_intervals())
        except ValueError as err:
            step.status = f"not fitted: {str(err).splitlines()[0]}"
            steps.append(step)
            continue
        held = runs.subset(test)
        step.errors = held.loss - result.predict(held)
        lo, hi = result.predict_range(held)
        step.range_width = float(np.max(hi - lo))
        if result.ridge_solutions and step.range_width > SAME_PREDICTION:
            step.status = (f"not identified: tied fits predict a range up to "
                           f"{step.range_width:.3g} nats wide")
        elif result.ridge_solutions:
            step.status = f"ok (tied fits differ, their predictions here by < {SAME_PREDICTION:g} nats)"
        steps.append(step)
    notes = [f"levels: {len(groups)} ({source}; runs within {tolerance:g} relative of a level's "
             "smallest value form it)", "each step is a bare fit: no bootstrap, profile or "
             "leave-one-out; leave-one-out (fit) measures interpolation, this extrapolation"]
    return Rollout(name, options.method, source, steps, notes)


def _r(v, digits: int = 5):
    """Rounded to what the fits support, so the table is the same on any machine."""
    if v is None or not np.isfinite(v):
        return ""
    return float(f"{v:.{digits}g}")


def _json(v):
    """A CSV cell for JSON: the empty cell (no number) as null."""
    return None if v == "" else v


def _f(v, spec: str) -> str:
    return "-" if not np.isfinite(v) else format(v, spec)
