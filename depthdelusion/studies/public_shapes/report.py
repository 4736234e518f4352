"""The public-shapes study's report and command: `sections` renders what
`results.measure` found (report.md, or report_partial.md without the core),
`write_report` writes it with the CSVs and figures of the parts run, all from the same results;
`run_command` is `depthdelusion public-shapes` (the parser is ``depthdelusion.cli``): its flags
become a `PublicShapesSpec` through the study specs' field checks. Nothing here computes a
number the report states; it formats them."""
from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import numpy as np

from depthdelusion import rundir
from depthdelusion.analysis.formats.table_text import csv_text, markdown_table
from depthdelusion.analysis.laws import get_law
from depthdelusion.analysis.reference import PAPER_KAPPA
from depthdelusion.option_fields import command_words
from depthdelusion.studies.public_shapes import chinchilla, figures, fitting_loss, loss_verdicts, nested, optimal
from depthdelusion.studies.public_shapes import prediction, study
from depthdelusion.studies.public_shapes import gadre
from depthdelusion.studies.public_shapes import sections as more
from depthdelusion.studies.public_shapes.answers import lr_flips, sign_flips
from depthdelusion.studies.public_shapes.options import PublicShapesOptions
from depthdelusion.studies.public_shapes.results import PublicShapesResults, measure

COMMAND = ("depthdelusion", "public-shapes", "--out", "analysis/public_shapes")
NOISE_PART_CSV = "noise_model_cooldown.csv"
#: why the noise model means the same on the cooldown table (part "noise")
NOISE_PART_NOTE = (
    "The cooldown table's checkpoints of one shape are separate cool-downs (linear to 0 over 10% of "
    "the tokens), each branched from the same hot run at its budget: they share the run's "
    "initialisation, data order and prefix, so a shape's checkpoints are one run's series in tokens, "
    "as on the hot table, and an N × T interaction in the token term asks the same question of them. "
    "The columns ρ and 'slope vs ln N' below are measured on this table.")


def command(spec: study.PublicShapesSpec) -> str:
    """The command that runs ``spec``: its options that are not the defaults, as declared."""
    options = PublicShapesOptions(
        bootstrap=spec.bootstrap, replicates=spec.replicates, seed=spec.seed, tables=",".join(spec.tables),
        conventions=",".join(spec.conventions), laws=None if list(spec.laws) == list(study.LAWS) else ",".join(spec.laws),
        no_lr_interaction=not spec.lr_interaction, parts=",".join(spec.parts),
        workers=spec.workers)
    return shlex.join([*COMMAND, *command_words(options)])


def _csv(path: Path, rows: list[dict]) -> None:
    path.write_text(csv_text(list(rows[0]), rows) if rows else "")


def _critical_rows(crit) -> list[dict]:
    return [{"arm": c.arm, "width": int(w), "d_crit": round(d, 1), "ci95_low": round(lo, 1),
             "ci95_high": round(hi, 1), "p": round(c.p, 3), "p_status": c.p_status,
             "checkpoints_past_d_crit": c.past, "rows": c.rows}
            for c in crit for (w, d, (lo, hi)) in c.widths]


def _interaction_rows(inter) -> list[dict]:
    return [{"n_convention": i.convention, "law": i.law, "parameter": i.parameter, "published_lr": round(i.hot, 4),
             "half_lr": round(i.half, 4), "diff_ci95_low": round(i.diff_ci[0], 4),
             "diff_ci95_high": round(i.diff_ci[1], 4), "p_two_sided": round(i.p, 3),
             "bootstrap_draws": i.draws, "paired": i.paired, "shapes": i.shapes} for i in inter]


def _audit_rows(audits) -> list[dict]:
    return [{"table": a.table, "n_convention": a.convention, "shape": r.shape, "depth": r.depth,
             "width": r.width, "params_mean": int(r.params), "d_over_d_crit_paper": round(r.ratio, 2),
             "excess_loss_vs_chinchilla": round(r.excess, 4)}
            for a in audits for r in a.rows]


