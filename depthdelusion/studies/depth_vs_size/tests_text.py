"""The depth-vs-size report's words for its tests (`report.sections` places them): the
pre-specified trend and ends tests with Holm, the depth and width series with their verdict, the
paper's critical depth with κ fixed, the depth-free law in both N conventions, the eval set and
what a seed draws; tests.csv. Formats what `study.measure` found; computes nothing it states."""
from __future__ import annotations

import math

from depthdelusion.analysis.formats.table_text import markdown_table
from depthdelusion.analysis.laws import papers_kappa
from depthdelusion.studies.common import laws
from depthdelusion.studies.depth_vs_size.study import DepthVsSizeResults, DepthVsSizeSpec, arms

ALPHA = 0.05
#: Kaplan et al. 2020 (§3.1, Fig. 5): loss changes by a few percent over FFN ratios 0.5–4 at fixed N
KAPLAN_FFN_RANGE = (0.5, 4.0)
KINDS = {"trend": "trend: d loss / d ln(D/W)", "ends": "ends: largest − smallest D/W (Welch)",
         "depth": "d loss / d ln D at width", "width": "d loss / d ln W at depth",
         "below_crit": "below D_crit: largest − smallest D/W (Welch)"}


def seed_draws(exp: DepthVsSizeSpec) -> str:
    """What one seed draws: a text corpus is fixed (its held-out batches with it); the built-in
    corpus is generated from the seed."""
    if (exp.base.get("data") or {}).get("path"):
        return "the init and the data order (the corpus and its held-out batches are the same at every seed)"
    return "the init, the data order and the built-in corpus with its held-out batches"


def tuning_text(exp: DepthVsSizeSpec) -> str:
    fixed = [i + 1 for i, level in enumerate(exp.resolved_levels) if level["sp_lrs"]]
    if len(fixed) == len(exp.resolved_levels):
        return "every lr fixed by the spec (`sp_lrs`): no lr grid ran."
    return (f"lr grids on tuning seed {exp.tuning_seed} only"
            + (f" (level(s) {fixed}: lrs fixed by the spec)." if fixed else "."))


def arm_text(exp: DepthVsSizeSpec, arm: str, text: str) -> str:
    if not all(level["sp_lrs"] for level in exp.resolved_levels):
        return text
    return {"SP": "SP, lr fixed per shape by the spec (`sp_lrs`)",
            "CompleteP": "CompleteP, the base shape's fixed lr transferred"}[arm]


def _batches(exp: DepthVsSizeSpec) -> tuple[int, int]:
    t, m = exp.base.get("train") or {}, exp.base.get("model") or {}
    return t["eval_batches"], t["eval_batches"] * t["batch_size"] * m["seq_len"]


def eval_set_text(exp: DepthVsSizeSpec) -> str:
    n, tokens = _batches(exp)
    return f"{n} held-out batches ({tokens:,} tokens), the same for every run at a seed"


def eval_set_lines(r: DepthVsSizeResults, wanted: int) -> list[str]:
    """Below `wanted` batches: whether the runs could be re-evaluated on more (their checkpoints)."""
    n, _ = _batches(r.spec)
    if n >= wanted:
        return []
    if r.checkpoints:
        return [f"Eval set: {n} batches, below the {wanted} every new run uses; {r.checkpoints} of {r.runs} runs "
                "keep their checkpoints and could be re-evaluated on more.", ""]
    return [f"Eval set: {n} batches, below the {wanted} every new run uses. Re-evaluating these runs on more "
            f"batches is not possible: none of the {r.runs} runs in `{r.runs_dir}` keeps its checkpoints "
            "(a run directory holds its config, metrics and summary). The eval noise is part of the seed "
            "noise every interval here carries.", ""]


def unmatched_lines(exp: DepthVsSizeSpec, i: int) -> list[str]:
    level = exp.resolved_levels[i]
    return [f"- {u['width']}×{u['depth']} is not in the level: even with F = 1 its non-embedding N is "
            f"{u['params']:,}, {100 * u['off']:+.1f}% from the level's median (match_tolerance "
            f"{exp.match_tolerance:g}); N grows with F, so no FFN width matches it." for u in level["unmatched"]] \
        + ([""] if level["unmatched"] else [])


def _ci(iv, digits: int = 4) -> str:
    return f"{iv.estimate:+.{digits}f} [{iv.lo:+.{digits}f}, {iv.hi:+.{digits}f}]"


def _p(p: float) -> str:
    return f"{p:.2g}"


def _shapes(t) -> str:
    return " − ".join(f"{w}×{d}" for w, d in t.shapes) if t.kind in ("ends", "below_crit", "to_base") \
        else ", ".join(f"{w}×{d}" for w, d in t.shapes)


