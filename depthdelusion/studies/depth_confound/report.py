"""The depth-confound study's report and command: `sections` renders what
`depth_confound.measure` found (report.md), `write_report` writes it with points.csv,
lr_curves.csv, laws.csv and loss_vs_depth.png; `run_command` is `depthdelusion depth-confound`.
Nothing here computes a number the report states; it formats them."""
from __future__ import annotations

import math
from pathlib import Path

from depthdelusion.analysis.formats.interval_text import interval_text
from depthdelusion.analysis.formats.table_text import markdown_table
from depthdelusion.studies.depth_confound import study as dc
from depthdelusion.studies.common import laws
from depthdelusion.studies.common import planned_runs
from depthdelusion.studies.depth_confound.study import (
    ARMS,
    DepthConfoundResults,
    Point,
    penalties_at,
)
from depthdelusion.studies.common.command import PlannedRunOptions
from depthdelusion.studies.common.spec import load_spec


def _fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else "–"


def _lr_fmt(lr: float | None) -> str:
    return "–" if lr is None else f"{lr:g}"


def _iv_text(iv) -> str:
    return f"{_fmt(iv.estimate)} [{_fmt(iv.lo)}, {_fmt(iv.hi)}]"


def _arm_part(arm: str, arm_pts: list[Point], got: dict, dmax: int) -> str:
    """One arm's clause: its best depth, the depths Welch's t cannot tell from it, its penalty
    at the deepest depth."""
    best = min(arm_pts, key=lambda p: p.mean)
    ties = [f"D = {d} +{_iv_text(iv)}" for d, iv in sorted(got.items())
            if d != best.depth and iv.lo <= 0]
    pen = got[dmax]
    return (f"arm {arm} is best at D = {best.depth} ({len(arm_pts)} depths; "
            + (f"not distinguishable from it: {', '.join(ties)}" if ties else "every other depth worse beyond its seeds")
            + f"), penalty at D = {dmax} " + ("0 (its best depth)" if dmax == best.depth else _iv_text(pen)))


def _kept_text(pen: dict, kept: dict, dmax: int) -> str:
    """How much of arm A's penalty B and C keep: Fieller's interval of the ratio (`kept`)."""
    if not pen["A"].lo > 0:
        return f" Arm A's own penalty at D = {dmax} is not distinguishable from 0, so there is no penalty to explain here."
    out = ""
    for arm in ("B", "C"):
        if arm not in pen:
            continue
        if pen[arm].se == 0:
            out += f" {arm} keeps none of A's penalty (D = {dmax} is its best depth)."
            continue
        r, lo, hi = kept[arm]
        out += (f" {arm} keeps {100 * r:.0f}% [{100 * lo:.0f}%, {100 * hi:.0f}%] of A's penalty"
                + (" (its own penalty's interval includes 0)" if pen[arm].lo <= 0 else "") + ".")
    return out


def verdict_lines(pts, penalties: dict, kept: dict, widths, dmax: int, *, iso: bool = False) -> list[str]:
    """One sentence per width (or the iso-FLOP slice): each arm's best depth, the depths its
    seeds cannot tell from it and its penalty at the deepest depth (Welch), then how much of arm
    A's penalty B and C keep (Fieller, `kept[width, iso]`). Only over points whose seeds all
    finished."""
    lines = []
    for w in widths:
        parts = []
        pen = penalties_at(pts, penalties, w, dmax)
        for arm, _ in ARMS:
            if arm not in pen:
                parts.append(f"arm {arm}: not enough finished points yet")
                continue
            arm_pts = [p for p in pts if p.arm == arm and p.width == w and math.isfinite(p.mean)]
            parts.append(_arm_part(arm, arm_pts, penalties[arm, w], dmax))
        head = f"- **fixed compute, W = {w}**: " if iso else f"- **W = {w}**: "
        lines.append(head + "; ".join(parts) + "." + (_kept_text(pen, kept[w, iso], dmax) if "A" in pen else ""))
    return lines


def no_depth_lines(r: DepthConfoundResults) -> list[str]:
    """Is the fixed-compute penalty more than size and steps? Per arm, the no-depth law's
    lack-of-fit test against the seed noise."""
    parts = [f"arm {arm}: largest cell-mean residual {t.max_cell_residual:.3f} nats, "
             f"F = {t.f:.2f} on ({t.df_lof}, {t.df_pure}) df, p = {t.p:.2g}" for arm, t in r.no_depth]
    if not parts:
        return []
    return [f"**Depth beyond size and steps at fixed width** (W = {r.spec.iso_flop.width}, every "
            f"equal-token and iso-FLOP cell): the law with parameters and tokens only (`{laws.NO_DEPTH}`, "
            "no depth term) fitted to the seed rows, against the seed noise by the lack-of-fit F test "
            "(assumes one Gaussian seed variance across cells): " + "; ".join(parts)
            + ". A large p: the cells are explained by N and T, with no depth term needed.", ""]