AUDIT_TICKS = (0.2, 0.5, 1, 2, 5)
#: a depth label's font size (points) and its box per character and in height, in font sizes
#: (DejaVu Sans digits are 0.64 wide; the box holds the descent)
LABEL_POINTS = 6
LABEL_WIDTH, LABEL_HEIGHT = 0.65, 1.2
#: where a label may sit from its point (points), tried in turn: right, below right, left, ...
_OFFSETS = ((3, 2), (3, -8), (-3, 2), (-3, -8), (3, 9), (3, -15), (-3, 9), (-3, -15), (8, -3), (-8, -3))


def label_offsets(points, xlim, ylim, panel) -> list[tuple]:
    """An offset (points) per (x, y, text) label that overlaps no label placed before it and no
    other point's marker, where one of ``_OFFSETS`` does (else the least overlapping): x on a log
    axis over ``xlim``, y linear over ``ylim``, in a plotting area of ``panel`` points. Labels
    are placed left to right, so the same points always get the same offsets."""
    (x0, x1), (y0, y1), (pw, ph) = np.log(xlim), ylim, panel

    def at(x, y):  # a point's position in the panel (points)
        return (np.log(x) - x0) / (x1 - x0) * pw, (y - y0) / (y1 - y0) * ph

    where = [at(x, y) for x, y, _ in points]
    markers = [(px - 3.5, py - 3.5, px + 3.5, py + 3.5) for px, py in where]  # a 6-point marker and a margin
    placed, out = [], [None] * len(points)
    height = LABEL_HEIGHT * LABEL_POINTS
    for i in sorted(range(len(points)), key=lambda i: (where[i][0], where[i][1])):
        (px, py), width = where[i], LABEL_WIDTH * LABEL_POINTS * len(points[i][2])
        boxes = [(px + dx - (width if dx < 0 else 0), py + dy, px + dx + (0 if dx < 0 else width), py + dy + height)
                 for dx, dy in _OFFSETS]
        others = placed + [m for j, m in enumerate(markers) if j != i]
        cost = [sum(_overlap(b, o) for o in others) for b in boxes]
        k = int(np.argmin(cost))  # the first offset that overlaps nothing, else the least overlap
        placed.append(boxes[k])
        dx, dy = _OFFSETS[k]
        out[i] = (dx - (width if dx < 0 else 0), dy)
    return out


def _overlap(a, b) -> float:
    """The area two boxes (x0, y0, x1, y1) share."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _figure(out: Path, audits) -> None:
    """audit.png (:func:`audit_figure`)."""
    import matplotlib.pyplot as plt

    fig = audit_figure(audits)
    fig.savefig(out / "audit.png", dpi=120)
    plt.close(fig)


def audit_figure(audits):
    """Each shape's excess loss over chinchilla against the paper's D / D_crit, one panel per N
    convention of the first table, its depth labels placed apart in each panel's laid-out area."""
    # here, not at the top: only a run that draws pays matplotlib's import (4 s measured), after Agg is chosen
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [a for a in audits if a.table == audits[0].table]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.4), squeeze=False, sharey=True)
    for ax, a in zip(axes[0], panels):
        _audit_panel(ax, a, plt)
    axes[0][0].set_ylabel("excess loss over chinchilla (nats, mean of checkpoints)")
    axes[0][-1].legend(fontsize=6, ncol=2)
    fig.suptitle(f"{panels[0].table}: which shapes lose? (labels: depth; D_crit = {PAPER_KAPPA}·ln W, "
                 "the paper's)", fontsize=9)
    fig.tight_layout()
    for ax, a in zip(axes[0], panels):  # after the layout: the labels need the panel's final size
        box = ax.get_window_extent()
        panel = (box.width * 72 / fig.dpi, box.height * 72 / fig.dpi)
        for r, offset in zip(a.rows, label_offsets([(r.ratio, r.excess, str(r.depth)) for r in a.rows],
                                                    ax.get_xlim(), ax.get_ylim(), panel)):
            ax.annotate(str(r.depth), (r.ratio, r.excess), fontsize=LABEL_POINTS, xytext=offset,
                        textcoords="offset points")
    return fig


