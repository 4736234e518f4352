"""The public-shapes study's outputs: report.md, its CSVs and the audit figure, and the command
``depthdelusion public-shapes`` (the parser is ``depthdelusion.cli``)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from depthdelusion.analysis.fitting.options import BOOTSTRAP
from depthdelusion.analysis.formats.table_text import csv_text, markdown_table
from depthdelusion.analysis.reference import PAPER_KAPPA

from . import public_shapes as study
from . import public_shapes_answers as answers

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


def _figure(out: Path, rows) -> str:
    """audit.png: each shape's excess loss over chinchilla against the paper's D / D_crit."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ModuleNotFoundError:
        return "audit.png not drawn: matplotlib is not installed"
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
    return "audit.png: each shape's excess loss over chinchilla against the paper's D / D_crit"


#: the study's parts: "laws" is the core (fits, tests, 4.1, 4.3, 4.4: report.md and its CSVs);
#: without it the other parts write report_partial.md and leave the core's files alone
PARTS = ("laws", "optimal", "prediction", "gadre", "figures")


def run_command(*, out: str, bootstrap: int = BOOTSTRAP, replicates: int = 200, seed: int = 0,
                tables: str = ",".join(study.FITTED_TABLES), conventions: str = ",".join(study.CONVENTIONS),
                laws: str | None = None, lr_interaction: bool = True, parts: str = ",".join(PARTS)) -> int:
    """`depthdelusion public-shapes`."""
    from depthdelusion import rundir

    start = time.perf_counter()
    out_dir = rundir.as_path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    law_list = _names(laws or ",".join(study.LAWS), study.LAWS, "--laws")
    part_list = _names(parts, PARTS, "--parts")
    if "chinchilla" not in law_list:
        raise ValueError("--laws must include chinchilla: the tests and the audit are against it")
    pairs = [(t, c) for t in _names(tables, study.FITTED_TABLES, "--tables")
             for c in _names(conventions, study.CONVENTIONS, "--conventions")]
    if "laws" in part_list:
        arms = [study.fit_arm(t, c, law_list, bootstrap=bootstrap, replicates=replicates, seed=seed)
                for t, c in pairs]
    else:
        arms = [_arm_for_parts(t, c, law_list, bootstrap=bootstrap, seed=seed) for t, c in pairs]
    more = _more_sections(arms, part_list, law_list, out_dir, bootstrap=bootstrap, seed=seed)
    settings = dict(bootstrap=bootstrap, replicates=replicates, seed=seed, parts=part_list)
    if "laws" in part_list:
        core = _core(arms, out_dir, bootstrap=bootstrap, seed=seed, lr_interaction=lr_interaction)
        settings["seconds"] = time.perf_counter() - start
        text = report_text(arms, *core, settings, more)
        name = "report.md"
    else:
        settings["seconds"] = time.perf_counter() - start
        text = partial_text(settings, more)
        name = "report_partial.md"
    (out_dir / name).write_text(text)
    print(text)
    print(f"report written to {out_dir / name}")
    return 0


def _arm_for_parts(table: str, convention: str, law_list, *, bootstrap: int, seed: int):
    """An arm without the core's tests: the shape laws of 4.2 with their cluster bootstrap, the
    rest of ``law_list`` bare (the figures need only their optima)."""
    from . import public_shapes_optimal as optimal

    runs = study.table_runs(table, convention)
    arm = study.Arm(table, convention, runs, study.shape_labels(runs))
    boot = [law for law in law_list if law in optimal.OPTIMAL_LAWS]
    arm.fits = {**study.fit_laws(runs, arm.clusters, boot, bootstrap=bootstrap, seed=seed),
                **study.fit_laws(runs, arm.clusters, [law for law in law_list if law not in boot],
                                 bootstrap=0, seed=seed)}
    return arm


