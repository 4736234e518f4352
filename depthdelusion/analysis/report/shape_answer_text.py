"""The shape answer (issue 58) for a reader: the terminal text (extrapolation and the N form in
the first lines), the JSON (plain keys ``depth``, ``width``, ``params``, ``tokens``, ``loss``,
``band``, each with ``low``/``high``) and the figure (predicted loss over depth × width at one C
with the band, the suites' shapes, the paper's D_crit(W) line and published LLM shapes)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..fitting.options import EPSILON_OF_PARAMS
from ..fitting.shape_answer import BudgetAnswer, ShapeAnswer
from ..fitting.shape_checks import ROLLOUT_FRACTION, RUN_FOLDS
from ..fitting.shape_optimum import DEPTHS, WIDTHS
from ..fitting.shape_pool import LAWS
from ..formats.interval_text import interval_text

#: Each parameter-count convention (a key of ``EPSILON_OF_PARAMS``, ``ShapeAnswer.params``) in a
#: reader's words, and the answer under it (the held conventions' are computed whatever the convention).
CONVENTIONS = {"fitted": ("fitted ε", lambda b: b.point), "total": ("total N", lambda b: b.under_total),
               "nonembedding": ("non-embedding N", lambda b: b.under_nonemb)}
#: What a held ε makes N.
HELD = {"total": "total N: every parameter, embeddings included",
        "nonembedding": "Kaplan's non-embedding N: every vocabulary matrix removed"}

#: What one cluster of each unit is, for the reader.
UNITS = {"shape": "shapes (depth × width: a run's checkpoints and a shape's seeds together)",
         "run": "runs (a run's checkpoints together)", "row": "rows (no clustering: each row alone)"}


def intervals_text(a: ShapeAnswer) -> str:
    """How the intervals were made: the unit drawn whole in each suite, and whether the suites
    themselves were drawn."""
    r = a.resampling
    units = set(r.units.values())
    if len(units) == 1:
        unit = units.pop()
        what = "whole " + UNITS.get(unit, f"clusters of column {unit!r} (its rows together)")
    else:
        what = "whole clusters, by suite: " + ", ".join(f"{k}: {v}" for k, v in r.units.items())
    suites = (f"suites resampled: the {r.n_suites - 1} suites other than the reference drawn with replacement "
              f"(the reference always in; ≥ {r.min_suites} suites)" if r.suites_resampled else
              f"suites not resampled: {r.n_suites} suite{'s' if r.n_suites != 1 else ''} (< {r.min_suites})")
    return (f"95% percentile intervals of {a.n_resamples} cluster-bootstrap refits: {what} drawn with "
            f"replacement within each suite; {suites}; each refit started from the full fit; N(D, W) "
            "held at the reference suite's count" + ("" if a.eps_held is None else f"; ε held at {a.eps_held:g}"))


def held_text(a: ShapeAnswer) -> str:
    """A held ε as the output names it: "ε held at 0 (Kaplan's non-embedding N: ...; --params
    nonembedding)"; "" when ε is fitted."""
    if a.eps_held is None:
        return ""
    return f"ε held at {a.eps_held:g} ({HELD[a.params]}; --params {a.params})"


def _shown(a: ShapeAnswer) -> list:
    """The conventions whose answer line 2 compares: the answer's first; a held ε fits none, so
    then no fitted-ε answer."""
    return [a.params] + [c for c, held in EPSILON_OF_PARAMS.items() if c != a.params and (held is not None
                                                                                   or a.eps_held is None)]


