"""The public-shapes study's check on Gadre et al. 2024 (issue 51 item 2; issue 62: every N convention).

The laws robust on Gemstones (:data:`LAWS`) fitted to the runs of ``gadre2024`` with a width and
depth (4 shapes × 3 training sets × token multiples), one offset E per training set, under each
N convention of the study (:func:`.study.with_convention`: total N, both untied 50,432 × W
vocabulary matrices counted; Kaplan's non-embedding N, both removed; ε fitted by chinchilla's
least-squares profile on these runs, one offset per training set as in the fits).

The resampling unit is the run: each row is its own training run (no checkpoints of one run), so
the bootstrap draws rows with replacement within each training set. Not the shape: with 4 shapes
a bootstrap over shapes holds all four in 4!/4⁴ ≈ 9% of its draws, and 4 clusters give a
percentile interval no stated coverage. The intervals therefore condition on these 4 shapes: they
carry run-to-run noise, not which shapes were trained (the section says so).

N takes one value per shape here, so a law whose size and shape terms have as many free values as
there are shapes fits the shape means exactly: it is saturated (:func:`saturated`), its RSS is
that of one free value per shape (:func:`per_shape_rss`) under every count, and ΔAICc against it
measures only the other law's lack of fit across the shape means.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from depthdelusion.analysis import fit
from depthdelusion.analysis.fitting.problem import OFFSET
from depthdelusion.analysis.fitting.result import AT_BOUND, DRIFT, OK, bound_reached, parameter_status
from depthdelusion.analysis.fitting.uncertainty import NULL_LOADING, near_bound
from depthdelusion.analysis.formats.table_text import markdown_table
from depthdelusion.analysis.table.published import load_table
from depthdelusion.studies.public_shapes.study import EPSILON_LAW, significant, with_convention

TABLE = "gadre2024"
LAWS = ("chinchilla", "shape_quadratic", "gemstones_width_depth", "depth_delusion")
#: ΔAICc within which two laws are not told apart (the study's margin throughout)
TIED_AICC = 2.0
#: a law whose RSS is within this (relative) of one free value per shape's is saturated: the
#: fits that reach it agree to 1e-12 (shape_quadratic and gemstones_width_depth on total N)
SATURATED_RTOL = 1e-9
HEADING = "## Item 2: the robust laws checked on Gadre et al. 2024 (gadre.csv)"


@dataclass(frozen=True)
class GadreFit:
    """One law fitted in one N convention, ``d_aicc`` its AICc above the convention's best law."""

    law: str
    fit: object
    d_aicc: float


@dataclass(frozen=True)
class GadreArm:
    """The laws fitted in one N convention: ε (its EmbeddingWeight when fitted), the runs with N
    in that convention, the fits by AICc, and the best law's RMSE per token multiple."""

    convention: str
    epsilon: float
    weight: object
    runs: object
    fits: tuple
    by_multiple: tuple      # (tokens per parameter of total N, RMSE of the best law there)
    shape_rss: float        # :func:`per_shape_rss` of the runs (the same in every convention)


def measure(conventions, *, bootstrap: int, seed: int, laws=LAWS) -> tuple:
    """A :class:`GadreArm` per N convention of ``conventions``."""
    table = load_table(TABLE)
    table = table.subset(np.isfinite(np.asarray(table.depth, float)) & np.isfinite(np.asarray(table.width, float)))
    # tokens per parameter of total N (the files' chinchilla_multiplier × 20): the same runs in every convention
    multiple = np.round(np.asarray(table.tokens, float) / np.asarray(table.params, float))
    floor = per_shape_rss(table)
    return tuple(_arm(table, c, multiple, laws, floor, bootstrap=bootstrap, seed=seed) for c in conventions)