def held_out_lines(r: DepthConfoundResults) -> list[str]:
    """The penalties at the deepest depth from the seeds that did not choose the lrs, and what
    so few seeds can say."""
    seeds = r.spec.seeds
    parts = [f"{arm}, W = {w}: " + ("0 (best)" if iv.se == 0 else f"{_iv_text(iv)} (df {iv.df:.1f})")
             for arm, w, iv in r.held_out]
    if not parts or len(seeds) < 3:
        return []
    tested = [iv for _, _, iv in r.held_out if iv.se != 0 and math.isfinite(iv.df)]
    line = (f"Seed {seeds[0]} chose every lr and is one of the reported seeds, which biases "
            f"the tuned arms' means down. Penalty at D = {max(r.spec.depths)} from the other seeds "
            f"{seeds[1:]} alone (Welch, {len(seeds) - 1} seeds a side): " + "; ".join(parts) + ".")
    if tested and len(seeds) - 1 <= 2:
        widest = max(tested, key=lambda iv: iv.hi - iv.lo)
        line += (f" This check is uninformative, not a confirmation: with {len(seeds) - 1} seeds a side "
                 f"Welch's t has {min(iv.df for iv in tested):.1f}–{max(iv.df for iv in tested):.1f} "
                 f"degrees of freedom, and its widest interval, {_iv_text(widest)}, spans "
                 f"{widest.hi - widest.lo:.1f} nats: it can neither confirm nor refute the seed-{seeds[0]} "
                 "numbers. Only tuning on a seed that is not reported removes the bias (not done: "
                 "the planner has no separate tuning seed).")
    return [line, ""]


def regime_lines(r: DepthConfoundResults) -> list[str]:
    """The tokens-per-parameter regime of the runs and the N convention, with its reason."""
    g = r.regime
    if g is None or not g.tokens_per_param:
        return []
    parts = [f"{name}: {lo:.2g}–{hi:.2g} tokens per parameter ({n} runs)"
             for name, (lo, hi, n) in g.tokens_per_param.items()]
    lo_s, hi_s = g.embedding_share
    share = (f" At these widths the embedding and output layers are {lo_s:.0%}–{hi_s:.0%} of total N "
             f"(equal-token runs), so the two conventions differ by up to ×{1 / (1 - hi_s):.2f}."
             if math.isfinite(hi_s) else "")
    return ["**Regime and N convention.** Tokens per parameter (total N, from each run's summary): "
            + "; ".join(parts) + ". Every run is far below the ~20 tokens per parameter of "
            "compute-optimal training (Hoffmann et al. 2022): this is a short-budget regime, and the "
            "equal-token comparison measures how much each shape learns from one small budget, not "
            "the loss it would converge to. N here is the total parameter count, embeddings "
            "included, because the iso-FLOP slice matched compute as 6·N·T with that N, and the "
            "laws use the same N so that both slices are measured in one unit; the depth_vs_size "
            "study uses non-embedding N because it matches shapes at equal non-embedding N (Kaplan "
            "et al.'s convention)." + share + " The laws of the two studies are not compared "
            "number for number.", ""]


def short_lines(r: DepthConfoundResults) -> list[str]:
    """The reported points short of their seeds, and the command that trains them."""
    if not r.short:
        return [f"Every reported point has all {len(r.spec.seeds)} seeds (no cell is short).", ""]
    names = [f"{p.arm} {p.depth}L × {p.width}" + (f" ({p.steps} steps)" if p.steps else "")
             + (": no lr yet" if p.lr is None else f": {len(p.losses)} of {len(r.spec.seeds)} seeds")
             for p in r.short]
    return [f"**Short**: {'; '.join(names)}. `depthdelusion depth-confound {r.source} --out DIR` "
            "trains them (it resumes: finished runs are skipped).", ""]


def point_rows(r: DepthConfoundResults) -> list[dict]:
    """points.csv's rows: every arm × cell of both slices with its penalty interval."""
    rows = []
    for kind, group in (("equal tokens", r.points), ("iso-FLOP", r.iso_points)):
        for p in group:
            pen = r.iso_penalties[p.arm] if kind == "iso-FLOP" else r.penalties.get((p.arm, p.width), {})
            iv = pen.get(p.depth)
            e, lo, hi = (iv.estimate, iv.lo, iv.hi) if iv else (math.nan,) * 3
            rows.append({"slice": kind, "arm": p.arm, "width": p.width, "depth": p.depth,
                         "steps": p.steps or r.spec.base["train"]["steps"], "lr": _lr_fmt(p.lr),
                         "seeds": len(p.losses), "loss_mean": _fmt(p.mean, 4), "loss_sd": _fmt(p.sd, 4),
                         "penalty": _fmt(e, 4), "penalty_lo": _fmt(lo, 4), "penalty_hi": _fmt(hi, 4)})
    return rows


