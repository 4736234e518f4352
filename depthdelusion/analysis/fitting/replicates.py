"""Replicate cells: rows that share the law's inputs (params, tokens, depth, width) — the same
model trained on the same data at several learning rates, seeds, batch sizes — and their
reduction to one row per cell.

A law sees only (N, T, D, W), so such rows are replicates of one point: fitted as they are,
they count as independent runs (standard errors too small, the learning-rate spread taken for
noise). Published sweeps are nearly always like this. ``reduce_replicates`` keeps the lowest
loss over a column (``best-of=lr``, the usual practice, which biases the loss down) or averages
over it (``mean=seed``).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..table.runs import Runs

#: The law's inputs: rows equal in these are one point of the law.
CELL_COLUMNS = ("params", "tokens", "depth", "width")
REDUCTIONS = ("best-of", "mean")


@dataclass
class ReplicateCells:
    """``cells``: index arrays of the cells with more than one row; ``varying``: the table's
    other columns whose values differ within some cell."""

    cells: list
    varying: list
    key_columns: tuple

    @property
    def n_rows(self) -> int:
        return int(sum(len(c) for c in self.cells))

    def describe(self, runs: Runs) -> str:
        if not self.cells:
            return ""
        from ..table.row_filter import grouping_columns

        groups = [c for c in self.varying if c in grouping_columns(runs)]  # e.g. dataset
        knobs = [c for c in self.varying if c not in groups]  # e.g. lr, seed
        copies = not self.varying and all(len(set(runs.loss[c].tolist())) == 1 for c in self.cells)
        what = (f"differ in {', '.join(self.varying)}" if self.varying else
                "are exact copies (duplicated rows?)" if copies else
                "differ only in their loss (no column says why: seeds?)")
        hints = []
        if knobs:
            hints.append(f"reduce them with --reduce best-of={knobs[0]} (the lowest loss per cell) "
                         f"or --reduce mean={knobs[0]}")
        if groups:
            hints.append(f"fit each value of {groups[0]} on its own (--by {groups[0]}, or "
                         f"--group VALUE when it is the group column)")
        if not self.varying:
            hints.append("remove the duplicated rows" if copies else
                         "add the column that tells them apart (e.g. seed) and --reduce mean=COL")
        return (f"{self.n_rows} of {len(runs)} rows fall in {len(self.cells)} replicate cells "
                f"(equal {', '.join(self.key_columns)}) that {what}: the fit pools them as "
                f"independent runs of the law; {'; or '.join(hints)}")


def _key_columns(runs: Runs) -> tuple:
    return tuple(c for c in CELL_COLUMNS if np.any(np.isfinite(np.asarray(getattr(runs, c), float))))


def _cell_keys(runs: Runs, columns) -> list:
    arrays = [np.asarray(getattr(runs, c), float) for c in columns]
    return [tuple(float(f"{a[i]:.12g}") if np.isfinite(a[i]) else None for a in arrays)
            for i in range(len(runs))]


def _cell_index(runs: Runs, columns) -> np.ndarray:
    """Per row, the index of its cell (rows equal in ``columns`` to 12 significant digits)."""
    if not columns:
        return np.zeros(len(runs), int)
    arrays = []
    for c in columns:
        a = np.asarray(getattr(runs, c), float)
        arrays.append(np.where(np.isfinite(a), _round12(a), -np.inf))
    return _row_ids(np.stack(arrays, axis=1))


def _row_ids(rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows`` (n, c), the index of its value among the distinct rows in
    lexicographic order: ``np.unique(rows, axis=0, return_inverse=True)[1]``, by one lexsort
    (np.unique's row sort is several times slower on millions of rows)."""
    order = np.lexsort(rows.T[::-1])
    ranked = rows[order]
    new = np.ones(len(rows), bool)
    new[1:] = np.any(ranked[1:] != ranked[:-1], axis=1)
    ids = np.empty(len(rows), int)
    ids[order] = np.cumsum(new) - 1
    return ids