def per_shape_rss(runs) -> float:
    """The least RSS of loss = v_shape + E_training set + B·D^−β with a free value v per shape
    (least squares, no bounds): linear in v, E and B for a given β, whose RSS is minimised over
    β ∈ [0.01, 3] (a grid, then a bounded search around its best). No law whose size and shape
    terms depend only on N and the shape fits better where N is one value per shape."""
    shapes = np.unique(np.stack([runs.width, runs.depth], 1).astype(float), axis=0, return_inverse=True)[1]
    groups = np.unique(runs.group, return_inverse=True)[1]
    one_hot = np.column_stack([np.ravel(shapes) == s for s in range(np.max(shapes) + 1)]
                              + [np.ravel(groups) == g for g in range(1, np.max(groups) + 1)]).astype(float)
    loss, tokens = np.asarray(runs.loss, float), np.asarray(runs.tokens, float)

    def rss(beta: float) -> float:
        x = np.column_stack([one_hot, tokens ** -beta])
        return float(np.sum((loss - x @ np.linalg.lstsq(x, loss, rcond=None)[0]) ** 2))

    grid = np.linspace(0.01, 3.0, 300)
    i = int(np.argmin([rss(b) for b in grid]))
    best = minimize_scalar(rss, bounds=(grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]),
                           method="bounded", options={"xatol": 1e-12})
    return float(min(best.fun, rss(grid[i])))


def saturated(arm: GadreArm, g: GadreFit) -> bool:
    """Whether ``g``'s RSS is that of one free value per shape to a relative ``SATURATED_RTOL``."""
    return abs(g.fit.rss / arm.shape_rss - 1) <= SATURATED_RTOL


def _arm(table, convention: str, multiple, laws, floor: float, *, bootstrap: int, seed: int) -> GadreArm:
    runs, epsilon, weight = with_convention(table, convention, group_offsets=True)
    fits = {law: fit(runs, law, bootstrap=bootstrap, seed=seed, profile=False, leave_one_out=False,
                     diagnostics=False, group_offsets=True) for law in laws}
    best = min(f.aicc for f in fits.values())
    ordered = tuple(sorted((GadreFit(law, f, f.aicc - best) for law, f in fits.items()), key=lambda g: g.d_aicc))
    resid = np.asarray(runs.loss, float) - ordered[0].fit.predict(runs)
    by_multiple = tuple((float(m), float(np.sqrt(np.mean(resid[multiple == m] ** 2)))) for m in np.unique(multiple))
    return GadreArm(convention, epsilon, weight, runs, ordered, by_multiple, floor)


def rows(arms) -> list[dict]:
    """gadre.csv: per N convention, law and parameter the value, status and run-bootstrap interval.
    Where the status is not ok there is no interval (the draws of a parameter the data do not set
    are no interval for it — lam, kappa, gamma never left their warm start) and no estimate: a
    parameter at its bound prints the bound, one not identified prints nothing (its value is one
    point of a ridge, which another CPU's BLAS ends elsewhere: m 1.33 → 1.41, Ad 2.8e10 → 1.8e10)."""
    out = []
    for arm in arms:
        for g in arm.fits:
            for name, value in g.fit.params.items():
                status = parameter_status(g.fit, name)
                lo, hi = tuple(map(significant, _bootstrap(g, name))) if status == OK else ("", "")
                shown = (significant(value) if status == OK else
                         significant(bound_reached(g.fit, name)) if status == AT_BOUND else "")
                out.append({"n_convention": arm.convention, "epsilon": significant(arm.epsilon, 3), "law": g.law,
                            "parameter": name, "value": shown, "status": status,
                            "ci95_low": lo, "ci95_high": hi, "rows": g.fit.n,
                            "d_aicc": round(g.d_aicc, 1), "bootstrap_kept": g.fit.n_bootstrap})
    return out


def _by_status(g: GadreFit) -> dict:
    """{status: the law's parameters with it, in the fit's order}."""
    found = {"ok": [], "at_bound": [], "not_identified": []}
    for name in g.fit.params:
        found[parameter_status(g.fit, name)].append(name)
    return found


def _names(names) -> str:
    return ", ".join(names) or "–"


def _bootstrap(g: GadreFit, name: str) -> tuple:
    return tuple((g.fit.ci_bootstrap or {}).get(name, (np.nan, np.nan)))


