"""The public-shapes study's figures (issue 51, item 6), drawn from one arm (Gemstones hot, total N):

- ``loss_vs_depth_matched.png``: loss against depth among shapes of matched parameter count
  (within ``MATCH`` relative of a group's smallest), at matched tokens (the last budget);
- ``fitted_vs_observed.png``: fitted against observed loss, one colour per width, for the best
  smooth law and the paper's kink law;
- ``d_crit.png``: the suite's shapes in the (W, D) plane with the paper's D_crit = κ·ln W and its
  κ band; no kink was found in these runs, so no fitted D_crit(W) is drawn (it is not identified).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from depthdelusion.analysis.fitting.isoflop import group_budgets
from depthdelusion.analysis.reference import PAPER_FIT

MATCH = 0.2          # shapes within 20% in N count as matched
FITTED_LAWS = ("gemstones_width_depth", "depth_delusion")
DEPTH_TICKS = (3, 5, 10, 20, 40, 80)
WIDTH_TICKS = (256, 512, 1024, 2048, 3072)
LOSS_VS_DEPTH, FITTED, D_CRIT = "loss_vs_depth_matched.png", "fitted_vs_observed.png", "d_crit.png"


@dataclass(frozen=True)
class FigureFacts:
    """What the figures of one arm show, in numbers (their captions are :func:`captions`)."""

    groups: int          # groups of >= 3 shapes matched in N
    last_tokens: float   # the last budget, where they are compared
    laws: tuple          # the laws drawn fitted against observed
    shapes: int          # the suite's shapes
    past: int            # of them past the paper's D_crit


def figure_facts(arm) -> FigureFacts:
    shapes = _shapes(arm)
    return FigureFacts(len(_matched_groups(shapes)), float(np.max(arm.runs.tokens)), tuple(_fitted_laws(arm)),
                       len(shapes), len(_past(shapes)))


def captions(facts: FigureFacts) -> list[str]:
    """One line per figure saying what it shows."""
    kappa = PAPER_FIT["kappa"][0]
    return [f"{LOSS_VS_DEPTH}: loss against depth among shapes matched in N (within {MATCH:.0%}) at "
            f"the last budget ({facts.last_tokens / 1e9:.0f}B tokens), {facts.groups} groups of ≥ 3 shapes",
            f"{FITTED}: fitted against observed loss, one colour per width ({', '.join(facts.laws)})",
            f"{D_CRIT}: the paper's D_crit = {kappa}·ln W with its κ band and the suite's {facts.shapes} "
            f"shapes ({facts.past} past the line); no fitted D_crit(W): no kink was found (4.1)"]


def draw(arm, out: Path) -> None:
    """Every figure of the module for ``arm``, into ``out``."""
    # here, not at the top: only the figures part pays matplotlib's import (4 s measured)
    from depthdelusion.analysis.report import plots

    _matched(arm, out / LOSS_VS_DEPTH, plots)
    _fitted(arm, out / FITTED, plots)
    _d_crit(arm, out / D_CRIT, plots)


def _shapes(arm):
    """(width, depth, mean N) per shape of ``arm``."""
    params = np.asarray(arm.runs.params, float)
    labels = sorted(set(arm.clusters.tolist()), key=lambda s: tuple(int(x) for x in s.split("x")))
    return [(*(int(x) for x in s.split("x")), float(params[arm.clusters == s].mean())) for s in labels]


def _matched_groups(shapes) -> list:
    """Groups (indices into ``shapes``) of >= 3 shapes within MATCH of each other in N."""
    return [g for g in group_budgets(np.array([s[2] for s in shapes]), MATCH) if len(g) >= 3]


def _fitted_laws(arm) -> list[str]:
    return [law for law in FITTED_LAWS if law in arm.fits] or [min(arm.fits, key=lambda k: arm.fits[k].aicc)]


def _past(shapes) -> list:
    """The shapes deeper than the paper's D_crit = κ·ln W."""
    kappa = PAPER_FIT["kappa"][0]
    return [s for s in shapes if s[1] > kappa * np.log(s[0])]