def _round12(a: np.ndarray) -> np.ndarray:
    """a rounded to 12 significant digits (so that 1e9 read two ways is one value)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        digits = 11 - np.floor(np.log10(np.abs(np.where(np.isfinite(a) & (a != 0), a, 1.0))))
        scale = 10.0 ** digits
        return np.round(a * scale) / scale


def replicate_cells(runs: Runs) -> ReplicateCells:
    """The replicate cells of ``runs`` and the columns that vary within them."""
    cols = _key_columns(runs)
    inverse = _cell_index(runs, cols)
    counts = np.bincount(inverse)
    order = np.argsort(inverse, kind="stable")
    starts = np.cumsum(counts) - counts
    # only the cells of two rows or more are made (a table of distinct rows has n cells of one)
    cells = [order[starts[c]:starts[c] + counts[c]] for c in np.flatnonzero(counts > 1)]
    varying = []
    others = {**runs.extra, "group": runs.group}
    for name, values in others.items():
        if any(len({str(values[i]) for i in c}) > 1 for c in cells):
            varying.append(name)
    return ReplicateCells(cells, varying, cols)


def parse_reduce(spec: str) -> tuple[str, str]:
    """``"best-of=lr"`` -> ("best-of", "lr")."""
    how, sep, col = (s.strip() for s in str(spec).partition("="))
    if not sep or how not in REDUCTIONS or not col:
        raise ValueError(f"--reduce {spec!r}: expected best-of=COLUMN (the lowest loss over that "
                         "column in each cell) or mean=COLUMN (the mean loss over it)")
    return how, col


def _expected_max_normal(k: int) -> float:
    """E[max of k independent standard normals] (0.56 for 2, 0.85 for 3, 1.03 for 4)."""
    if k <= 1:
        return 0.0
    from scipy import integrate, stats

    f = lambda x: x * k * stats.norm.pdf(x) * stats.norm.cdf(x) ** (k - 1)
    return float(integrate.quad(f, -10, 10)[0])


def reduce_replicates(runs: Runs, spec: str) -> Runs:
    """One row per (cell, the other varying columns): the lowest loss over ``COLUMN``
    (``best-of=COLUMN``) or the mean over it (``mean=COLUMN``, loss_se = s.d./√k). Notes say
    what was done and, for best-of, how far down the selection biases the loss."""
    how, col = parse_reduce(spec)
    if col not in runs.extra:
        known = ", ".join(runs.extra) or "none"
        raise ValueError(f"--reduce {spec}: the table has no column {col!r} besides the law's "
                         f"(its other columns: {known})")
    cols = _key_columns(runs)
    keys = _cell_keys(runs, cols)
    rest = [c for c in runs.extra if c != col]
    groups: dict = {}
    for i, key in enumerate(keys):
        full = key + (str(runs.group[i]),) + tuple(str(runs.extra[c][i]) for c in rest)
        groups.setdefault(full, []).append(i)
    keep, loss, loss_se, sizes = [], [], [], []
    for members in groups.values():
        m = np.array(members)
        sizes.append(len(m))
        if how == "best-of":
            best = m[int(np.argmin(runs.loss[m]))]
            keep.append(best)
            loss.append(runs.loss[best])
            loss_se.append(runs.loss_se[best])
        else:
            keep.append(m[0])
            loss.append(float(np.mean(runs.loss[m])))
            loss_se.append(float(np.std(runs.loss[m], ddof=1) / math.sqrt(len(m))) if len(m) > 1
                           else runs.loss_se[m[0]])
    out = runs.subset(np.array(keep))
    out = dataclasses.replace(out, loss=np.array(loss, float), loss_se=np.array(loss_se, float),
                              extra={k: v for k, v in out.extra.items() if k != col},
                              notes=list(out.notes))
    k = int(np.median(sizes)) if sizes else 1
    if how == "mean":
        out.notes.append(f"replicates reduced: mean loss over {col} in each cell ({len(runs)} → "
                         f"{len(out)} rows; loss_se = s.d./√k)")
        return out
    spread = _within_cell_sd(out, cols)
    bias = (f"with the spread between the remaining replicates (s.d. {spread[0]:.3g} nats over "
            f"{spread[1]} cells) that is at most about {spread[0] * _expected_max_normal(k):.2g} "
            "nats (the expected maximum of k normal draws, if the values of "
            f"{col} were equally good)" if spread else
            "the table has no other replicates (e.g. seeds) to size it")
    out.notes.append(f"replicates reduced: the lowest loss over {col} in each cell ({len(runs)} → "
                     f"{len(out)} rows, typically {k} per cell). Picking the lowest of k noisy "
                     f"losses biases the loss down; {bias}")
    return out


def _within_cell_sd(runs: Runs, cols) -> tuple[float, int] | None:
    """Pooled within-cell standard deviation of the loss over cells with several rows."""
    by_key: dict = {}
    for i, key in enumerate(_cell_keys(runs, cols)):
        by_key.setdefault(key, []).append(i)
    cells = [np.array(v) for v in by_key.values() if len(v) > 1]
    if not cells:
        return None
    ss = sum(float(np.sum((runs.loss[c] - runs.loss[c].mean()) ** 2)) for c in cells)
    dof = sum(len(c) - 1 for c in cells)
    return math.sqrt(ss / dof), len(cells)
