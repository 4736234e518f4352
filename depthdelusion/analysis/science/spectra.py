"""Tail indices of representation spectra ("Scaling laws are redundancy laws"); the report's section on them is
report/spectra_text.py.

`depthdelusion spectrum RUN` (depthdelusion/studies/common/spectrum.py) measures the eigenvalues of the
covariance of a model's residual stream; this module, numpy only, owns what is fitted to them and
the tail.csv format it writes:

- the fit: λ_i ∝ i^(−β), least squares of log λ on log i over a rank range [lo, hi];
- the range rule (`fit_range`): lo = max(2, ⌈W/64⌉) skips the top few directions (outlier
  dimensions of the residual stream do not follow the tail); hi is the largest rank ≤ W/2 such
  that every rank in [lo, hi] has eigenvalues from two disjoint halves of the tokens within
  `HALF_TOLERANCE` of each other (the bottom half of a finite-W spectrum rolls off, and ranks the
  tokens do not pin down are not fitted). Fewer than `MIN_RANKS` ranks: no fit;
- the interval: a delete-one-group jackknife over G contiguous groups of token sequences (it
  reflects the sampling of tokens; a bootstrap over ranks would not, and the ranks' log residuals
  are correlated), β̂ ± t(0.975, G−1)·SE. It is conditional on the rank range: a spectrum that
  is not an exact power law has another β over another range (e.g. when more tokens extend the
  stable range), and the interval does not cover that. On i.i.d. Gaussian samples with an exact
  power law (64 dimensions, 8 groups of 2,000) it covered the true β in 94 of 100 seeds.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from depthdelusion import rundir

from ..formats.table_text import write_csv

HALF_TOLERANCE = 0.10  # relative difference of the two halves' eigenvalues inside the fit range
MIN_RANKS = 5
S_VALUES = (0.25, 0.5, 1.0)  # source smoothness s for the predicted exponent (s is not measured)
TAIL_COLUMNS = ("layer", "beta", "beta_lo", "beta_hi", "beta_half_a", "beta_half_b", "rank_lo",
                "rank_hi", "top_k", "half_max_rel_diff", "tokens")


def fit_tail_index(eigenvalues: np.ndarray, lo: int, hi: int) -> float:
    """β of λ_i ∝ i^(−β) fitted to ranks lo..hi (1-based, inclusive; eigenvalues sorted from the
    largest) by least squares on log-log axes."""
    lam = np.asarray(eigenvalues, dtype=float)[lo - 1:hi]
    if len(lam) < 2 or not np.all(lam > 0):
        return math.nan
    ranks = np.arange(lo, hi + 1, dtype=float)
    return -float(np.polyfit(np.log(ranks), np.log(lam), 1)[0])


def top_k(width: int) -> int:
    """How many leading eigenvalues the half-split agreement is reported over."""
    return min(256, max(1, width // 2))


def relative_differences(a: np.ndarray, b: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """|a_i − b_i| / reference_i (reference: the spectrum of all tokens); inf where it is ≤ 0."""
    ref = np.asarray(reference, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ref > 0, np.abs(np.asarray(a) - np.asarray(b)) / ref, np.inf)


def fit_range(full: np.ndarray, half_a: np.ndarray, half_b: np.ndarray) -> tuple[int, int] | None:
    """(lo, hi) by the rule in the module docstring, or None when fewer than MIN_RANKS qualify."""
    width = len(full)
    lo = max(2, math.ceil(width / 64))
    rel = relative_differences(half_a, half_b, full)
    hi = lo - 1
    for i in range(lo, width // 2 + 1):
        if not (rel[i - 1] <= HALF_TOLERANCE and full[i - 1] > 0):
            break
        hi = i
    return (lo, hi) if hi - lo + 1 >= MIN_RANKS else None


@dataclass
class TailFit:
    layer: int
    beta: float
    ci: tuple[float, float]
    beta_halves: tuple[float, float]
    rank_range: tuple[int, int] | None
    top_k: int
    half_max_rel_diff: float
    tokens: int

    def row(self) -> list:
        lo, hi = self.rank_range or ("", "")
        return [self.layer, _r(self.beta), _r(self.ci[0]), _r(self.ci[1]), _r(self.beta_halves[0]),
                _r(self.beta_halves[1]), lo, hi, self.top_k, _r(self.half_max_rel_diff, 4), self.tokens]


def _r(x: float, digits: int = 3):
    return "" if x is None or not math.isfinite(x) else round(float(x), digits)


def tail_fit(layer: int, full: np.ndarray, halves: tuple[np.ndarray, np.ndarray],
             leave_one_out: list[np.ndarray], tokens: int) -> TailFit:
    """The fit for one layer from its spectra: all tokens, two disjoint halves, and each
    delete-one-group spectrum (the jackknife)."""
    from scipy import stats

    k = top_k(len(full))
    half_diff = float(np.max(relative_differences(halves[0][:k], halves[1][:k], full[:k])))
    rng = fit_range(full, *halves)
    if rng is None:
        return TailFit(layer, math.nan, (math.nan, math.nan), (math.nan, math.nan), None, k,
                       half_diff, tokens)
    beta = fit_tail_index(full, *rng)
    jack = np.array([fit_tail_index(e, *rng) for e in leave_one_out])
    g = len(jack)
    se = math.sqrt((g - 1) / g * float(np.sum((jack - jack.mean()) ** 2)))
    half = stats.t.ppf(0.975, g - 1) * se
    return TailFit(layer, beta, (beta - half, beta + half),
                   (fit_tail_index(halves[0], *rng), fit_tail_index(halves[1], *rng)), rng, k,
                   half_diff, tokens)


def write_tail_csv(fits: list[TailFit], path: Path) -> Path:
    return write_csv(path, TAIL_COLUMNS, [f.row() for f in fits])


def read_tail_csv(path: Path) -> list[dict]:
    """Rows of a tail.csv as dicts of floats (None for an empty cell); a clear error naming the
    file and the missing columns otherwise."""
    with io.StringIO(rundir.as_path(path).read_text(encoding="utf-8"), newline="") as fh:
        reader = csv.DictReader(fh)
        missing = set(TAIL_COLUMNS) - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: not a tail.csv from `depthdelusion spectrum` (missing "
                             f"columns: {', '.join(sorted(missing))})")
        rows = []
        for lineno, raw in enumerate(reader, start=2):
            try:
                rows.append({k: float(raw[k]) if raw[k] not in ("", None) else None for k in TAIL_COLUMNS})
            except ValueError:
                raise ValueError(f"{path} line {lineno}: a value is not a number") from None
    return rows


def spectrum_tables(root) -> list[tuple[str, list[dict]]]:
    """Every RUN/spectrum/tail.csv below ``root`` (a directory of runs), read: (run name, its
    rows) pairs; none when there is no table (or ``root`` is not a directory)."""
    if not root or not rundir.as_path(root).is_dir():  # "" (runs not loaded from a directory) included
        return []
    root = rundir.as_path(root)
    return [(path.parent.parent.relative_to(root).as_posix() if path.parent.parent != root else root.name,
             read_tail_csv(path)) for path in rundir.files_below(root, "spectrum/tail.csv")]