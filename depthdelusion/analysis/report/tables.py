"""The analysis report's tables: :class:`~.contents.ReportResults` formatted as rows under
named columns (``tables.Table``), to the digits the data support. The Markdown, LaTeX and CSV
renderings all come from these rows, so every format prints the same digits; the cells are
rounded by :mod:`.cells`, the report's one rounding of each kind of number."""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..fitting.result import parameter_status
from ..formats.table_text import Table
from ..laws import papers_kappa, shape_kind
from ..reference import PAPER_FIT, PAPER_KAPPA, PAPER_SHAPE_EXPONENTS
from .cells import estimate_cell, fmt, interval, interval_cell, millions, profile_ci, shape_unit, value
from .consistency import CONVENTIONS
from .contents import RANGE_TOL, ReportResults, exceeding
from .verdict import HEADS


# --- cells ---------------------------------------------------------------------------------------


def prediction_cell(lo, hi, observed) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "—"
    mid = 0.5 * (lo + hi)
    if hi - lo > RANGE_TOL:
        return f"{lo:.3f}–{hi:.3f} ({lo - observed:+.3f} to {hi - observed:+.3f})"
    return f"{mid:.3f} ({mid - observed:+.3f})"


def verdict_cell(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    head = HEADS.get(v.answer, v.answer)
    if v.answer == "uninformative":
        return f"{head}: too few runs for {v.reason.split('too few runs for ')[1].split(' ')[0]} parameters"
    p = (f"p ≤ {v.test.p:.2g} Davies" if v.test is not None and v.test.method == "Davies bound"
         else v.p_text().split(" (")[0])
    return f"{head} (ΔAICc {v.d_aicc:+.1f}, LR {v.lr:.1f}, {p})"


# --- tables --------------------------------------------------------------------------------------

def law_comparison(r: ReportResults) -> Table:
    comp = Table("law_comparison", f"Law comparison, {r.design.main_label} (loss in nats; lower "
                 "AICc/BIC/LOO is better; shape: kink = a critical depth, smooth = a shape "
                 "penalty without one)",
                 ["law", "shape", "k", "R²", "RMSE", "LOO RMSE", "AICc", "BIC", "ΔAICc", "ΔBIC", "flags"])
    best_aicc = min(f.aicc for f in r.fits.values())
    best_bic = min(f.bic for f in r.fits.values())
    for name, f in r.fits.items():
        comp.add(name, shape_kind(f.law) or "—", f.k, fmt(f.r2, ".3f"), fmt(f.rmse, ".3f"),
                 fmt(f.loo_rmse, ".3f"), fmt(f.aicc, ".1f"), fmt(f.bic, ".1f"),
                 fmt(f.aicc - best_aicc, ".1f"), fmt(f.bic - best_bic, ".1f"), len(f.flags))
    return comp


def design_conventions(matrix) -> list:
    return sorted({c for _, c in matrix}, key=["total", "non_embedding"].index)


def design_verdicts(r: ReportResults) -> Table:
    matrix = r.design.matrix
    convs = design_conventions(matrix)
    mt = Table("design_verdicts", f"Verdict on the {r.primary} penalty in every form the design "
               "allows, under total and non-embedding N (vs the same-data-term baseline; p: "
               "Davies' bound for λ = 0 with the kink location unidentified — an upper bound only "
               "asymptotically: at these n it can fall below the parametric-bootstrap p of the same fit, "
               "so a 'Yes' resting on it needs the bootstrap)",
               ["form", "runs"] + [f"{c.replace('_', '-')} N" for c in convs] + ["caveat"])
    for form in dict.fromkeys(lbl for lbl, _ in matrix):
        cells = [matrix[(form, c)] for c in convs]
        n_runs = next((f.n for _, f, _ in cells if f is not None), "")
        mt.add(form, n_runs, *[verdict_cell(v) for v, _, _ in cells], cells[0][2] or "")
    return mt


def design_parameters(r: ReportResults) -> Table:
    kt = Table("design_parameters", f"{r.primary} in every design form: κ (or c), λ and α with "
               "95% profile-likelihood intervals, and R²",
               ["form", "N", "κ", "λ", "α", "R²", "flags"])
    for (form, conv), (_, lf, _) in r.design.matrix.items():
        if lf is None:
            continue
        kt.add(form, conv.replace("_", "-"),
               *[estimate_cell(lf, k, profile_ci(lf, k)) if k else "—"
                 for k in (lf.law.kink, lf.law.penalty, lf.law.roles.capacity_exponent)],
               fmt(lf.r2, ".3f"), len(lf.flags))
    return kt


def _bootstrap_cell(test) -> str:
    """'LR 19.4: 2 of 200 replicates ≥ it, p = 0.015 ± 0.009' (a parametric bootstrap)."""
    return (f"LR {test.lr:.1f}: {exceeding(test)} of {test.replicates} replicates ≥ it, "
            f"p = {test.p:.2g} ± {test.mc_error:.1g}")


def calibrated_table(r: ReportResults) -> Table:
    """The design cells rechecked by bootstrap (:mod:`.calibrated`)."""
    reps = r.calibrated[0].described or r.calibrated[0].penalty.test
    t = Table("calibrated_cells", f"{r.primary}: the design cells that rest on Davies' bound, and those "
              "the rule calls uninformative, rechecked by parametric bootstrap "
              f"({reps.replicates} replicates, seed {reps.seed}; ± its Monte-Carlo error): λ = 0 from "
              "the shape-agnostic fit; the kink against the best smooth shape law (lowest AICc) from "
              "the smooth fit, LR = n·ln(RSS_smooth/RSS_kink); κ with its 95% profile-likelihood "
              "interval. 'described': the rule calls the cell uninformative, so its numbers are a "
              "description, not a verdict",
              ["form", "N", "runs", "test", "λ = 0 (bootstrap)", "smooth law", "RSS kink / smooth",
               "ΔAICc kink − smooth", "kink vs smooth (bootstrap)", "κ"])
    for c in r.calibrated:
        kink_test = c.critical.test if c.critical is not None else c.described
        t.add(c.form, c.convention.replace("_", "-"), c.n, c.kind,
              _bootstrap_cell(c.penalty.test) if c.penalty is not None and c.penalty.test is not None
              else "not tested",
              c.smooth.law.name, f"{fmt(c.kink.rss, '.4g')} / {fmt(c.smooth.rss, '.4g')}",
              fmt(c.kink.aicc - c.smooth.aicc, '+.1f'),
              _bootstrap_cell(kink_test) if kink_test is not None else "not tested",
              estimate_cell(c.kink, c.kink.law.kink, profile_ci(c.kink, c.kink.law.kink), '.3g'))
    return t


def extrapolation(r: ReportResults) -> Table:
    x, runs, laws = r.extrapolation, r.runs, r.laws
    t = Table("extrapolation", f"Extrapolation: {x.how} (loss in nats; a range: tied solutions)",
              ["run", "D", "W", "N (M)", "observed"] + [f"{n}" for n in laws])
    for j, i in enumerate(x.test_rows):
        t.add(runs.name[i], fmt(runs.depth[i], ".0f"), fmt(runs.width[i], ".0f"), millions(runs.params[i]),
              fmt(runs.loss[i], ".3f"),
              *[prediction_cell(x.predictions[n][0][j], x.predictions[n][1][j], runs.loss[i]) for n in laws])
    t.add("RMSE", "", "", "", "", *[("n.i." if n in x.rmse and math.isnan(x.rmse[n])
                                     else fmt(x.rmse.get(n), ".3f")) for n in laws])
    return t


#: The paper's reported quantities next to the parameter of ours that estimates each.
#: (row title, key of PAPER_FIT, law -> the law's parameter that estimates it, "" for none), each
#: asked of the law's roles (κ only where its critical depth is the paper's κ·ln W).
PAPER_QUANTITIES = (
    ("persistence exponent p (D_crit = c·W^p)", "persistence_exponent",
     lambda law: law.roles.d_crit_width_exponent),
    ("κ (D_crit = κ ln W)", "kappa", papers_kappa),
    ("α", "alpha", lambda law: law.roles.capacity_exponent),
    ("λ", "lam", lambda law: law.penalty),
    ("γ", "gamma", lambda law: law.roles.width_exponent))


def paper_comparison(r: ReportResults) -> Table:
    t = Table("paper_comparison", f"Our fits ({r.design.main_label}) next to the paper's reported "
              "values (ours: 95% profile-likelihood intervals, bootstrap ones when no profile was "
              "computed; paper: its stated intervals)", ["quantity", "paper"] + r.laws)
    for title, paper_key, estimate in PAPER_QUANTITIES:
        v, ci = PAPER_FIT[paper_key]
        cells = []
        for f in r.fits.values():
            param = estimate(f.law)
            if param and param in f.params:
                ci_ = profile_ci(f, param) or (f.ci_bootstrap[param] if f.ci_bootstrap else None)
                cells.append(estimate_cell(f, param, ci_))
            else:
                cells.append("—")
        t.add(title, f"{v:g} {interval(ci)}", *cells)
    t.add("R²", f"{PAPER_FIT['r2'][0]:g}", *[fmt(f.r2, ".3f") for f in r.fits.values()])
    return t


def has_profile(r: ReportResults) -> bool:
    return any(getattr(f, "ci_profile", None) for f in r.fits.values())


def parameters(r: ReportResults) -> Table:
    prof_col = has_profile(r)
    t = Table("parameters", "Fitted parameters: 95% intervals from the Jacobian, the bootstrap"
              + (" and the profile likelihood" if prof_col else ""),
              ["law", "parameter", "value", "status", "CI (Jacobian)", "CI (bootstrap)"]
              + (["CI (profile)"] if prof_col else []))
    for name, f in r.fits.items():
        prof = getattr(f, "ci_profile", None) or {}
        for p in f.params:
            row = [name, p, value(f, p, ".4g"), parameter_status(f, p), interval_cell(f, p, f.ci_jacobian[p]),
                   interval_cell(f, p, f.ci_bootstrap[p] if f.ci_bootstrap else None, ".2g")]
            t.add(*row, *([interval_cell(f, p, prof.get(p))] if prof_col else []))
    return t


def consistency(r: ReportResults) -> Table:
    audit = r.audit
    t = Table("consistency", "Parameter counts recomputed from (D, W): best convention per group "
              "and rows more than 1% off it", ["group", "convention", "formula", "median error",
                                               "rows within 1%"])
    for group, conv in audit.best.items():
        cf = next(c for c in audit.convention_fits if c.group == group and c.convention == conv)
        t.add(group, conv, CONVENTIONS[conv][0], f"{cf.median_rel_error:.2%}",
              f"{cf.n_within_tolerance}/{cf.n_rows}")
    return t


def llm_audit(r: ReportResults) -> Table:
    dd, llm = r.shape.fit, r.shape.audit
    t = Table("llm_audit", f"Published models: D / D_crit(W), D_crit from the {dd.law.name} fit "
              f"({dd.law.critical_depth_text(dd.all_params)}) and from the paper's κ = {PAPER_KAPPA}",
              ["model", "D", "W", "D_crit (fit)", "D/D_crit (fit)", "D_crit (paper κ)",
               "D/D_crit (paper κ)"])
    for i, m in enumerate(llm.model):
        t.add(m, llm.depth[i], llm.width[i], fmt(llm.d_crit[i], ".1f"), fmt(llm.ratio[i], ".2f"),
              fmt(llm.d_crit_paper[i], ".1f"), fmt(llm.ratio_paper[i], ".2f"))
    return t


def optimal_shape(r: ReportResults, shape) -> Table:
    dd, unit = r.shape.fit, shape_unit(shape.constraint)
    sym, token_term = unit[0], r.shape.token_term
    t = Table(f"optimal_shape_{shape.constraint}",
              f"Optimal shape of {dd.law.name} at fixed {unit}: D* ∝ {sym}^"
              f"{fmt(shape.depth_exponent, '.2f')} {interval(shape.depth_exponent_ci, '.2f')}, W* ∝ {sym}^"
              f"{fmt(shape.width_exponent, '.2f')} {interval(shape.width_exponent_ci, '.2f')}"
              + (f" (95% intervals over {shape.n_bootstrap} bootstrap draws)" if shape.n_bootstrap else "")
              + (f" (paper, fixed C: {PAPER_SHAPE_EXPONENTS['depth']} and "
                 f"{PAPER_SHAPE_EXPONENTS['width']})" if shape.constraint == "compute" else ""),
              [unit, "D*", "plateau D", "W*", "N", "T (tokens)", "loss"])
    for row in shape.rows:
        t.add(fmt(row.budget, ".3g"), fmt(row.depth, ".0f"), f"{row.depth_min:.0f}–{row.depth:.0f}",
              fmt(row.width, ".0f"), fmt(row.params, ".3g"),
              fmt(row.tokens, ".3g") if token_term else "any", fmt(row.loss, ".3f"))
    return t


def persistence(r: ReportResults) -> Table:
    lo, hi = r.persistence.window
    t = Table("persistence", f"Persistence rate per run: ln g averaged over the logged steps in "
              f"[{lo}, {hi}]", ["run", "kind", "D", "W", "steps", "status", "rate 1/ℓ", "95% CI", "ℓ", "R²"])
    for kind, pfits in r.persistence.fits.items():
        for p in pfits:
            t.add(p.name, kind, p.depth, p.width, f"{p.steps[0]}–{p.steps[-1]} ({len(p.steps)})",
                  p.status, fmt(p.rate, "+.3g"), interval(p.rate_ci, "+.3g"), fmt(p.length, "+.3g"),
                  fmt(p.r2, ".2f"))
    return t


def build_tables(r: ReportResults) -> tuple:
    """Every table of the report, in the order of the LaTeX document and of ``Report.tables``."""
    out = [law_comparison(r)]
    if r.design.matrix:
        out += [design_verdicts(r), design_parameters(r)]
    if r.calibrated:
        out.append(calibrated_table(r))
    out += [extrapolation(r), paper_comparison(r), parameters(r)]
    if r.audit is not None:
        out.append(consistency(r))
    if r.shape is not None and r.shape.audit is not None:
        out += [llm_audit(r)] + [optimal_shape(r, s) for s in r.shape.optima]
    if r.persistence.measured:
        out.append(persistence(r))
    return tuple(out)


def with_tables(r: ReportResults) -> ReportResults:
    """``r`` with its tables (:func:`build_tables`)."""
    return dataclasses.replace(r, tables=build_tables(r))
