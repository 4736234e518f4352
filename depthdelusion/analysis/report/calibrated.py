"""The design cells rechecked with the calibrated tests. The design table (``results.design_matrix``)
decides λ = 0 by Davies' bound, which is an upper bound only asymptotically, and calls a cell with
too few runs for the law's parameters uninformative. Here, in every cell whose caveat does not
make it invalid:

- where the bound rejects λ = 0, λ = 0 is retested by the parametric bootstrap from the
  shape-agnostic fit, and the kink is tested against the best smooth shape law (the main
  report's two tests, ``verdict.penalty_verdicts`` and ``verdict.critical_depth_verdict``);
- where the rule says "uninformative", the kink against the best smooth shape law is *described*
  (residual sums of squares, LR, its parametric-bootstrap p, κ's profile interval) with the
  limits that keep it from being a verdict: parameters against runs, runs per shape, token
  budgets.

Computed by ``results.compute`` (the forms and the fitting function are passed in, so this module
does not import ``results``); rendered by ``markdown`` and ``tables``; the cells' type is ``contents.CalibratedCell``."""
from __future__ import annotations

import functools

import numpy as np

from ..fitting.lr_test import bootstrap_tests
from ..fitting.options import FitOptions
from ..fitting.refits import default_refit
from ..fitting.workers import in_this_process
from ..laws import shape_kind
from .consistency import with_param_convention
from .contents import CalibratedCell
from .verdict import (
    critical_depth_verdict,
    penalty_verdicts,
    shape_variation,
    too_few_runs,
)


def _limits(runs, kink) -> str:
    """What keeps a described cell from being a verdict, from the runs themselves."""
    shapes = len({(d, w) for d, w in zip(runs.depth, runs.width)})
    tokens = np.asarray(runs.tokens, float) if runs.tokens is not None else np.full(len(runs), np.nan)
    unknown = int(np.sum(~np.isfinite(tokens)))
    parts = [too_few_runs(kink) or f"{kink.k} parameters on {kink.n} runs",
             "one run per shape (no seed replicates)" if shapes == len(runs)
             else f"{len(runs)} runs over {shapes} shapes"]
    if unknown:
        parts.append(f"token budgets unknown for {unknown} of {len(runs)} runs (absorbed into the offsets)")
    return "; ".join(parts)


def _cell(r, label, conv, kind, v, lf, fits, s) -> CalibratedCell:
    """Run the cell's tests on its fits (``s``: (primary, seed, replicates))."""
    primary, seed, replicates = s
    smooth = min((f for f in fits.values() if shape_kind(f.law) == "smooth"), key=lambda f: f.aicc)
    if kind == "calibrated":
        (pen,) = penalty_verdicts({primary: lf, v.baseline: fits[v.baseline]}, r,
                                  replicates=replicates, seed=seed)
        crit = critical_depth_verdict({primary: lf, **fits}, r, primary, pen, replicates=replicates, seed=seed)
        return CalibratedCell(label, conv, kind, lf.n, v, lf, smooth, penalty=pen, critical=crit)
    test = bootstrap_tests(r, smooth, {primary: lf}, replicates=replicates, seed=seed, nested=False,
                           refit=default_refit(smooth))[primary]
    return CalibratedCell(label, conv, kind, lf.n, v, lf, smooth, described=test, limits=_limits(r, lf))


def calibrated_cells(forms, matrix: dict, primary: str, options: FitOptions, replicates: int,
                     smooth_laws, fit_form, map_units=in_this_process
                     ) -> tuple[CalibratedCell, ...]:
    """``forms``: ``results.design_forms``' (label, runs, offsets, caveat); ``matrix``: the design
    matrix of ``primary``; ``options``: the report's fit options (each cell's laws are fitted under
    them without intervals; the tests draw with their seed); ``smooth_laws``: the smooth shape
    laws to fit; ``fit_form``: ``results.fit_form``. No cells without replicates (the tests are
    bootstraps). ``map_units(fn, items)``: how the cells are computed (``fitting.workers.Workers.map``: in
    worker processes)."""
    if replicates <= 0 or not smooth_laws:
        return ()
    todo = []
    for label, sub, offsets, caveat in forms:
        for conv in ("total", "non_embedding"):
            v, lf, _ = matrix.get((label, conv), (None, None, None))
            if caveat or lf is None or isinstance(v, str):
                continue
            kind = ("calibrated" if v.significant and v.test is not None and v.test.method == "Davies bound"
                    and v.answer != "uninformative" else "described" if v.answer == "uninformative" else "")
            r, _ = with_param_convention(sub, conv)
            if not kind or not shape_variation(r).ok:
                continue
            names = [*smooth_laws, v.baseline] if kind == "calibrated" else list(smooth_laws)
            todo.append((r, label, conv, kind, v, lf, offsets, names))
    cells = map_units(functools.partial(_fitted_cell, fit_form, options, (primary, options.seed, replicates)), todo)
    return tuple(c for c in cells if c is not None)


def _fitted_cell(fit_form, options: FitOptions, s, cell) -> CalibratedCell | None:
    """A cell's laws fitted (None where its runs cannot fit one: the design table says so
    already), then its tests (:func:`_cell`)."""
    r, label, conv, kind, v, lf, offsets, names = cell
    try:
        fits = {n: fit_form(r, n, options.without_intervals(), offsets) for n in names}
    except ValueError:
        return None
    return _cell(r, label, conv, kind, v, lf, fits, s)