def _seeds_text(p: Point) -> str:
    return f"{_fmt(p.mean)} ± {_fmt(p.sd)} (n={len(p.losses)}, lr {_lr_fmt(p.lr)})"


def _loss_tables(r: DepthConfoundResults) -> list[str]:
    """Mean ± SD over seeds per arm, width and depth, for both slices."""
    lines = []
    for kind, group in (("equal tokens", r.points), ("iso-FLOP", r.iso_points)):
        lines += [f"### {kind}", ""]
        header = ["arm", "width"] + [f"D={d}" for d in (r.spec.iso_flop.depths if kind == "iso-FLOP" else r.spec.depths)]
        rows = []
        for arm, _ in ARMS:
            for w in sorted({p.width for p in group}):
                cells = [p for p in group if p.arm == arm and p.width == w]
                rows.append([arm, w] + [_seeds_text(p) if p.losses else "–" for p in cells])
        lines += [markdown_table(header, rows), ""]
    return lines


def _transfer_lines(r: DepthConfoundResults) -> list[str]:
    """What transfer loses on the CompleteP cells tuned per cell (none tuned: no lines)."""
    if not r.transfer:
        return []
    rows = [[t["width"], t["depth"], *(_seeds_text(p) for p in (t["transferred"], t["tuned"])),
             f"{_fmt(t['cost'])} [{_fmt(t['cost_lo'])}, {_fmt(t['cost_hi'])}]"] for t in r.transfer]
    return ["## What transfer loses (CompleteP, tuned cells)", "",
            "CompleteP at the lr transferred from its base shape against CompleteP with the lr "
            "tuned for the cell (B's rule), every seed of both; cost = transferred − tuned, "
            "Welch's 95% t interval.", "",
            markdown_table(["W", "D", "transferred lr", "tuned lr", "cost (nats)"], rows), ""]


def curve_rows(r: DepthConfoundResults) -> list[dict]:
    """lr_curves.csv's rows: each tuned shape's grid as text, the numbers to 5 decimals."""
    return [{k: (" ".join(f"{lr:g}" for lr in v) if k == "lrs" else " ".join(_fmt(y) for y in v)
                 if k == "losses" else _fmt(v, 5) if isinstance(v, float) else v)
             for k, v in c.items()} for c in r.curves]


def _lr_curve_lines(r: DepthConfoundResults) -> list[str]:
    """The lr grids of every tuned shape with the optimum of each."""
    sigma, dof = r.sigma, r.dof
    lines = ["## Learning-rate curves (seed %d)" % r.spec.seeds[0], "",
             "Optimum from the quadratic in ln lr through the grid's best point and its two "
             "neighbours; 95% intervals (Fieller's for lr*, delta method for the loss there) with t quantiles, the noise σ "
             + (f"= {sigma:.4f} over seed replicates (median-based, robust to a cell where a seed "
                f"diverged; {dof} dof)." if sigma else
                "not yet measured (no seed replicates): no intervals yet."), ""]
    rows = [[c["parametrization"], c["width"], c["depth"], " ".join(f"{lr:g}" for lr in c["lrs"]),
             " ".join(_fmt(y) for y in c["losses"]),
             f"{c['fit_lr']:.3g} {interval_text((c['fit_lr_lo'], c['fit_lr_hi']), '.3g')}" if math.isfinite(c["fit_lr"]) else "–",
             f"{_fmt(c['fit_loss'])} [{_fmt(c['fit_loss_lo'])}, {_fmt(c['fit_loss_hi'])}]" if math.isfinite(c["fit_loss"]) else "–",
             c["note"]] for c in r.curves]
    lines += [markdown_table(["param", "W", "D", "lrs", "losses", "fitted lr* [95%]", "loss at lr* [95%]", "note"], rows), ""]
    return lines


