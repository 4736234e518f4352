"""Report figures (PNG, matplotlib Agg backend). Each function writes one file and returns its path."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..formats.row_keys import row_key  # noqa: E402

_DPI = 110


def colors(n: int):
    """n distinguishable line colours (the default cycle repeats after 10)."""
    return plt.cm.turbo(np.linspace(0.05, 0.95, max(n, 1)))


def save_figure(fig, path: Path) -> Path:
    """Write and close `fig` (no software tag, so the file is the same on every machine; the
    figure's title, if any, also as the PNG's Title, where a reader finds it without the image)."""
    fig.tight_layout()
    title = fig.get_suptitle()
    fig.savefig(path, dpi=_DPI, metadata={"Software": None, **({"Title": title} if title else {})})
    plt.close(fig)
    return path


def loss_vs_depth(runs, fit, path: Path) -> Path:
    """U-curves: observed loss vs depth, one line per width; open markers = fitted law."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    pred = fit.predict(runs)
    widths = sorted(set(runs.width.tolist()))
    for w, color in zip(widths, colors(len(widths))):
        sel = np.flatnonzero(runs.width == w)
        sel = sel[np.argsort(runs.depth[sel])]
        line, = ax.plot(runs.depth[sel], runs.loss[sel], "o-", color=color, label=f"W = {w}")
        ax.plot(runs.depth[sel], pred[sel], "x", color=line.get_color(), ms=7)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("depth D (layers, log scale)")
    ax.set_ylabel("final loss (nats)")
    ax.set_title(f"Loss vs depth per width  (lines: observed, ×: {fit.law.name} fit)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def loss_vs_width(runs, fit, path: Path) -> Path:
    """Observed loss vs width, one line per depth; × = fitted law."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    pred = fit.predict(runs)
    depths = sorted(set(runs.depth.tolist()))
    for d, color in zip(depths, colors(len(depths))):
        sel = np.flatnonzero(runs.depth == d)
        sel = sel[np.argsort(runs.width[sel])]
        line, = ax.plot(runs.width[sel], runs.loss[sel], "o-", color=color, label=f"D = {d}")
        ax.plot(runs.width[sel], pred[sel], "x", color=line.get_color(), ms=7)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("width W (model dimension, log scale)")
    ax.set_ylabel("final loss (nats)")
    ax.set_title(f"Loss vs width per depth  (lines: observed, ×: {fit.law.name} fit)")
    ax.legend(fontsize=7, ncol=3)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def predicted_vs_observed(fits: dict, path: Path) -> Path:
    """Predicted vs observed loss for each law, with the 1:1 line."""
    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    lo = min(min(f.observed.min(), f.predicted.min()) for f in fits.values())
    hi = max(max(f.observed.max(), f.predicted.max()) for f in fits.values())
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="1:1")
    markers = "osD^v"
    for (name, f), m in zip(fits.items(), markers):
        ax.plot(f.observed, f.predicted, m, mfc="none", label=f"{name} (R² = {f.r2:.3f})")
    ax.set_xlabel("observed loss (nats)")
    ax.set_ylabel("predicted loss (nats)")
    ax.set_title("Predicted vs observed")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def residuals(runs, fits: dict, path: Path) -> Path:
    """Residuals (observed − predicted, nats) against depth (when the table has it) and against
    parameter count."""
    against = ([("depth D (layers)", runs.depth, 2)] if runs.has("depth") else []) + \
        [("parameters N", runs.params, 10)]
    fig, axes = plt.subplots(1, len(against), figsize=(5 * len(against), 4), sharey=True,
                             squeeze=False)
    axes = axes[0]
    markers = "osD^v"
    for (name, f), m in zip(fits.items(), markers):
        for ax, (_, x, _) in zip(axes, against):
            ax.plot(x, f.residuals, m, mfc="none", label=name)
    for ax, (label, _, base) in zip(axes, against):
        ax.axhline(0, color="k", lw=1)
        ax.set_xscale("log", base=base)
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(label + " (log scale)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("residual, observed − predicted (nats)")
    axes[0].legend(fontsize=8)
    fig.suptitle("Residuals")
    return save_figure(fig, path)


def gradient_profiles(runs, fits_by_run: dict, path: Path, kind: str = "weight", step: int = 1000) -> Path:
    """ln(g_l / g_D) vs distance from the top, one panel per width, one line per depth: the
    logged profiles the windowed fit averaged (``fits_by_run[name].steps``)."""
    by_width: dict = {}
    steps_drawn: set = set()
    for i, profile in enumerate(runs.profiles):
        if profile is None or not profile.steps(kind):
            continue
        f = fits_by_run.get(str(runs.name[i]))
        table = profile.by_kind(kind)
        used = [s for s in (f.steps if f is not None and f.steps else ()) if s in table]
        if not used:
            used = [profile.nearest(step, kind)[0]]
        steps_drawn.update(used)
        g = np.exp(np.mean([np.log(table[s]) for s in used], axis=0))
        by_width.setdefault(int(runs.width[i]), []).append((int(runs.depth[i]), g, f,
                                                             profile.insertion_signal))
    return gradient_profile_panels(by_width, path, kind=kind,
                                   title=f"Per-layer {kind}-gradient norms, {_steps_words(steps_drawn)}")


def _steps_words(steps) -> str:
    """The logged steps a figure averaged, as its title states them (the window actually used,
    which moves to the end of training when the runs stop before the requested step)."""
    if not steps:
        return "no logged step"
    lo, hi = min(steps), max(steps)
    return f"at step {lo}" if lo == hi else f"mean of ln g over the logged steps {lo}–{hi}"


def _fit_label(f) -> str:
    if f is None or f.status == "too few layers":
        return ""
    if f.status == "decay":
        return f", decay ℓ = {f.length:.3g}"
    if f.status == "growth":
        return f", growth ℓ = {f.length:.3g}"
    return ", flat"


def gradient_profile_panels(by_width: dict, path: Path, *, kind: str = "weight", title: str = "") -> Path:
    """One panel per width: ln(g_l / g_D) against D − l, one line per depth.

    ``by_width``: {W: [(D, norms[D]) or (D, norms[D], PersistenceFit[, signal[D]])]}, index 0 =
    bottom block; ``signal`` (dashed): the first-order signal of a block inserted after block l
    (``depthdelusion expand RUN --probe``), also as ln(s_l / s_top), where a run has one.
    The paper's g_l/g_D = exp(−(D − l)/ℓ) is a straight line of slope −1/ℓ through 0; a line
    rising to the left is growth towards the input."""
    widths = sorted(by_width)
    fig, axes = plt.subplots(1, len(widths), figsize=(4 * len(widths), 3.8), squeeze=False, sharey=True)
    for ax, w in zip(axes[0], widths):
        entries = sorted(by_width[w], key=lambda e: e[0])
        for (depth, g, *rest), color in zip(entries, colors(len(entries))):
            g = np.asarray(g, float)
            dist = len(g) - 1 - np.arange(len(g))
            ax.plot(dist, np.log(g / g[-1]), "o-", ms=2.5, color=color,
                    label=f"D = {depth}" + _fit_label(rest[0] if rest else None))
            signal = rest[1] if len(rest) > 1 else None
            if signal is not None and np.isfinite(signal[-1]) and signal[-1] > 0:
                # the first-order signal of a block inserted after block l, at block l's place
                ax.plot(dist, np.log(np.asarray(signal, float) / signal[-1]), "s--", ms=2.5,
                        color=color, alpha=0.7, label=f"D = {depth}: insertion signal after l")
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xlabel("D − l (blocks below the top block)")
        ax.set_title(f"W = {w}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel(f"ln(g_l / g_D)  ({kind} gradient)\n< 0: decay towards the input")
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def persistence_scaling(scaling, path: Path) -> Path:
    """Left: ℓ vs W on log axes (runs with ℓ > 0) with both fitted forms. Right: the rate 1/ℓ of
    every run (growth < 0 included: the fit uses all of them) with both forms."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    W = scaling.widths
    grid = np.geomspace(W.min() / 1.2, W.max() * 1.2, 100)
    power_lbl = f"ℓ = {scaling.c:.3g}·W^{scaling.p:.2f} (R² {scaling.r2_power:.2f})"
    log_lbl = f"ℓ = {scaling.a:.3g}·ln W {scaling.b:+.3g} (R² {scaling.r2_log:.2f})"
    jitter = np.exp(0.03 * (np.arange(len(W)) % 5 - 2))  # runs of one width side by side
    pos = scaling.rates > 0
    if pos.any():
        ax.plot(W[pos] * jitter[pos], 1 / scaling.rates[pos], "o", mfc="none", label="runs (ℓ > 0)")
        for pred, style, lbl in ((scaling.predict_power(grid), "-", power_lbl),
                                 (scaling.predict_log(grid), "--", log_lbl)):
            ok = pred > 0
            if ok.any():
                ax.plot(grid[ok], pred[ok], style, label=lbl)
        ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, "no run has ℓ > 0", transform=ax.transAxes, ha="center")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("width W (log scale)")
    ax.set_ylabel("persistence length ℓ (layers, log scale)")
    ax.set_title("ℓ vs W (decaying runs)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    bx.errorbar(W * jitter, scaling.rates, yerr=1.96 * scaling.rate_se, fmt="o", mfc="none", ms=4,
                label="runs (±1.96 bootstrap SE)")
    bx.plot(grid, scaling.predict_rate_power(grid), "-", label="1/(" + power_lbl.split(" (")[0][4:] + ")")
    with np.errstate(divide="ignore"):
        rl = scaling.predict_rate_log(grid)
    bx.plot(grid, np.where(np.abs(rl) < 10, rl, np.nan), "--", label="1/(" + log_lbl.split(" (")[0][4:] + ")")
    bx.axhline(0, color="k", lw=0.8)
    bx.set_xscale("log", base=2)
    bx.set_xlabel("width W (log scale)")
    bx.set_ylabel("rate 1/ℓ per layer (< 0: growth towards the input)")
    bx.set_title("1/ℓ of every run (the fitted quantity)")
    bx.legend(fontsize=7)
    bx.grid(alpha=0.3)
    return save_figure(fig, path)


