"""The public-shapes study's report and command: `sections` renders what
`public_shapes_results.measure` found (report.md, or report_partial.md without the core),
`write_report` writes it with the CSVs and figures of the parts run, all from the same results;
`run_command` is `depthdelusion public-shapes` (the parser is ``depthdelusion.cli``): its flags
become a `PublicShapesSpec` through the study specs' field checks. Nothing here computes a
number the report states; it formats them."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from depthdelusion import rundir
from depthdelusion.analysis.fitting.options import BOOTSTRAP
from depthdelusion.analysis.formats.table_text import csv_text, markdown_table
from depthdelusion.analysis.reference import PAPER_KAPPA
from depthdelusion.studies.public_shapes import figures, optimal, prediction, study
from depthdelusion.studies.public_shapes import sections as more
from depthdelusion.studies.public_shapes.results import PublicShapesResults, measure

COMMAND = "depthdelusion public-shapes --out analysis/public_shapes"


def _csv(path: Path, rows: list[dict]) -> None:
    path.write_text(csv_text(list(rows[0]), rows) if rows else "")


def _critical_rows(crit) -> list[dict]:
    return [{"arm": c.arm, "width": int(w), "d_crit": round(d, 1), "ci95_low": round(lo, 1),
             "ci95_high": round(hi, 1), "p": round(c.p, 3), "p_status": c.p_status,
             "checkpoints_past_d_crit": c.past, "rows": c.rows}
            for c in crit for (w, d, (lo, hi)) in c.widths]


def _interaction_rows(inter) -> list[dict]:
    return [{"law": i.law, "parameter": i.parameter, "published_lr": round(i.hot, 4),
             "half_lr": round(i.half, 4), "diff_ci95_low": round(i.diff_ci[0], 4),
             "diff_ci95_high": round(i.diff_ci[1], 4), "p_two_sided": round(i.p, 3),
             "paired": i.paired, "shapes": i.shapes} for i in inter]


def _audit_rows(rows) -> list[dict]:
    return [{"shape": r.shape, "depth": r.depth, "width": r.width, "params_mean": int(r.params),
             "d_over_d_crit_paper": round(r.ratio, 2), "excess_loss_vs_chinchilla": round(r.excess, 4)}
            for r in rows]


def _figure(out: Path, rows) -> None:
    """audit.png: each shape's excess loss over chinchilla against the paper's D / D_crit."""
    # here, not at the top: only a run that draws pays matplotlib's import (4 s measured), after Agg is chosen
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    widths = sorted({r.width for r in rows})
    colours = plt.cm.viridis(np.linspace(0, 0.9, len(widths)))
    for w, c in zip(widths, colours):
        pts = [r for r in rows if r.width == w]
        ax.scatter([r.ratio for r in pts], [r.excess for r in pts], color=c, label=f"W = {w}")
        for r in pts:
            ax.annotate(str(r.depth), (r.ratio, r.excess), fontsize=7, xytext=(3, 2), textcoords="offset points")
    ax.axvline(1.0, color="grey", ls="--", lw=1)
    ax.axhline(0.0, color="grey", lw=0.5)
    ax.set_xscale("log")
    ax.set_xlabel(f"D / D_crit(W), the paper's D_crit = {PAPER_KAPPA}·ln W (log scale)")
    ax.set_ylabel("excess loss over chinchilla (nats, mean of checkpoints)")
    ax.set_title("Gemstones (hot, total N): which shapes lose? (labels: depth)")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(out / "audit.png", dpi=120)
    plt.close(fig)


def run_command(*, out: str, bootstrap: int = BOOTSTRAP, replicates: int = study.DEFAULT_REPLICATES,
                seed: int = 0, tables: str = ",".join(study.FITTED_TABLES),
                conventions: str = ",".join(study.CONVENTIONS), laws: str | None = None,
                lr_interaction: bool = True, parts: str = ",".join(study.PARTS)) -> int:
    """`depthdelusion public-shapes`: the spec from the flags, measured, then written."""
    spec = study.spec_from_flags(bootstrap=bootstrap, replicates=replicates, seed=seed, tables=tables,
                                 conventions=conventions, laws=laws, lr_interaction=lr_interaction,
                                 parts=parts)
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
        _csv(out_dir / "gadre.csv", prediction.gadre_rows(list(r.gadre)))
    if "figures" in parts:
        figures.draw(r.arms[0], out_dir)
    if r.spec.core:
        _csv(out_dir / "laws.csv", study.parameter_rows(list(r.arms)))
        _csv(out_dir / "tests.csv", study.verdict_rows(list(r.arms)))
        _csv(out_dir / "critical_depth.csv", _critical_rows(r.critical))
        _csv(out_dir / "lr_interaction.csv", _interaction_rows(r.interaction))
        _csv(out_dir / "audit.csv", _audit_rows(r.audit))
        if r.audit_drawn:
            _figure(out_dir, r.audit)
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
        f"Reproduce: `{COMMAND}` (tables downloaded by name and cached; "
        "`DEPTHDELUSION_TABLES_URL` names a mirror, `DEPTHDELUSION_CACHE` the cache).", "",
        f"Settings: {spec.bootstrap} cluster-bootstrap refits per law and arm (whole runs "
        f"resampled: a shape's checkpoints are one run), {spec.replicates} parametric-bootstrap "
        f"replicates per test (with a per-run random effect), seed {spec.seed}; wall time "
        f"{r.wall_s:.0f} s on this machine. Fits: least squares on the loss. N conventions: "
        "total = params_active_precise (embeddings included); non-embedding = that less 50,304·W. "
        f"FLOP convention: {study.FLOP_CONVENTION}.", ""]
    lines += _fit_section(r.arms) + _test_section(r.arms) + _critical_section(r.critical)
    lines += _interaction_section(r.interaction)
    lines += _audit_section(r.audit, r.deep_minus_rest, r.deep_ci, _audit_caption(r)) + _more_sections(r)
    return "\n".join(lines) + "\n"


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
        lines += more.gadre_section(list(r.gadre), r.gadre_runs, r.gadre_by_multiple)
    if "figures" in parts:
        lines += more.figures_section(figures.captions(r.figures))
    return lines


def partial_text(r: PublicShapesResults) -> str:
    """report_partial.md: the parts run without the core, labelled as such."""
    parts = r.spec.parts
    return "\n".join([
        "# Public shapes: PARTIAL RESULT — the parts " + ", ".join(parts) + " only", "",
        f"Reproduce: `{COMMAND} --parts {','.join(parts)}`. The core (laws, calibrated tests, "
        "4.1, 4.3, 4.4) was not rerun: report.md and its CSVs are from an earlier full run and are "
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


def _critical_section(crit) -> list[str]:
    out = ["## 4.1 Is there a critical depth? (critical_depth.csv)", ""]
    for c in crit:
        out.append(f"- {c.arm}: {c.exponent_text()}. {c.past} of {c.rows} checkpoints lie past the "
                   f"fitted D_crit = c·W^p (D_crit at W = {int(c.widths[0][0])}: {c.widths[0][1]:.0f} layers).")
    return out + [""]


def _interaction_section(inter) -> list[str]:
    if not inter:
        return ["## 4.3 Learning-rate interaction: not run (--no-lr-interaction)", ""]
    rows = [[i.law, i.parameter, f"{i.hot:.4g}", f"{i.half:.4g}", f"[{i.diff_ci[0]:.3g}, {i.diff_ci[1]:.3g}]",
             f"{i.p:.3f}", "yes" if i.moves else "no"] for i in inter]
    how = ("paired cluster bootstrap" if all(i.paired for i in inter) else
           "cluster bootstrap (unpaired where a resample was left out)")
    return ["## 4.3 Does the shape effect move with the learning rate? (lr_interaction.csv)", "",
            f"The {inter[0].shapes} shapes in both tables, each law fitted to each learning rate; the "
            f"interaction is the difference half − published of each shape parameter, its 95% interval "
            f"and two-sided p from a {how} over shapes (a shape's two runs drawn together). "
            "m: ln(D/W) of the loss-optimal aspect ratio; q: the bowl's curvature; aw, ad: the "
            "Gemstones law's width and depth exponents.", "",
            markdown_table(["law", "parameter", "published lr", "half lr", "difference 95%", "p", "moves"],
                           rows, "llrrrrl"), ""]


def _audit_section(rows, diff, ci, figure) -> list[str]:
    table = [[r.shape, r.depth, r.width, f"{r.params / 1e6:.0f}M", f"{r.ratio:.2f}", f"{r.excess:+.4f}"]
             for r in sorted(rows, key=lambda r: -r.excess)]
    return ["## 4.4 The paper's audit: D / D_crit against which shapes lose (audit.csv)", "",
            f"Gemstones hot, total N. D_crit = {PAPER_KAPPA}·ln W (the paper's κ); excess = the shape's mean "
            "residual over the chinchilla fit (observed − predicted, nats, at matched N and T), "
            "largest first.", "",
            markdown_table(["shape", "D", "W", "N", "D / D_crit", "excess (nats)"], table, "lrrrrr"), "",
            f"Deep shapes (D / D_crit > 1) minus the rest, mean excess: {diff:+.4f} nats, 95% "
            f"[{ci[0]:+.4f}, {ci[1]:+.4f}] (bootstrap over shapes within each group). Positive would "
            "mean the deep shapes lose, as the paper predicts.", "", figure, ""]
