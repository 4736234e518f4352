"""The analysis report as Markdown: :func:`markdown` words a
:class:`~.contents.ReportResults` section by section and shows its tables
(:mod:`.tables`); it computes nothing. :func:`first_lines` and :func:`verdict_text` are the
prose the LaTeX rendering shares."""
from __future__ import annotations

import numpy as np

from ..fitting.kink_reach import MIN_WIDTHS_BOTH_SIDES
from ..laws import papers_kappa
from ..reference import (
    PAPER_KAPPA,
    PAPER_PERSISTENCE_EXPONENT,
    PAPER_PERSISTENCE_R2,
    PAPER_SHAPE_EXPONENTS,
)
from ..science.persistence import (
    DEFAULT_WINDOW,
    MIN_SEEDS,
    PAPER_EPSILONS,
    compare_with_paper,
    length_statement,
    paper_implied_length,
)
from .cells import (
    NOT_IDENTIFIED,
    interval,
    is_not_identified,
    is_numerical_note,
    profile_ci,
    rounded_note,
    shape_unit,
    value,
)
from .contents import (
    CANNOT_TELL,
    FITTED_COUNT,
    NO_VOCAB,
    NOT_ESTABLISHED,
    SIZE_CLASS_GAP,
    UNFIT,
    ReportResults,
    exceeding,
)
from .verdict import shape_variation

# --- the first lines: what a reader must know before any number ----------------------------------

def _cells_text(cells) -> str:
    """'form (total and non-embedding N)'-style list of (form, convention) cells."""
    by_form = {}
    for form, conv in cells:
        by_form.setdefault(form, []).append(conv.replace("_", "-"))
    return "; ".join(f"{form} ({' and '.join(convs)} N)" for form, convs in by_form.items())


_ANSWER_WORDS = {"yes": "Yes", "no": "no", "not clearly": "significant but not clearly preferred by "
                 "the information criteria", "cannot tell": "cannot tell",
                 "uninformative": "uninformative (too few runs for the law's parameters)",
                 "not fitted": "not fitted"}


def _kink_locations(law, cells: list) -> str:
    """"Where λ is significant, the critical-depth slope is κ = … ; the paper reports κ = …":
    the law's declared kink location (named by its doc; a law's own parameter may have none), the
    paper's κ where the law's kink is it (its critical depth the paper's κ·ln W, asked of its roles)."""
    kink = law.param(law.kink)
    return (f"Where {law.shown(law.penalty)} is significant, the "
            f"{kink.doc.partition(':')[0] or 'kink location'} is "
            f"{kink.shown} = " + ", ".join(cells) + " (95% profile-likelihood intervals)"
            + (f"; the paper reports {kink.shown} = {PAPER_KAPPA}" if papers_kappa(law) else "") + ". ")


def _conclusions(matrix, law: str, main_label: str, main_overall: str) -> list:
    """The report's first paragraph: which of the paper's conclusions hold where, in plain words."""
    if not matrix:
        return []
    answers = {a: [] for a in _ANSWER_WORDS}
    invalid, kinks = {}, []
    for (form, conv), (v, lf, caveat) in matrix.items():
        if caveat:
            invalid[form] = caveat
            continue
        answers["not fitted" if isinstance(v, str) else v.answer].append((form, conv))
        if not isinstance(v, str) and v.significant and lf is not None and lf.law.kink in lf.params:
            kink = lf.law.kink
            ci = profile_ci(lf, kink)
            kinks.append((NOT_IDENTIFIED + " " if is_not_identified(lf, kink)
                           else f"{value(lf, kink, '.2f')} {interval(ci, '.2f')} ")
                          + ("— its interval includes 0, i.e. no critical depth at all — " if ci is not None and ci[0] <= 0 else "")
                          + f"({form}, {conv.replace('_', '-')} N)")
    said = [f"{_ANSWER_WORDS[a]} for {_cells_text(c)}" for a, c in answers.items() if c]
    text = ("Which of the paper's conclusions hold depends on two choices it leaves implicit: how "
            "runs trained on different token budgets are combined, and which parameter count N is "
            f"used. Does the {law} depth penalty earn its extra parameters over the shape-agnostic "
            "law? " + "; ".join(said) + ". " + _untested_yes(matrix))
    text += (_kink_locations(next(lf.law for _, lf, _ in matrix.values() if lf is not None), kinks)
             if kinks else
             "In no valid form is λ significant by a calibrated test (Davies' bound), so no "
             "critical depth is established. ")
    for form, caveat in invalid.items():
        text += (f"Fitting {form} without offsets or a token term — the paper's fit — is invalid "
                 f"here: it {caveat}. ")
    text += (f"The detailed sections below use {main_label}, where the overall answer is "
             f"'{main_overall}'.")
    return [text]


