"""The analysis report's numbers, computed once: fits, tests and verdicts with their assumptions,
the design matrix, extrapolation, the parameter-count audit, critical depth and optimal shape,
persistence lengths — a frozen :class:`ReportResults` that the renderers (``report.markdown``,
``report.latex``, the CSV tables of ``report.tables``) only format.

Design assumptions the results make explicit (docs/analysis.md):

- **Token budgets.** Groups trained on different token budgets cannot be pooled by a law without
  a token term: the extra tokens would be credited to N. ``groups="auto"`` then fits a per-group
  offset E_g (the budget's data term, constant within a group); ``groups="pooled"`` fits as
  asked but flags it in the report's first lines.
- **N convention.** ``params="total"`` (printed N; rows inconsistent with their shape refitted
  with the recomputed N), ``"non_embedding"`` or ``"recomputed"`` (consistency.PARAM_CONVENTIONS),
  ``"nonembedding"`` (Kaplan's), ``"fitted"`` (ε profiled by the baseline law, then held:
  :func:`.build.fitted_count`).
- **Which conclusion holds where.** With several groups, every form the design allows is also
  fitted (each group alone; groups with unknown budgets with size-class offsets; pooled with
  group offsets; pooled without, flagged) under total and non-embedding N, with the penalty
  verdict in each.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from ...progress import SILENT
from ..fitting.clusters import cluster_kwargs
from ..fitting.engine import FitResult, fit_with
from ..fitting.lr_test import DEFAULT_REPLICATES
from ..fitting.options import FITTED, FitOptions
from ..fitting.replicates import replicate_cells
from ..fitting.result import OK, parameter_status
from ..fitting.setup import check_fixed, options_for_law
from ..fitting.workers import PARALLEL_FROM_BOOTSTRAPS, Workers, available_cpus, in_this_process
from ..laws import fresh_process_fits, loads_in_a_fresh_process, shape_kind
from ..science.persistence import (
    DEFAULT_WINDOW,
    persistence_lengths,
    persistence_scaling,
    seed_interval,
    window_bounds,
)
from .spectra_text import readout_section, spectrum_section
from ..table.law_columns import law_missing_columns
from ..table.load import PAPER_VOCAB, load_runs
from ..table.runs import Runs
from .consistency import audit_param_counts, with_param_convention
from .contents import (
    CANNOT_TELL,
    FITTED_COUNT,
    NO_VOCAB,
    NOT_ESTABLISHED,
    RANGE_TOL,
    SIZE_CLASS_GAP,
    UNFIT,
    Design,
    Extrapolation,
    Persistence,
    ReportResults,
    Settings,
    ShapeResults,
)
from .options import ReportOptions
from .shape import (
    audit_shapes,
    has_token_term,
    optimal_shape,
    trainer_counts,
)
from .size_rival import size_rival
from .verdict import (
    baseline_for,
    critical_depth_verdict,
    is_architecture_law,
    overall,
    penalty_verdict,
    penalty_verdicts,
    shape_variation,
)

GROUP_MODES = ("auto", "offsets", "pooled")
MIN_RUNS_ALONE = 10   # a group is fitted alone only with at least this many runs


# --- design: token budgets, groups, forms --------------------------------------------------------

def _budget(tokens) -> float:
    """A group's token budget: the common value, NaN when unknown, inf when it varies."""
    t = np.asarray(tokens, float)
    if not np.all(np.isfinite(t)):
        return math.nan
    return float(t[0]) if t.max() <= 1.01 * t.min() else math.inf


def mixed_budgets(runs: Runs) -> str | None:
    """A description of the groups' token budgets when they differ (or are unknown for some
    groups) and the runs' tokens are not known per run; None when pooling is safe."""
    if runs.tokens_vary or len(runs.groups) < 2:
        return None
    budgets = {g: _budget(runs.tokens[runs.group == g]) for g in runs.groups}
    known = [b for b in budgets.values() if np.isfinite(b)]
    if len(known) == len(budgets) and max(known) <= 1.01 * min(known):
        return None
    if not known:
        return None  # no budget known anywhere: nothing says they differ (stated in the notes)
    return "; ".join(f"{g}: " + (f"{b:.3g} tokens" if np.isfinite(b) else "unknown")
                     for g, b in budgets.items())


def size_classes(params) -> np.ndarray:
    """Labels 0, 1, ... of runs grouped by N: a new class starts where sorted N jumps by more
    than ``SIZE_CLASS_GAP``×."""
    N = np.asarray(params, float)
    order = np.argsort(N)
    labels = np.zeros(len(N), int)
    cls = 0
    for prev, cur in zip(order[:-1], order[1:]):
        if N[cur] > SIZE_CLASS_GAP * N[prev]:
            cls += 1
        labels[cur] = cls
    return labels


