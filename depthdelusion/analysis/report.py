"""The analysis report: fits, the law comparison, extrapolation, audits, shape, persistence.

``write_report(runs, out)`` writes report.md, report.tex (booktabs), one CSV per table and PNG
figures. Text outputs are deterministic for a given input, bootstrap count and seed.
Also runnable as ``python -m depthdelusion.analysis.report RUNS --out DIR``.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import plots
from .consistency import CONVENTIONS, audit_param_counts
from .fitting import FitResult, fit
from .persistence import (DEFAULT_STEP, DEFAULT_WINDOW, persistence_lengths, persistence_scaling,
                          window_bounds)
from .reference import PAPER_FIT, PAPER_PERSISTENCE_R2, PAPER_SHAPE_EXPONENTS
from .runs import Runs, load_runs
from .shape import PAPER_KAPPA, audit_shapes, optimal_shape
from .tables import Table

DEFAULT_LAWS = ("depth_delusion", "depth_delusion_relative", "depth_delusion_power", "kaplan")
BASELINE_LAW = "kaplan"


@dataclass
class Report:
    out: Path
    fits: dict
    tables: list
    files: list = field(default_factory=list)
    verdict: str = ""


def _f(v, spec=".4g") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—" if v is None or math.isnan(v) else ("∞" if v > 0 else "−∞")
    return format(v, spec)


def _ci(ci, spec=".3g") -> str:
    return "—" if not ci else f"[{_f(ci[0], spec)}, {_f(ci[1], spec)}]"


def _split_for_extrapolation(runs: Runs):
    """Train on the group with the smallest largest model, test on the rest; with one group,
    train on the smallest 60% of runs by N."""
    if len(runs.groups) >= 2:
        train_group = min(runs.groups, key=lambda g: runs.params[runs.group == g].max())
        train = runs.group == train_group
        return train, f"fit on the {int(train.sum())} {train_group} runs, predict the other {int((~train).sum())}"
    cut = np.quantile(runs.params, 0.6)
    train = runs.params <= cut
    return train, f"fit on the {int(train.sum())} runs with N ≤ {cut:.3g}, predict the {int((~train).sum())} larger ones"


def _verdict(fits: dict, extrap_rmse: dict) -> str:
    dd, base = fits.get("depth_delusion"), fits.get(BASELINE_LAW)
    if dd is None or base is None:
        return ""
    d_aic, d_bic = dd.aicc - base.aicc, dd.bic - base.bic
    d_loo = dd.loo_rmse - base.loo_rmse
    facts = (f"depth_delusion vs {BASELINE_LAW}: ΔAICc = {d_aic:+.2f}, ΔBIC = {d_bic:+.2f} "
             f"(negative favours depth_delusion), leave-one-out RMSE {dd.loo_rmse:.4f} vs "
             f"{base.loo_rmse:.4f} nats")
    if "depth_delusion" in extrap_rmse and BASELINE_LAW in extrap_rmse:
        facts += (f", extrapolation RMSE {extrap_rmse['depth_delusion']:.4f} vs "
                  f"{extrap_rmse[BASELINE_LAW]:.4f} nats")
    if d_aic < -2 and d_bic < -2 and d_loo < 0:
        answer = "Yes: the architecture penalty earns its extra parameters on this data"
    elif d_aic > 0 and d_bic > 0:
        answer = ("No: the architecture penalty does not earn its extra parameters on this data — "
                  f"the shape-agnostic {BASELINE_LAW} law is preferred by both information criteria")
        if d_loo < 0:
            answer += (", and the penalty's leave-one-out gain is small "
                       f"({-d_loo:.4f} nats, {-d_loo / base.loo_rmse:.1%})")
    else:
        answer = "Not clearly: the criteria disagree, so the evidence for the penalty is weak"
    return f"{answer}. ({facts}.)"


def build_report(runs, *, laws=DEFAULT_LAWS, bootstrap: int = 1000, seed: int = 0,
                 method: str = "lm", step: int = DEFAULT_STEP, runs_label: str | None = None,
                 shape_draws: int = 200) -> tuple[Report, str, str]:
    """Fit and tabulate; returns (report, markdown, latex) without writing anything."""
    label = runs_label or (runs if isinstance(runs, str) else "RUNS")
    runs = load_runs(runs)
    laws = list(laws)
    if runs.tokens_vary and "chinchilla" not in laws:
        laws.append("chinchilla")
    fits = {name: fit(runs, name, method, bootstrap=bootstrap, seed=seed) for name in laws}
    tables, md, tex_tables = [], [], []
    cmd = f"depthdelusion report {label} --out DIR --bootstrap {bootstrap} --seed {seed} --method {method}"
    md += ["# Scaling-law analysis report", "",
           f"Data: {runs.source} — {len(runs)} runs, groups: "
           + ", ".join(f"{g} ({int((runs.group == g).sum())})" for g in runs.groups) + ".",
           f"Regenerate with `{cmd}` (also `python -m depthdelusion.analysis.report ...`). "
           f"Fits: {'Levenberg–Marquardt' if method == 'lm' else 'Huber on log loss'} from a grid of "
           f"starts; intervals from the Jacobian and from {bootstrap} seeded (seed {seed}) case-bootstrap "
           "refits; runs weighted equally; loss in nats.", ""]
    notes = sorted({n for f in fits.values() for n in f.notes if "token" in n} | set(runs.notes))
    md += [f"- {n}" for n in notes] + [""]

    # --- law comparison -------------------------------------------------------------------
    comp = Table("law_comparison", "Law comparison (loss in nats; lower AICc/BIC/LOO is better)",
                 ["law", "k", "R²", "RMSE", "LOO RMSE", "AIC", "AICc", "BIC", "ΔAICc", "ΔBIC", "flags"])
    best_aicc = min(f.aicc for f in fits.values())
    best_bic = min(f.bic for f in fits.values())
    for name, f in fits.items():
        comp.add(name, f.k, _f(f.r2, ".4f"), _f(f.rmse, ".4f"), _f(f.loo_rmse, ".4f"), _f(f.aic, ".2f"),
                 _f(f.aicc, ".2f"), _f(f.bic, ".2f"), _f(f.aicc - best_aicc, ".2f"),
                 _f(f.bic - best_bic, ".2f"), len(f.flags))
    tables.append(comp)

    # --- extrapolation --------------------------------------------------------------------
    train, how = _split_for_extrapolation(runs)
    extrap = Table("extrapolation", f"Extrapolation: {how} (loss in nats)",
                   ["run", "D", "W", "N (M)", "observed"] + [f"{n} pred" for n in laws]
                   + [f"{n} err" for n in laws])
    extrap_rmse = {}
    test_idx = np.flatnonzero(~train)
    preds, ridges = {}, []
    for name in laws:
        try:
            small = fit(runs.subset(train), name, method, bootstrap=0, seed=seed, leave_one_out=False)
            preds[name] = small.predict(runs.subset(~train))
            if small.starts.ridge_params:
                ridges.append(f"- {name}: the training runs do not determine "
                              f"{', '.join(small.starts.ridge_params)} ({small.starts.n_at_best} of "
                              f"{small.starts.n_starts} starts reach the same objective at different "
                              "values); its predictions are one point of that ridge (the first start "
                              "in grid order), and others fit the training runs as well")
            extrap_rmse[name] = float(np.sqrt(np.mean((preds[name] - runs.loss[test_idx]) ** 2)))
        except ValueError as err:  # e.g. too few training runs for this law
            preds[name] = np.full(len(test_idx), np.nan)
            md.append(f"- extrapolation with {name} not possible: {err}")
    for j, i in enumerate(test_idx):
        extrap.add(runs.name[i], runs.depth[i], runs.width[i], _f(runs.params[i] / 1e6, ".3g"),
                   _f(runs.loss[i], ".3f"), *[_f(preds[n][j], ".3f") for n in laws],
                   *[_f(preds[n][j] - runs.loss[i], "+.3f") for n in laws])
    extrap.add("RMSE", "", "", "", "", *["" for _ in laws], *[_f(extrap_rmse.get(n), ".4f") for n in laws])
    tables.append(extrap)

    verdict = _verdict(fits, extrap_rmse)
    md += ["## Does the architecture penalty earn its parameters?", "", verdict or
           f"(needs both depth_delusion and {BASELINE_LAW} in the fitted laws)", "",
           comp.markdown(), ""]

    # --- ours vs paper ----------------------------------------------------------------------
    paper = Table("paper_comparison", "Our fits next to the paper's reported values "
                  "(bootstrap 95% intervals; paper: its stated intervals)",
                  ["quantity", "paper"] + laws)
    mapping = [("persistence exponent p (D_crit = c·W^p)", "persistence_exponent", "p"),
               ("κ (D_crit = κ ln W)", "kappa", "kappa"), ("α", "alpha", "alpha"),
               ("λ", "lam", "lam"), ("γ", "gamma", "gamma")]
    for title, paper_key, param in mapping:
        value, ci = PAPER_FIT[paper_key]
        cells = []
        for name in laws:
            f = fits[name]
            if param in f.params:
                boot = f.ci_bootstrap[param] if f.ci_bootstrap else None
                cells.append(f"{_f(f.params[param], '.3g')} {_ci(boot)}")
            else:
                cells.append("—")
        paper.add(title, f"{value:g} {_ci(ci)}", *cells)
    paper.add("R²", f"{PAPER_FIT['r2'][0]:g}", *[_f(fits[n].r2, ".3f") for n in laws])
    tables.append(paper)
    md += ["## The paper's fit, refitted", "", paper.markdown(), "",
           "The paper's persistence exponent comes from per-layer gradient norms, which the "
           "bundled data lacks; the closest refittable quantity is p of `depth_delusion_power`.",
           "", "## Extrapolation from small to large runs", "", extrap.markdown(), "",
           "A dash: the law's prediction is not finite there (a degenerate fit, e.g. λ → 0 with "
           "W^−γ overflowing), so no extrapolation error is given.", "", *ridges,
           *([""] if ridges else [])]

    # --- parameters of every fit ----------------------------------------------------------
    params = Table("parameters", "Fitted parameters (Jacobian and bootstrap 95% intervals)",
                   ["law", "parameter", "value", "std. err.", "CI (Jacobian)", "CI (bootstrap)"])
    for name, f in fits.items():
        for p, v in f.params.items():
            params.add(name, p, _f(v, ".4g"), _f(f.stderr[p], ".3g"), _ci(f.ci_jacobian[p]),
                       _ci(f.ci_bootstrap[p] if f.ci_bootstrap else None))
    tables.append(params)
    md += ["## Fits", ""]
    for name, f in fits.items():
        md += [f"### {name}", "", "```", f.summary(), "```", ""]

    # --- consistency audit ----------------------------------------------------------------
    audit = audit_param_counts(runs, vocab=_runs_vocab(runs))
    cons = Table("consistency", "Parameter counts recomputed from (D, W): best convention per group "
                 "and rows more than 1% off it", ["group", "convention", "formula", "median error",
                                                  "rows within 1%"])
    for group, conv in audit.best.items():
        cf = next(c for c in audit.convention_fits if c.group == group and c.convention == conv)
        cons.add(group, conv, CONVENTIONS[conv][0], f"{cf.median_rel_error:.3%}",
                 f"{cf.n_within_tolerance}/{cf.n_rows}")
    tables.append(cons)
    md += ["## Consistency audit", "", cons.markdown(), "", "```", audit.summary(), "```", ""]

    # --- critical depth, LLM audit, optimal shape ------------------------------------------
    dd = next((fits[n] for n in laws if "kappa" in fits[n].all_params), None)
    if dd is not None:
        llm = audit_shapes(dd)
        llm_t = Table("llm_audit", f"Published models: D / D_crit(W), D_crit from the {dd.law.name} fit "
                      f"(κ = {dd.params.get('kappa', float('nan')):.3g}) and from the paper's κ = {PAPER_KAPPA}",
                      ["model", "D", "W", "D_crit (fit)", "D/D_crit (fit)", "D_crit (paper κ)",
                       "D/D_crit (paper κ)"])
        for i, m in enumerate(llm.model):
            llm_t.add(m, llm.depth[i], llm.width[i], _f(llm.d_crit[i], ".1f"), _f(llm.ratio[i], ".2f"),
                      _f(llm.d_crit_paper[i], ".1f"), _f(llm.ratio_paper[i], ".2f"))
        tables.append(llm_t)
        md += ["## Critical depth and published models", "", llm_t.markdown(), ""]
        for constraint in ("compute", "params"):
            shape = optimal_shape(dd, constraint=constraint, bootstrap=min(shape_draws, bootstrap))
            unit = "C (FLOPs)" if constraint == "compute" else "N (params)"
            sym = unit[0]
            st = Table(f"optimal_shape_{constraint}",
                       f"Optimal shape of {dd.law.name} at fixed {unit}: D* ∝ {sym}^"
                       f"{_f(shape.depth_exponent, '.3f')} {_ci(shape.depth_exponent_ci)}, W* ∝ {sym}^"
                       f"{_f(shape.width_exponent, '.3f')} {_ci(shape.width_exponent_ci)}"
                       + (f" (paper, fixed C: {PAPER_SHAPE_EXPONENTS['depth']} and "
                          f"{PAPER_SHAPE_EXPONENTS['width']})" if constraint == "compute" else ""),
                       [unit, "D*", "plateau D", "W*", "N", "T (tokens)", "loss"])
            for r in shape.rows:
                st.add(_f(r.budget, ".3g"), _f(r.depth, ".0f"), f"{r.depth_min:.0f}–{r.depth:.0f}",
                       _f(r.width, ".0f"), _f(r.params, ".3g"), _f(r.tokens, ".3g"), _f(r.loss, ".4f"))
            tables.append(st)
            md += [f"## Optimal shape at fixed {unit}", "", st.caption + ".", "",
                   *[f"- {a}" for a in shape.assumptions], "", st.markdown(), ""]

    # --- persistence length -----------------------------------------------------------------
    persist, p_step, p_note = _persistence_section(runs, step)
    if not any(persist.values()):
        md += ["## Gradient persistence length", "",
               "The data has no per-layer gradient norms, so ℓ cannot be estimated here "
               f"(the paper reports ℓ ∝ W^0.44, power-law R² {PAPER_PERSISTENCE_R2['power']} vs "
               f"log-form R² {PAPER_PERSISTENCE_R2['log']}).", ""]
    else:
        lo, hi = window_bounds(p_step, DEFAULT_WINDOW)
        pt = Table("persistence", f"Persistence rate per run: ln g averaged over the logged steps in "
                   f"[{lo}, {hi}]",
                   ["run", "kind", "D", "W", "steps", "status", "rate 1/ℓ", "95% CI", "ℓ", "R²"])
        md += ["## Gradient persistence length", "",
               f"Windowed protocol (`docs/persistence.md`): for each run, ln g_l averaged over the "
               f"logged steps in [{lo}, {hi}] (requested step {p_step}, window ±{DEFAULT_WINDOW:.0%}), "
               "then ln ḡ_l = b − rate·(D − l); rate = 1/ℓ > 0 is the paper's decay towards the "
               "input, rate < 0 is growth towards the input (reported, not dropped). 95% CI: "
               "bootstrap over the window's steps (the t-interval of the slope with fewer than 3). "
               "ℓ(W) is fitted to the rates of all runs.", ""] + ([p_note, ""] if p_note else [])
        for kind, pfits in list(persist.items()):
            for p in pfits:
                pt.add(p.name, kind, p.depth, p.width, f"{p.steps[0]}–{p.steps[-1]} ({len(p.steps)})",
                       p.status, _f(p.rate, "+.3g"), _ci(p.rate_ci, "+.3g"), _f(p.length, "+.3g"),
                       _f(p.r2, ".2f"))
            warnings = sorted({p.warning for p in pfits if p.warning})
            md += [f"- {kind} gradients: warning: {w}" for w in warnings]
            counts = {s: sum(p.status == s for p in pfits) for s in ("decay", "flat", "growth")}
            if any(counts.values()):
                md += [f"- {kind} gradients: {counts['decay']} run(s) decay towards the input, "
                       f"{counts['flat']} flat, {counts['growth']} grow towards the input."]
            try:
                sc = persistence_scaling(pfits)
                md += ["", "```", f"{kind} gradients: " + sc.summary(), "```", ""]
                persist[kind + "_scaling"] = sc
            except ValueError as err:
                if pfits:
                    md += [f"- {kind} gradients: ℓ(W) not fitted: {err}", ""]
        tables.append(pt)
        md += [pt.markdown(), ""]
    md[2:2] = [_opening(runs, fits, persist), ""]
    report = Report(Path("."), fits, tables, verdict=verdict)
    report.persistence = persist
    report.runs = runs
    tex = _latex(tables, verdict, cmd)
    return report, "\n".join(md) + "\n", tex


def _runs_vocab(runs) -> int:
    """The runs' own vocabulary (their summary.json: 257 for byte tokens), else the paper's."""
    import json

    from .consistency import VOCAB

    vocab = getattr(runs, "vocab", None)
    if vocab:
        return int(vocab)
    source = Path(str(getattr(runs, "source", "") or ""))
    found = set()
    if source.is_dir():
        for path in source.rglob("summary.json"):
            try:
                v = json.loads(path.read_text()).get("model", {}).get("vocab_size")
            except (OSError, ValueError):
                continue
            if v:
                found.add(int(v))
    if len(found) > 1:
        raise ValueError(f"{source}: the runs use different vocabularies {sorted(found)}; "
                         "fit runs of one tokenizer together")
    return found.pop() if found else VOCAB


def _persistence_section(runs, step: int):
    """Windowed fits for both kinds. When every run stopped logging before the window, the window
    is placed at the end of training instead (the shortest run's last logged step), and said so."""
    profiles = [p for p in runs.profiles if p is not None and p.steps("weight")]
    p_step, note = step, ""
    if profiles:
        last = min(max(p.steps("weight")) for p in profiles)
        if last < window_bounds(step, DEFAULT_WINDOW)[0]:
            p_step = last
            note = (f"The runs end (step {last}) before the window around step {step} (the paper's "
                    f"measurement point): the window is placed at the end of training, steps "
                    f"{window_bounds(last, DEFAULT_WINDOW)[0]}–{last}. A profile this early in training "
                    "need not be the one at the paper's step.")
    persist = {kind: persistence_lengths(runs, step=p_step, kind=kind) for kind in ("weight", "activation")}
    return persist, p_step, note


def _opening(runs, fits: dict, persist: dict) -> str:
    """Two or three sentences: what the runs show (best shape, depth trend, gradient profile)."""
    best = int(np.argmin(runs.loss))
    widths = sorted(set(int(w) for w in runs.width))
    trends = []
    for w in widths:
        sel = np.flatnonzero(runs.width == w)
        if len(sel) >= 2:
            order = sel[np.argsort(runs.depth[sel])]
            d_best = int(runs.depth[order[np.argmin(runs.loss[order])]])
            trends.append((w, d_best, int(runs.depth[order[-1]])))
    text = (f"In short: {len(runs)} runs (depth {int(runs.depth.min())}–{int(runs.depth.max())} × width "
            f"{widths[0]}–{widths[-1]}); the lowest loss is {runs.loss[best]:.3f} at "
            f"{int(runs.depth[best])}L×{int(runs.width[best])}.")
    if trends:
        deepest = sum(d == top for _, d, top in trends)
        text += (f" At {deepest} of {len(trends)} widths the deepest run is the best, so no critical "
                 "depth is reached within this grid" if deepest == len(trends) else
                 " The loss-optimal depth per width is " + ", ".join(f"D = {d} at W = {w}" for w, d, _ in trends))
        text += "."
    weight = [p for p in persist.get("weight", []) if np.isfinite(p.rate)]
    if weight:
        n = {s: sum(p.status == s for p in weight) for s in ("decay", "flat", "growth")}
        text += (f" Per-layer weight gradients: {n['decay']} of {len(weight)} runs decay towards the input "
                 f"(the paper's ℓ), {n['growth']} grow towards it, {n['flat']} are flat")
        sc = persist.get("weight_scaling")
        if sc is None:
            text += "."
        elif sc.c > 0:
            text += f"; ℓ(W) power-law fit p = {sc.p:.2f} (paper 0.44)."
        else:
            text += ", so there is no decay length to compare with the paper's ℓ ∝ W^0.44."
    if fits:
        by_aicc = min(fits.values(), key=lambda f: f.aicc)
        text += f" Best law by AICc: {by_aicc.law.name}."
    return text


def _latex(tables, verdict: str, cmd: str) -> str:
    from .tables import tex_escape

    parts = [r"% Generated by depthdelusion; regenerate with: " + cmd,
             r"\documentclass{article}", r"\usepackage{booktabs}", r"\usepackage[margin=2cm]{geometry}",
             r"\begin{document}", r"\section*{Scaling-law analysis}", tex_escape(verdict), ""]
    for t in tables:
        if len(t.columns) > 9:
            parts.append(r"\begingroup\tiny")
            parts += [t.latex(), r"\endgroup"]
        else:
            parts.append(t.latex())
        parts.append("")
    parts.append(r"\end{document}")
    return "\n".join(parts) + "\n"


def write_report(runs, out, *, laws=DEFAULT_LAWS, bootstrap: int = 1000, seed: int = 0,
                 method: str = "lm", step: int = DEFAULT_STEP, figures: bool = True,
                 runs_label: str | None = None) -> Report:
    """Write report.md, report.tex, <table>.csv and (if ``figures``) PNGs into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report, md, tex = build_report(runs, laws=laws, bootstrap=bootstrap, seed=seed, method=method,
                                   step=step, runs_label=runs_label)
    report.out = out
    runs_t, fits = report.runs, report.fits
    weight = report.persistence.get("weight") or []
    main_fit = fits.get("depth_delusion") or next(iter(fits.values()))
    # The figure list is part of report.md whether or not the PNGs are (re)drawn.
    figures_to_make = {
        "loss_vs_depth": lambda p: plots.loss_vs_depth(runs_t, main_fit, p),
        "loss_vs_width": lambda p: plots.loss_vs_width(runs_t, main_fit, p),
        "predicted_vs_observed": lambda p: plots.predicted_vs_observed(fits, p),
        "residuals": lambda p: plots.residuals(runs_t, fits, p),
    }
    if weight:
        figures_to_make["gradient_profiles"] = lambda p: plots.gradient_profiles(
            runs_t, {f.name: f for f in weight}, p, step=step)
    if "weight_scaling" in report.persistence:
        figures_to_make["persistence_scaling"] = lambda p: plots.persistence_scaling(
            report.persistence["weight_scaling"], p)
    md += "## Figures\n\n" + "\n".join(f"![{name}]({name}.png)" for name in figures_to_make) + "\n"
    if not weight:
        md += ("\n(No per-layer gradient-profile or ℓ(W) figures: the data has no per-layer "
               "gradient norms.)\n")
    if figures:
        report.files += [draw(out / f"{name}.png") for name, draw in figures_to_make.items()]
    (out / "report.md").write_text(md)
    (out / "report.tex").write_text(tex)
    report.files += [out / "report.md", out / "report.tex"]
    for t in report.tables:
        path = out / f"{t.name}.csv"
        path.write_text(t.csv())
        report.files.append(path)
    return report


def main(argv=None) -> int:
    import argparse

    from .commands import add_report_arguments, run_report

    parser = argparse.ArgumentParser(prog="python -m depthdelusion.analysis.report",
                                     description="Write the scaling-law analysis report.")
    add_report_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_report(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"report: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