def _lof(t) -> str:
    lof = t.slope.lack_of_fit if t.slope else None
    return "–" if lof is None else f"F({lof.df_lack}, {lof.df_pure}) = {lof.f:.2f}, p = {_p(lof.p)}"


def trend_lines(r: DepthVsSizeResults) -> list[str]:
    """The pre-specified family: per level and arm the trend in ln(D/W) and the ends contrast."""
    lines = ["## Pre-specified tests: the trend in ln(D/W) and the ends, Holm over the family", "",
             "Chosen before the data (issue 60), one family: per arm and level (complete cells only), (a) the "
             "OLS slope of the loss against ln(D/W) over every test seed of every cell with a fixed effect per "
             "seed (the study's seed centring; C·S − S − 1 dof for C cells and S seeds; Student-t 95% interval, "
             "two-sided p) and (b) the deepest-narrowest shape (largest D/W) minus the shallowest-widest "
             "(smallest D/W), Welch's 95% interval and p. Holm's step-down correction over every test of the "
             f"table (family-wise error {ALPHA:g}). Assumptions: seeds independent with one noise variance "
             "(Welch: per shape); (a) also a loss linear in ln(D/W) within a level. The last column checks "
             "that: the lack-of-fit F of the line against the cell-by-seed interaction. Where it is small the "
             "cell means bend away from the line, the slope is the average rise over the shapes tested, and "
             "its run-level interval, which counts the bend as noise on more dof than there are cells, is "
             "narrower than an interval over cell means would be.", ""]
    if not r.trends:
        return lines + ["No arm has two complete cells of different D/W at any level yet: nothing tested.", ""]
    rows = [[t.level, t.arm, KINDS[t.kind], _shapes(t) if t.kind == "ends" else _of_level(r.spec, t),
             _ci(t.interval), _p(t.p), _p(t.p_holm), "yes" if t.p_holm <= ALPHA else "no", _lof(t)] for t in r.trends]
    lines += [markdown_table(["level", "arm", "test", "shapes", "estimate [95%] (nats)", "p", "Holm p",
                              f"rejects 0 (Holm, {ALPHA:g})", "line's lack of fit"], rows), ""]
    held = sum(1 for t in r.trends if t.p_holm <= ALPHA)
    return lines + [f"{held} of {len(r.trends)} tests reject 0 after Holm (a positive estimate means the loss "
                    "rises with D/W: deeper and narrower is worse at fixed N and T).", ""]


def _of_level(exp: DepthVsSizeSpec, t) -> str:
    """'5 cells', or how many of the level's shapes a partial study's trend rests on."""
    planned = len(exp.resolved_levels[t.level - 1]["shapes"])
    return f"{len(t.shapes)} cells" + ("" if len(t.shapes) == planned else f" (partial: of {planned} shapes)")


def series_lines(r: DepthVsSizeResults) -> list[str]:
    """Per level with a depth or width series: the slopes (Holm within the level), the contrasts to
    the base shape, the verdict per arm and the FFN nuisance."""
    lines = []
    for level, found in r.series.items():
        if not found:
            continue
        base = r.spec.resolved_levels[level - 1]["completep_base"]
        lines += [f"## Level {level}: depth at fixed width and width at fixed depth", "",
                  "Each series holds one dimension: loss against ln D at one width, against ln W at one depth; "
                  "the slope as in the trend test (seed fixed effects, Student-t 95%), Holm over the level's "
                  f"series (both arms). Contrasts to the base shape {base[0]}×{base[1]}: Welch's 95% interval, "
                  "uncorrected (description). A rise with depth at fixed width is a positive depth slope; a rise "
                  "with narrowness at fixed depth is a negative width slope.", ""]
        rows = [[s.test.arm, f"{KINDS[s.test.kind]} {s.fixed}", _series_cells(r.spec, level, s), _ci(s.test.interval),
                 _p(s.test.p), _p(s.test.p_holm), "; ".join(f"{_shapes(t)}: {_ci(t.interval)}" for t in s.to_base) or "–"]
                for s in found]
        lines += [markdown_table(["arm", "series", "cells", "slope [95%] (nats per e-fold)", "p", "Holm p",
                                  "this − base [Welch 95%]"], rows), ""]
        lines += [f"- {arm}: {verdict(found, arm, _partial_series(r.spec, level, found, arm))}"
                  for arm, _, _ in arms(r.spec)] + [""]
        lines += ffn_lines(r.spec, level, found)
    return lines


def _series_count(exp: DepthVsSizeSpec, level: int, series) -> tuple[int, int]:
    """(complete shapes, the level's shapes along the series)."""
    held = "width" if series.test.kind == "depth" else "depth"
    planned = sum(1 for x in exp.resolved_levels[level - 1]["shapes"] if x[held] == series.fixed)
    return len(series.test.shapes), planned