def _relabel(runs: Runs, labels) -> Runs:
    return dataclasses.replace(runs, group=np.asarray(labels, dtype=object))


def design_forms(runs: Runs) -> list:
    """The forms a runs table's design allows: (label, runs, offsets, caveat)."""
    forms = []
    mixed = mixed_budgets(runs)
    if len(runs.groups) >= 2:
        forms.append(("all runs, group offsets", runs, True, ""))
    forms.append(("all runs pooled", runs, False,
                  f"mixes token budgets ({mixed}) without a token term" if mixed else ""))
    if len(runs.groups) >= 2:
        for g in runs.groups:
            sub = runs.where_group(g)
            if len(sub) < MIN_RUNS_ALONE:
                continue
            classes = size_classes(sub.params)
            if not np.isfinite(_budget(sub.tokens)) and classes.max() >= 1 and not sub.tokens_vary:
                labels = [f"{g}/{c}" for c in classes]
                forms.append((f"{g} alone, size-class offsets", _relabel(sub, labels), True, ""))
            else:
                forms.append((f"{g} alone", sub, False, ""))
    return forms


def fit_form(runs, law, options: FitOptions, offsets: bool, **kw) -> FitResult:
    """``fitting.fit_with`` of ``law`` under ``options`` (only the fixed parameters it has), with
    one offset per group when ``offsets`` (``kw``: the bootstrap's clusters)."""
    return fit_with(runs, law, options_for_law(options, law), group_offsets=offsets, **kw)


def design_matrix(runs: Runs, law: str, options: FitOptions, conventions=("total", "non_embedding"),
                  map_units=in_this_process):
    """The penalty verdict of ``law`` against its same-data-term baseline in every design form
    under each N convention: {(form label, convention): (verdict or reason, fit, caveat)}; every
    fit under ``options`` without intervals, ``law``'s with its profile stage as asked (None:
    by rows). ``map_units(fn, items)``: how the cells are computed (``fitting.workers.Workers.map``:
    in worker processes)."""
    cells = [(label, sub, offsets, caveat, conv) for label, sub, offsets, caveat in design_forms(runs)
             for conv in conventions]
    found = map_units(functools.partial(_design_cell, law, options), cells)
    return {(label, conv): cell for (label, _, _, _, conv), cell in zip(cells, found)}


def _design_cell(law: str, options: FitOptions, cell) -> tuple:
    """One cell of :func:`design_matrix`: (verdict or reason, fit, caveat)."""
    label, sub, offsets, caveat, conv = cell
    quick = options.without_intervals()
    try:
        r, _ = with_param_convention(sub, conv)
        lf = fit_form(r, law, dataclasses.replace(quick, profile=options.profile), offsets)
        base = "chinchilla" if r.tokens_vary else "kaplan"
        bf = fit_form(r, base, quick, offsets)
        return penalty_verdict(lf, bf, shape_variation(r), runs=r), lf, caveat
    except ValueError as err:
        return f"not fitted: {err}", None, caveat


# --- extrapolation -------------------------------------------------------------------------------


def _split_for_extrapolation(runs: Runs):
    """Within each group, fit on the smallest 60% of runs by N and predict the larger ones
    (never across groups: their token budgets may differ)."""
    train = np.zeros(len(runs), bool)
    for g in runs.groups:
        rows = np.flatnonzero(runs.group == g)
        cut = np.quantile(runs.params[rows], 0.6)
        train[rows[runs.params[rows] <= cut]] = True
    how = (f"within each group, fit on the {int(train.sum())} runs with N at or below the group's "
           f"60th percentile, predict the other {int((~train).sum())}")
    return train, how