def where_text(a: ShapeAnswer, b: BudgetAnswer) -> str:
    """Where C lies against the reference suite's runs (whose N and T terms split C into N* and
    T*), and against every suite's where that differs; what of the optimum lies past its runs."""
    ref = f"the runs of suite {a.reference}"
    if b.decades_outside > 0:
        text = f"EXTRAPOLATION: {b.decades_outside:.2f} decades beyond the largest compute of {ref}"
    elif b.decades_outside < 0:
        text = f"EXTRAPOLATION: {-b.decades_outside:.2f} decades below the smallest compute of {ref}"
    else:
        text = f"inside the compute range of {ref}"
    if b.decades_outside_pooled != b.decades_outside:
        text += (" (inside the pooled suites' range)" if b.decades_outside_pooled == 0 else
                 f" ({abs(b.decades_outside_pooled):.2f} decades outside the pooled suites' range)")
    words = {"depth": ("D*", "deeper than their deepest run", ".0f"),
             "params": ("N*", "larger than their largest run", ".3g")}
    for name, value, largest in b.beyond_runs:
        label, what, spec = words[name]
        text += f"; EXTRAPOLATION: {label} {value:{spec}} is {what} ({largest:{spec}})"
    return text


def is_extrapolation(b: BudgetAnswer) -> bool:
    return bool(b.decades_outside or b.beyond_runs)


def first_lines(a: ShapeAnswer) -> list[str]:
    """Where every C lies against the data (line 1), the N form and how D* moves under total
    and non-embedding N (line 2), the law and the loss scale (line 3)."""
    lo, hi = a.compute_range
    ref_lo, ref_hi = a.reference_range
    wheres = "; ".join(f"C = {b.point.compute:.3g}: {where_text(a, b)}" for b in a.budgets)
    extrapolated = any(map(is_extrapolation, a.budgets))
    line1 = (("EXTRAPOLATION — " if extrapolated else "Inside the data — ") + wheres
             + f" (runs span {ref_lo:.3g}–{ref_hi:.3g} FLOPs in suite {a.reference}"
             + (f", {lo:.3g}–{hi:.3g} in all suites" if len(a.suites) > 1 else "")
             + "; C = 6·N_total·T)")
    eps = float(a.fit.eps[a.fit.names.index(a.reference)])
    shown = [CONVENTIONS[c] for c in _shown(a)]
    if not a.fit.has_shape:
        first = a.budgets[0]
        moves = ("the law has no shape term: D* and W* are not determined; N* at the first budget "
                 + ", ".join(f"{under(first).params:.3g} " + (f"({label})" if i == 0 else f"under {label}")
                             for i, (label, under) in enumerate(shown)))
    else:
        moves = "; ".join(
            f"at {b.point.compute:.3g}: D* " + ", ".join(f"{_depth(under(b).depth)} ({label})" for label, under in shown)
            + "; band depth " + ", ".join(f"{_range(under(b).band_depth)} ({label})" for label, under in shown)
            for b in a.budgets)
    moves = moves[:1].upper() + moves[1:]  # it follows a sentence
    if a.fit.uses_eps and a.eps_held is not None:
        line2 = (f"N = N_nonemb + ε·N_emb with {held_text(a)} in every fit and refit (the pooled fit, the "
                 "bootstrap, the held-out checks): ε is not fitted, so it has no interval. " + moves)
    elif a.fit.uses_eps:
        whose = (f"the ε of suite {a.reference} (every suite fits its own)" if a.law == "separate"
                 else "one ε shared by every suite")
        line2 = (f"N = N_nonemb + ε·N_emb with ε = {eps:.3f} fitted, {whose} (95% profile likelihood "
                 f"{interval_text(a.eps_profile, '.3f')}, "
                 f"rows independent; cluster bootstrap {interval_text(a.eps_bootstrap, '.3f')}); N_nonemb is "
                 f"Kaplan's (every vocabulary matrix removed). {moves}")
    else:
        line2 = ("N = N_nonemb + ε·N_emb: the law has no parameter-count term, so ε does not enter it and "
                 "D* does not move with the count; N_total(D, W) only sets T = C / (6·N_total) at a budget. "
                 + "; ".join(f"at {b.point.compute:.3g}: D* {_depth(b.point.depth)}, band depth "
                             f"{_range(b.point.band_depth)}" for b in a.budgets))
    held = f"; ε held at {a.eps_held:g}, not fitted" if a.eps_held is not None and a.fit.uses_eps else ""
    line3 = (f"Law: {a.law} ({LAWS[a.law]}{held}); {a.law_reason}.{shape_text(a)} Losses on the scale of suite "
             f"{a.reference!r}; band: shapes within {a.tolerance:.3g} (relative) of the best loss."
             + "".join(f" WARNING: {w}." for w in a.warnings))
    return [line1, line2, line3]