def _audit_panel(ax, a, plt) -> None:
    rows = a.rows
    widths = sorted({r.width for r in rows})
    for w, c in zip(widths, plt.cm.viridis(np.linspace(0, 0.9, len(widths)))):
        pts = [r for r in rows if r.width == w]
        ax.scatter([r.ratio for r in pts], [r.excess for r in pts], color=c, label=f"W = {w}")
    ax.axvline(1.0, color="grey", ls="--", lw=1)
    ax.axhline(0.0, color="grey", lw=0.5)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(plt.FixedLocator(AUDIT_TICKS))
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlabel("D / D_crit(W) (log scale)", fontsize=8)
    ax.set_title(f"{a.convention} N: deep − rest {a.text()}", fontsize=8)


def run_command(*, out: str, options: PublicShapesOptions = PublicShapesOptions()) -> int:
    """`depthdelusion public-shapes`: the spec from the options, measured, then written."""
    flags = dataclasses.asdict(options)
    flags["lr_interaction"] = not flags.pop("no_lr_interaction")
    spec = study.spec_from_flags(**flags)
    out_dir = rundir.as_path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = write_report(measure(spec), out_dir)
    print(path.read_text())
    print(f"report written to {path}")
    return 0


def write_report(r: PublicShapesResults, out_dir: Path) -> Path:
    """report.md (report_partial.md without the core), the CSVs and figures of the parts run,
    all from ``r``; the report's path."""
    parts = r.spec.parts
    if "optimal" in parts:
        _csv(out_dir / "compute_optimal.csv", optimal.rows(list(r.optimal)))
    if "prediction" in parts:
        _csv(out_dir / "prediction.csv", prediction.prediction_rows(list(r.predictions)))
    if "gadre" in parts:
        _csv(out_dir / "gadre.csv", gadre.rows(r.gadre))
    if "figures" in parts:
        figures.draw(r.arms[0], out_dir, r.arms)
    if "chinchilla_shapes" in parts:
        _csv(out_dir / "chinchilla_shapes.csv", chinchilla.rows(r.chinchilla))
    if "later" in parts:
        _csv(out_dir / "later_budgets.csv", prediction.prediction_rows(list(r.later)))
    if "huber" in parts:
        _csv(out_dir / "fitting_loss_verdicts.csv", loss_verdicts.rows(r.loss_verdicts))
    if "noise" in parts:
        _csv(out_dir / NOISE_PART_CSV, nested.rows(list(r.noise_part)))
    if r.spec.core:
        _csv(out_dir / "laws.csv", study.parameter_rows(list(r.arms)))
        _csv(out_dir / "tests.csv", study.verdict_rows(list(r.arms)))
        _csv(out_dir / "critical_depth.csv", _critical_rows(r.critical))
        _csv(out_dir / "lr_interaction.csv", _interaction_rows(r.interaction))
        _csv(out_dir / "audit.csv", _audit_rows(r.audits))
        _csv(out_dir / "nested_kink.csv", nested.rows(list(r.nested)))
        _csv(out_dir / "noise_model.csv", nested.rows(_noise_kinks(r.nested, r.noise)))
        _csv(out_dir / "fitting_loss.csv", fitting_loss.rows(list(r.losses)))
        if r.audit_drawn:
            _figure(out_dir, r.audits)
    path = out_dir / ("report.md" if r.spec.core else "report_partial.md")
    path.write_text(sections(r))
    return path


def sections(r: PublicShapesResults) -> str:
    """report.md from ``r`` (report_partial.md's text when the core was not run)."""
    if not r.spec.core:
        return partial_text(r)
    spec = r.spec
    lines = [
        "# Public shapes: the critical-depth law on the Gemstones suite", "",
        *_first_paragraph(r),
        f"Reproduce: `{command(spec)}` (tables downloaded by name and cached; "
        "`DEPTHDELUSION_TABLES_URL` names a mirror, `DEPTHDELUSION_CACHE` the cache).", "",
        f"Settings: {spec.bootstrap} cluster-bootstrap refits per law and arm (whole runs "
        f"resampled: a shape's checkpoints are one run), {spec.replicates} parametric-bootstrap "
        f"replicates per test (with a per-run random effect), seed {spec.seed}; wall time "
        f"{r.wall_s:.0f} s on this machine. Fits: least squares on the loss. "
        f"FLOP convention: {study.FLOP_CONVENTION}.", "",
        *_convention_lines(r.arms)]
    lines += _fit_section(r.arms) + _test_section(r.arms) + _nested_section(r.nested)
    lines += _noise_section(r.nested, r.noise) + _critical_section(r.critical)
    lines += _interaction_section(r.interaction) + _lr_penalty_lines(r.lr_penalty)
    lines += _audit_section(r.audits, _audit_caption(r)) + _loss_section(r.losses) + _more_sections(r)
    return "\n".join(lines) + "\n"


