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
    arm: str = ""        # the arm drawn (its table and N convention)
    matched: tuple = ()  # (N convention, groups of >= 3 shapes matched in it) per panel
    collapsed: tuple = ()  # the laws drawn whose fit is chinchilla's


def figure_facts(arm, arms=()) -> FigureFacts:
    shapes = _shapes(arm)
    panels = [a for a in arms if a.table == arm.table] or [arm]
    laws = tuple(_fitted_laws(arm))
    return FigureFacts(len(_matched_groups(shapes)), float(np.max(arm.runs.tokens)), laws,
                       len(shapes), len(_past(shapes)), arm.label,
                       tuple((a.convention, len(_matched_groups(_shapes(a)))) for a in panels),
                       tuple(law for law in laws if "= chinchilla" in _panel_name(arm, law)))


def captions(facts: FigureFacts) -> list[str]:
    """One line per figure saying what it shows."""
    kappa = PAPER_FIT["kappa"][0]
    matched = ", ".join(f"{c} N: {g}" for c, g in facts.matched) or f"{facts.groups}"
    same = (f"; {', '.join(facts.collapsed)} collapsed to chinchilla (the panel says so)" if facts.collapsed else "")
    return [f"{LOSS_VS_DEPTH}: loss against depth among shapes matched in N (within {MATCH:.0%}) at "
            f"the last budget ({facts.last_tokens / 1e9:.0f}B tokens), one panel per N convention; groups of "
            f"≥ 3 shapes — {matched}",
            f"{FITTED}: fitted against observed loss on {facts.arm}, one colour per width "
            f"({', '.join(facts.laws)}){same}",
            f"{D_CRIT}: the paper's D_crit = {kappa}·ln W with its κ band and the suite's {facts.shapes} "
            f"shapes ({facts.past} past the line); no fitted D_crit(W): its exponent is not identified (4.1)"]


def draw(arm, out: Path, arms=()) -> None:
    """Every figure of the module for ``arm``, into ``out``; the matched-N figure one panel per
    arm of ``arm``'s table in ``arms`` (each N convention matches different shapes)."""
    # here, not at the top: only the figures part pays matplotlib's import (4 s measured)
    from depthdelusion.analysis.report import plots

    panels = [a for a in arms if a.table == arm.table] or [arm]
    _matched(panels, out / LOSS_VS_DEPTH, plots)
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


def _matched(arms, path: Path, plots) -> None:
    fig, axes = plots.plt.subplots(1, len(arms), figsize=(5.2 * len(arms), 4.4), squeeze=False, sharey=True)
    for ax, arm in zip(axes[0], arms):
        _matched_panel(ax, arm, plots)
    axes[0][0].set_ylabel(f"loss at {float(np.max(arms[0].runs.tokens)) / 1e9:.0f}B tokens (nats)")
    fig.suptitle(f"{arms[0].table}: loss against depth among shapes matched in N (±{MATCH:.0%}) at the "
                 "last budget — the matching depends on the N convention", fontsize=9)
    plots.save_figure(fig, path)


def _matched_panel(ax, arm, plots) -> None:
    shapes = _shapes(arm)
    n = np.array([s[2] for s in shapes])
    groups = _matched_groups(shapes)
    last = float(np.max(arm.runs.tokens))
    at_last = np.isclose(np.asarray(arm.runs.tokens, float), last, rtol=0.01)
    for g, colour in zip(groups, plots.colors(len(groups))):
        pts = sorted((shapes[i][1], shapes[i][0]) for i in g)
        loss = [float(np.mean(arm.runs.loss[at_last & (arm.clusters == f"{w}x{d}")])) for d, w in pts]
        ax.plot([d for d, _ in pts], loss, "o-", color=colour,
                label=f"N {n[g].min() / 1e6:.0f}–{n[g].max() / 1e6:.0f}M")
        for (d, w), y in zip(pts, loss):
            ax.annotate(f"W {w}", (d, y), fontsize=6, xytext=(3, 2), textcoords="offset points")
    _plain_log(ax.xaxis, plots, DEPTH_TICKS)
    ax.set_xlabel("depth D (layers, log scale)")
    ax.legend(fontsize=6, title=f"matched {arm.convention} N", title_fontsize=6)
    ax.grid(alpha=0.3)
    ax.set_title(f"N: {arm.convention}" + (f" (ε = {arm.epsilon:.2g})" if arm.convention == "fitted" else ""),
                 fontsize=8)


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
        ax.set_title(f"{_panel_name(arm, law)} (RMSE {rmse:.3f} nats)", fontsize=8)
        ax.set_xlabel("observed loss (nats)")
        ax.set_ylabel("fitted loss (nats)")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=6, ncol=2)
    fig.suptitle(f"{arm.label}: fitted against observed, one colour per width", fontsize=10)
    plots.save_figure(fig, path)


def _panel_name(arm, law: str) -> str:
    """The law's name, saying when its fit is chinchilla's (a kink collapsed to λ → 0)."""
    base = arm.fits.get("chinchilla")
    f = arm.fits[law]
    if law != "chinchilla" and base is not None and abs(f.rss - base.rss) <= 1e-6 * base.rss:
        return f"{law} = chinchilla (kink outside the data, λ → 0)"
    return law


def _d_crit(arm, path: Path, plots) -> None:
    kappa, (k_lo, k_hi) = PAPER_FIT["kappa"]
    shapes = _shapes(arm)
    w_line = np.geomspace(min(s[0] for s in shapes) * 0.8, max(s[0] for s in shapes) * 1.25, 100)
    fig, ax = plots.plt.subplots(figsize=(8.4, 4.2))
    ax.fill_between(w_line, k_lo * np.log(w_line), k_hi * np.log(w_line), color="grey", alpha=0.25,
                    label=f"paper's κ band [{k_lo}, {k_hi}]")
    ax.plot(w_line, kappa * np.log(w_line), "k-", lw=1.2, label=f"paper's D_crit = {kappa}·ln W")
    past = _past(shapes)
    rest = [s for s in shapes if s not in past]
    ax.scatter([s[0] for s in rest], [s[1] for s in rest], color="tab:blue", label="Gemstones shapes")
    ax.scatter([s[0] for s in past], [s[1] for s in past], color="tab:red",
               label="past the paper's D_crit (do they lose? audit.csv)")
    _plain_log(ax.xaxis, plots, WIDTH_TICKS)
    _plain_log(ax.yaxis, plots, DEPTH_TICKS)
    ax.set_xlabel("width W (log scale)")
    ax.set_ylabel("depth D (layers, log scale)")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(alpha=0.3)
    fig.suptitle("D_crit(W): the paper's line against the suite's shapes\n(no fitted D_crit drawn: its "
                 "exponent is not identified on any N convention, 4.1)", fontsize=9)
    plots.save_figure(fig, path)