def _untested_yes(matrix) -> str:
    """Where a penalty earns its parameters but no three widths bracket its kink, said after the
    answers: a "yes" there is not a depth effect at fixed width."""
    cells = [(form, conv) for (form, conv), (v, _, caveat) in matrix.items()
             if not caveat and not isinstance(v, str) and v.answer in ("yes", "not clearly")
             and v.reach is not None and not v.reach.tested_within_widths]
    if not cells:
        return ""
    return (f"For {_cells_text(cells)}, the kink is not tested within widths (fewer than "
            f"{MIN_WIDTHS_BOTH_SIDES} widths have shapes on both sides of the fitted D_crit): what "
            "it fits may be a break across widths or model sizes. ")


def _warnings(r: ReportResults) -> list:
    """Warnings that invalidate the main fits (they come before everything else)."""
    if not r.design.pooled_invalid:
        return []
    return [f"WARNING: this fit pools groups trained on different token budgets ({r.design.mixed}) "
            "with no token term, so the larger budget's lower loss is credited to N. Its "
            "exponents and verdict are not valid; fit with group offsets "
            "(groups='offsets', CLI --groups offsets) or each group alone."]


def first_lines(r: ReportResults) -> list:
    """The report's first lines: warnings, which conclusion holds where, how groups are
    combined, and whether there is a critical depth."""
    d = r.design
    offsets = ([] if not d.offsets else
               ["Groups are fitted with their own offset E_g"
                + (f" because their token budgets differ or are unknown ({d.mixed})" if d.mixed else "")
                + ": the data term of each budget is absorbed into its group's offset, and "
                "shape and N effects are estimated within groups."])
    critical = ([f"Is there a critical depth ({d.main_label})? " + r.critical.sentence()]
                if r.critical is not None and r.critical.answer != "not compared" else [])
    return (_warnings(r) + _conclusions(d.matrix, r.primary, d.main_label, r.overall) + offsets
            + critical)


def verdict_text(r: ReportResults) -> str:
    """The overall penalty verdict in one paragraph (also ``Report.verdict``)."""
    if not r.verdicts:
        return "(no architecture law and same-data-term baseline among the fitted laws)"
    text = f"Overall ({r.design.main_label}): {r.overall}. " + " ".join(v.sentence() for v in r.verdicts)
    text += f" {r.size_rival.sentence()}" if r.size_rival is not None else ""
    if r.replicates.cells:  # the verdict counts replicates as independent runs
        text += f" This verdict is reached on pooled replicates: {r.replicates.describe(r.runs)}."
    return text


def in_short(r: ReportResults) -> str:
    """The report's "In short" paragraph (what the runs show), where the table has shapes and
    is not the paper's; "" otherwise."""
    if r.paper_data or not r.has_shapes:
        return ""
    return opening_paragraph(r.runs, r.fits, r.persistence.as_dict())


def opening_paragraph(runs, fits: dict, persist: dict) -> str:
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
        text += _depth_trend(trends, widths)
    weight = [p for p in persist.get("weight", []) if np.isfinite(p.rate)]
    if weight:
        text += _gradient_trend(weight, persist.get("weight_scaling"))
    if fits:
        text += best_law_text(fits)
    return text


def best_law_text(fits: dict) -> str:
    """" Best law by AICc and BIC: X.", or both laws with their margins when the criteria
    disagree (the law-comparison table shows both; a headline naming one would contradict it)."""
    by_aicc = min(fits.values(), key=lambda f: f.aicc)
    by_bic = min(fits.values(), key=lambda f: f.bic)
    a, b = by_aicc.law.name, by_bic.law.name
    if by_aicc is by_bic:
        return f" Best law by AICc and BIC: {a}."
    return (f" The criteria disagree: best law by AICc: {a} (AICc {by_bic.aicc - by_aicc.aicc:.1f} "
            f"below {b}'s); by BIC: {b} (BIC {by_aicc.bic - by_bic.bic:.1f} below {a}'s).")