def _partial_series(exp: DepthVsSizeSpec, level: int, found, arm: str) -> list[str]:
    """The arm's series that hold fewer complete shapes than the level plans, as the verdict says them."""
    return [f"{KINDS[x.test.kind]} {x.fixed} has {got} of {planned} shapes" for x in found if x.test.arm == arm
            for got, planned in [_series_count(exp, level, x)] if got < planned]


def _series_cells(exp: DepthVsSizeSpec, level: int, series) -> str:
    """The series' complete cells, and how many of the level's shapes it holds when not all are
    complete (a partial series)."""
    got, planned = _series_count(exp, level, series)
    return _shapes(series.test) + ("" if got == planned else f" (partial: {got} of {planned} shapes complete)")


def _direction(p_holm: float, rise: float) -> int:
    """+1: the loss rises beyond the seed noise after Holm; -1: it falls beyond it; 0: neither."""
    return 0 if p_holm > ALPHA else (1 if rise > 0 else -1)


def verdict(found, arm: str, partial: list[str] = ()) -> str:
    """Which of depth and narrowness carries the rise, from the Holm-corrected series slopes;
    ``partial``: the series not yet complete, said first (a verdict on them may change)."""
    mine = [s for s in found if s.test.arm == arm]
    depth = [s for s in mine if s.test.kind == "depth"]
    width = [s for s in mine if s.test.kind == "width"]
    if not depth or not width:
        return "the level has not both a depth and a width series complete: no verdict yet."
    d, w = depth[0].test, width[0].test
    # a significant slope either way is said: a loss that falls with depth at fixed width is a
    # finding too, not "no rise"
    deep = _direction(d.p_holm, d.interval.estimate)
    narrow = _direction(w.p_holm, -w.interval.estimate)
    facts = (f"depth at width {depth[0].fixed}: {_ci(d.interval)} nats per e-fold of D (Holm p {_p(d.p_holm)}); "
             f"width at depth {width[0].fixed}: {_ci(w.interval)} nats per e-fold of W (Holm p {_p(w.p_holm)}); "
             f"per e-fold of D/W, the trend's scale: {d.interval.estimate:+.4f} along depth, "
             f"{-w.interval.estimate:+.4f} along narrowness")
    not_deep = {0: "depth at fixed width does not beyond the seed noise",
                -1: f"depth at fixed width lowers the loss beyond the seed noise (deeper is better at width {depth[0].fixed})"}
    not_narrow = {0: "narrowness at fixed depth does not beyond the seed noise",
                  -1: f"narrowness at fixed depth lowers the loss beyond the seed noise (narrower is better at depth {width[0].fixed})"}
    if deep == 1 and narrow == 1:
        head = "both depth and narrowness carry the rise"
    elif deep == 1:
        head = f"depth carries the rise; {not_narrow[narrow]}"
    elif narrow == 1:
        head = f"narrowness carries the rise; {not_deep[deep]}"
    else:
        falls = [text[-1] for text, way in ((not_deep, deep), (not_narrow, narrow)) if way == -1]
        head = ("neither series rises beyond the seed noise after Holm"
                + (f"; {'; '.join(falls)}" if falls else
                   ": the runs do not say which of depth and narrowness carries the rise"))
    if partial:
        return (f"PARTIAL ({'; '.join(partial)}): so far, {head} ({facts}); the verdict may change when "
                "the series are complete.")
    return f"{head[0].upper()}{head[1:]} ({facts})."  # not str.capitalize: it lowers "Holm"


def ffn_lines(exp: DepthVsSizeSpec, level: int, found) -> list[str]:
    """The FFN ratio F/W of every series shape: the nuisance the series do not separate."""
    shapes = {(s["width"], s["depth"]): s for s in exp.resolved_levels[level - 1]["shapes"]}
    used = sorted({wd for s in found for wd in s.test.shapes}, key=lambda wd: (wd[0], wd[1]))
    ratios = {wd: shapes[wd].get("ffn", 4 * wd[0]) / wd[0] for wd in used}
    outside = [wd for wd, q in ratios.items() if not KAPLAN_FFN_RANGE[0] <= q <= KAPLAN_FFN_RANGE[1]]
    listed = ", ".join(f"{w}×{d} F/W = {q:.3g}" for (w, d), q in ratios.items())
    return [f"Nuisance not separated: N is held by the FFN width F, so F/W varies along the series ({listed}). "
            "Kaplan et al. (2020) found the loss changes by a few percent over F/W = "
            f"{KAPLAN_FFN_RANGE[0]:g}–{KAPLAN_FFN_RANGE[1]:g} at fixed N; "
            + (f"{', '.join(f'{w}×{d}' for w, d in outside)} lie(s) outside that range, where it was not measured. "
               if outside else "")
            + "No run here varies F alone at fixed width and depth, so the FFN ratio's share of a slope is not "
              "bounded from these runs: the series slopes are of depth (or width) together with F/W.", ""]