def shape_text(a: ShapeAnswer) -> str:
    """The fitted shape term with its intervals (the bowl's centre also as D/W), or ""."""
    s = a.fit.names.index(a.reference)
    values = a.fit.shape_parameters(s)
    if not values:
        return ""
    on_bound = a.fit.at_bound(s)
    parts = [f"{k} {v:.4g} {interval_text(a.shape_intervals.get(k), '.4g')}"
             + (" (at its bound)" if k in on_bound else "")
             for k, v in values.items()]
    if "centre" in values and np.isfinite(values["centre"]):
        lo, hi = a.shape_intervals.get("centre", (np.nan, np.nan))
        parts.append(f"bowl bottom D/W = {np.exp(values['centre']):.3g} {interval_text((np.exp(lo), np.exp(hi)), '.3g')}")
    return " Shape term: " + ", ".join(parts) + "."


def _depth(v) -> str:
    """A depth as the text prints it; on the search grid's edge, "≥ 1024 (grid edge)"."""
    if not np.isfinite(v):
        return "—"
    edge = _grid_edge(v, DEPTHS, ".0f")
    return edge or (f"{v:.0f}" if v >= 10 else f"{v:.1f}")


def _grid_edge(v, grid, spec) -> str:
    """"≥ top (grid edge)" / "≤ bottom (grid edge)" for a value on the search grid's edge (the
    optimum or band lies beyond what was searched), else ""."""
    if v >= grid[-1] * (1 - 1e-9):
        return f"≥ {grid[-1]:{spec}} (grid edge)"
    if v <= grid[0] * (1 + 1e-9):
        return f"≤ {grid[0]:{spec}} (grid edge)"
    return ""


def _range(edges) -> str:
    low, high = _depth(edges[0]), _depth(edges[1])
    return f"{low} to {high}" if "grid edge" in low + high else f"{low}–{high}"


def _value(v, ci, spec, grid=None) -> str:
    """The value and its interval; a value on the search grid's edge as that edge ("≥ 1024 (grid
    edge)"), without an interval that would read as a precise estimate."""
    edge = _grid_edge(v, grid, ".0f") if grid is not None and np.isfinite(v) else ""
    return edge or f"{format(v, spec)} {interval_text(ci, spec)}"


