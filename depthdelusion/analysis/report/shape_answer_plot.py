"""The shape answer's figure (issue 58): predicted loss over width × depth at one budget, with
the band, the optimum, the suites' shapes, the paper's D_crit(W) = κ·ln W and published LLMs."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..fitting.shape_answer import BudgetAnswer, ShapeAnswer
from ..fitting.shape_optimum import DEPTHS, WIDTHS, loss_surface
from ..reference import PAPER_KAPPA, load_llm_shapes
from .plots import colors, plt, save_figure


def budget_figure(a: ShapeAnswer, b: BudgetAnswer, path: Path) -> Path:
    """One PNG: (L/L* − 1) in % over width × depth (log axes) at b's compute."""
    s = a.fit.names.index(a.reference)
    surface = loss_surface(a.fit, s, a.counts, b.point.compute)
    excess = 100.0 * (surface / b.point.loss - 1.0)
    fig, ax = plt.subplots(figsize=(8, 6))
    levels = [0, 0.5, 1, 2, 5, 10, 20, 50]
    filled = ax.contourf(WIDTHS, DEPTHS, np.clip(excess, 0, 60), levels=levels + [60], cmap="viridis_r")
    fig.colorbar(filled, ax=ax, label=f"predicted loss above the best (%), {a.reference}'s scale")
    ax.contour(WIDTHS, DEPTHS, excess, levels=[100 * a.tolerance], colors="red", linewidths=2)
    ax.plot([], [], color="red", lw=2, label=f"band: within {a.tolerance:.3g} of the best")
    if a.fit.has_shape:  # a law without a shape term has an N*, not a D* and W*: no star to draw
        ax.plot(b.point.width, b.point.depth, "r*", ms=16, label=f"optimum D* {b.point.depth:.0f}, W* {b.point.width:.0f}")
    else:
        ax.plot([], [], " ", label="no optimum shape: the law has no shape term")
    for suite, color in zip(a.suites, colors(len(a.suites))):
        shapes = np.unique(np.stack([suite.width, suite.depth], 1), axis=0)
        ax.plot(shapes[:, 0], shapes[:, 1], "o", mfc="none", color=color, label=f"{suite.name} shapes")
    ax.plot(WIDTHS, PAPER_KAPPA * np.log(WIDTHS), "k--", label=f"paper's D_crit = {PAPER_KAPPA}·ln W")
    llm = load_llm_shapes()
    ax.plot(llm.width, llm.depth, "k^", ms=5, label="published LLMs (llm_shapes)")
    for name, w, d in zip(llm.model, llm.width, llm.depth):
        ax.annotate(name, (w, d), fontsize=6, xytext=(3, 2), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(64, 65536)
    ax.set_ylim(1, 512)
    ax.set_xlabel("width W (model dimension)")
    ax.set_ylabel("depth D (layers)")
    fig.suptitle(f"Predicted loss at C = {b.point.compute:.3g} FLOPs, law {a.law} "
                 f"(T = C / (6·N_total) per shape)")
    ax.legend(fontsize=7, loc="lower right")
    return save_figure(fig, path)


def write_figures(a: ShapeAnswer, out: Path) -> list[Path]:
    """One figure per budget, ``shape_C{compute:.0e}.png`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    return [budget_figure(a, b, out / f"shape_C{b.point.compute:.0e}.png".replace("+", ""))
            for b in a.budgets]
