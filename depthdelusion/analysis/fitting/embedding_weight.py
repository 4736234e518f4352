"""N = N_nonemb + ε·N_emb with the weight ε of the embeddings fitted (``--params fitted``).

Whether embeddings count as model capacity decides the sign of a shape effect on Gemstones
(issue 62): total N (ε = 1) and Kaplan's non-embedding N (ε = 0) are two ends of one family.
ε is profiled, not searched inside the law: for each ε the law is refitted by least squares to
N = N_nonemb + ε·N_emb (the pieces: :func:`..table.param_count.param_pieces`), and
Λ(ε) = n·ln(RSS(ε) / RSS_min) is compared with χ²₁(0.95), the same profile as every law
parameter's (:mod:`.profile`). ε is searched over its declared range [0, 1] (non-embedding N to
total N); an interval end that does not close inside it is open and said so, never a number.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from ..table.param_count import param_pieces
from .engine import fit

#: ε's declared range: 0 is Kaplan's non-embedding N, 1 the total.
EPSILON_RANGE = (0.0, 1.0)
#: Grid points over the range before the best is refined.
GRID = 21
CHI2_95 = 3.841458820694124
_QUICK = dict(bootstrap=0, profile=False, leave_one_out=False, diagnostics=False)


@dataclass(frozen=True)
class EmbeddingWeight:
    """ε's estimate and 95% profile interval; an end at the range's edge where the profile does
    not close (``low_open`` / ``high_open``); the least-squares RSS at 0, 1 and the estimate."""

    law: str
    value: float
    low: float
    high: float
    low_open: bool
    high_open: bool
    rss: dict

    def interval_text(self) -> str:
        if self.low_open and self.high_open:
            return "n.i. (the profile does not close inside [0, 1])"
        low = f"≤ {self.low:.3g}" if self.low_open else f"{self.low:.3g}"
        high = f"≥ {self.high:.3g}" if self.high_open else f"{self.high:.3g}"
        return f"[{low}, {high}]"

    def sentence(self) -> str:
        return (f"N = N_nonemb + ε·N_emb with ε fitted: ε = {self.value:.3g} {self.interval_text()} "
                f"(95% profile over ε ∈ [0, 1], law {self.law} by least squares; RSS {self.rss[0.0]:.4g} at "
                f"ε = 0, {self.rss[1.0]:.4g} at ε = 1, {self.rss[self.value]:.4g} at the estimate; the "
                "profile treats rows as independent, so checkpoints of one run make it too narrow); "
                "ε is one more fitted parameter, which the law's AIC/BIC below do not count")


def fit_embedding_weight(runs, law: str, method: str = "lm", **fit_kwargs) -> EmbeddingWeight:
    """ε of N = N_nonemb + ε·N_emb for ``law`` on ``runs`` by a least-squares profile."""
    if method not in ("lm", "ls"):
        raise ValueError(f"--params fitted profiles ε by least squares; --loss {method} is not "
                         "supported with it: use --loss ls")
    n_nonemb, n_emb, _ = param_pieces(runs)
    cache = {}

    def rss(eps: float) -> float:
        if eps not in cache:
            shifted = dataclasses.replace(runs, params=n_nonemb + eps * n_emb)
            cache[eps] = fit(shifted, law, "lm", **_QUICK, **fit_kwargs).rss
        return cache[eps]

    grid = np.linspace(*EPSILON_RANGE, GRID)
    values = [rss(float(e)) for e in grid]
    best = int(np.argmin(values))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, GRID - 1)]
    value = float(optimize.minimize_scalar(rss, bounds=(lo, hi), method="bounded",
                                           options={"xatol": 1e-3}).x)
    if rss(value) > values[best]:
        value = float(grid[best])
    n = len(runs)

    def excess(eps: float) -> float:  # Λ(ε) − χ²₁(0.95)
        return n * math.log(rss(eps) / rss(value)) - CHI2_95

    low, low_open = _interval_end(excess, value, EPSILON_RANGE[0], grid)
    high, high_open = _interval_end(excess, value, EPSILON_RANGE[1], grid)
    return EmbeddingWeight(law, value, low, high, low_open, high_open,
                           {0.0: rss(0.0), 1.0: rss(1.0), value: rss(value)})


def _interval_end(excess, value: float, edge: float, grid) -> tuple[float, bool]:
    """Where Λ crosses χ²₁(0.95) between the estimate and ``edge`` (the grid point nearest the
    estimate that is past it, then brentq); ``(edge, True)`` when it never does."""
    side = [e for e in grid if (e < value if edge < value else e > value)]
    for far in sorted(side, key=lambda e: abs(e - value)):
        if excess(float(far)) > 0:
            return float(optimize.brentq(excess, value, float(far), xtol=1e-4)), False
    if value != edge and excess(edge) > 0:
        return float(optimize.brentq(excess, value, edge, xtol=1e-4)), False
    return edge, True


def with_fitted_weight(runs, law: str, method: str = "lm", held: str = "", **fit_kwargs) -> tuple:
    """``(runs, notes, weight)``: the runs with N = N_nonemb + ε̂·N_emb and the sentence saying ε
    (``held``: what holds ε̂ afterwards, e.g. "every law below"). ``fit_kwargs``: the profile's
    fits' (e.g. ``group_offsets``)."""
    weight = fit_embedding_weight(runs, law, method, **fit_kwargs)
    n_nonemb, n_emb, how = param_pieces(runs)
    shifted = dataclasses.replace(runs, params=n_nonemb + weight.value * n_emb)
    held = (f"; ε held at {weight.value:.3g} for {held} (its own interval is not carried into theirs)"
            if held else "")
    return shifted, [f"N convention: {weight.sentence()}{held}; N_nonemb is {how}"], weight