def _depth_trend(trends, widths) -> str:
    deepest = sum(d == top for _, d, top in trends)
    with_depths = (f"{len(trends)} widths with two depths or more (of {len(widths)})"
                   if len(trends) < len(widths) else f"{len(trends)} widths")
    if deepest == len(trends):
        return (f" At {deepest} of {with_depths} the deepest run is the best, so no critical "
                "depth is reached within this grid.")
    return (" The loss-optimal depth per width" + (f" (over the {with_depths})" if len(trends) < len(widths)
                                                   else "")
            + " is " + ", ".join(f"D = {d} at W = {w}" for w, d, _ in trends) + ".")


def _gradient_trend(weight, sc) -> str:
    n = {s: sum(p.status == s for p in weight) for s in ("decay", "flat", "growth")}
    text = (f" Per-layer weight gradients: {n['decay']} of {len(weight)} runs decay towards the input "
            f"(the paper's ℓ), {n['growth']} grow towards it, {n['flat']} are flat")
    if sc is None:
        return text + "."
    if sc.c > 0:
        return text + f"; ℓ(W) power-law fit p = {sc.p:.2f} (paper {PAPER_PERSISTENCE_EXPONENT})."
    return text + f", so there is no decay length to compare with the paper's ℓ ∝ W^{PAPER_PERSISTENCE_EXPONENT}."


def _head(r: ReportResults) -> list:
    s, runs = r.settings, r.runs
    method_words = ("bounded Levenberg–Marquardt least squares on loss residuals (nats)"
                    if s.method == "lm" else "Huber (threshold 1e-3) on log-loss residuals")
    # what the runs show opens the report, after any warning that invalidates a fit (the
    # paper's first lines are its conclusions; a table without shapes has no depth trend)
    warnings, rest = _warnings(r), first_lines(r)[len(_warnings(r)):]
    opening = [in_short(r), ""] if in_short(r) else []
    return ["# Scaling-law analysis report", "", *[line + "\n" for line in warnings], *opening,
            *[line + "\n" for line in rest],
            f"Data: {runs.source} — {len(runs)} runs, groups: "
            + ", ".join(f"{g} ({int((runs.group == g).sum())})" for g in runs.groups) + ".",
            *([f"Published table: {s.citation}."] if s.citation else []),
            f"Regenerate with `{s.command}`. "
            f"Fits: {method_words} from a grid of starts; intervals from the Jacobian, from "
            f"{s.bootstrap} seeded (seed {s.seed}) {_resampled(s)} refits (from the optimum and the best multi-start points) and from the "
            f"profile likelihood{_profile_how(s)}; runs weighted equally; loss in nats.", "",
            *[f"- {n} not fitted: the law needs the column(s) {', '.join(m)}, which the table lacks"
              for n, m in r.skipped.items()], *([""] if r.skipped else []),
            *[f"- {n}" for n in r.notes], ""]


def _resampled(s) -> str:
    """What the report's bootstraps draw: rows ("case-bootstrap"), or whole clusters, named."""
    return "case-bootstrap" if s.cluster == "row" else f"cluster-bootstrap (whole clusters; cluster = {s.cluster})"


def _profile_how(s) -> str:
    how = {"none": " (skipped: --profile none; each interval is named by its method)",
           "fast": " (ends by root-finding from the Wald bracket: --profile fast)"}.get(s.profile, "")
    if "--fix" in s.interval_flags:  # the tests' replicate refits (fitting.refits) take no fixed values
        how += (" (--fix holds its parameters in the fits; the likelihood-ratio tests' replicate "
                "refits leave them free, which makes their p-values conservative)")
    return how


# --- verdicts ------------------------------------------------------------------------------------

def _penalty_section(r: ReportResults) -> list:
    reps, seed = r.settings.lr_replicates, r.settings.seed
    return ["## Does the architecture penalty earn its parameters?", "",
            "Each architecture law is compared with the shape-agnostic law that has the same data "
            "term (kaplan without a token term, chinchilla with one). λ = 0 is tested by "
            "LR = n·ln(RSS_baseline / RSS_law); at λ = 0 the penalty sits on its bound and its "
            "kink location is not identified, so χ²₁ is not its reference: p comes from "
            + (f"{reps} parametric-bootstrap replicates from the baseline fit (seed "
               f"{seed}; ± its Monte-Carlo error)" if reps else "Davies' upper bound")
            + ". The verdict is Yes only when λ = 0 is rejected at 5% and ΔAICc and ΔBIC are both "
            "below −2; 'uninformative' when n − K − 1 ≤ 5 (too few runs for K parameters); "
            "'cannot tell' when the runs do not vary shape enough "
            f"({shape_variation(r.runs).reason}).", "",
            *[f"- {v.sentence()}" for v in r.verdicts], *_rival_lines(r), "",
            r.table("law_comparison").markdown(), ""]