def _first_paragraph(r: PublicShapesResults) -> list[str]:
    """The verdict that depends on the parameter count, first: where the deep-minus-rest
    contrast of the audit changes sign between N conventions (or that it does not)."""
    flips = sign_flips(r.audits) + sign_flips([c.contrast for c in getattr(r, "chinchilla", ())])
    names = ", ".join(dict.fromkeys(a.convention for a in r.audits))
    lr = lr_flips(getattr(r, "interaction", ()))
    lr_line = _penalty_flips(r) + ([f"The learning-rate shift of the shape parameters also changes sign with the count "
                f"(half − published, 95% paired cluster bootstrap): {' | '.join(lr)}.", ""] if lr else [])
    if not flips:
        return [f"**The parameter count does not change the audit's sign** (conventions {names}): "
                + "; ".join(f"{a.arm} {a.text()}" for a in r.audits) + ".", ""] + lr_line
    return ["**The sign of the shape effect depends on the parameter count.** The audit's contrast "
            "(mean excess loss over chinchilla of the shapes past the paper's D_crit minus the rest, "
            "nats, 95% bootstrap over shapes) under each N convention — " + " | ".join(flips)
            + ". Total N counts both untied 50,304×W vocabulary matrices as capacity (ε = 1), Kaplan's "
            "count neither (ε = 0): which shapes 'lose' at matched N is decided by that choice as much "
            "as by the shapes. Every verdict below is given per convention.", ""] + lr_line


def _penalty_flips(r) -> list[str]:
    """A line per table where "λ = 0 against chinchilla" is rejected under one N convention and
    not under another (any kink law): where the rejecting kink lies (its reach, κ's interval) and
    what the nested test (the kink inside gemstones_width_depth, the one that can show a kink over a
    smooth shape effect) finds on that table."""
    out = []
    arms = getattr(r, "arms", ())
    detects = {k.arm: k.rejects for k in getattr(r, "nested", ()) if k.null == nested.SMOOTH.name}
    for table in dict.fromkeys(a.table for a in arms):
        mine = [a for a in arms if a.table == table]
        found = {a.convention: [v for v in a.penalties if v.test is not None] for a in mine}
        said = {c: any(v.significant for v in vs) for c, vs in found.items() if vs}
        if len(set(said.values())) > 1:
            yes = [a for a in mine if said.get(a.convention)]
            where = "; ".join(_rejecting_kink(a) for a in yes)
            seen = [a.convention for a in mine if detects.get(a.label)]
            nested_text = ("a kink is detected under " + ", ".join(seen) + " N only" if seen else
                           "a kink is detected under no count") if detects else "not run"
            out += [f"The kink's λ = 0 against chinchilla (calibrated parametric bootstrap) is rejected on "
                    f"{table} under {', '.join(a.convention for a in yes)} N and not under "
                    f"{', '.join(c for c, y in said.items() if not y)} N, by no critical depth of the paper's "
                    f"kind ({where}). Nested inside {nested.SMOOTH.name} (whole runs' residual series "
                    f"resampled; below), {nested_text}"
                    + ("" if set(seen) & {a.convention for a in yes} or not detects else
                       ": not where λ = 0 is rejected") + ".", ""]
    return out


def _rejecting_kink(arm) -> str:
    """Where the first kink law that rejects λ = 0 on ``arm`` puts D_crit: its reach (every row
    past it: no threshold, a penalty on every row, with the width exponent γ that says how fast
    it falls with width) and, with a threshold inside the data, the cluster-bootstrap interval of
    its kink parameter. γ to 2 digits: its interval spans a factor of 30."""
    v = next(v for v in arm.penalties if v.significant)
    kink, reach, fit = get_law(v.law).kink, v.reach, arm.fits[v.law]
    if not reach.threshold_inside:
        text = f"{arm.convention} N, {v.law}: {reach.location}, every row past it: no threshold, a penalty on every row"
        if "gamma" not in fit.params:
            return text
        lo, hi = (fit.ci_bootstrap or {}).get("gamma", (np.nan, np.nan))
        return text + f" falling with width as W^−γ, γ = {fit.params['gamma']:.2g} [{lo:.2g}, {hi:.2g}]"
    lo, hi = (fit.ci_bootstrap or {}).get(kink, (np.nan, np.nan))
    return (f"{arm.convention} N, {v.law}: {reach.location}, {reach.past_rows} of {reach.n_rows} rows past it, "
            f"{get_law(v.law).shown(kink)}'s 95% interval [{lo:.3g}, {hi:.3g}]")