def budget_lines(a: ShapeAnswer, b: BudgetAnswer) -> list[str]:
    p, ci = b.point, b.intervals
    shape = a.fit.has_shape
    lines = [f"C = {p.compute:.3g} FLOPs ({where_text(a, b)})" + (f"; N: {held_text(a)}" if a.eps_held is not None
                                                                 and a.fit.uses_eps else ""),
             f"  depth D*      {_value(p.depth, ci['depth'], '.3g', DEPTHS) if shape else 'not determined (no shape term)'}",
             f"  width W*      {_value(p.width, ci['width'], '.4g', WIDTHS) if shape else 'not determined (no shape term)'}",
             f"  N* total      {_value(p.params, ci['params'], '.3g')}  (every parameter, embeddings included)",
             f"  N* non-emb    {_value(p.params_nonemb, ci['params_nonemb'], '.3g')}  (Kaplan: every vocabulary matrix removed)",
             f"  tokens T*     {_value(p.tokens, ci['tokens'], '.3g')}  (T = C / (6·N_total))",
             f"  loss          {_value(p.loss, ci['loss'], '.4f')} nats on the scale of suite {a.reference}",
             f"  band (loss within {a.tolerance:.3g} of the best; each edge with its interval):"]
    for label, key, spec, grid in (("depth", "depth", ".3g", DEPTHS), ("width", "width", ".4g", WIDTHS),
                                   ("D/W", "aspect", ".3g", None)):
        edges = getattr(p, f"band_{key}")
        lines.append(f"    {label:<6} {_value(edges[0], ci[f'band_{key}_low'], spec, grid)} to "
                     f"{_value(edges[1], ci[f'band_{key}_high'], spec, grid)}")
    if p.at_limit:
        lines.append(f"  at the search grid's edge: {', '.join(p.at_limit)} (depth 1–1024, width 32–262144)")
    if b.without_suite:
        shifts = ", ".join(f"without {n}: {_depth(d)} ({_shift(d - p.depth)})" for n, d in b.without_suite.items())
        lines.append(f"  which suites constrain D* (leave one suite out of the shared terms): {shifts}")
    if b.own_suite_depth:
        own = ", ".join(f"{n} {_depth(d)}" for n, d in b.own_suite_depth.items())
        lines.append(f"  which suites constrain D*: only suite {a.reference} (law {a.law}: the suites share no "
                     f"shape term; the others only took part in picking the law); each suite's own D* at this C: {own}")
    return lines


def check_lines(a: ShapeAnswer) -> list[str]:
    lines = ["Laws by held-out prediction (RMSE, nats). LOSO: leave one suite out (its own E, A, α, "
             f"B, β (inverse_depth: E, B, β) refitted on it, the shared terms from the others); runs-out: "
             f"{RUN_FOLDS} folds of whole clusters (unseen shapes); rollout: fitted on each suite's smaller {ROLLOUT_FRACTION:.0%} "
             "of ln C, predicting the rest. Score: mean over the checks of RMSE / the best law's."
             + (f" Every fit and refit with {held_text(a)}." if a.eps_held is not None else ""),
             f"  {'law':<13} {'LOSO':>8} {'runs-out':>8} {'rollout':>8} {'score':>7} {'params':>6} {'RSS':>8}"]
    for c in a.checks:
        lines.append(f"  {c.law:<13} {_rmse(c.loso)} {_rmse(c.runs_out)} {_rmse(c.rollout)} {c.score:>7.3f} {c.n_params:>6d} "
                     f"{c.rss:>8.4f}" + ("  <- used" if c.law == a.law else "")
                     + (f"  ({', '.join(c.at_bound)} on the search bound)" if c.at_bound else ""))
    return lines


def _shift(v: float) -> str:
    """A shift in layers: "+3", "−10", "±0" (never "-0")."""
    k = int(round(v)) if np.isfinite(v) else 0
    return "±0" if k == 0 else f"{'+' if k > 0 else '−'}{abs(k)}"


def _rmse(v) -> str:
    return f"{'n.a.':>8}" if not np.isfinite(v) else f"{v:>8.4f}"


def summary(a: ShapeAnswer) -> str:
    """The whole terminal text."""
    lines = first_lines(a) + [""]
    for b in a.budgets:
        lines += budget_lines(a, b) + [""]
    lines += check_lines(a) + ["", "Notes:", "  - " + intervals_text(a)]
    if a.n_degenerate and a.fit.has_shape:
        lines.append(f"  - {a.n_degenerate} of {a.n_resamples} resamples put the optimum on the search "
                     "grid's edge at some budget (kept in the intervals)")
    lines += [f"  - {n}" for n in a.notes]
    lines.append(f"  - fitted by least squares on loss (nats), every row weighted equally; law {a.law}: {LAWS[a.law]} "
                 "(a bowl is a·(u − c)² in u = ln(D/W)); the optimum and band searched on a grid of depths "
                 f"{DEPTHS[0]:.0f}–{DEPTHS[-1]:.0f} and widths {WIDTHS[0]:.0f}–{WIDTHS[-1]:.0f} (resolution ≈ 3% in D and W)")
    if a.law == "inverse_depth" or any(c.law == "inverse_depth" for c in a.checks):
        lines.append("  - inverse_depth: Liu et al. 2026 (arXiv 2602.05970) fit ln L on Chinchilla's runs less "
                     "the 40 highest losses; here it is fitted on the same rows and by the same least squares "
                     "as the other laws, so that the held-out errors compare")
    return "\n".join(lines)