def reaches_bound(g: GadreFit, name: str) -> bool:
    """Whether an end of ``name``'s run-bootstrap interval lies on the parameter's physical bound,
    by the fit's own at-bound tolerance (:func:`near_bound`; an offset E[group] has E's bounds)."""
    param = g.fit.law.param(OFFSET if name.startswith(OFFSET + "[") else name)
    return any(np.isfinite(end) and near_bound(param, float(end)) for end in _bootstrap(g, name))


def _marked(g: GadreFit, names) -> str:
    """``names`` with † on each whose interval reaches its bound."""
    return _names([f"{n}†" if reaches_bound(g, n) else n for n in names])


def _interval(g: GadreFit, name: str) -> str:
    lo, hi = _bootstrap(g, name)
    return f"{g.fit.params[name]:.3g} [{lo:.3g}, {hi:.3g}]" + (" (reaches its bound)" if reaches_bound(g, name) else "")


def _over_floor(arm: GadreArm, g: GadreFit) -> str:
    return "saturated" if saturated(arm, g) else f"{g.fit.rss / arm.shape_rss - 1:+.2%}"


def section(arms) -> list[str]:
    if not arms:
        return []
    runs = arms[0].runs
    shapes = sorted({(int(w), int(d)) for w, d in zip(runs.width, runs.depth)})
    table = []
    for arm in arms:
        for g in arm.fits:
            status = _by_status(g)
            table.append([f"{arm.convention} N", g.law, f"{g.d_aicc:+.1f}", f"{np.sqrt(g.fit.rss / g.fit.n):.4f}",
                          _over_floor(arm, g), _marked(g, status["ok"]), _names(status["at_bound"]),
                          _names(status["not_identified"]), g.fit.n_bootstrap])
    return [HEADING, "", _intro(arms, shapes), "", *_conventions(arms), "",
            markdown_table(["N", "law", "ΔAICc", "RMSE (nats)", "RSS over one value per shape", "identified (ok)",
                            "at a bound", "not identified", "bootstrap kept"], table, "llrrrlllr"), "",
            _saturation(arms, shapes), "", _status_rule(), "", *_verdicts(arms), ""]


def _status_rule() -> str:
    """The words for :func:`parameter_status` without a profile (its docstring's rule), and the † mark."""
    return ("Status per parameter (gadre.csv), by the study's rule without profiles: at a bound where the "
            "optimum sits within the fit's tolerance of the parameter's physical bound, except where the bound "
            "is not what holds it: a null direction of the Jacobian loads on it by more than "
            f"{NULL_LOADING:g} (along that ridge it leaves the bound at no cost), or it is a scale whose term "
            "another parameter has killed (dead again at the scale's smallest start: its value is wherever "
            "the solver stopped); not identified where "
            "starts that fit equally well disagree on it (a ridge), its estimate drifted beyond "
            f"1e{math.log10(DRIFT):.0f} (a positive scale: below 1e{-math.log10(DRIFT):.0f}), its standard "
            "error is infinite or undefined (no prediction depends on it, or a null direction of the "
            f"Jacobian loads on it by more than {NULL_LOADING:g}), its Jacobian interval is open at an end, "
            "or its covariance with "
            "a parameter the Jacobian does bound is undefined; else ok. A parameter that is not ok has no "
            "interval (gadre.csv leaves its ci95 cells empty): its draws are no interval for it. A law's other "
            "parameters keep their own status. † ok, but an end of its 95% run-bootstrap interval lies on the "
            "parameter's physical bound (within the fit's at-bound tolerance): the draws do not keep it off "
            "the bound.")