def _convention_lines(arms) -> list[str]:
    """The N convention of every arm in words (ε with its profile interval where it is fitted)."""
    seen, out = set(), ["N conventions (N = N_nonemb + ε·N_emb, N_emb = 2·50,304·W: Gemstones unties "
                        "its input embedding and LM head):", ""]
    for arm in arms:
        key = (arm.table, arm.convention)
        if key not in seen:
            seen.add(key)
            out.append(f"- {arm.label}: {arm.convention_text}"
                       + (f". {arm.weight.sentence()}" if arm.weight is not None else ""))
    return out + [""]


def _audit_caption(r: PublicShapesResults) -> str:
    return ("audit.png: each shape's excess loss over chinchilla against the paper's D / D_crit" if r.audit_drawn
            else "audit.png not drawn: matplotlib is not installed")


def _more_sections(r: PublicShapesResults) -> list[str]:
    """The report's lines for the parts beyond the core that were run."""
    lines, parts = [], r.spec.parts
    if "optimal" in parts:
        lines += more.optimal_section(optimal.rows(list(r.optimal)),
                                      r.optimal[0].result.assumptions if r.optimal else [])
    if "prediction" in parts:
        lines += more.prediction_section(prediction.prediction_rows(list(r.predictions)))
    if "gadre" in parts:
        lines += gadre.section(r.gadre)
    if "later" in parts:
        lines += more.later_section(prediction.prediction_rows(list(r.later)))
    if "chinchilla_shapes" in parts:
        lines += chinchilla.section(r.chinchilla)
    if "huber" in parts:
        lines += loss_verdicts.section(r.loss_verdicts, replicates=r.spec.replicates, bootstrap=r.spec.bootstrap)
    if "noise" in parts:
        lines += _noise_section((), r.noise_part, NOISE_PART_CSV, NOISE_PART_NOTE)
    if "figures" in parts:
        lines += more.figures_section(figures.captions(r.figures))
    return lines


def partial_text(r: PublicShapesResults) -> str:
    """report_partial.md: the parts run without the core, labelled as such."""
    parts = r.spec.parts
    return "\n".join([
        "# Public shapes: PARTIAL RESULT — the parts " + ", ".join(parts) + " only", "",
        f"Reproduce: `{command(r.spec)}`. The core (laws, calibrated tests, "
        "4.1, 4.3, 4.4) was not rerun: report.md and its CSVs are from a separate run of the core (its "
        "README's Status says when) and are "
        "not changed by this one.", "",
        f"Settings: {r.spec.bootstrap} cluster-bootstrap refits per shape law and arm (whole runs "
        f"resampled), seed {r.spec.seed}; wall time {r.wall_s:.0f} s on this machine. "
        f"FLOP convention: {study.FLOP_CONVENTION}.", ""] + _more_sections(r)) + "\n"


def _fit_section(arms) -> list[str]:
    rows = []
    for arm in arms:
        best = min(f.aicc for f in arm.fits.values())
        for law, f in sorted(arm.fits.items(), key=lambda kv: kv[1].aicc):
            rows.append([arm.label, law, f.n, arm.n_shapes, f"{f.rss:.4g}", f"{f.aicc - best:+.1f}",
                         f"{np.sqrt(f.rss / f.n):.4f}", f.n_bootstrap])
    return ["## Laws per arm (ΔAICc from the arm's best; every parameter, status and interval in laws.csv)", "",
            markdown_table(["arm", "law", "rows", "runs", "RSS", "ΔAICc", "RMSE (nats)", "bootstrap kept"],
                           rows, "llrrrrrr"), ""]


