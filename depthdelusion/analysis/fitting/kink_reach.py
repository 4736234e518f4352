"""Where a fitted kink acts: the shapes and rows past D_crit(W), and whether any width has shapes
on both sides of it.

A kink law's penalty λ·max(0, D − D_crit(W))·… is zero for every row with D ≤ D_crit(W), so its
whole gain over the shape-agnostic law rests on the rows past D_crit. When those are a handful of
shapes — say the largest models — a break in model size fits as well, and the fit says nothing
about depth at a fixed width. Within a width the kink is tested only when that width has shapes
on both sides of D_crit; with fewer than :data:`MIN_WIDTHS_BOTH_SIDES` such widths the verdict
must say that the kink is not tested within widths.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..laws import get_law

MIN_WIDTHS_BOTH_SIDES = 3  # fewer widths with shapes on both sides of D_crit: not tested within widths
SHAPES_LISTED = 8  # shapes past D_crit named; the rest counted
AT_BREAK = 1e-9  # a row within this relative distance of D_crit is on it, not past it


@dataclass(frozen=True)
class KinkReach:
    """The rows and shapes (distinct D × W) a fitted kink's penalty touches."""

    location: str          # the fitted kink, e.g. "D_crit = 4.6·ln W"
    n_shapes: int
    n_rows: int
    past_shapes: tuple     # labels "DL×W" of the shapes with D > D_crit(W), most layers past first
    past_rows: int
    widths_both_sides: int  # widths with shapes on both sides of D_crit
    n_widths: int
    size_break: float = float("nan")  # when every row past D_crit is larger (N) than every row
    #                                   before it: the smallest N past it (a size break splits alike)

    @property
    def tested_within_widths(self) -> bool:
        return self.widths_both_sides >= MIN_WIDTHS_BOTH_SIDES

    @property
    def threshold_inside(self) -> bool:
        """Rows on both sides of D_crit: only then is there a threshold in the data. With every
        row past it the kink is λ·(D − D_crit)·… throughout, a smooth depth penalty."""
        return 0 < self.past_rows < self.n_rows

    def sentence(self) -> str:
        named = ", ".join(self.past_shapes[:SHAPES_LISTED])
        more = len(self.past_shapes) - SHAPES_LISTED
        named += f" …and {more} more" if more > 0 else ""
        return (f"Kink reach ({self.location}): {len(self.past_shapes)} of {self.n_shapes} shapes "
                f"({self.past_rows} of {self.n_rows} rows) have D > D_crit(W)"
                + (f": {named}" if named else "") + f"; {self.widths_both_sides} of {self.n_widths} "
                "widths have shapes on both sides of D_crit" + ("" if self.tested_within_widths else
                f" (fewer than {MIN_WIDTHS_BOTH_SIDES}: the kink is not tested within widths)") + "."
                + self.size_text())

    def size_text(self) -> str:
        """" The rows past D_crit are the k largest models …" when a break in N splits them alike."""
        if not np.isfinite(self.size_break):
            return ""
        return (f" The rows past D_crit are the {self.past_rows} largest models (N ≥ "
                f"{self.size_break:.3g}): a break in model size there splits the rows the same way.")

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "past_shapes": list(self.past_shapes),
                "tested_within_widths": self.tested_within_widths, "threshold_inside": self.threshold_inside}

    def untested(self) -> str:
        """The clause a verdict carries when the kink is not tested within widths ("" if it is)."""
        if self.tested_within_widths:
            return ""
        return (f"the kink is not tested within widths (only {self.widths_both_sides} of "
                f"{self.n_widths} widths have shapes on both sides of D_crit, fewer than "
                f"{MIN_WIDTHS_BOTH_SIDES}): what it fits may be a break across widths or model sizes")


def kink_reach(law, values: dict, depth, width, size=None) -> KinkReach | None:
    """The reach of ``law``'s kink (a Law or its name; its declared critical depth) at
    ``values`` over rows of ``depth`` × ``width`` (``size``: their N, to say whether a
    model-size break splits the rows alike); None when the law has no critical depth or no row
    gives both."""
    law = get_law(law)
    if not law.has_critical_depth:
        return None
    D, W = np.asarray(depth, float), np.asarray(width, float)
    keep = np.isfinite(D) & np.isfinite(W) & (W > 0)
    if not keep.any():
        return None
    D, W = D[keep], W[keep]
    d_crit = np.broadcast_to(law.critical_depth(values, W), D.shape)
    # A row at D_crit itself pays nothing (max(0, D − D_crit) = 0); the search puts a kink on a
    # row's break (search.scan_breaks), where D − D_crit is a rounding error of either sign.
    past = D - d_crit > AT_BREAK * np.maximum(D, 1.0)
    N = np.full(len(D), np.nan) if size is None else np.asarray(size, float)[keep]
    size_break = (float(N[past].min()) if past.any() and (~past).any() and np.all(np.isfinite(N))
                  and N[past].min() > N[~past].max() else float("nan"))
    excess = {}  # shape → D − D_crit in layers (what the penalty is linear in), for those past it
    sides: dict = {}  # width → the sides of D_crit its shapes are on
    for d, w, p, dc in zip(D, W, past, d_crit):
        sides.setdefault(w, set()).add(bool(p))
        if p:
            excess[(d, w)] = d - float(dc)
    shapes = sorted(excess, key=lambda s: -excess[s])
    return KinkReach(law.critical_depth_text(values), len(set(zip(D.tolist(), W.tolist()))),
                     int(keep.sum()), tuple(f"{d:g}L×{w:g}" for d, w in shapes), int(past.sum()),
                     sum(len(s) == 2 for s in sides.values()), len(sides), size_break)


def reach_of_fit(result, runs) -> KinkReach | None:
    """:func:`kink_reach` of a fitted law with a declared penalty and critical depth (its fixed
    values included) over the rows it was fitted to; None for a law without them."""
    depth, width = getattr(runs, "depth", None), getattr(runs, "width", None)
    if not (result.law.penalty and result.law.has_critical_depth) or depth is None or width is None:
        return None
    return kink_reach(result.law, result.all_params, depth, width, getattr(runs, "params", None))