def _rival_lines(r: ReportResults) -> list:
    """The size-break rival of the primary kink law, beside its verdict (:mod:`.size_rival`)."""
    return [f"- {r.size_rival.sentence()}"] if r.size_rival is not None else []


def _critical_section(r: ReportResults) -> list:
    if r.critical is None:
        return []
    return ["## Is there a critical depth?", "",
            f"A penalty that beats the shape-agnostic law shows that shape matters, not that "
            f"there is a critical depth. {r.primary}'s kink is tested against the best smooth "
            "shape law (shape = smooth above; lowest AICc) by LR = n·ln(RSS_smooth / "
            "RSS_kink), referred to its distribution under the smooth law (parametric "
            "bootstrap: the laws are not nested). D/D_crit and optimal-shape tables appear "
            "only when the kink wins.", "", f"- {r.critical.sentence()}", ""]


def _design_section(r: ReportResults) -> list:
    if not r.design.matrix:
        return []
    return ["## Which verdict holds under which assumptions", "",
            "Forms: every run with one offset per group; every run pooled with no offset "
            "(invalid when the groups' token budgets differ); each group alone, and a group "
            "whose token budgets are unknown with one offset per size class (runs whose N "
            f"differ by more than {SIZE_CLASS_GAP:g}× start a new class). N: as printed "
            "(total; rows inconsistent with their shape refitted with the recomputed N) and "
            "non-embedding.", "", r.table("design_verdicts").markdown(), "",
            r.table("design_parameters").markdown(), ""]


def _kink_against_smooth(c, test) -> str:
    """'RSS 0.002050 (kink) against 0.008911 (shape_quadratic), ΔAICc …, LR …, p = …; κ = …'."""
    kink = c.kink.law.kink
    ci = profile_ci(c.kink, kink)
    return (f"RSS {c.kink.rss:.4g} (kink) against {c.smooth.rss:.4g} ({c.smooth.law.name}), "
            f"ΔAICc kink − smooth {c.kink.aicc - c.smooth.aicc:+.1f}, LR = n·ln(RSS_smooth/RSS_kink) = "
            f"{c.kink_lr:.1f}, " + (test.p_text() if test is not None else "not tested")
            + f"; {c.kink.law.shown(kink)} = {value(c.kink, kink, '.3g')} {interval(ci, '.3g')} "
            "(95% profile likelihood)")


def calibrated_reading(c) -> str:
    """What one rechecked design cell says, in words (:mod:`.calibrated`)."""
    where = f"{c.form}, {c.convention.replace('_', '-')} N ({c.n} runs)"
    if c.kind == "described":
        test = c.described
        said = ("the kink fits better than the smooth law — a hint of a critical depth, too weak for "
                "a verdict" if test.rejects() else "the kink is not preferred over the smooth law")
        return (f"{where}: the rule calls it uninformative. Described, not a verdict: {said} "
                f"({_kink_against_smooth(c, test)}). Its limits: {c.limits}.")
    pen, crit = c.penalty, c.critical
    head = (f"{where}: Davies' bound gave p ≤ {c.bound.test.p:.2g}; the parametric bootstrap gives "
            f"LR = {pen.lr:.1f}, reached by {exceeding(pen.test)} of {pen.test.replicates} replicates, "
            f"{pen.p_text()} — λ = 0 {'rejected' if pen.significant else 'not rejected'} at 5%"
            + (f" (but p is within two Monte-Carlo errors of 0.05: {pen.test.replicates} replicates "
               "do not settle the decision)" if abs(pen.test.p - 0.05) < 2 * pen.test.mc_error else "")
            + ".")
    if not pen.significant:
        return head + " The bound's rejection does not survive calibration."
    kink_test = crit.test if crit is not None else None
    if crit is not None and crit.kink_wins:
        return (head + f" The kink beats the smooth law ({_kink_against_smooth(c, kink_test)}): a "
                "critical depth is supported here.")
    smooth_better = c.kink.aicc > c.smooth.aicc
    return (head + f" But the smooth {c.smooth.law.name} "
            + ("fits better than the kink" if smooth_better else "is not rejected by the kink")
            + f" ({_kink_against_smooth(c, kink_test)}): here the penalty is a smooth shape effect, "
            "not a critical depth.")