def _test_section(arms) -> list[str]:
    out = ["## Calibrated tests (tests.csv)", ""]
    for arm in arms:
        out.append(f"**{arm.label}** ({arm.n_shapes} runs, {len(arm.runs)} checkpoints):")
        out.append("")
        for v in arm.penalties:
            out += [f"- λ = 0, {v.law}: {v.sentence()}", f"- kink vs smooth, {v.law}: {arm.critical[v.law].sentence()}"]
        out.append("")
    return out


def _nested_section(kinks) -> list[str]:
    if not kinks:
        return ["## The nested kink test: not run (--replicates 0)", ""]
    sizes = [f"{s:g}×" for s, _, _ in kinks[0].power]
    table = [[k.arm, f"{k.lr:.2f}", f"{k.p:.3f}", f"{k.critical:.2f}",
              f"λ {k.kink[0]:.3g}, κ {k.kink[1]:g}, γ {k.kink[2]:.2f}",
              *(f"{pw:.2f} ({pen:.3f})" for _, pen, pw in k.power)] for k in kinks]
    return ["## The nested kink test and its power (nested_kink.csv)", "",
            "The kink inside gemstones_width_depth: gemstones_width_depth + λ·max(0, D − κ·ln W)/(κ·ln W)·W^−γ "
            "(the relative form, λ ≥ 0, γ ∈ [0, 2], κ on a grid 1–6), against gemstones_width_depth "
            "alone: nested, so LR = n·ln(RSS_smooth / RSS_kink) ≥ 0 (the core's kink-vs-smooth LR above is "
            "non-nested and cannot show a kink). Null: the smooth fit plus whole runs' residual series "
            f"resampled ({kinks[0].replicates} draws; p = (1 + #{{LR* ≥ LR}}) / (1 + draws)). Power "
            f"({kinks[0].power_draws or kinks[0].replicates} draws per size): the "
            f"paper's kink (λ 0.18, κ {PAPER_KAPPA}, γ 0.35, relative form) added at each size to the same kind of "
            "draw, detected when LR exceeds the null's 95th percentile; in brackets the penalty it puts "
            f"on {kinks[0].worst_shape}, the shape it hits hardest (nats).", "",
            markdown_table(["arm", "LR", "p", "LR* 95%", "kink fitted"] + [f"power at {s} (penalty)" for s in sizes],
                           table, "lrrrl" + "r" * len(sizes)), "",
            *[f"- {k.arm}: λ = 0 " + ("rejected" if k.rejects else "not rejected")
              + f" (p = {k.p:.3f} ± {np.sqrt(k.p * (1 - k.p) / k.replicates):.3f}, Monte-Carlo error of "
              f"{k.replicates} draws); "
              f"{k.excluded()}." + (" The fitted γ is at its bound 0 (a penalty that does not shrink "
                                    "with width)." if k.kink[2] == 0 else "") for k in kinks],
            *_nested_agreement(kinks), ""]