def kappa_lines(r: DepthVsSizeResults, kappa: float) -> list[str]:
    """The paper's critical depth D_crit = κ·ln W with κ fixed: λ = 0 per arm, and the shapes below
    D_crit compared (Holm over arms and levels)."""
    kinks = [(a.laws.arm, a.laws.fits[laws.KINK]) for a in r.laws if a.laws.fits]
    free = [f"{arm} {f.params[papers_kappa(f.law)]:.2g}" for arm, f in kinks if papers_kappa(f.law) in f.params]
    lines = [f"## The paper's critical depth with κ = {kappa:g} fixed", "",
             f"The kink law with D_crit = {kappa:g}·ln W (the paper's κ, not fitted"
             + (f"; the free fits above put κ at {', '.join(free)}, and a κ whose D_crit lies below every depth "
                "tested turns the kink-vs-smooth test into a line against a bowl" if free else "")
             + "), fitted to the same seed-centred rows; λ = 0 tested by the same parametric bootstrap from the depth-free fit (γ is "
             "unidentified under the null). It says two things: depth beyond D_crit costs (λ > 0), and depth "
             "below D_crit is free. The second is tested directly: per arm and level, among the shapes "
             "with D < D_crit(W), the one of largest D/W minus the one of smallest (Welch 95%), which the "
             "law predicts equal up to their N (matched within the level's tolerance); Holm over arms and "
             "levels.", ""]
    for a in r.laws:
        if a.kappa_verdict is not None:
            lines += [f"- {a.laws.arm}, λ = 0: {a.kappa_verdict.sentence()}"]
    lines += [""] if any(a.kappa_verdict is not None for a in r.laws) else []
    if not r.below_crit:
        return lines + ["No level has two complete cells of different D/W below D_crit.", ""]
    rows = [[t.level, t.arm, _shapes(t), _ci(t.interval), _p(t.p), _p(t.p_holm),
             "rejected" if t.p_holm <= ALPHA else "not rejected"] for t in r.below_crit]
    return lines + [markdown_table(["level", "arm", "below D_crit: this − that", "difference [Welch 95%]", "p",
                                   "Holm p", "'depth is free below D_crit'"], rows), ""]


def depth_free_lines(r: DepthVsSizeResults) -> list[str]:
    """The depth-free law in non-embedding and in total N, each against the seed noise."""
    lines = ["## The depth-free law in non-embedding and in total N", "",
             "E + A·N^−α (`kaplan`) fitted to the seed-centred rows with N = non-embedding parameters (the "
             "study's matched quantity) and with N = total parameters (embeddings and unembedding included; "
             "not matched: a narrow shape spends less on them). Lack-of-fit F: the law's misfit of the cell "
             "means against the cell-by-seed interaction (the seed noise; (C − 1)(S − 1) dof per level). A small "
             "p: the shapes differ beyond what N explains in that convention.", ""]
    rows = [[a.laws.arm, d.convention, f"{d.fit.rmse:.4f}",
             f"F({d.lack_of_fit.df_lack}, {d.lack_of_fit.df_pure}) = {d.lack_of_fit.f:.2f}", _p(d.lack_of_fit.p)]
            for a in r.laws for d in a.depth_free]
    if not rows:
        return lines + ["Too few complete cells to fit.", ""]
    shares = [1 - s["params"] / s["params_total"] for level in r.spec.resolved_levels for s in level["shapes"]]
    spans = [max(s["params_total"] for s in lv["shapes"]) / min(s["params_total"] for s in lv["shapes"])
             for lv in r.spec.resolved_levels]
    return lines + [markdown_table(["arm", "N", "RMSE", "lack of fit", "p"], rows), "",
                    f"Embedding share of total N over the shapes: {100 * min(shares):.0f}–{100 * max(shares):.0f}%; "
                    f"total N spans up to ×{max(spans):.2f} within a level.", ""]


def test_rows(r: DepthVsSizeResults) -> list[dict]:
    """tests.csv: every test of the report (trend family, series with their base contrasts, below D_crit)."""
    tests = list(r.trends) + [t for found in r.series.values() for s in found for t in (s.test, *s.to_base)] \
        + list(r.below_crit)
    return [{"level": t.level, "arm": t.arm, "test": t.kind, "shapes": _shapes(t).replace(",", ""),
             "estimate": f"{t.interval.estimate:.4f}", "ci95_lo": f"{t.interval.lo:.4f}",
             "ci95_hi": f"{t.interval.hi:.4f}", "dof": f"{t.interval.df:.3g}", "p": _p(t.p),
             "p_holm": "" if math.isnan(t.p_holm) else _p(t.p_holm)} for t in tests]