def _head_lines(r: DepthConfoundResults) -> list[str]:
    """The title, what ran and the arms."""
    exp, t = r.spec, r.spec.base["train"]
    return ["# The depth confound: a depth penalty once the lr is right for each shape? "
            "(generated by `depthdelusion depth-confound`)", "",
            *planned_runs.partial_lines(r.done, list(r.todo)),
            f"Experiment: `{r.source}`. Widths {exp.widths}, depths {exp.depths}, {t['steps']} steps of "
            f"{t['batch_size']} × {exp.base['model']['seq_len']} tokens at every cell (equal tokens), seeds "
            f"{exp.seeds} (init and data order; lr grids at seed {exp.seeds[0]}). Metric: `{exp.metric}` "
            f"(validation loss, nats/byte, {t['eval_batches']} fixed held-out batches). Training wall time"
            f"{' so far' if r.todo else ''}: "
            f"{r.wall_s / 60:.0f} min ({r.runs} runs, on a shared 2-core CPU).", "",
            "Arms: " + "; ".join(f"**{a}** {text}" for a, text in ARMS) + ".", ""]


def sections(r: DepthConfoundResults) -> str:
    """report.md: the verdict per width and on the iso-FLOP slice, its assumptions, the losses,
    what transfer loses, the laws, the lr curves and what has not finished."""
    exp, iso_w = r.spec, r.spec.iso_flop.width
    lines = [*_head_lines(r), "## Verdict", "",
             *verdict_lines(r.points, r.penalties, r.kept, exp.widths, max(exp.depths)),
             *verdict_lines(r.iso_points, {(arm, iso_w): v for arm, v in r.iso_penalties.items()}, r.kept,
                            [iso_w], max(exp.iso_flop.depths), iso=True), "",
             *no_depth_lines(r), *held_out_lines(r), *regime_lines(r), *short_lines(r),
             "Assumptions: one token budget for every cell (no compute matching except the iso-FLOP slice); "
             "the penalty is loss(D) − loss(best D) of seed means, its 95% interval Welch's t (Welch–"
             "Satterthwaite df) with the best depth taken as given; a depth is \"not distinguishable\" from "
             "the best when that interval includes 0; the share of A's penalty kept is Fieller's 95% "
             "interval of the ratio (t on the smaller df); points with fewer than 2 finished seeds are left "
             "out; ± is the SD over seeds.", "",
             "## Loss against depth (mean ± SD over seeds)", ""]
    lines += _loss_tables(r) + _transfer_lines(r) + laws.report_lines(list(r.laws))
    lines += _lr_curve_lines(r) + planned_runs.not_finished_lines(list(r.todo))
    return "\n".join(lines)


def write_report(r: DepthConfoundResults, out) -> Path:
    """report.md, points.csv, lr_curves.csv, laws.csv and loss_vs_depth.png into OUT (local or
    gs://: the figure drawn locally and copied up)."""
    tables = {"points": point_rows(r), "lr_curves": curve_rows(r), "laws": laws.csv_rows(list(r.laws))}
    return planned_runs.write_outputs(out, sections(r), tables, lambda path: plot(r, path))


def plot(r: DepthConfoundResults, path: Path) -> None:
    # here, not at the top: only writing the report draws; sections and tables do not pay
    # matplotlib's import (4 s measured), and Agg is chosen before pyplot
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(f"W = {w}, equal tokens", [p for p in r.points if p.width == w]) for w in r.spec.widths]
    panels.append((f"W = {r.spec.iso_flop.width}, iso-FLOP", list(r.iso_points)))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (title, group) in zip(axes[0], panels):
        for (arm, label), color in zip(ARMS, ("tab:red", "tab:blue", "tab:green")):
            got = [p for p in group if p.arm == arm and math.isfinite(p.mean)]
            if got:
                ax.errorbar([p.depth for p in got], [p.mean for p in got],
                            yerr=[p.sd if math.isfinite(p.sd) else 0 for p in got],
                            marker="o", capsize=3, color=color, label=f"{arm}: {label}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("depth D")
        ax.set_title(title, fontsize=9)
    axes[0][0].set_ylabel(f"{r.spec.metric} (nats/byte), mean ± SD over seeds")
    # one legend for the arms, in their order, from whichever panels plot them (a partial
    # study's first panel may be empty)
    drawn = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            drawn.setdefault(label, handle)
    labels = [name for name in (f"{arm}: {label}" for arm, label in ARMS) if name in drawn]
    if labels:
        axes[0][0].legend([drawn[x] for x in labels], labels, fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_command(*, experiment: str, out: str, options: PlannedRunOptions = PlannedRunOptions()) -> int:
    """`depthdelusion depth-confound` (the parser is `depthdelusion.cli`)."""
    return planned_runs.command(
        load_spec(dc.DepthConfoundSpec, experiment), experiment, out, train=dc.train, max_runs=options.max_runs,
        write_report=lambda exp, source, out_dir: write_report(dc.measure(exp, source, out_dir / "runs"), out_dir),
        report_only=options.report_only)


run_command.option_groups = {"options": PlannedRunOptions}