def prediction_range(f: FitResult, runs) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) predictions over the solutions tied at the best objective (the fitting
    engine's ``predict_range`` when it has one; else the single point)."""
    rng = getattr(f, "predict_range", None)
    if callable(rng):
        lo, hi = rng(runs)
        return np.asarray(lo, float), np.asarray(hi, float)
    p = f.predict(runs)
    return p, p


def extrapolate(runs: Runs, laws, options: FitOptions, offsets: bool) -> Extrapolation:
    """Each law fitted (``options`` without intervals) on the smaller runs of each group, and its
    predictions of the larger ones."""
    train, how = _split_for_extrapolation(runs)
    test_rows = np.flatnonzero(~train)
    preds, rmse, ridges, errors = {}, {}, {}, {}
    for name in laws:
        try:
            small = fit_form(runs.subset(train), name, options.without_intervals(), offsets)
            lo, hi = prediction_range(small, runs.subset(~train))
            preds[name] = (lo, hi)
            on_ridge = bool(np.any(hi - lo > RANGE_TOL))
            if on_ridge:
                ridges[name] = tuple(small.starts.ridge_params)
            # On a ridge the error is a range per run; one RMSE would pick a point of it.
            rmse[name] = (math.nan if on_ridge else
                          float(np.sqrt(np.mean((0.5 * (lo + hi) - runs.loss[test_rows]) ** 2))))
        except ValueError as err:  # e.g. too few training runs for this law
            preds[name] = (np.full(len(test_rows), np.nan),) * 2
            errors[name] = str(err)
    return Extrapolation(how, test_rows, preds, rmse, ridges, errors)


# --- critical depth, published models, optimal shape ---------------------------------------------

def derived_quantities_blocked(fit, names=None) -> str | None:
    """Hook for per-parameter status: why quantities derived from ``names`` (default: the law's
    penalty and the parameters of its D_crit; these give D_crit and optimal shapes) must not be
    printed as numbers — a parameter at its bound or not identified — or None. Uses the fit's own status where the results API provides one (``fit.status``: name →
    "ok" / "at_bound" / "not_identified"), else its at-bound list and identifiability."""
    status = getattr(fit, "status", None)
    if names is None:
        names = tuple(n for n in (fit.law.penalty, *fit.law.d_crit_params) if n)
    present = [n for n in names if n in fit.params]
    if isinstance(status, dict):
        bad = [f"{n} {status[n].replace('_', ' ')}" for n in present if status.get(n, "ok") != "ok"]
    else:
        bad = ([f"{n} at its bound" for n in present if n in (getattr(fit, "at_bound", None) or [])]
               + [f"{n} not identified" for n in present
                  if n in fit.params and parameter_status(fit, n) != OK])
    return "; ".join(bad) or None


def runs_vocab(runs) -> int | None:
    """The runs' one vocabulary size (None when unknown or mixed); the bundled paper data is
    GPT-2 BPE."""
    v = getattr(runs, "vocab_size", None)
    if v is not None:
        v = np.asarray(v, dtype=float).ravel()
        v = v[np.isfinite(v)]
        if len(v):
            return int(v[0]) if len(set(v.tolist())) == 1 else None
    return PAPER_VOCAB if str(runs.source).startswith("paper") else None


def _withheld(dd: FitResult, v, critical) -> str | None:
    lam_profile = (getattr(dd, "ci_profile", None) or {}).get(dd.law.penalty)
    if (v is None or not v.significant or (lam_profile is not None and not lam_profile[0] > 0)
            or (critical is not None and not critical.kink_wins) or derived_quantities_blocked(dd)):
        return NOT_ESTABLISHED
    return CANNOT_TELL if v.answer == "cannot tell" else None


def shape_results(dd: FitResult, v, critical, runs: Runs, raw: Runs, params: str, bootstrap: int,
                  shape_draws: int) -> ShapeResults:
    base = ShapeResults(dd, v, critical, blocked=derived_quantities_blocked(dd))
    withheld = _withheld(dd, v, critical)
    if withheld:
        return dataclasses.replace(base, withheld=withheld)
    # not identified, or a critical-depth scale at 0 (γ = 0 on its bound is a value: W^0)
    unfit = {p: parameter_status(dd, p) for p in (dd.law.penalty, *dd.law.d_crit_params) if p in dd.params
             and (parameter_status(dd, p) == "not_identified"
                  or (p == dd.law.kink and parameter_status(dd, p) != OK))}
    if unfit:
        return dataclasses.replace(base, withheld=UNFIT, unfit=unfit)
    audit = audit_shapes(dd)
    vocab = runs_vocab(raw)
    if vocab is None:
        return dataclasses.replace(base, withheld=NO_VOCAB, audit=audit)
    if params == FITTED:
        return dataclasses.replace(base, withheld=FITTED_COUNT, audit=audit)
    counts = trainer_counts(vocab, non_embedding=(params == "non_embedding"))
    constraints = ["compute", "params"] if has_token_term(dd) else ["params"]
    typical_tokens = float(np.nanmedian(runs.tokens)) if np.any(np.isfinite(runs.tokens)) else None
    optima = []
    for constraint in constraints:
        # Fixed N is cheap: every bootstrap draw (fewer draws make the percentiles of a slope of
        # integer depths noisy); fixed compute searches widths too: ``shape_draws`` of them.
        draws = bootstrap if constraint == "params" else min(shape_draws, bootstrap)
        optima.append(optimal_shape(dd, constraint=constraint, counts=counts, bootstrap=draws,
                                    tokens=typical_tokens if has_token_term(dd) else None))
    return dataclasses.replace(base, audit=audit, optima=tuple(optima))


# --- persistence ---------------------------------------------------------------------------------


def _persistence_window(runs, step: int):
    """When every run stopped logging before the window, the window is placed at the end of
    training instead (the shortest run's last logged step), and said so."""
    profiles = [p for p in runs.profiles if p is not None and p.steps("weight")]
    if profiles:
        last = min(max(p.steps("weight")) for p in profiles)
        if last < window_bounds(step, DEFAULT_WINDOW)[0]:
            return last, (f"The runs end (step {last}) before the window around step {step} (the "
                          f"paper's measurement point): the window is placed at the end of training, "
                          f"steps {window_bounds(last, DEFAULT_WINDOW)[0]}–{last}. A profile this "
                          "early in training need not be the one at the paper's step.")
    return step, ""


def persistence(runs, step: int) -> Persistence:
    p_step, note = _persistence_window(runs, step)
    fits = {kind: persistence_lengths(runs, step=p_step, kind=kind) for kind in ("weight", "activation")}
    scaling, errors, shapes = {}, {}, {}
    if any(fits.values()):
        for kind, pfits in fits.items():
            try:
                scaling[kind] = persistence_scaling(pfits)
            except ValueError as err:
                errors[kind] = str(err)
            by_shape: dict = {}
            for p in pfits:
                if np.isfinite(p.rate):
                    by_shape.setdefault((p.depth, p.width), []).append(p)
            shapes[kind] = {k: seed_interval(v) for k, v in sorted(by_shape.items())}
    return Persistence(fits, p_step, note, scaling, errors, shapes)


# --- the whole report ----------------------------------------------------------------------------


def _laws_to_fit(runs: Runs, laws, label: str) -> tuple[list, dict]:
    laws = list(laws)
    if runs.tokens_vary and "chinchilla" not in laws:
        laws.append("chinchilla")
    skipped = {name: law_missing_columns(name, runs) for name in laws}
    skipped = {name: missing for name, missing in skipped.items() if missing}
    laws = [name for name in laws if name not in skipped]
    if not laws:
        raise ValueError(f"{label}: no law of the report can be fitted to this table: "
                         + "; ".join(f"{n} needs {', '.join(m)}" for n, m in skipped.items()))
    return laws, skipped


def primary_law(laws) -> str | None:
    for name in ("depth_delusion", *laws):
        if name in laws and name not in ("kaplan", "chinchilla"):
            return name
    return None


def _settings(runs, o: ReportOptions) -> Settings:
    lr_replicates = min(DEFAULT_REPLICATES, o.fit.bootstrap) if o.lr_replicates is None else o.lr_replicates
    if o.groups not in GROUP_MODES:
        raise ValueError(f"groups must be one of {', '.join(GROUP_MODES)}, got {o.groups!r}")
    label = o.runs_label or (runs if isinstance(runs, str) else "RUNS")
    return Settings(label, o.fit.bootstrap, o.fit.seed, o.fit.method, o.step, o.groups, o.params,
                    lr_replicates, o.shape_draws, profile=o.fit.profile,
                    interval_flags=o.fit.interval_flags(), input_words=o.input_words, citation=o.citation)


def _shape(fits, verdicts, critical, runs, raw, s: Settings) -> ShapeResults | None:
    dd_name = next((n for n in fits if shape_kind(fits[n].law) == "kink" and fits[n].law.has_critical_depth), None)
    if dd_name is None:
        return None
    return shape_results(fits[dd_name], next((v for v in verdicts if v.law == dd_name), None),
                         critical if critical is not None and critical.kink == dd_name else None,
                         runs, raw, s.params, s.bootstrap, s.shape_draws)


def worker_count(options: ReportOptions, laws) -> int:
    """1 where a fresh process would not fit every one of ``laws`` and their baselines as this one
    does (``laws.fresh_process_fits``: a law registered or replaced here, or one that does not
    pickle), or where the fit options would not load there (``laws.loads_in_a_fresh_process``);
    else ``options.workers``, or, when None, the CPUs this process may use when the fits
    bootstrap ``PARALLEL_FROM_BOOTSTRAPS`` times or more, else 1."""
    if not all(fresh_process_fits(law) for law in [*laws, "kaplan", "chinchilla"]):
        return 1
    if not loads_in_a_fresh_process(options.fit):  # every unit carries them to its worker
        return 1
    if options.workers is not None:
        return options.workers
    return available_cpus() if options.fit.bootstrap >= PARALLEL_FROM_BOOTSTRAPS else 1


def compute(runs, options: ReportOptions, progress=SILENT, calibrate=None, count=None) -> ReportResults:
    """Fit and test as ``options`` say; writes nothing. The tables are added by
    ``tables.with_tables``. ``progress`` (``depthdelusion.progress.Stages``) is told as each
    stage starts. ``calibrate``: :func:`.calibrated.calibrated_cells` (build hands it in, so that
    this module stays one level above the verdicts), the design cells rechecked by bootstrap;
    None: not rechecked. ``count``: ``build.fitted_count``, N with a fitted ε (``params``
    ``"fitted"``; handed in for the same reason)."""
    s = _settings(runs, options)
    laws, groups, params, design, step = options.laws, options.groups, options.params, options.design, options.step
    bootstrap, seed = s.bootstrap, s.seed
    raw = load_runs(runs)
    if params == FITTED and count is None:
        raise ValueError("--params fitted: this report was computed without the ε profile (count=)")
    runs, n_notes = count(raw, options.fit, groups) if params == FITTED else with_param_convention(raw, params)
    mixed = mixed_budgets(runs)
    offsets = groups == "offsets" or (groups == "auto" and mixed is not None)
    laws, skipped = _laws_to_fit(runs, laws, s.label)
    primary = primary_law(laws)
    with_matrix = bool(design and primary and len(raw.groups) >= 2)
    progress.expect(len(laws) + 3 + with_matrix)
    fits = {}
    check_fixed(options.fit, laws)
    clusters = cluster_kwargs(options.fit.cluster, runs)  # every bootstrap of the report resamples these
    s = dataclasses.replace(s, cluster=clusters["cluster_name"])
    with Workers(worker_count(options, laws)) as workers:
        fitted = workers.submit(functools.partial(fit_form, runs, options=options.fit, offsets=offsets, **clusters),
                                laws)
        for name, result in zip(laws, fitted):
            progress.stage(f"fitting {name} ({bootstrap} bootstraps)")
            fits[name] = result()
        progress.stage("penalty and critical-depth tests")
        verdicts = penalty_verdicts(fits, runs, replicates=s.lr_replicates, seed=seed,
                                    clusters=clusters["clusters"], map_units=workers.map)
        critical = (critical_depth_verdict(fits, runs, primary,
                                           next((v for v in verdicts if v.law == primary), None),
                                           replicates=s.lr_replicates, seed=seed,
                                           clusters=clusters["clusters"], map_units=workers.map)
                    if primary in fits else None)
        rival = (size_rival(fits[primary], baseline_for(fits[primary]),
                            lambda law, opts: fit_form(runs, law, opts, offsets),
                            options.fit, fits.get(baseline_for(fits[primary])))
                 if primary in fits and is_architecture_law(fits[primary]) and fits[primary].law.has_critical_depth
                 else None)
        if with_matrix:
            progress.stage(f"{primary} in every design form")
        matrix = design_matrix(raw, primary, options.fit, map_units=workers.map) if with_matrix else {}
        smooth = [n for n, f in fits.items() if shape_kind(f.law) == "smooth"]
        calibrated = (calibrate(design_forms(raw), matrix, primary, options.fit, s.lr_replicates,
                                smooth, fit_form, map_units=workers.map) if with_matrix and calibrate is not None else ())
    notes = sorted({n for f in fits.values() for n in f.notes if "token" in n} | set(runs.notes)
                   | set(n_notes))
    audit = (audit_param_counts(raw, vocab=runs_vocab(raw))  # a registered count is not the paper's
             if raw.has("depth") and raw.has("width") and runs_vocab(raw) is not None
             and raw.embeddings is None else None)
    progress.stage("extrapolation")
    extrapolated = extrapolate(runs, laws, options.fit, offsets)
    progress.stage("optimal shape, persistence")
    return ReportResults(
        settings=s, raw=raw, runs=runs, notes=tuple(notes), skipped=skipped, fits=fits,
        verdicts=tuple(verdicts), overall=overall(verdicts), primary=primary, critical=critical,
        design=Design(mixed, offsets, params, matrix), replicates=replicate_cells(runs),
        extrapolation=extrapolated, audit=audit,
        shape=_shape(fits, verdicts, critical, runs, raw, s), persistence=persistence(runs, step),
        studies=tuple(spectrum_section(runs.source)) + tuple(readout_section(runs.source)),
        calibrated=calibrated, size_rival=rival)
