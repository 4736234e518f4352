"""The one-step bootstrap of a very large table through block sums.

A one-step resample's θ depends on its weights only through Σᵢ wᵢ·aᵢ, the weighted sums of each
row's k(k+1)/2 Jacobian products and k gradient terms (``resampling._OneStep``). When whole
units (clusters, or blocks of rows) are drawn with replacement, that sum is Σᵤ cᵤ·Sᵤ: the unit
counts c times the units' sums S, so a resample costs O(units·k²), not O(rows·k²) — the 3M-row
fit's 1,000 resamples in a second instead of a minute (benchmarks/RESULTS.md, "The one-step
bootstrap in blocks").

- With clusters, the units are the clusters: the same draws and the same steps as expanding the
  counts to rows (to the last bits of the sums' order).
- Without, the rows are dealt at random (a seeded permutation, within each stratum) into
  ``BLOCKS`` blocks, drawn whole: the case bootstrap of i.i.d. blocks instead of i.i.d. rows.
  Its variance is the rows' (a block sum of m i.i.d. rows has m times their variance) and its
  resamples differ; the coverage of its intervals beside the row bootstrap's is in
  benchmarks/RESULTS.md. Rows in a meaningful order (a run's checkpoints) should be drawn as
  clusters, not left to the random blocks.
"""
from __future__ import annotations

import numpy as np

#: tables of at least this many rows draw blocks, not rows (below, every committed fit)
BLOCK_SUMS_FROM_ROWS = 100_000
#: blocks a table's rows are dealt into (fewer where a stratum has fewer rows)
BLOCKS = 10_000


def count_blocks(unit_strata, units: int, n_boot: int, seed: int, block: int):
    """(resamples × ``units``) draw counts, ``block`` resamples at a time: per resample each
    stratum's units (``unit_strata``, a label per unit, or None: one stratum) drawn with
    replacement, as many as it has. The cluster bootstrap's draws."""
    rng = np.random.default_rng(seed)
    groups = ([np.arange(units)] if unit_strata is None else
              [np.flatnonzero(unit_strata == g) for g in np.unique(unit_strata)])
    for a in range(0, n_boot, block):
        counts = np.zeros((min(block, n_boot - a), units))
        for b in range(len(counts)):
            for members in groups:
                counts[b] += np.bincount(rng.choice(members, len(members)), minlength=units)
        yield counts


def random_blocks(n: int, seed: int, strata=None) -> tuple[np.ndarray, np.ndarray | None]:
    """(block number per row, stratum per block or None): each stratum's rows dealt by a seeded
    permutation into blocks of near-equal size, the stratum's share of ``BLOCKS`` (at least one
    block, at most one per row)."""
    rng = np.random.default_rng([seed, 1])  # a stream apart from the draws' (seeded by ``seed``)
    labels = np.empty(n, dtype=np.int64)
    if strata is None:
        members = [np.arange(n)]
        names = [None]
    else:
        names = np.unique(strata)
        members = [np.flatnonzero(strata == g) for g in names]
    block_strata, first = [], 0
    for rows, name in zip(members, names):
        m = max(1, min(len(rows), round(BLOCKS * len(rows) / max(n, 1))))
        labels[rng.permutation(rows)] = first + np.arange(len(rows)) * m // len(rows)
        block_strata += [name] * m
        first += m
    return labels, (None if strata is None else np.asarray(block_strata))


def unit_sums(labels: np.ndarray, units: int, columns: np.ndarray) -> np.ndarray:
    """(units × columns) sums of ``columns`` (rows × c) over each unit's rows."""
    return np.stack([np.bincount(labels, weights=col, minlength=units) for col in columns.T], axis=1)
