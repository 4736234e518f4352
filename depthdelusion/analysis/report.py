"""The analysis report: fits, verdicts under each design assumption, extrapolation, audits, shape,
persistence.

``write_report(runs, out)`` writes report.md, report.tex (pdflatex, booktabs), one CSV per table
and PNG figures. Text outputs are deterministic for a given input, bootstrap count and seed, and
rounded to the precision the data supports. On the command line: ``depthdelusion report RUNS
--out DIR``.

Design assumptions the report makes explicit (docs/analysis.md):

- **Token budgets.** Groups trained on different token budgets cannot be pooled by a law without
  a token term: the extra tokens would be credited to N. ``groups="auto"`` then fits a per-group
  offset E_g (the budget's data term, constant within a group); ``groups="pooled"`` fits as
  asked but flags it in the report's first lines.
- **N convention.** ``params="total"`` (printed N; rows inconsistent with their shape refitted
  with the recomputed N), ``"non_embedding"`` or ``"recomputed"`` (consistency.PARAM_CONVENTIONS).
- **Which conclusion holds where.** With several groups, the report also fits every form the
  design allows (each group alone; groups with unknown budgets with size-class offsets; pooled
  with group offsets; pooled without, flagged) under total and non-embedding N, and tabulates
  the penalty verdict in each.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .columns import law_missing_columns
from .consistency import CONVENTIONS, audit_param_counts, with_param_convention
from .fit_result import DRIFT, OK, parameter_status
from .fitting import FitResult, fit
from .persistence import (DEFAULT_STEP, DEFAULT_WINDOW, MIN_SEEDS, PAPER_EPSILONS, compare_with_paper,
                          length_statement, paper_implied_length, persistence_lengths,
                          persistence_scaling, seed_interval, window_bounds)
from .replicates import replicate_cells
from .reference import (PAPER_FIT, PAPER_KAPPA, PAPER_PERSISTENCE_EXPONENT, PAPER_PERSISTENCE_R2,
                        PAPER_SHAPE_EXPONENTS)
from .laws import shape_kind
from .runs import PAPER_VOCAB, Runs, load_runs
from .shape import audit_shapes, optimal_shape, trainer_counts
from .readout import readout_section
from .spectra import spectrum_section
from .tables import Table, latex_document
from .lr_test import DEFAULT_REPLICATES
from .verdict import (HEADS, critical_depth_verdict, overall, penalty_verdict, penalty_verdicts,
                      shape_variation)

DEFAULT_LAWS = ("depth_delusion", "depth_delusion_relative", "depth_delusion_power",
                "shape_quadratic", "depth_softplus", "kaplan")
GROUP_MODES = ("auto", "offsets", "pooled")
SIZE_CLASS_GAP = 1.5  # runs whose N differ by more than this factor start a new size class
MIN_RUNS_ALONE = 10   # a group is fitted alone only with at least this many runs


@dataclass
class Report:
    out: Path
    fits: dict
    tables: list
    files: list = field(default_factory=list)
    verdict: str = ""
    verdicts: list = field(default_factory=list)
    first_lines: list = field(default_factory=list)


def _f(v, spec=".4g") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—" if v is None or math.isnan(v) else ("∞" if v > 0 else "−∞")
    out = format(v, spec)
    return "0" if out.lstrip("-+") in ("0", "0.0", "0.00", "0.000", "0.0000") and spec.endswith("g") else out


def _ci(ci, spec=".3g") -> str:
    return "—" if not ci else f"[{_f(ci[0], spec)}, {_f(ci[1], spec)}]"


SPAN_LIMIT = 1e3  # a scale parameter whose interval spans more than this factor is not determined


def _is_scale(f, name: str) -> bool:
    try:
        return bool(f.law.param(name).log)
    except (ValueError, AttributeError):
        return False


def _param_ci(f, name: str, ci, spec=".3g") -> str:
    """An interval as the data support it: a scale parameter's interval spanning more than
    ``SPAN_LIMIT``× (its ends are then set by numerical flatness, not by the data) is printed as
    such instead of as two machine-dependent digits; an end beyond ``DRIFT`` (set by how far the
    optimiser drifted along a flat direction) is printed as unbounded."""
    if ci:
        ci = tuple(np.inf if c > DRIFT else -np.inf if c < -DRIFT else c for c in ci)
    if ci and _is_scale(f, name) and ci[0] > 0 and np.isfinite(ci[1]) and ci[1] / ci[0] > SPAN_LIMIT:
        return f"[spans > {SPAN_LIMIT:.0e}×]".replace("1e+03", "10³")
    return _ci(ci, spec)


def _rounded_note(note: str) -> str:
    """A count of stalled bootstrap refits depends on the CPU's last bits: give it as a share
    rounded to one significant digit."""
    m = re.match(r"(\d+) of (\d+) bootstrap refits (.*)", note)
    if not m:
        return note
    share = int(m.group(1)) / max(int(m.group(2)), 1)
    return f"about {float(f'{share:.1g}'):.1%} of {m.group(2)} bootstrap refits {m.group(3)}".replace(".0%", "%")


def _identified(f, name: str) -> bool:
    """False when the parameter's status (fit_result.parameter_status) is not ok: at a bound,
    or not pinned by the data (ridge, open profile, infinite s.e., |r| ≈ 1, drifted)."""
    return name not in f.params or parameter_status(f, name) == OK


def _value(f, name: str, spec=".3g") -> str:
    """The point estimate; "at bound v" on a bound; "n.i." (not identified) where any point
    would be arbitrary."""
    v = f.all_params.get(name)
    if name in f.params and parameter_status(f, name) != OK:
        return f"at bound {_f(v, spec)}" if parameter_status(f, name) == "at_bound" else "n.i."
    return _f(v, spec)


# --- design: token budgets, groups, forms ------------------------------------------------------

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


def _fit(runs, law, method, offsets: bool, **kw) -> FitResult:
    if not offsets:
        return fit(runs, law, method, **kw)
    try:
        return fit(runs, law, method, group_offsets=True, **kw)
    except TypeError as err:
        if "group_offsets" in str(err):
            raise ValueError("group offsets need fitting.fit(..., group_offsets=True), which this "
                             "version of the fitting engine lacks") from None
        raise


def _primary_law(laws) -> str | None:
    for name in ("depth_delusion", *laws):
        if name in laws and name not in ("kaplan", "chinchilla"):
            return name
    return None


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


def _verdict_cell(v) -> str:
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


def design_matrix(runs: Runs, law: str, method: str, seed: int, conventions=("total", "non_embedding")):
    """The penalty verdict of ``law`` against its same-data-term baseline in every design form
    under each N convention: {(form label, convention): (verdict or reason, fit)}."""
    out = {}
    for label, sub, offsets, caveat in design_forms(runs):
        for conv in conventions:
            try:
                r, _ = with_param_convention(sub, conv)
                lf = _fit(r, law, method, offsets, bootstrap=0, seed=seed, leave_one_out=False)
                base = "chinchilla" if r.tokens_vary else "kaplan"
                bf = _fit(r, base, method, offsets, bootstrap=0, seed=seed, leave_one_out=False,
                          profile=False)
                out[(label, conv)] = (penalty_verdict(lf, bf, shape_variation(r)), lf, caveat)
            except ValueError as err:
                out[(label, conv)] = (f"not fitted: {err}", None, caveat)
    return out


def _cells_text(cells) -> str:
    """'form (total and non-embedding N)'-style list of (form, convention) cells."""
    by_form = {}
    for form, conv in cells:
        by_form.setdefault(form, []).append(conv.replace("_", "-"))
    return "; ".join(f"{form} ({' and '.join(convs)} N)" for form, convs in by_form.items())


def _profile(f, name):
    return (getattr(f, "ci_profile", None) or {}).get(name)


def _conclusions(matrix, law: str, main_label: str, main_overall: str) -> list:
    """The report's first paragraph: which of the paper's conclusions hold where, in plain words."""
    if not matrix:
        return []
    answers = {"yes": [], "no": [], "not clearly": [], "cannot tell": [], "uninformative": [],
               "not fitted": []}
    invalid, kappas = {}, []
    for (form, conv), (v, lf, caveat) in matrix.items():
        if caveat:
            invalid[form] = caveat
            continue
        answers["not fitted" if isinstance(v, str) else v.answer].append((form, conv))
        if not isinstance(v, str) and v.significant and lf is not None and "kappa" in lf.params:
            kappas.append(f"{_value(lf, 'kappa', '.2f')} {_ci(_profile(lf, 'kappa'), '.2f')} "
                          f"({form}, {conv.replace('_', '-')} N)")
    words = {"yes": "Yes", "no": "no", "not clearly": "significant but not clearly preferred by the "
             "information criteria", "cannot tell": "cannot tell",
             "uninformative": "uninformative (too few runs for the law's parameters)",
             "not fitted": "not fitted"}
    said = [f"{words[a]} for {_cells_text(c)}" for a, c in answers.items() if c]
    text = ("Which of the paper's conclusions hold depends on two choices it leaves implicit: how "
            "runs trained on different token budgets are combined, and which parameter count N is "
            f"used. Does the {law} depth penalty earn its extra parameters over the shape-agnostic "
            "law? " + "; ".join(said) + ". ")
    text += (("Where λ is significant, the critical-depth slope is κ = " + ", ".join(kappas)
              + f" (95% profile-likelihood intervals); the paper reports κ = {PAPER_FIT['kappa'][0]}. ")
             if kappas else
             "In no valid form is λ significant by a calibrated test (Davies' bound), so no "
             "critical depth is established. ")
    for form, caveat in invalid.items():
        text += (f"Fitting {form} without offsets or a token term — the paper's fit — is invalid "
                 f"here: it {caveat}. ")
    text += (f"The detailed sections below use {main_label}, where the overall answer is "
             f"'{main_overall}'.")
    return [text]


def build_report(runs, *, laws=DEFAULT_LAWS, bootstrap: int = 1000, seed: int = 0,
                 method: str = "lm", step: int = DEFAULT_STEP, runs_label: str | None = None,
                 shape_draws: int = 200, groups: str = "auto", params: str = "total",
                 design: bool = True, fit_options: dict | None = None,
                 lr_replicates: int | None = None) -> tuple[Report, str, str]:
    """Fit and tabulate; returns (report, markdown, latex) without writing anything.

    ``groups``: ``"auto"`` (per-group offsets E_g when the groups' token budgets differ or are
    unknown for some, else pooled), ``"offsets"`` or ``"pooled"`` (flagged when budgets differ).
    ``params``: the N convention (``"total"``, ``"non_embedding"``, ``"recomputed"``).
    ``design``: also tabulate the verdict in every form the design allows (several groups only).
    ``fit_options``: extra keyword arguments for the main fits (e.g. ``leave_one_out=False``).
    ``lr_replicates``: parametric-bootstrap replicates of the main fits' likelihood-ratio tests
    (0: Davies' bound for λ = 0, and no kink-vs-smooth test); default ``DEFAULT_REPLICATES``,
    or ``bootstrap`` when that is smaller (0: a quick look without resampling).
    """
    if lr_replicates is None:
        lr_replicates = min(DEFAULT_REPLICATES, bootstrap)
    if groups not in GROUP_MODES:
        raise ValueError(f"groups must be one of {', '.join(GROUP_MODES)}, got {groups!r}")
    label = runs_label or (runs if isinstance(runs, str) else "RUNS")
    raw = load_runs(runs)
    runs, n_notes = with_param_convention(raw, params)
    mixed = mixed_budgets(runs)
    offsets = groups == "offsets" or (groups == "auto" and mixed is not None)
    laws = list(laws)
    if runs.tokens_vary and "chinchilla" not in laws:
        laws.append("chinchilla")
    skipped = {name: law_missing_columns(name, runs) for name in laws}
    skipped = {name: missing for name, missing in skipped.items() if missing}
    laws = [name for name in laws if name not in skipped]
    if not laws:
        raise ValueError(f"{label}: no law of the report can be fitted to this table: "
                         + "; ".join(f"{n} needs {', '.join(m)}" for n, m in skipped.items()))
    fits = {name: _fit(runs, name, method, offsets, bootstrap=bootstrap, seed=seed, **(fit_options or {}))
            for name in laws}
    verdicts = penalty_verdicts(fits, runs, replicates=lr_replicates, seed=seed)
    main_answer = overall(verdicts)
    primary = _primary_law(laws)
    critical = (critical_depth_verdict(fits, runs, primary,
                                       next((v for v in verdicts if v.law == primary), None),
                                       replicates=lr_replicates, seed=seed)
                if primary in fits else None)
    main_label = ("all runs with group offsets" if offsets else "all runs pooled") + \
        f", {params.replace('_', '-')} N"

    warnings, first = [], []  # the report's first lines: what a reader must know before any number
    if mixed and not offsets:
        warnings.append(f"WARNING: this fit pools groups trained on different token budgets ({mixed}) "
                     "with no token term, so the larger budget's lower loss is credited to N. Its "
                     "exponents and verdict are not valid; fit with group offsets "
                     "(groups='offsets', CLI --groups offsets) or each group alone.")
    elif offsets:
        first.append("Groups are fitted with their own offset E_g"
                     + (f" because their token budgets differ or are unknown ({mixed})" if mixed else "")
                     + ": the data term of each budget is absorbed into its group's offset, and "
                     "shape and N effects are estimated within groups.")
    matrix = design_matrix(raw, primary, method, seed) if (design and primary and len(raw.groups) >= 2) else {}
    first = warnings + _conclusions(matrix, primary, main_label, main_answer) + first + \
        ([f"Is there a critical depth ({main_label})? " + critical.sentence()]
         if critical is not None and critical.answer != "not compared" else [])

    tables, md = [], []
    least_squares = method == "lm"
    cmd = (f"depthdelusion report {label} --out DIR --bootstrap {bootstrap} --seed {seed}"
           + ("" if least_squares else f" --method {method}") + f" --groups {groups}"
           + (f" --params {params}" if params != "total" else ""))
    method_words = ("bounded Levenberg–Marquardt least squares on loss residuals (nats)"
                    if least_squares else "Huber (threshold 1e-3) on log-loss residuals")
    md += ["# Scaling-law analysis report", "", *[line + "\n" for line in first],
           f"Data: {runs.source} — {len(runs)} runs, groups: "
           + ", ".join(f"{g} ({int((runs.group == g).sum())})" for g in runs.groups) + ".",
           f"Regenerate with `{cmd}`. "
           f"Fits: {method_words} from a grid of starts; intervals from the Jacobian, from "
           f"{bootstrap} seeded (seed {seed}) case-bootstrap refits (from the optimum and the best multi-start points) and from the "
           "profile likelihood; runs weighted equally; loss in nats.", "",
           *[f"- {n} not fitted: the law needs the column(s) {', '.join(m)}, which the table lacks"
             for n, m in skipped.items()], *([""] if skipped else [])]
    notes = sorted({n for f in fits.values() for n in f.notes if "token" in n} | set(runs.notes)
                   | set(n_notes))
    md += [f"- {n}" for n in notes] + [""]

    # --- verdicts -----------------------------------------------------------------------------
    comp = Table("law_comparison", f"Law comparison, {main_label} (loss in nats; lower "
                 "AICc/BIC/LOO is better; shape: kink = a critical depth, smooth = a shape "
                 "penalty without one)",
                 ["law", "shape", "k", "R²", "RMSE", "LOO RMSE", "AICc", "BIC", "ΔAICc", "ΔBIC", "flags"])
    best_aicc = min(f.aicc for f in fits.values())
    best_bic = min(f.bic for f in fits.values())
    for name, f in fits.items():
        comp.add(name, shape_kind(f.law) or "—", f.k, _f(f.r2, ".3f"), _f(f.rmse, ".3f"), _f(f.loo_rmse, ".3f"),
                 _f(f.aicc, ".1f"), _f(f.bic, ".1f"), _f(f.aicc - best_aicc, ".1f"),
                 _f(f.bic - best_bic, ".1f"), len(f.flags))
    tables.append(comp)
    verdict_lines = [v.sentence() for v in verdicts]
    verdict = (f"Overall ({main_label}): {main_answer}. " + " ".join(verdict_lines)) if verdicts else \
        "(no architecture law and same-data-term baseline among the fitted laws)"
    replicates = replicate_cells(runs)
    if verdicts and replicates.cells:  # the verdict counts replicates as independent runs
        verdict += f" This verdict is reached on pooled replicates: {replicates.describe(runs)}."
    md += ["## Does the architecture penalty earn its parameters?", "",
           "Each architecture law is compared with the shape-agnostic law that has the same data "
           f"term (kaplan without a token term, chinchilla with one). λ = 0 is tested by "
           f"LR = n·ln(RSS_baseline / RSS_law); at λ = 0 the penalty sits on its bound and its "
           f"kink location is not identified, so χ²₁ is not its reference: p comes from "
           + (f"{lr_replicates} parametric-bootstrap replicates from the baseline fit (seed "
              f"{seed}; ± its Monte-Carlo error)" if lr_replicates else "Davies' upper bound")
           + ". The verdict is Yes only when λ = 0 is rejected at 5% and ΔAICc and ΔBIC are both "
           "below −2; 'uninformative' when n − K − 1 ≤ 5 (too few runs for K parameters); "
           "'cannot tell' when the runs do not vary shape enough "
           f"({shape_variation(runs).reason}).", "",
           *[f"- {line}" for line in verdict_lines], "", comp.markdown(), ""]
    if critical is not None:
        md += ["## Is there a critical depth?", "",
               f"A penalty that beats the shape-agnostic law shows that shape matters, not that "
               f"there is a critical depth. {primary}'s kink is tested against the best smooth "
               "shape law (shape = smooth above; lowest AICc) by LR = n·ln(RSS_smooth / "
               "RSS_kink), referred to its distribution under the smooth law (parametric "
               "bootstrap: the laws are not nested). D/D_crit and optimal-shape tables appear "
               "only when the kink wins.", "", f"- {critical.sentence()}", ""]
    if matrix:
        convs = sorted({c for _, c in matrix}, key=["total", "non_embedding"].index)
        mt = Table("design_verdicts", f"Verdict on the {primary} penalty in every form the design "
                   "allows, under total and non-embedding N (vs the same-data-term baseline; p: "
                   "Davies' upper bound for λ = 0 with the kink location unidentified)",
                   ["form", "runs"] + [f"{c.replace('_', '-')} N" for c in convs] + ["caveat"])
        for label_ in dict.fromkeys(lbl for lbl, _ in matrix):
            cells = [matrix[(label_, c)] for c in convs]
            n_runs = next((f.n for _, f, _ in cells if f is not None), "")
            mt.add(label_, n_runs, *[_verdict_cell(v) for v, _, _ in cells], cells[0][2] or "")
        tables.append(mt)
        kt = Table("design_parameters", f"{primary} in every design form: κ (or c), λ and α with "
                   "95% profile-likelihood intervals, and R²",
                   ["form", "N", "κ", "λ", "α", "R²", "flags"])
        for (label_, conv), (_, lf, _) in matrix.items():
            if lf is None:
                continue
            p = lf.all_params
            crit = "kappa" if "kappa" in p else "c"
            kt.add(label_, conv.replace("_", "-"),
                   *[f"{_value(lf, k)} {_param_ci(lf, k, _profile(lf, k), '.2g')}"
                     for k in (crit, "lam", "alpha")],
                   _f(lf.r2, ".3f"), len(lf.flags))
        tables.append(kt)
        md += ["## Which verdict holds under which assumptions", "",
               "Forms: every run with one offset per group; every run pooled with no offset "
               "(invalid when the groups' token budgets differ); each group alone, and a group "
               "whose token budgets are unknown with one offset per size class (runs whose N "
               f"differ by more than {SIZE_CLASS_GAP:g}× start a new class). N: as printed "
               "(total; rows inconsistent with their shape refitted with the recomputed N) and "
               "non-embedding.", "", mt.markdown(), "", kt.markdown(), ""]

    # --- extrapolation --------------------------------------------------------------------
    train, how = _split_for_extrapolation(runs)
    test_idx = np.flatnonzero(~train)
    extrap_rmse, preds, ridges = {}, {}, []
    for name in laws:
        try:
            small = _fit(runs.subset(train), name, method, offsets, bootstrap=0, seed=seed,
                         leave_one_out=False, profile=False)
            lo, hi = _prediction_range(small, runs.subset(~train))
            preds[name] = (lo, hi)
            if np.any(hi - lo > 5e-4):
                ridges.append(f"- {name}: the training runs do not determine "
                              f"{', '.join(small.starts.ridge_params) or 'all parameters'}; the "
                              "prediction is given as the range over the starts tied at the best "
                              "objective, its error as a range, and no RMSE (n.i.)")
            # On a ridge the error is a range per run; one RMSE would pick a point of it.
            extrap_rmse[name] = (math.nan if np.any(hi - lo > 5e-4) else
                                 float(np.sqrt(np.mean((0.5 * (lo + hi) - runs.loss[test_idx]) ** 2))))
        except ValueError as err:  # e.g. too few training runs for this law
            preds[name] = (np.full(len(test_idx), np.nan),) * 2
            md.append(f"- extrapolation with {name} not possible: {err}")
    extrap = Table("extrapolation", f"Extrapolation: {how} (loss in nats; a range: tied solutions)",
                   ["run", "D", "W", "N (M)", "observed"] + [f"{n}" for n in laws])
    for j, i in enumerate(test_idx):
        extrap.add(runs.name[i], _f(runs.depth[i], ".0f"), _f(runs.width[i], ".0f"), _millions(runs.params[i]),
                   _f(runs.loss[i], ".3f"), *[_pred_cell(preds[n][0][j], preds[n][1][j], runs.loss[i])
                                              for n in laws])
    extrap.add("RMSE", "", "", "", "", *[("n.i." if n in extrap_rmse and math.isnan(extrap_rmse[n])
                                          else _f(extrap_rmse.get(n), ".3f")) for n in laws])
    tables.append(extrap)

    # --- ours vs paper ----------------------------------------------------------------------
    paper = Table("paper_comparison", f"Our fits ({main_label}) next to the paper's reported values "
                  "(ours: 95% profile-likelihood intervals, bootstrap ones when no profile was "
                  "computed; paper: its stated intervals)", ["quantity", "paper"] + laws)
    mapping = [("persistence exponent p (D_crit = c·W^p)", "persistence_exponent", "p"),
               ("κ (D_crit = κ ln W)", "kappa", "kappa"), ("α", "alpha", "alpha"),
               ("λ", "lam", "lam"), ("γ", "gamma", "gamma")]
    for title, paper_key, param in mapping:
        value, ci = PAPER_FIT[paper_key]
        cells = []
        for name in laws:
            f = fits[name]
            if param in f.params:
                ci_ = _profile(f, param) or (f.ci_bootstrap[param] if f.ci_bootstrap else None)
                cells.append(f"{_value(f, param)} {_param_ci(f, param, ci_, '.2g')}")
            else:
                cells.append("—")
        paper.add(title, f"{value:g} {_ci(ci)}", *cells)
    paper.add("R²", f"{PAPER_FIT['r2'][0]:g}", *[_f(fits[n].r2, ".3f") for n in laws])
    tables.append(paper)
    md += ["## The paper's fit, refitted", "", paper.markdown(), "",
           "The paper's persistence exponent comes from per-layer gradient norms, which the "
           "bundled data lacks; the closest refittable quantity is p of `depth_delusion_power`.",
           "", "## Extrapolation from small to large runs", "", extrap.markdown(), "",
           "A dash: the law's prediction is not finite there (a degenerate fit), so no "
           "extrapolation error is given.", "", *ridges, *([""] if ridges else [])]

    # --- parameters of every fit ----------------------------------------------------------
    has_profile = any(getattr(f, "ci_profile", None) for f in fits.values())
    params_t = Table("parameters", "Fitted parameters: 95% intervals from the Jacobian, the bootstrap"
                     + (" and the profile likelihood" if has_profile else ""),
                     ["law", "parameter", "value", "status", "CI (Jacobian)", "CI (bootstrap)"]
                     + (["CI (profile)"] if has_profile else []))
    for name, f in fits.items():
        prof = getattr(f, "ci_profile", None) or {}
        for p, v in f.params.items():
            row = [name, p, _value(f, p, ".4g"), parameter_status(f, p), _param_ci(f, p, f.ci_jacobian[p]),
                   _param_ci(f, p, f.ci_bootstrap[p] if f.ci_bootstrap else None, ".2g")]
            params_t.add(*row, *([_param_ci(f, p, prof.get(p))] if has_profile else []))
    tables.append(params_t)
    md += ["## Fits", "", "status: ok, at_bound (the optimum is on the physical bound) or "
           "not_identified (n.i.: a ridge of equally good fits, an open-ended profile interval, an "
           "infinite standard error, |r| ≥ 0.9995 with another parameter, or a drifted estimate): "
           "no point estimate is given unless ok. "
           + (f"Bootstrap intervals are percentiles of {bootstrap} refits, printed to 2 digits "
              "(their Monte Carlo error). " if bootstrap else "") +
           f"`depthdelusion fit {label} --law NAME` prints a law's full summary.", "",
           params_t.markdown(), ""]
    for name, f in fits.items():
        md += [f"### {name}: flags and notes", ""] + [f"- ! {x}" for x in f.flags] + \
              [f"- {_rounded_note(x)}" for x in f.notes] + \
              [f"- profile: {note}" for note in f.profile_notes] + [""]

    # --- consistency audit ----------------------------------------------------------------
    if raw.has("depth") and raw.has("width"):
        md += _consistency_section(raw, tables)
    else:
        md += ["## Consistency audit", "", "Not done: the table has no depth and width, so "
               "parameter counts cannot be recomputed from the shape.", ""]

    # --- critical depth, LLM audit, optimal shape: only from a significant penalty ------------
    dd_name = next((n for n in laws if "kappa" in fits[n].all_params), None)
    if dd_name is not None:
        md += _shape_sections(fits[dd_name], next((v for v in verdicts if v.law == dd_name), None),
                              runs, raw, params, bootstrap, shape_draws, tables,
                              critical if critical is not None and critical.kink == dd_name else None)

    # --- persistence length -----------------------------------------------------------------
    persist, p_step, p_note = _persistence_section(runs, step)
    if not any(persist.values()):
        md += ["## Gradient persistence length", "",
               "The data has no per-layer gradient norms, so ℓ cannot be estimated here "
               f"(the paper reports ℓ ∝ W^{PAPER_PERSISTENCE_EXPONENT}, "
               f"power-law R² {PAPER_PERSISTENCE_R2['power']} vs "
               f"log-form R² {PAPER_PERSISTENCE_R2['log']}).", ""]
    else:
        lo, hi = window_bounds(p_step, DEFAULT_WINDOW)
        pt = Table("persistence", f"Persistence rate per run: ln g averaged over the logged steps in "
                   f"[{lo}, {hi}]",
                   ["run", "kind", "D", "W", "steps", "status", "rate 1/ℓ", "95% CI", "ℓ", "R²"])
        md += ["## Gradient persistence length", "",
               f"Windowed protocol (`docs/persistence.md`): for each run, ln g_l averaged over the "
               f"logged steps in [{lo}, {hi}] (requested step {p_step}, window ±{DEFAULT_WINDOW:.0%}), "
               "then ln ḡ_l = b − rate·(D − l) over blocks 1 … D−1 (the bottom block, which reads "
               "the embedding stream, is left out of the fit); rate = 1/ℓ > 0 is the paper's decay "
               "towards the input, rate < 0 is growth towards the input (reported, not dropped). "
               "95% CI per run: moving-block bootstrap over the window's steps (the t-interval of "
               "the slope with fewer than 3); per shape with several seeds: t over the seeds' rates. "
               "ℓ(W) is fitted to the rates of all runs.", ""] + ([p_note, ""] if p_note else [])
        for kind, pfits in list(persist.items()):
            for p in pfits:
                pt.add(p.name, kind, p.depth, p.width, f"{p.steps[0]}–{p.steps[-1]} ({len(p.steps)})",
                       p.status, _f(p.rate, "+.3g"), _ci(p.rate_ci, "+.3g"), _f(p.length, "+.3g"),
                       _f(p.r2, ".2f"))
            kind_warnings = sorted({p.warning for p in pfits if p.warning})
            md += [f"- {kind} gradients: warning: {w}" for w in kind_warnings]
            counts = {s: sum(p.status == s for p in pfits) for s in ("decay", "flat", "growth")}
            if any(counts.values()):
                md += [f"- {kind} gradients: {counts['decay']} run(s) decay towards the input, "
                       f"{counts['flat']} flat, {counts['growth']} grow towards the input."]
            md += _persistence_cells(kind, pfits)
            try:
                sc = persistence_scaling(pfits)
                md += ["", "```", f"{kind} gradients: " + sc.summary(), "```", ""]
                persist[kind + "_scaling"] = sc
            except ValueError as err:
                if pfits:
                    md += [f"- {kind} gradients: ℓ(W) not fitted: {err}", ""]
        tables.append(pt)
        md += [pt.markdown(), ""]
    md += spectrum_section(runs.source)  # runs whose directories carry spectrum/tail.csv
    md += readout_section(runs.source)  # ... and spectrum/readout.csv (data-exponent study)
    if not str(runs.source).startswith("paper") and runs.has("depth") and runs.has("width"):
        # (the paper's first lines are its conclusions; a table without shapes has no depth trend)
        # what the runs show opens the report, after any warning that invalidates a fit
        at = 2 + len(warnings)
        md[at:at] = [_opening(runs, fits, persist), ""]
    report = Report(Path("."), fits, tables, verdict=verdict, verdicts=verdicts, first_lines=first)
    report.persistence = persist
    report.runs = runs
    tex = latex_document("Scaling-law analysis", [*first, verdict], tables,
                         header_comment="Generated by depthdelusion; regenerate with: " + cmd)
    return report, "\n".join(md) + "\n", tex


def _prediction_range(f: FitResult, runs) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) predictions over the solutions tied at the best objective (the fitting
    engine's ``predict_range`` when it has one; else the single point)."""
    rng = getattr(f, "predict_range", None)
    if callable(rng):
        lo, hi = rng(runs)
        return np.asarray(lo, float), np.asarray(hi, float)
    p = f.predict(runs)
    return p, p


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


def _persistence_cells(kind: str, pfits: list) -> list:
    """The study's rules on the report's runs: the rate per shape (t over seeds where a shape
    repeats), which cells a verdict may rest on, and the paper's implied ℓ(W) per width."""
    by_shape: dict = {}
    for p in pfits:
        if np.isfinite(p.rate):
            by_shape.setdefault((p.depth, p.width), []).append(p)
    if not by_shape:
        return []
    cells = {k: seed_interval(v) for k, v in sorted(by_shape.items())}
    strong = {k: v for k, v in cells.items() if v.enough_seeds}
    use = strong or cells
    n = {s: sum(v.status == s for v in use.values()) for s in ("decay", "flat", "growth")}
    basis = (f"{len(strong)} shape(s) with ≥ {MIN_SEEDS} seeds" if strong else
             f"rests on single runs: no shape has ≥ {MIN_SEEDS} seeds")
    out = [f"- {kind} gradients per shape ({basis}): {n['decay']} decay, {n['flat']} flat, "
           f"{n['growth']} growth."]
    for w in sorted({k[1] for k in use}):
        entries = [(k, v) for k, v in use.items() if k[1] == w]
        implied = ", ".join(f"{paper_implied_length(w, e):.2f}" for e in PAPER_EPSILONS)
        ok = [any(c for _, c in compare_with_paper(w, v.lo, v.hi).values()) for _, v in entries]
        verdict = "consistent" if all(ok) else "not consistent" if not any(ok) else "mixed"
        out.append(f"- {kind} gradients, W = {w}: the paper's κ implies ℓ = {implied} layers (ε = "
                   + ", ".join(f"{e:g}" for e in PAPER_EPSILONS) + "); measured: "
                   + "; ".join(f"{d}L ({v.n} seed{'s' if v.n > 1 else ''}): {length_statement(v.lo, v.hi)}"
                               for (d, _), v in entries) + f" — {verdict}.")
    return out


def _consistency_section(raw, tables: list) -> list:
    """The parameter-count audit against the runs' own vocabulary (the paper's for its data)."""
    vocab = _vocab(raw)
    if vocab is None:  # never an assumed vocabulary: the audit would blame the wrong rows
        return ["## Parameter-count audit", "", "Not audited: the table gives no vocabulary size "
                "(a vocab_size column, or --vocab V), which the embedding count needs.", ""]
    audit = audit_param_counts(raw, vocab=vocab)
    cons = Table("consistency", "Parameter counts recomputed from (D, W): best convention per group "
                 "and rows more than 1% off it", ["group", "convention", "formula", "median error",
                                                  "rows within 1%"])
    for group, conv in audit.best.items():
        cf = next(c for c in audit.convention_fits if c.group == group and c.convention == conv)
        cons.add(group, conv, CONVENTIONS[conv][0], f"{cf.median_rel_error:.2%}",
                 f"{cf.n_within_tolerance}/{cf.n_rows}")
    tables.append(cons)
    return ["## Consistency audit", "", cons.markdown(), "", "```", audit.summary(), "```", ""]


def _opening(runs, fits: dict, persist: dict) -> str:
    """Two or three sentences: what the runs show (best shape, depth trend, gradient profile)."""
    best = int(np.argmin(runs.loss))
    widths = sorted(set(int(w) for w in runs.width))
    trends = []
    for w in widths:  # only widths with two depths or more can show a depth trend
        sel = np.flatnonzero(runs.width == w)
        if len(set(runs.depth[sel].tolist())) >= 2:
            order = sel[np.argsort(runs.depth[sel])]
            d_best = int(runs.depth[order[np.argmin(runs.loss[order])]])
            trends.append((w, d_best, int(runs.depth[order[-1]])))
    text = (f"In short: {len(runs)} runs (depth {int(runs.depth.min())}–{int(runs.depth.max())} × width "
            f"{widths[0]}–{widths[-1]}); the lowest loss is {runs.loss[best]:.3f} at "
            f"{int(runs.depth[best])}L×{int(runs.width[best])}.")
    if trends:
        deepest = sum(d == top for _, d, top in trends)
        with_depths = (f"{len(trends)} widths with two depths or more (of {len(widths)})"
                       if len(trends) < len(widths) else f"{len(trends)} widths")
        text += (f" At {deepest} of {with_depths} the deepest run is the best, so no critical "
                 "depth is reached within this grid" if deepest == len(trends) else
                 " The loss-optimal depth per width" + (f" (over the {with_depths})" if len(trends) < len(widths)
                                                        else "") + " is " + ", ".join(f"D = {d} at W = {w}" for w, d, _ in trends))
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
            text += f"; ℓ(W) power-law fit p = {sc.p:.2f} (paper {PAPER_PERSISTENCE_EXPONENT})."
        else:
            text += f", so there is no decay length to compare with the paper's ℓ ∝ W^{PAPER_PERSISTENCE_EXPONENT}."
    if fits:
        by_aicc = min(fits.values(), key=lambda f: f.aicc)
        text += f" Best law by AICc: {by_aicc.law.name}."
    return text


def _millions(n) -> str:
    """A parameter count in millions, to 3 significant digits (0.123, 12.3, 123, 1234)."""
    m = n / 1e6
    return _f(m, ".0f") if abs(m) >= 100 else _f(m, ".3g")


def _pred_cell(lo, hi, observed) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "—"
    mid = 0.5 * (lo + hi)
    if hi - lo > 5e-4:
        return f"{lo:.3f}–{hi:.3f} ({lo - observed:+.3f} to {hi - observed:+.3f})"
    return f"{mid:.3f} ({mid - observed:+.3f})"


def _vocab(runs) -> int | None:
    """The runs' one vocabulary size (None when unknown or mixed); the bundled paper data is
    GPT-2 BPE."""
    v = getattr(runs, "vocab_size", None)
    if v is not None:
        v = np.asarray(v, dtype=float).ravel()
        v = v[np.isfinite(v)]
        if len(v):
            return int(v[0]) if len(set(v.tolist())) == 1 else None
    return PAPER_VOCAB if str(runs.source).startswith("paper") else None


def derived_quantities_blocked(fit, names=("lam", "kappa", "c", "p")) -> str | None:
    """Hook for per-parameter status: why quantities derived from ``names`` (D_crit, optimal
    shapes) must not be printed as numbers — a parameter at its bound or not identified — or
    None. Uses the fit's own status where the results API provides one (``fit.status``: name →
    "ok" / "at_bound" / "not_identified"), else its at-bound list and identifiability."""
    status = getattr(fit, "status", None)
    present = [n for n in names if n in fit.params]
    if isinstance(status, dict):
        bad = [f"{n} {status[n].replace('_', ' ')}" for n in present if status.get(n, "ok") != "ok"]
    else:
        bad = ([f"{n} at its bound" for n in present if n in (getattr(fit, "at_bound", None) or [])]
               + [f"{n} not identified" for n in present if not _identified(fit, n)])
    return "; ".join(bad) or None


def _shape_sections(dd: FitResult, v, runs, raw, params: str, bootstrap: int, shape_draws: int,
                    tables: list, critical=None) -> list:
    """D_crit, the LLM audit and the optimal shape — shown only when the penalty is significant
    by a calibrated test, the kink beats the best smooth shape law (``critical``), and the
    kink's parameters are determined; in the runs' own parameter and compute units."""
    md = ["## Critical depth, published models and optimal shape", ""]
    lam_profile = (getattr(dd, "ci_profile", None) or {}).get("lam")
    blocked = derived_quantities_blocked(dd)
    if (v is None or not v.significant or (lam_profile is not None and not lam_profile[0] > 0)
            or (critical is not None and not critical.kink_wins) or blocked):
        if v is None or v.answer == "not compared":
            why = "its same-data-term baseline was not fitted"
        elif v.answer == "uninformative":
            why = v.reason
        elif not v.significant:
            why = f"λ = 0 is not rejected by the calibrated test (LR = {v.lr:.2f}, {v.p_text()})"
        elif critical is not None and critical.answer in ("not compared", "uninformative", "cannot tell"):
            why = f"the kink was not tested against a smooth shape law ({critical.reason})"
        elif critical is not None and not critical.kink_wins:
            why = (f"the kink does not beat the best smooth shape law {critical.smooth} "
                   + (f"({critical.test.p_text()})" if critical.test is not None else f"({critical.reason})"))
        elif blocked:
            why = f"the kink's parameters are not determined ({blocked})"
        else:
            why = f"λ's profile-likelihood interval {_ci(lam_profile)} reaches 0"
        md += [f"Not shown: the {dd.law.name} fit does not establish a critical depth — {why}. "
               "Without a kink that the data require, D_crit = κ·ln W is not determined, so the "
               "critical depths of published models (D/D_crit) and the optimal shape it would "
               "imply are not supported by this data.", ""]
        return md
    if v.answer == "cannot tell":
        md += [f"Not shown: {v.reason}.", ""]
        return md
    # not identified, or a critical-depth scale at 0 (γ = 0 on its bound is a value: W^0)
    unfit = {p: parameter_status(dd, p) for p in ("lam", "kappa", "c", "p") if p in dd.params
             and (parameter_status(dd, p) == "not_identified"
                  or (p in ("kappa", "c") and parameter_status(dd, p) != OK))}
    if unfit:  # D_crit and the shapes would carry an arbitrary value of these
        md += ["Not shown: D_crit and the optimal shape depend on "
               + ", ".join(f"{p} ({st.replace('_', ' ')})" for p, st in unfit.items())
               + ", so any number for them would be arbitrary.", ""]
        return md
    llm = audit_shapes(dd)
    llm_t = Table("llm_audit", f"Published models: D / D_crit(W), D_crit from the {dd.law.name} fit "
                  f"(κ = {dd.params.get('kappa', float('nan')):.3g}) and from the paper's κ = {PAPER_KAPPA}",
                  ["model", "D", "W", "D_crit (fit)", "D/D_crit (fit)", "D_crit (paper κ)",
                   "D/D_crit (paper κ)"])
    for i, m in enumerate(llm.model):
        llm_t.add(m, llm.depth[i], llm.width[i], _f(llm.d_crit[i], ".1f"), _f(llm.ratio[i], ".2f"),
                  _f(llm.d_crit_paper[i], ".1f"), _f(llm.ratio_paper[i], ".2f"))
    tables.append(llm_t)
    md += [llm_t.markdown(), ""]
    vocab = _vocab(raw)
    if vocab is None:
        md += ["Optimal shape not shown: the runs do not state one vocabulary size, which the "
               "parameter count N(D, W) needs.", ""]
        return md
    counts = trainer_counts(vocab, non_embedding=(params == "non_embedding"))
    from .shape import has_token_term
    constraints = ["compute", "params"] if has_token_term(dd) else ["params"]
    if "compute" not in constraints:
        md += ["Fixed-compute optimum not shown: the fit has no data term (token counts are "
               "constant within groups or unknown), so it cannot say how to trade parameters for "
               "tokens. A fixed-compute optimum would rest on a data term assumed from elsewhere "
               f"(the paper's W* ∝ C^{PAPER_SHAPE_EXPONENTS['width']} does); "
               "`shape.optimal_shape(fit, token_term=(B, β))` computes one on request.", ""]
    typical_tokens = float(np.nanmedian(runs.tokens)) if np.any(np.isfinite(runs.tokens)) else None
    for constraint in constraints:
        # Fixed N is cheap: every bootstrap draw (fewer draws make the percentiles of a slope of
        # integer depths noisy); fixed compute searches widths too: ``shape_draws`` of them.
        draws = bootstrap if constraint == "params" else min(shape_draws, bootstrap)
        shape = optimal_shape(dd, constraint=constraint, counts=counts, bootstrap=draws,
                              tokens=typical_tokens if has_token_term(dd) else None)
        unit = "C (FLOPs)" if constraint == "compute" else "N (params)"
        sym = unit[0]
        st = Table(f"optimal_shape_{constraint}",
                   f"Optimal shape of {dd.law.name} at fixed {unit}: D* ∝ {sym}^"
                   f"{_f(shape.depth_exponent, '.2f')} {_ci(shape.depth_exponent_ci, '.2f')}, W* ∝ {sym}^"
                   f"{_f(shape.width_exponent, '.2f')} {_ci(shape.width_exponent_ci, '.2f')}"
                   + (f" (95% intervals over {shape.n_bootstrap} bootstrap draws)" if shape.n_bootstrap else "")
                   + (f" (paper, fixed C: {PAPER_SHAPE_EXPONENTS['depth']} and "
                      f"{PAPER_SHAPE_EXPONENTS['width']})" if constraint == "compute" else ""),
                   [unit, "D*", "plateau D", "W*", "N", "T (tokens)", "loss"])
        for r in shape.rows:
            st.add(_f(r.budget, ".3g"), _f(r.depth, ".0f"), f"{r.depth_min:.0f}–{r.depth:.0f}",
                   _f(r.width, ".0f"), _f(r.params, ".3g"),
                   _f(r.tokens, ".3g") if has_token_term(dd) else "any", _f(r.loss, ".3f"))
        tables.append(st)
        md += [f"### Optimal shape at fixed {unit}", "", st.caption + ".", "",
               *[f"- {a}" for a in shape.assumptions], "", st.markdown(), ""]
    return md


def write_report(runs, out, *, laws=DEFAULT_LAWS, bootstrap: int = 1000, seed: int = 0,
                 method: str = "lm", step: int = DEFAULT_STEP, figures: bool = True,
                 runs_label: str | None = None, groups: str = "auto", params: str = "total",
                 design: bool = True, lr_replicates: int | None = None) -> Report:
    """Write report.md, report.tex, <table>.csv and (if ``figures``) PNGs into ``out``
    (``groups``, ``params``, ``design``: see :func:`build_report`)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report, md, tex = build_report(runs, laws=laws, bootstrap=bootstrap, seed=seed, method=method,
                                   step=step, runs_label=runs_label, groups=groups, params=params,
                                   design=design, lr_replicates=lr_replicates)
    report.out = out
    if figures:  # matplotlib only when figures are drawn
        from . import plots
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
    if not (runs_t.has("depth") and runs_t.has("width")):  # a table of (N[, T], loss) only
        del figures_to_make["loss_vs_depth"], figures_to_make["loss_vs_width"]
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
    probed = [str(n) for n, p in zip(runs_t.name, runs_t.profiles)
              if p is not None and p.insertion_signal is not None]
    if weight and probed:
        md += ("\nIn gradient_profiles.png the dashed lines beside g_l are the first-order signal "
               "of a zero-output block inserted after block l, ln(s_l / s_top) on the same axis "
               "(`depthdelusion expand RUN --probe`; runs: " + ", ".join(probed) + ").\n")
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