def _noise_section(kinks, noise, csv: str = "noise_model.csv", note: str = "") -> list[str]:
    """The noise model (issue 62 item 5): the residuals' structure under the additive and the
    interacting token term, and the nested tests redone with each (the kink-in-the-smooth-law
    test with its power curve under each); ``csv`` the file its rows are in, ``note`` a
    paragraph on the table's structure first."""
    if not noise:
        return []
    found = _noise_kinks(kinks, noise)
    sizes = [f"{s:g}×" for s, _, _ in next((k.power for k in found if k.power), ())]
    table = [[k.arm, k.null, f"{k.structure[0]:.2f}", f"{k.structure[1]:+.2f}", f"{k.structure[2]:.2f}",
              f"{k.lr:.2f}", f"{k.p:.3f}", f"λ {k.kink[0]:.3g}, κ {k.kink[1]:g}, γ {k.kink[2]:.2f}",
              *([f"{pw:.2f} ({pen:.3f})" for _, pen, pw in k.power] or ["—"] * len(sizes))] for k in found]
    rho, worth = [k.structure[0] for k in found], [k.structure[2] for k in found]
    powered = [k for k in found if k.power]
    return [f"## The noise model: autocorrelated runs and an N × T interaction ({csv})", "",
            *([note, ""] if note else []),
            "Residuals of each null law fitted to the data: ρ, the lag-1 autocorrelation within runs "
            "(consecutive checkpoints of one run, pooled); the correlation across runs of each run's "
            "residual slope in ln T with ln N; and what a run's checkpoints are worth in independent "
            "ones for its mean level, n²/Σᵢⱼ ρ^|i−j| (AR(1), n the checkpoints per run: never below 1 for "
            "ρ ≥ 0; under chinchilla, which has no shape term, ρ carries each run's shape effect too). The N × T "
            "interaction adds c·ln(N/N̄)·T^−β to the token term (c of either sign). Each row is a nested "
            "test of the paper's kink (relative form) inside that null law, calibrated by resampling "
            f"whole runs' residual series ({found[0].replicates} draws): inside gemstones_width_depth it "
            "is the kink-vs-smooth test, inside chinchilla the λ = 0 verdict. Power (inside "
            "gemstones_width_depth, with either token term; "
            f"{powered[0].power_draws if powered else 0} draws per size): the paper's kink added at each "
            "size to draws from that null's own fit and residual series, detected when LR exceeds that "
            "null's 95th percentile, as in the previous section; in brackets the penalty at "
            f"{found[0].worst_shape} (nats); — where only null draws were made.", "",
            markdown_table(["arm", "kink nested in", "ρ", "slope vs ln N", "worth (checkpoints)", "LR", "p",
                            "kink fitted"] + [f"power at {s} (penalty)" for s in sizes], table,
                           "llrrrrrl" + "r" * len(sizes)), "",
            *[f"- {k.arm}, {k.null}: {k.excluded()}." for k in powered], *([""] if powered else []),
            f"Consequence: with ρ from {min(rho):.2f} to {max(rho):.2f} a run's checkpoints carry "
            f"{min(worth):.2g}–{max(worth):.2g} checkpoints' worth of independent evidence on its level, so a test that draws checkpoints independently (the "
            "core's parametric bootstrap, even with its per-run effect) misstates the noise; the tests "
            "here keep each run's series whole. The interaction removes the N-dependence of the runs' "
            "slopes (the column 'slope vs ln N'), not the autocorrelation.", ""]


def _noise_kinks(kinks, noise) -> list:
    """The noise model's tests in the report's order: per arm the noise model was run on, the
    additive nested test (from ``kinks``) and then each of ``noise``'s nulls."""
    return [k for a in dict.fromkeys(k.arm for k in noise)
            for k in [k for k in kinks if k.arm == a] + [k for k in noise if k.arm == a]]


def _nested_agreement(kinks) -> list[str]:
    """Whether the nested test's answer holds under every N convention of a table."""
    out = []
    for table in dict.fromkeys(k.arm.split(" (")[0] for k in kinks):
        mine = [k for k in kinks if k.arm.split(" (")[0] == table]
        if len({k.rejects for k in mine}) > 1:
            out.append(f"- {table}: the answer depends on the N convention (rejected on "
                       + ", ".join(k.arm for k in mine if k.rejects) + " only): not a finding about the "
                       "shapes alone.")
    return out


def _loss_section(found) -> list[str]:
    if not found:
        return []
    table = [[c.arm, *(f"{a.text()} ({a.sign})" for a in c.contrast),
              *(f"{e[0]:.3g} / {e[1]:.3g}" for e in c.exponents), "; ".join(c.depends) or "none"] for c in found]
    return ["## The fitting loss: least squares against Huber on log-loss (fitting_loss.csv)", "",
            "Every fit above is least squares on the loss (nats). The Gemstones authors fit "
            f"{fitting_loss.HUBER}; here chinchilla and gemstones_width_depth are refitted that way "
            "(point fits) and the audit contrast (same bootstrap over shapes) and the compute-optimal "
            "exponents (D* / W* against C, same search) recomputed. A verdict depends on the loss "
            f"when the contrast's sign changes or an exponent moves by more than {fitting_loss.MOVES}.", "",
            markdown_table(["arm", "audit, least squares", "audit, Huber", "a / b, least squares", "a / b, Huber",
                            "depends on the loss"], table, "lrrrrl"), ""]


def _critical_section(crit) -> list[str]:
    out = ["## 4.1 Is there a critical depth? (critical_depth.csv)", ""]
    for c in crit:
        out.append(f"- {c.arm}: {c.exponent_text()}. {c.past} of {c.rows} checkpoints lie past the "
                   f"fitted D_crit = c·W^p (D_crit at W = {int(c.widths[0][0])}: {c.widths[0][1]:.0f} layers).")
    return out + [""]