def _matched(arm, path: Path, plots) -> None:
    shapes = _shapes(arm)
    n = np.array([s[2] for s in shapes])
    groups = _matched_groups(shapes)
    last = float(np.max(arm.runs.tokens))
    at_last = np.isclose(np.asarray(arm.runs.tokens, float), last, rtol=0.01)
    fig, ax = plots.plt.subplots(figsize=(6.4, 4.2))
    for g, colour in zip(groups, plots.colors(len(groups))):
        pts = sorted((shapes[i][1], shapes[i][0]) for i in g)
        loss = [float(np.mean(arm.runs.loss[at_last & (arm.clusters == f"{w}x{d}")])) for d, w in pts]
        ax.plot([d for d, _ in pts], loss, "o-", color=colour,
                label=f"N {n[g].min() / 1e6:.0f}–{n[g].max() / 1e6:.0f}M")
        for (d, w), y in zip(pts, loss):
            ax.annotate(f"W {w}", (d, y), fontsize=6, xytext=(3, 2), textcoords="offset points")
    _plain_log(ax.xaxis, plots, DEPTH_TICKS)
    ax.set_xlabel("depth D (layers, log scale)")
    ax.set_ylabel(f"loss at {last / 1e9:.0f}B tokens (nats)")
    ax.legend(fontsize=7, title=f"matched N (±{MATCH:.0%})", title_fontsize=7)
    ax.grid(alpha=0.3)
    fig.suptitle("Gemstones (hot): loss against depth at matched parameters and tokens", fontsize=10)
    plots.save_figure(fig, path)


def _plain_log(axis, plots, ticks) -> None:
    """A log axis labelled with plain numbers at ``ticks``, not powers of ten."""
    getattr(axis.axes, f"set_{axis.axis_name}scale")("log")
    axis.set_major_locator(plots.matplotlib.ticker.FixedLocator(ticks))
    axis.set_major_formatter(plots.matplotlib.ticker.ScalarFormatter())
    axis.set_minor_formatter(plots.matplotlib.ticker.NullFormatter())


def _fitted(arm, path: Path, plots) -> None:
    laws = _fitted_laws(arm)
    widths = sorted({int(w) for w in arm.runs.width})
    fig, axes = plots.plt.subplots(1, len(laws), figsize=(5.2 * len(laws), 4.6), squeeze=False)
    for ax, law in zip(axes[0], laws):
        pred = arm.fits[law].predict(arm.runs)
        for w, colour in zip(widths, plots.colors(len(widths))):
            at = np.asarray(arm.runs.width) == w
            ax.scatter(arm.runs.loss[at], pred[at], s=10, color=colour, label=f"W {w}")
        lo, hi = float(np.min(arm.runs.loss)), float(np.max(arm.runs.loss))
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        rmse = float(np.sqrt(np.mean((np.asarray(arm.runs.loss) - pred) ** 2)))
        ax.set_title(f"{law} (RMSE {rmse:.3f} nats)", fontsize=9)
        ax.set_xlabel("observed loss (nats)")
        ax.set_ylabel("fitted loss (nats)")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=6, ncol=2)
    fig.suptitle(f"{arm.label}: fitted against observed, one colour per width", fontsize=10)
    plots.save_figure(fig, path)


def _d_crit(arm, path: Path, plots) -> None:
    kappa, (k_lo, k_hi) = PAPER_FIT["kappa"]
    shapes = _shapes(arm)
    w_line = np.geomspace(min(s[0] for s in shapes) * 0.8, max(s[0] for s in shapes) * 1.25, 100)
    fig, ax = plots.plt.subplots(figsize=(6.4, 4.2))
    ax.fill_between(w_line, k_lo * np.log(w_line), k_hi * np.log(w_line), color="grey", alpha=0.25,
                    label=f"paper's κ band [{k_lo}, {k_hi}]")
    ax.plot(w_line, kappa * np.log(w_line), "k-", lw=1.2, label=f"paper's D_crit = {kappa}·ln W")
    past = _past(shapes)
    rest = [s for s in shapes if s not in past]
    ax.scatter([s[0] for s in rest], [s[1] for s in rest], color="tab:blue", label="Gemstones shapes")
    ax.scatter([s[0] for s in past], [s[1] for s in past], color="tab:red",
               label="past the paper's D_crit (they do not lose: audit.csv)")
    _plain_log(ax.xaxis, plots, WIDTH_TICKS)
    _plain_log(ax.yaxis, plots, DEPTH_TICKS)
    ax.set_xlabel("width W (log scale)")
    ax.set_ylabel("depth D (layers, log scale)")
    ax.legend(fontsize=6, loc="lower left")
    ax.grid(alpha=0.3)
    fig.suptitle("D_crit(W): the paper's line against the suite's shapes\n(no kink found in "
                 "Gemstones, so no fitted D_crit is drawn)", fontsize=9)
    plots.save_figure(fig, path)