def _calibrated_section(r: ReportResults) -> list:
    if not r.calibrated:
        return []
    return ["## The design cells rechecked by bootstrap", "",
            "Davies' bound decides λ = 0 in the table above, and the rule calls cells with too few "
            "runs for the law's parameters uninformative. Every valid cell that rests on the bound, "
            "or that the rule sets aside, is rechecked here with the main section's parametric "
            "bootstraps (λ = 0; the kink against the best smooth shape law).", "",
            *[f"- {calibrated_reading(c)}" for c in r.calibrated], "",
            r.table("calibrated_cells").markdown(), ""]


# --- extrapolation, the paper's fit, every fit ---------------------------------------------------

def _paper_and_extrapolation(r: ReportResults) -> list:
    x = r.extrapolation
    ridges = [f"- {name}: the training runs do not determine {', '.join(params) or 'all parameters'}; "
              "the prediction is given as the range over the starts tied at the best objective, "
              "its error as a range, and no RMSE (n.i.)" for name, params in x.ridges.items()]
    return [*[f"- extrapolation with {name} not possible: {err}" for name, err in x.errors.items()],
            "## The paper's fit, refitted", "", r.table("paper_comparison").markdown(), "",
            "The paper's persistence exponent comes from per-layer gradient norms, which the "
            "bundled data lacks; the closest refittable quantity is p of `depth_delusion_power`.",
            "", "## Extrapolation from small to large runs", "", r.table("extrapolation").markdown(), "",
            "A dash: the law's prediction is not finite there (a degenerate fit), so no "
            "extrapolation error is given.", "", *ridges, *([""] if ridges else [])]


def _fits_section(r: ReportResults) -> list:
    s = r.settings
    md = ["## Fits", "", "status: ok, at_bound (the optimum is on the physical bound) or "
          "not_identified (n.i.: a ridge of equally good fits, an open-ended profile interval, "
          "a drifted estimate, or without a profile an infinite or undefined standard error or "
          "an open Jacobian interval; a strong correlation "
          "with another parameter alone is not one): "
          "no point estimate is given unless ok. "
          + (f"Bootstrap intervals are percentiles of {s.bootstrap} refits, printed to 2 digits "
             "(their Monte Carlo error). " if s.bootstrap else "") +
          f"`depthdelusion fit {s.label} --law NAME` prints a law's full summary. Numerical notes "
          "(refits left out at the iteration cap; where a profile goes flat or jumps) are in "
          "`numerics.md`: which refits stall, and where on a flat direction, depends on the CPU's "
          "floating point as much as on the data.", "",
          r.table("parameters").markdown(), ""]
    for name, f in r.fits.items():
        md += [f"### {name}: flags and notes", ""] + [f"- ! {x}" for x in f.flags] + \
              [f"- {x}" for x in f.notes if not is_numerical_note(x)] + [""]
    return md


def numerics_markdown(r: ReportResults) -> str:
    """numerics.md: per fit, the bootstrap refits left out and the profiles' shape notes."""
    md = ["# Numerical notes", "", "Which refits stop at the iteration cap, and where a profile on a "
          "flat direction is found to go flat or jump, depend on the CPU's floating point (FMA, "
          "vector width, BLAS kernels) as much as on the data: these notes differ between "
          "machines, unlike report.md. An open interval end (∞) in report.md is where a profile "
          "never crossed its cut, or crossed it only by a jump (refits losing the fit: no "
          "likelihood limit).", ""]
    for name, f in r.fits.items():
        notes = [rounded_note(x) for x in f.notes if is_numerical_note(x)]
        notes += [f"profile: {note}" for note in f.profile_notes]
        md += [f"## {name}", ""] + ([f"- {x}" for x in notes] or ["- none"]) + [""]
    return "\n".join(md)


