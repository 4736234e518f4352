"""Report figures (PNG, matplotlib Agg backend). Each function writes one file and returns its path."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

_DPI = 110


def _colors(n: int):
    # One distinguishable colour per line (the default cycle repeats after 10).
    return plt.cm.turbo(np.linspace(0.05, 0.95, max(n, 1)))


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=_DPI, metadata={"Software": None})
    plt.close(fig)
    return path


def loss_vs_depth(runs, fit, path: Path) -> Path:
    """U-curves: observed loss vs depth, one line per width; open markers = fitted law."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    pred = fit.predict(runs)
    widths = sorted(set(runs.width.tolist()))
    for w, color in zip(widths, _colors(len(widths))):
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
    return _save(fig, path)


def loss_vs_width(runs, fit, path: Path) -> Path:
    """Observed loss vs width, one line per depth; × = fitted law."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    pred = fit.predict(runs)
    depths = sorted(set(runs.depth.tolist()))
    for d, color in zip(depths, _colors(len(depths))):
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
    return _save(fig, path)


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
    return _save(fig, path)


def residuals(runs, fits: dict, path: Path) -> Path:
    """Residuals (observed − predicted, nats) against depth and against parameter count."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    markers = "osD^v"
    for (name, f), m in zip(fits.items(), markers):
        axes[0].plot(runs.depth, f.residuals, m, mfc="none", label=name)
        axes[1].plot(runs.params, f.residuals, m, mfc="none", label=name)
    for ax, label, base in zip(axes, ("depth D (layers)", "parameters N"), (2, 10)):
        ax.axhline(0, color="k", lw=1)
        ax.set_xscale("log", base=base)
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel(label + " (log scale)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("residual, observed − predicted (nats)")
    axes[0].legend(fontsize=8)
    fig.suptitle("Residuals")
    return _save(fig, path)


def gradient_profiles(runs, fits_by_run: dict, path: Path, kind: str = "weight", step: int = 1000) -> Path:
    """Per-layer gradient norms (normalised to the top block) vs distance from the top, per width."""
    widths = sorted({int(runs.width[i]) for i, p in enumerate(runs.profiles) if p is not None})
    fig, axes = plt.subplots(1, len(widths), figsize=(4 * len(widths), 3.8), squeeze=False)
    for ax, w in zip(axes[0], widths):
        for i in np.flatnonzero(runs.width == w):
            profile = runs.profiles[i]
            if profile is None or not profile.steps(kind):
                continue
            used, g = profile.nearest(step, kind)
            dist = len(g) - 1 - np.arange(len(g))
            fitp = fits_by_run.get(str(runs.name[i]))
            label = f"D = {runs.depth[i]}" + (f", ℓ = {fitp.length:.1f}" if fitp and fitp.length else
                                              ", no decay" if fitp and fitp.status == "no decay" else "")
            ax.plot(dist, g / g[-1], "o-", ms=3, label=label)
        ax.set_yscale("log")
        ax.set_xlabel("D − l (layers below the top block)")
        ax.set_title(f"W = {w}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel(f"g_l / g_D ({kind} gradient norm)")
    fig.suptitle(f"Per-layer gradient norms near step {step}")
    return _save(fig, path)


def persistence_scaling(scaling, path: Path) -> Path:
    """ℓ vs W with the power-law and log-form fits."""
    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.plot(scaling.widths, scaling.lengths, "o", label="runs")
    grid = np.geomspace(scaling.widths.min() / 1.2, scaling.widths.max() * 1.2, 100)
    ax.plot(grid, scaling.predict_power(grid), "-",
            label=f"ℓ = {scaling.c:.3g}·W^{scaling.p:.2f} (R² = {scaling.r2_power:.3f})")
    ax.plot(grid, scaling.predict_log(grid), "--",
            label=f"ℓ = {scaling.a:.3g}·ln W {scaling.b:+.3g} (R² = {scaling.r2_log:.3f})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("width W (log scale)")
    ax.set_ylabel("persistence length ℓ (layers)")
    ax.set_title("Gradient persistence length vs width")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, path)
