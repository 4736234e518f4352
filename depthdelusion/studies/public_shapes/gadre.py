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
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from depthdelusion.analysis import fit
from depthdelusion.analysis.fitting.result import parameter_status
from depthdelusion.analysis.formats.table_text import markdown_table
from depthdelusion.analysis.table.published import load_table
from depthdelusion.studies.public_shapes.study import significant, with_convention

TABLE = "gadre2024"
LAWS = ("chinchilla", "shape_quadratic", "gemstones_width_depth", "depth_delusion")
#: ΔAICc within which two laws are not told apart (the study's margin throughout)
TIED_AICC = 2.0
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


def measure(conventions, *, bootstrap: int, seed: int, laws=LAWS) -> tuple:
    """A :class:`GadreArm` per N convention of ``conventions``."""
    table = load_table(TABLE)
    table = table.subset(np.isfinite(np.asarray(table.depth, float)) & np.isfinite(np.asarray(table.width, float)))
    # tokens per parameter of total N (the files' chinchilla_multiplier × 20): the same runs in every convention
    multiple = np.round(np.asarray(table.tokens, float) / np.asarray(table.params, float))
    return tuple(_arm(table, c, multiple, laws, bootstrap=bootstrap, seed=seed) for c in conventions)


def _arm(table, convention: str, multiple, laws, *, bootstrap: int, seed: int) -> GadreArm:
    runs, epsilon, weight = with_convention(table, convention, group_offsets=True)
    fits = {law: fit(runs, law, bootstrap=bootstrap, seed=seed, profile=False, leave_one_out=False,
                     diagnostics=False, group_offsets=True) for law in laws}
    best = min(f.aicc for f in fits.values())
    ordered = tuple(sorted((GadreFit(law, f, f.aicc - best) for law, f in fits.items()), key=lambda g: g.d_aicc))
    resid = np.asarray(runs.loss, float) - ordered[0].fit.predict(runs)
    by_multiple = tuple((float(m), float(np.sqrt(np.mean(resid[multiple == m] ** 2)))) for m in np.unique(multiple))
    return GadreArm(convention, epsilon, weight, runs, ordered, by_multiple)


def rows(arms) -> list[dict]:
    """gadre.csv: per N convention, law and parameter the value, status and run-bootstrap interval."""
    out = []
    for arm in arms:
        for g in arm.fits:
            for name, value in g.fit.params.items():
                lo, hi = (g.fit.ci_bootstrap or {}).get(name, (np.nan, np.nan))
                out.append({"n_convention": arm.convention, "epsilon": significant(arm.epsilon, 3), "law": g.law,
                            "parameter": name, "value": significant(value), "status": parameter_status(g.fit, name),
                            "ci95_low": significant(lo), "ci95_high": significant(hi), "rows": g.fit.n,
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


def _interval(g: GadreFit, name: str) -> str:
    lo, hi = (g.fit.ci_bootstrap or {}).get(name, (np.nan, np.nan))
    return f"{g.fit.params[name]:.3g} [{lo:.3g}, {hi:.3g}]"


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
                          _names(status["ok"]), _names(status["at_bound"]), _names(status["not_identified"]),
                          g.fit.n_bootstrap])
    return [HEADING, "", _intro(arms, shapes), "", *_conventions(arms), "",
            markdown_table(["N", "law", "ΔAICc", "RMSE (nats)", "identified (ok)", "at a bound", "not identified",
                            "bootstrap kept"], table, "llrrlllr"), "",
            "Status per parameter (gadre.csv), by the study's rule without profiles: not identified where "
            "starts that fit equally well disagree on it (a ridge) or its standard error is infinite; its "
            "bootstrap interval is then no interval for it. A law's other parameters keep their own status.",
            "", *_verdicts(arms), ""]


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
                     "independent runs here, unlike Gemstones' checkpoints)")
        lines.append(f"- {arm.convention} N: {said}")
    return lines


def _verdicts(arms) -> list[str]:
    """Per convention: which law wins (ΔAICc), the token term's intervals; then what flips between counts."""
    lines = []
    for arm in arms:
        best, rest = arm.fits[0], arm.fits[1:]
        tied = [g.law for g in rest if g.d_aicc < TIED_AICC]
        wins = (f"{best.law} lowest AICc; within {TIED_AICC:g} of it, not told apart: "
                + ", ".join(f"{g.law} (ΔAICc {g.d_aicc:+.2f})" for g in rest if g.law in tied) if tied
                else f"{best.law} wins by ΔAICc {rest[0].d_aicc:+.2f} over {rest[0].law}" if rest else best.law)
        token = "; ".join(f"{g.law} " + ", ".join(ok) for g in arm.fits if (ok := [
            f"{n} {_interval(g, n)}" for n in ("B", "beta") if parameter_status(g.fit, n) == "ok"]))
        lines.append(f"- **{arm.convention} N:** {wins}. The token term (95% run bootstrap) where identified: {token}. "
                     f"RMSE of {best.law} by tokens per parameter (multiple of total N: nats) — "
                     + ", ".join(f"{m:.0f}: {rmse:.3f}" for m, rmse in arm.by_multiple) + ".")
    return lines + ["", _flips(arms)]


def _flips(arms) -> str:
    """Where a verdict differs between the N conventions: the winning law, a parameter's status."""
    if len(arms) < 2:
        return "One N convention: nothing to compare."
    said = []
    # the verdict on the laws: the best and every law within the margin of it (not told apart)
    winners = {arm.convention: tuple(g.law for g in arm.fits if g.d_aicc < TIED_AICC) for arm in arms}
    if len({frozenset(w) for w in winners.values()}) > 1:
        said.append(f"the best law (within ΔAICc {TIED_AICC:g}: not told apart): " + "; ".join(
            f"{c} N {' ≈ '.join(w)}" for c, w in winners.items()))
    status = {(arm.convention, g.law, name): parameter_status(g.fit, name) for arm in arms for g in arm.fits
              for name in g.fit.params}
    for law in LAWS:
        for name in dict.fromkeys(n for (_, lw, n) in status if lw == law):
            each = {arm.convention: status.get((arm.convention, law, name)) for arm in arms}
            if len(set(each.values())) > 1:
                said.append(f"{law} {name}: " + ", ".join(f"{s} on {c} N" for c, s in each.items()))
    if not said:
        return ("Between the N conventions nothing flips: the same law has the lowest AICc and every "
                "parameter keeps its status under every count.")
    return "Between the N conventions these verdicts flip — " + "; ".join(said) + "."