def _consistency_section(r: ReportResults) -> list:
    """The parameter-count audit against the runs' own vocabulary (the paper's for its data)."""
    if not (r.raw.has("depth") and r.raw.has("width")):
        return ["## Consistency audit", "", "Not done: the table has no depth and width, so "
                "parameter counts cannot be recomputed from the shape.", ""]
    if r.raw.embeddings is not None:  # a published table's own rule, not the paper's conventions
        return ["## Parameter-count audit", "", "Not audited against the paper's conventions: this "
                f"table's counts are registered and fitted as published. {r.raw.embeddings.describe()} "
                "(`--params nonembedding` fits Kaplan's non-embedding N.)", ""]
    if r.audit is None:  # never an assumed vocabulary: the audit would blame the wrong rows
        return ["## Parameter-count audit", "", "Not audited: the table gives no vocabulary size "
                "(a vocab_size column, or --vocab V), which the embedding count needs.", ""]
    return ["## Consistency audit", "", r.table("consistency").markdown(), "", "```",
            r.audit.summary(), "```", ""]


# --- critical depth, published models and optimal shape ------------------------------------------

def _not_established(sh) -> str:
    """Why the kink law's fit does not establish a critical depth."""
    v, critical = sh.verdict, sh.critical
    penalty = sh.fit.law.shown(sh.fit.law.penalty)
    lam_profile = profile_ci(sh.fit, sh.fit.law.penalty)
    if v is None or v.answer == "not compared":
        return "its same-data-term baseline was not fitted"
    if v.answer == "uninformative":
        return v.reason
    if not v.significant:
        return f"{penalty} = 0 is not rejected by the calibrated test (LR = {v.lr:.2f}, {v.p_text()})"
    if critical is not None and critical.answer in ("not compared", "uninformative", "cannot tell"):
        return f"the kink was not tested against a smooth shape law ({critical.reason})"
    if critical is not None and not critical.kink_wins:
        return (f"the kink does not beat the best smooth shape law {critical.smooth} "
                + (f"({critical.test.p_text()})" if critical.test is not None else f"({critical.reason})"))
    if sh.blocked:
        return f"the kink's parameters are not determined ({sh.blocked})"
    return f"{penalty}'s profile-likelihood interval {interval(lam_profile)} reaches 0"


def _withheld_text(sh) -> list:
    if sh.withheld == NOT_ESTABLISHED:
        return [f"Not shown: the {sh.fit.law.name} fit does not establish a critical depth — "
                f"{_not_established(sh)}. Without a kink that the data require, "
                f"{sh.fit.law.critical_depth_formula()} is not determined, so the critical depths of published models (D/D_crit) and the "
                "optimal shape it would imply are not supported by this data.", ""]
    if sh.withheld == CANNOT_TELL:
        return [f"Not shown: {sh.verdict.reason}.", ""]
    if sh.withheld == UNFIT:  # D_crit and the shapes would carry an arbitrary value of these
        return ["Not shown: D_crit and the optimal shape depend on "
                + ", ".join(f"{p} ({st.replace('_', ' ')})" for p, st in sh.unfit.items())
                + ", so any number for them would be arbitrary.", ""]
    return []


#: published tables whose own shapes the public-shapes study audits against the paper's D_crit
PUBLIC_SHAPES_TABLES = ("gemstones", "gemstones_cooldown", "gemstones_lr_half")


def published_table_line(label: str) -> list:
    """The audit's line for runs given as a published table by name (``--table NAME``, whose
    label is "published table NAME[=PATH]"); none for a file of runs."""
    if not label.startswith("published table "):
        return []
    name = label.removeprefix("published table ").partition("=")[0]
    line = (f"The runs are the published table `{name}` (`depthdelusion tables` gives its provenance); "
            "this section's audit is of published LLMs, not of the table's own shapes")
    if name in PUBLIC_SHAPES_TABLES:
        line += (" — the paper's audit of these shapes themselves (D / D_crit against each shape's excess "
                 "loss), whole runs resampled, is the public-shapes study (`depthdelusion public-shapes`, "
                 "analysis/public_shapes/): there whether the shapes past the paper's D_crit lose depends on the "
                 "parameter count (they do not on total N; on Kaplan's non-embedding N the deepest, narrowest do)")
    return [line + ".", ""]