def to_json(a: ShapeAnswer) -> dict:
    """The answer under plain keys (see the module)."""
    def item(v, ci):
        return {"value": _num(v), "low": _num(ci[0]), "high": _num(ci[1])}

    budgets = []
    for b in a.budgets:
        p, ci = b.point, b.intervals
        band = {key: {"low": item(getattr(p, f"band_{key}")[0], ci[f"band_{key}_low"]),
                      "high": item(getattr(p, f"band_{key}")[1], ci[f"band_{key}_high"])}
                for key in ("depth", "width", "aspect")}
        budgets.append({
            "compute": p.compute, "params_convention": a.params, "where": where_text(a, b),
            "decades_outside": b.decades_outside,
            "decades_outside_pooled": b.decades_outside_pooled,
            "beyond_runs": [{"quantity": n, "value": v, "largest_run": m} for n, v, m in b.beyond_runs],
            "own_suite_depth": {k: _num(v) for k, v in b.own_suite_depth.items()},
            "depth": item(p.depth, ci["depth"]), "width": item(p.width, ci["width"]),
            "params": {**item(p.params, ci["params"]), "convention": "total"},
            "params_nonemb": {**item(p.params_nonemb, ci["params_nonemb"]),
                              "convention": "Kaplan non-embedding (every vocabulary matrix removed)"},
            "tokens": item(p.tokens, ci["tokens"]), "loss": {**item(p.loss, ci["loss"]), "scale": a.reference},
            "band": band, "at_limit": list(p.at_limit),
            "under_total_params": {"depth": _num(b.under_total.depth), "band_depth": list(map(_num, b.under_total.band_depth))},
            "under_nonemb_params": {"depth": _num(b.under_nonemb.depth), "band_depth": list(map(_num, b.under_nonemb.band_depth))},
            "depth_without_suite": {k: _num(v) for k, v in b.without_suite.items()}})
    return {"first_lines": first_lines(a), "law": a.law, "law_reason": a.law_reason,
            "shape_term": {k: {"value": _num(v), "low": _num(a.shape_intervals.get(k, (None, None))[0]),
                               "high": _num(a.shape_intervals.get(k, (None, None))[1])}
                           for k, v in a.fit.shape_parameters(a.fit.names.index(a.reference)).items()},
            "eps": {"value": _num(a.fit.eps[a.fit.names.index(a.reference)]), "profile": list(map(_num, a.eps_profile)),
                    "bootstrap": list(map(_num, a.eps_bootstrap)), "params": a.params, "held": a.eps_held is not None},
            "tolerance": a.tolerance, "reference": a.reference, "budgets": budgets,
            "checks": [{"law": c.law, "loso": _num(c.loso), "runs_out": _num(c.runs_out), "rollout": _num(c.rollout), "score": _num(c.score),
                        "n_params": c.n_params, "rss": c.rss, "at_bound": list(c.at_bound)} for c in a.checks],
            "intervals": intervals_text(a),
            "resampling": {"unit": dict(a.resampling.units), "suites_resampled": a.resampling.suites_resampled,
                           "min_suites_resampled": a.resampling.min_suites, "resamples": a.n_resamples},
            "notes": a.notes, "warnings": a.warnings}


def _num(v):
    return None if v is None or not math.isfinite(float(v)) else float(v)