def _saturation(arms, shapes) -> str:
    """Which laws are saturated (:func:`saturated`) in which convention, and what that leaves ΔAICc."""
    n, depths = len(shapes), len({d for _, d in shapes})
    one_value = all(len(np.unique(np.stack([a.runs.width, a.runs.depth, a.runs.params], 1).astype(float),
                                  axis=0)) == n for a in arms)
    rule = ("Saturation (rule: a law is saturated where its RSS equals, to a relative "
            f"1e{math.log10(SATURATED_RTOL):.0f}, "
            "the least RSS of one free value per shape, loss = v_shape + E_training set + B·D^−β by least "
            f"squares without bounds: {arms[0].shape_rss:.6g}; the column gives each RSS above it). "
            + (f"N takes {n} values under every count, one per shape, so no law whose size and shape terms "
               "depend on N and the shape alone fits better. " if one_value else
               "N takes more than one value within a shape under some count: there a law can fit better. "))
    where = {law: [a.convention for a in arms for g in a.fits if g.law == law and saturated(a, g)] for law in LAWS}
    found = {law: c for law, c in where.items() if c}
    if not found:
        return rule + "No law is saturated."
    short = [f"{g.law} on {a.convention} N ({_over_floor(a, g)}; at a bound: {_names(_by_status(g)['at_bound'])})"
             for a in arms for g in a.fits if g.law in found and a.convention not in found[g.law]]
    return (rule + "Saturated: " + "; ".join(f"{law} on {', '.join(c)} N" for law, c in found.items())
            + f". A saturated law fits the {n} shape means exactly whatever N is: its RSS is the same under "
            "every count where it is saturated, so ΔAICc between it and another law measures only the other's "
            f"lack of fit across the {n} shape means (less the penalty for its extra parameters), and the count "
            "moves only the other laws' RSS. Readings of a saturated law's shape parameters (a bowl's centre m, "
            f"a depth term that becomes a step between the {depths} depths) are not evidence: any {n} values "
            "per shape fit. " + ("Not saturated where its bounds hold it above the floor: " + "; ".join(short)
                                 + "." if short else "").rstrip())


def _intro(arms, shapes) -> str:
    runs, n = arms[0].runs, len(shapes)
    groups = sorted(set(runs.group.tolist()))
    return (f"The {len(runs)} runs of `{TABLE}` with a width and depth: {n} shapes "
            f"({', '.join(f'{w}×{d}' for w, d in shapes)}) on {len(groups)} training sets, C4 validation loss; "
            "one offset E per training set. open_lm_1b/7b have no width or depth in the files and are left "
            "out. Resampling unit: the run, within training sets. Each row is its own training run (a shape, "
            f"training set and token multiple; {len(runs) / n:.0f} runs per shape on average), so the bootstrap draws "
            f"runs with replacement within each training set. Not the shape: with {n} shapes a bootstrap over "
            f"shapes holds all {n} in only {math.factorial(n)} of its {n ** n} equally likely draws "
            f"({math.factorial(n) / n ** n:.0%}), and {n} clusters give a percentile interval no stated coverage. "
            f"The intervals therefore condition on these {n} shapes: they carry run-to-run noise, not which shapes "
            f"were trained, and a shape parameter's interval is narrower than a shape-level one would be. With {n} "
            f"shapes and {len({d for _, d in shapes})} depths a shape law has {n} points to describe its shape term.")


def _conventions(arms) -> list[str]:
    """One line per N convention: how N is counted, ε with its interval when fitted."""
    count = arms[0].runs.embeddings
    emb = f"{count.matrices}·{count.vocab:,}·W"
    text = {"total": f"the files' params, both untied vocabulary matrices counted ({emb}; ε = 1)",
            "nonembedding": f"Kaplan's non-embedding N, both vocabulary matrices removed: N − {emb} (ε = 0)",
            "fitted": f"N = N_nonemb + ε·N_emb, N_emb = {emb}, ε from chinchilla's least-squares profile on these "
                      "runs with one offset per training set",
            "no_embeds": "one vocabulary matrix removed, the LM head still counted: the files' params_no_embed "
                         "(ε = 1/2)"}
    lines = [f"N conventions ({count.summary()}; `tables show {TABLE}`):", ""]
    for arm in arms:
        said = text[arm.convention]
        if arm.weight is not None:
            said += (f": ε = {arm.weight.value:.3g} {arm.weight.interval_text()} (95% profile; the rows are "
                     "independent runs here, unlike Gemstones' checkpoints); ε held at "
                     f"{EPSILON_LAW}'s optimum in every law and draw; its uncertainty not propagated")
        lines.append(f"- {arm.convention} N: {said}")
    return lines