def _interaction_section(inter) -> list[str]:
    if not inter:
        return ["## 4.3 Learning-rate interaction: not run (--no-lr-interaction)", ""]
    rows = [[i.convention, i.law, i.parameter, f"{i.hot:.4g}", f"{i.half:.4g}",
             f"[{i.diff_ci[0]:.3g}, {i.diff_ci[1]:.3g}]", i.p_text, "yes" if i.moves else "no"] for i in inter]
    how = ("paired cluster bootstrap" if all(i.paired for i in inter) else
           "cluster bootstrap (unpaired where a resample was left out)")
    return ["## 4.3 Does the shape effect move with the learning rate? (lr_interaction.csv)", "",
            f"The {inter[0].shapes} shapes in both tables, each law fitted to each learning rate under "
            "each N convention (fitted ε: the hot table's, for both); the "
            f"interaction is the difference half − published of each shape parameter, its 95% interval "
            f"and two-sided p from a {how} over shapes (a shape's two runs drawn together; p below "
            "2/draws is given as that bound). m: ln(D/W) of the loss-optimal aspect ratio (its centre, "
            "which moves with the convention); q: the bowl's curvature; aw, ad: the "
            "Gemstones law's width and depth exponents. " + _lr_survives(inter), "",
            markdown_table(["N", "law", "parameter", "published lr", "half lr", "difference 95%", "p", "moves"],
                           rows, "lllrrrrl"), ""]


def _lr_penalty_lines(found) -> list[str]:
    if not found:
        return []
    return (["Model-free check: each shape's half-lr penalty (mean loss at half the lr minus at the "
             "published lr over the budgets both reached) regressed on ln(D/W) and ln N; the slope on "
             "ln(D/W), 95% bootstrap over shapes. A centre m that moves with the lr would need a slope "
             "that excludes 0:", ""] + [f"- {p.text()}" for p in found] + [""])


def _lr_survives(inter) -> str:
    """Which shape parameters move with the lr under every convention, and which under some."""
    by = {}
    for i in inter:
        by.setdefault((i.law, i.parameter), []).append(i)
    every = [f"{law} {p}" for (law, p), xs in by.items() if all(x.moves for x in xs)]
    some = [f"{law} {p} (moves on {', '.join(x.convention for x in xs if x.moves)} N only)"
            for (law, p), xs in by.items() if any(x.moves for x in xs) and not all(x.moves for x in xs)]
    return ("Moves under every convention: " + (", ".join(every) or "none") + ". Depends on the "
            "convention: " + (", ".join(some) or "none") + ".")


def _audit_section(audits, figure) -> list[str]:
    first = [a for a in audits if a.table == audits[0].table]
    excess = {a.convention: {r.shape: r.excess for r in a.rows} for a in first}
    table = [[r.shape, r.depth, r.width, f"{r.params / 1e6:.0f}M", f"{r.ratio:.2f}",
              *(f"{excess[a.convention][r.shape]:+.4f}" for a in first)]
             for r in sorted(first[0].rows, key=lambda r: -r.excess)]
    return (["## 4.4 The paper's audit: D / D_crit against which shapes lose (audit.csv)", "",
            f"D_crit = {PAPER_KAPPA}·ln W (the paper's κ); excess = the shape's mean residual over the "
            "chinchilla fit of the same arm (observed − predicted, nats, at matched N and T), per N "
            f"convention; {first[0].table}, sorted by the {first[0].convention}-N excess, N column in "
            f"{first[0].convention} N.", "",
            markdown_table(["shape", "D", "W", "N", "D / D_crit"] + [f"excess, {a.convention} N" for a in first],
                           table, "lrrrr" + "r" * len(first)), "",
            "Deep shapes (D / D_crit > 1) minus the rest, mean excess, 95% bootstrap over shapes within "
            "each group (positive: the deep shapes lose, as the paper predicts):", ""]
            + [f"- {a.arm}: {a.text()} ({a.sign})" for a in audits] + ["", figure, ""])


run_command.option_groups = {"options": PublicShapesOptions}