def _shape_section(r: ReportResults) -> list:
    """D_crit, the LLM audit and the optimal shape, in the runs' own parameter and compute
    units — or why they are not shown."""
    sh = r.shape
    if sh is None:
        return []
    md = (["## Critical depth, published models and optimal shape", ""] + _withheld_text(sh)
          + published_table_line(r.settings.label))
    if sh.audit is None:
        return md
    md += [r.table("llm_audit").markdown(), ""]
    if sh.withheld == NO_VOCAB:
        return md + ["Optimal shape not shown: the runs do not state one vocabulary size, which the "
                     "parameter count N(D, W) needs.", ""]
    if sh.withheld == FITTED_COUNT:
        return md + ["Optimal shape not shown: under --params fitted the law's N is N_nonemb + ε·N_emb, "
                     "which the trainer's count N(D, W) does not give; `depthdelusion shape --params "
                     "fitted` answers with ε fitted.", ""]
    if not sh.token_term:
        md += ["Fixed-compute optimum not shown: the fit has no data term (token counts are "
               "constant within groups or unknown), so it cannot say how to trade parameters for "
               "tokens. A fixed-compute optimum would rest on a data term assumed from elsewhere "
               f"(the paper's W* ∝ C^{PAPER_SHAPE_EXPONENTS['width']} does); "
               "`shape.optimal_shape(fit, token_term=(B, β))` computes one on request.", ""]
    for shape in sh.optima:
        st = r.table(f"optimal_shape_{shape.constraint}")
        md += [f"### Optimal shape at fixed {shape_unit(shape.constraint)}", "", st.caption + ".", "",
               *[f"- {a}" for a in shape.assumptions], "", st.markdown(), ""]
    return md


# --- persistence ---------------------------------------------------------------------------------

def _persistence_cells(kind: str, cells: dict) -> list:
    """The study's rules on the report's runs: the rate per shape (t over seeds where a shape
    repeats), which cells a verdict may rest on, and the paper's implied ℓ(W) per width."""
    if not cells:
        return []
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


def _persistence_kind(p, kind: str) -> list:
    pfits = p.fits[kind]
    md = [f"- {kind} gradients: warning: {w}" for w in sorted({f.warning for f in pfits if f.warning})]
    counts = {s: sum(f.status == s for f in pfits) for s in ("decay", "flat", "growth")}
    if any(counts.values()):
        md += [f"- {kind} gradients: {counts['decay']} run(s) decay towards the input, "
               f"{counts['flat']} flat, {counts['growth']} grow towards the input."]
    md += _persistence_cells(kind, p.shapes.get(kind, {}))
    if kind in p.scaling:
        md += ["", "```", f"{kind} gradients: " + p.scaling[kind].summary(), "```", ""]
    elif pfits:
        md += [f"- {kind} gradients: ℓ(W) not fitted: {p.scaling_errors[kind]}", ""]
    return md


def _persistence_section(r: ReportResults) -> list:
    p = r.persistence
    if not p.measured:
        return ["## Gradient persistence length", "",
                "The data has no per-layer gradient norms, so ℓ cannot be estimated here "
                f"(the paper reports ℓ ∝ W^{PAPER_PERSISTENCE_EXPONENT}, "
                f"power-law R² {PAPER_PERSISTENCE_R2['power']} vs "
                f"log-form R² {PAPER_PERSISTENCE_R2['log']}).", ""]
    lo, hi = p.window
    md = ["## Gradient persistence length", "",
          f"Windowed protocol (`docs/persistence.md`): for each run, ln g_l averaged over the "
          f"logged steps in [{lo}, {hi}] (requested step {p.step}, window ±{DEFAULT_WINDOW:.0%}), "
          "then ln ḡ_l = b − rate·(D − l) over blocks 1 … D−1 (the bottom block, which reads "
          "the embedding stream, is left out of the fit); rate = 1/ℓ > 0 is the paper's decay "
          "towards the input, rate < 0 is growth towards the input (reported, not dropped). "
          "95% CI per run: moving-block bootstrap over the window's steps (the t-interval of "
          "the slope with fewer than 3); per shape with several seeds: t over the seeds' rates. "
          "ℓ(W) is fitted to the rates of all runs.", ""] + ([p.note, ""] if p.note else [])
    for kind in p.fits:
        md += _persistence_kind(p, kind)
    return md + [r.table("persistence").markdown(), ""]


# --- the whole report ----------------------------------------------------------------------------

SECTIONS = (_head, _penalty_section, _critical_section, _design_section, _calibrated_section,
            _paper_and_extrapolation,
            _fits_section, _consistency_section, _shape_section, _persistence_section)


def markdown(r: ReportResults) -> str:
    """report.md without its figure list (``report.write_report`` adds it)."""
    md = [line for section in SECTIONS for line in section(r)]
    md += list(r.studies)  # runs whose directories carry spectrum/tail.csv or readout.csv
    return "\n".join(md) + "\n"