def _core(arms, out_dir: Path, *, bootstrap: int, seed: int, lr_interaction: bool):
    """The core's answers (4.1, 4.3, 4.4) and its CSVs and audit figure."""
    crit = [c for c in (answers.critical_depth(a) for a in arms) if c is not None]
    inter = answers.lr_interaction(bootstrap=bootstrap, seed=seed) if lr_interaction else []
    audit_rows, deep_minus_rest, deep_ci = answers.audit(arms[0], bootstrap=bootstrap, seed=seed)
    _csv(out_dir / "laws.csv", study.parameter_rows(arms))
    _csv(out_dir / "tests.csv", study.verdict_rows(arms))
    _csv(out_dir / "critical_depth.csv", _critical_rows(crit))
    _csv(out_dir / "lr_interaction.csv", _interaction_rows(inter))
    _csv(out_dir / "audit.csv", _audit_rows(audit_rows))
    figure = _figure(out_dir, audit_rows)
    return crit, inter, (audit_rows, deep_minus_rest, deep_ci), figure


def _more_sections(arms, part_list, law_list, out_dir: Path, *, bootstrap: int, seed: int) -> list[str]:
    """The parts beyond the core, each writing its CSV (or figures): the report's lines."""
    from . import public_shapes_optimal as optimal
    from . import public_shapes_prediction as prediction
    from . import public_shapes_sections as sections

    lines = []
    if "optimal" in part_list:
        found = [o for a in arms for o in optimal.optima(a, bootstrap=bootstrap)]
        found += optimal.released_optima(arms[0].runs)
        rows = optimal.rows(found)
        _csv(out_dir / "compute_optimal.csv", rows)
        lines += sections.optimal_section(rows, found[0].result.assumptions if found else [])
    if "prediction" in part_list:
        rows = prediction.prediction_rows([p for a in arms for p in
                                           prediction.predict(a, law_list, bootstrap=bootstrap, seed=seed)])
        _csv(out_dir / "prediction.csv", rows)
        lines += sections.prediction_section(rows)
    if "gadre" in part_list:
        fits, runs = prediction.gadre(bootstrap=bootstrap, seed=seed)
        _csv(out_dir / "gadre.csv", prediction.gadre_rows(fits))
        lines += sections.gadre_section(fits, runs)
    if "figures" in part_list:
        from . import public_shapes_figures as figures

        lines += sections.figures_section(figures.draw(arms[0], out_dir))
    return lines


def partial_text(settings: dict, more: list[str]) -> str:
    """report_partial.md: the parts run without the core, labelled as such."""
    return "\n".join([
        "# Public shapes: PARTIAL RESULT — the parts " + ", ".join(settings["parts"]) + " only", "",
        f"Reproduce: `{COMMAND} --parts {','.join(settings['parts'])}`. The core (laws, calibrated tests, "
        "4.1, 4.3, 4.4) was not rerun: report.md and its CSVs are from an earlier full run and are "
        "not changed by this one.", "",
        f"Settings: {settings['bootstrap']} cluster-bootstrap refits per shape law and arm (whole runs "
        f"resampled), seed {settings['seed']}; wall time {settings['seconds']:.0f} s on this machine. "
        f"FLOP convention: {study.FLOP_CONVENTION}.", ""] + more) + "\n"


def _names(text: str, known: tuple, flag: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise ValueError(f"{flag} {text!r}: expected a comma-separated list of {', '.join(known)}")
    return names


def report_text(arms, crit, inter, audit, figure: str, settings: dict, more: list[str] = ()) -> str:
    lines = [
        "# Public shapes: the critical-depth law on the Gemstones suite", "",
        f"Reproduce: `{COMMAND}` (tables downloaded by name and cached; "
        "`DEPTHDELUSION_TABLES_URL` names a mirror, `DEPTHDELUSION_CACHE` the cache).", "",
        f"Settings: {settings['bootstrap']} cluster-bootstrap refits per law and arm (whole runs "
        f"resampled: a shape's checkpoints are one run), {settings['replicates']} parametric-bootstrap "
        f"replicates per test (with a per-run random effect), seed {settings['seed']}; wall time "
        f"{settings['seconds']:.0f} s on this machine. Fits: least squares on the loss. N conventions: "
        "total = params_active_precise (embeddings included); non-embedding = that less 50,304·W. "
        f"FLOP convention: {study.FLOP_CONVENTION}.", ""]
    lines += _fit_section(arms) + _test_section(arms) + _critical_section(crit)
    lines += _interaction_section(inter) + _audit_section(*audit, figure) + list(more)
    return "\n".join(lines) + "\n"


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