def _verdicts(arms) -> list[str]:
    """Per convention: which law wins (ΔAICc), the token term's intervals; then what changes between counts."""
    lines = []
    for arm in arms:
        best, rest = arm.fits[0], arm.fits[1:]
        tied = [g.law for g in rest if g.d_aicc < TIED_AICC]
        wins = (f"{best.law} lowest AICc; within {TIED_AICC:g} of it, not told apart: "
                + ", ".join(f"{g.law} (ΔAICc {g.d_aicc:+.2f})" for g in rest if g.law in tied) if tied
                else f"{best.law} wins by ΔAICc {rest[0].d_aicc:+.2f} over {rest[0].law}" if rest else best.law)
        token = "; ".join(f"{g.law} " + ", ".join(ok) for g in arm.fits if (ok := [
            f"{n} {_interval(g, n)}" for n in ("B", "beta") if parameter_status(g.fit, n) == OK]))
        lines.append(f"- **{arm.convention} N:** {wins}{_epsilon_caveat(arm)}. The token term (95% run bootstrap) "
                     f"where identified: {token}. RMSE of {best.law} by tokens per parameter (multiple of total N: "
                     "nats) — " + ", ".join(f"{m:.0f}: {rmse:.3f}" for m, rmse in arm.by_multiple) + ".")
    return lines + ["", *_flips(arms)]


def _epsilon_caveat(arm: GadreArm) -> str:
    """For fitted ε: the verdict rests on an ε chosen for one law and held fixed."""
    if arm.weight is None:
        return ""
    flat = [g.law for g in arm.fits if saturated(arm, g)]
    return (f" (ε is {EPSILON_LAW}'s least-squares optimum, held in every law and draw: these intervals leave "
            "out ε's uncertainty" + (f", and {' and '.join(flat)}, saturated, do not depend on ε, so "
                                     f"{EPSILON_LAW}'s margin here is partly by construction" if flat else "") + ")")


def _flips(arms) -> list[str]:
    """The best law where its set (every law within ``TIED_AICC`` of the lowest) differs between the
    N conventions; then the parameters whose status changes between them (not verdicts)."""
    if len(arms) < 2:
        return ["One N convention: nothing to compare."]
    winners = {arm.convention: frozenset(g.law for g in arm.fits if g.d_aicc < TIED_AICC) for arm in arms}
    sets = dict.fromkeys(winners.values())
    if len(sets) > 1:
        lines = [f"The best law flips between the N conventions (the laws within ΔAICc {TIED_AICC:g} of the "
                 "lowest, not told apart): " + "; ".join(
                     " ≈ ".join(law for law in LAWS if law in w) + " on "
                     + ", ".join(f"{c} N" for c, v in winners.items() if v == w) for w in sets) + "."
                 + "".join(f" On {a.convention} N ε was tuned for {EPSILON_LAW} and the saturated laws do not depend "
                           "on it: that set is partly by construction." for a in arms
                           if a.weight is not None and any(saturated(a, g) for g in a.fits))]
    else:
        lines = [f"The best law is the same under every count: {' ≈ '.join(law for law in LAWS if law in next(iter(sets)))} "
                 f"(within ΔAICc {TIED_AICC:g})."]
    status = {(arm.convention, g.law, name): parameter_status(g.fit, name) for arm in arms for g in arm.fits
              for name in g.fit.params}
    changes = []
    for law in LAWS:
        for name in dict.fromkeys(n for (_, lw, n) in status if lw == law):
            each = {arm.convention: status.get((arm.convention, law, name)) for arm in arms}
            if len(set(each.values())) > 1:
                changes.append(f"{law} {name}: " + ", ".join(f"{s} on {c} N" for c, s in each.items()))
    return [*lines, "", "Parameter statuses that change between counts: " + "; ".join(changes) + "."
            if changes else "No parameter's status changes between counts."]