def loss_vs_depth_errorbars(rows: list, path: Path, title: str = "") -> Path:
    """Final loss vs depth, one line per width (and parametrization), error bars = the run's
    ± standard error, or the seed-to-seed SE where several seeds were run (``se`` per row)."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r.get("label", ""), r["width"]), []).append(r)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (label, w), color in zip(sorted(groups), colors(len(groups))):
        rs = sorted(groups[(label, w)], key=lambda r: r["depth"])
        ax.errorbar([r["depth"] for r in rs], [r["loss"] for r in rs], yerr=[r["se"] for r in rs],
                    fmt="o-" if label in ("", "sp") else "s--", color=color, capsize=3, ms=4,
                    label=f"{label} W = {w}".strip())
    ax.set_xscale("log", base=2)
    ax.set_xlabel("depth D (log scale)")
    ax.set_ylabel("final loss (nats/byte)")
    ax.set_title(title or "Loss vs depth per width")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def isoflop_profiles(result, path: Path, title: str = "") -> Path:
    """The isoFLOP figure: loss vs N per compute budget with its parabola and vertex (open
    marker: a budget left out of the exponent fit), and N*(C) with the fitted power law."""
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    budgets = [b for b in result.budgets if b.points]
    for b, c in zip(budgets, colors(len(budgets))):
        N, y = result.params[b.index], result.loss[b.index]
        ax.scatter(N, y, s=14, color=c, label=f"C = {b.compute:.2g}")
        if np.isfinite(b.coef[2]):
            x = np.linspace(np.log(N.min()), np.log(N.max()), 60) - b.centre
            c0, c1, c2 = b.coef
            ax.plot(np.exp(x + b.centre), c0 + c1 * x + c2 * x * x, color=c, lw=1)
        if np.isfinite(b.n_opt):
            ax.scatter([b.n_opt], [b.loss_opt], marker="*", s=90, color=c if b.used else "none",
                       edgecolors=c, zorder=3)
    if len(result.used) >= 2:  # the optima the exponent fit uses, joined
        ax.plot([b.n_opt for b in result.used], [b.loss_opt for b in result.used], "k--", lw=0.8,
                label="vertices used")
    ax.set_xscale("log")
    ax.set_xlabel("parameters N")
    ax.set_ylabel("loss (nats)")
    ax.set_title(title or "isoFLOP profiles")
    ax.legend(fontsize=7, ncol=2)
    used = result.used
    for b in result.budgets:
        if np.isfinite(b.n_opt):
            lo, hi = b.n_opt_ci
            err = [[b.n_opt - lo if np.isfinite(lo) else 0], [hi - b.n_opt if np.isfinite(hi) else 0]]
            ax2.errorbar([b.compute], [b.n_opt], yerr=err, fmt="o", color="k",
                         mfc="k" if b.used else "none", capsize=2)
    if len(used) >= 2 and np.isfinite(result.a.value):
        c = np.geomspace(min(b.compute for b in used), max(b.compute for b in used), 50)
        ax2.plot(c, np.exp(result.log_k) * c ** result.a.value, color="C3",
                 label=f"N* ∝ C^{result.a.value:.3f}")
        ax2.legend(fontsize=8)
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("compute C (FLOPs)")
    ax2.set_ylabel("N* (95% Fieller interval)")
    ax2.set_title("loss-optimal N per budget")
    return save_figure(fig, path)


def residual_diagnostics(runs, result, labels, path: Path) -> Path:
    """One fit's residuals (observed − fitted, nats) against N and against tokens (or depth when
    tokens are unknown), one colour per value of ``labels`` (per row), outliers (|robust z|
    above the threshold) ringed and named."""
    d = result.diagnostics
    against = [("parameters N", runs.params)] if runs.has("params") else []
    if runs.has("tokens"):
        against.append(("tokens D", runs.tokens))
    elif runs.has("depth"):
        against.append(("depth (layers)", runs.depth))
    if not against:
        against = [("row", np.arange(1, len(runs) + 1))]
    labels = np.asarray(labels, dtype=object)
    groups = sorted(set(labels), key=str)
    palette = colors(len(groups))
    out = d.outlier_mask
    fig, axes = plt.subplots(1, len(against), figsize=(5.5 * len(against), 4.2), sharey=True,
                             squeeze=False)
    for ax, (label, x) in zip(axes[0], against):
        x = np.asarray(x, float)
        for g, c in zip(groups, palette):
            m = labels == g
            ax.plot(x[m], d.residual[m], "o", ms=4, color=c, alpha=0.8,
                    label=str(g) if len(groups) > 1 else None)
        if out.any():
            ax.plot(x[out], d.residual[out], "o", ms=10, mfc="none", mec="k", mew=1.2,
                    label=f"|robust z| > {d.threshold:g}")
            for i in np.flatnonzero(out)[:10]:
                ax.annotate(row_key(runs.name[i], i), (x[i], d.residual[i]), fontsize=7,
                            xytext=(4, 4), textcoords="offset points")
        ax.axhline(0, color="k", lw=1)
        if label != "row" and np.all(x > 0):
            ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("residual, observed − fitted (nats)")
    if len(groups) > 1 or out.any():
        axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{result.law.name}: residuals ({result.n} rows)")
    return save_figure(fig, path)
