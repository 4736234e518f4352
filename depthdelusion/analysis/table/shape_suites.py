"""Suites for the pooled shape fit (``depthdelusion shape``, issue 58): each table given is one
suite, with per row its depth, width, tokens, loss, the parameter count split into its
non-embedding and embedding parts, and the run (cluster) the row belongs to.

The split is :func:`embedding_split`, the one place that decides how N is counted here. It is
meant to be replaced by the published-table layer's ``param_pieces(runs)`` (branch h58-tables,
``table/param_count.py``: the same (N_nonemb, N_emb, how), from a table's registered embedding
count) once that is merged, keeping the fallback below for a table it refuses.
Kaplan's non-embedding N removes every vocabulary matrix (input embedding and LM head).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .param_count import param_pieces

#: Columns the shape fit needs, in the words of the error a table without them gets.
SHAPE_COLUMNS = ("depth", "width", "params", "tokens", "loss")


@dataclass(frozen=True)
class Suite:
    """One table's rows, arrays of shape (n,): depth (layers), width (model dimension), tokens,
    loss (nats), params_total, params_nonemb (Kaplan: no vocabulary matrix) and params_emb (the
    vocabulary matrices), and run, the label of the row's cluster (resampled whole; folds of the
    held-out check), whose unit ``cluster_name`` names ("shape" by default)."""

    name: str
    depth: np.ndarray
    width: np.ndarray
    tokens: np.ndarray
    loss: np.ndarray
    params_total: np.ndarray
    params_nonemb: np.ndarray
    params_emb: np.ndarray
    run: np.ndarray
    count_note: str
    cluster_name: str = "shape"

    @property
    def counts_embeddings(self) -> bool:
        """Whether the count has vocabulary matrices in it (a registration, a non-embedding
        column or a vocabulary column): without, N_emb is 0 and ε does not act on the suite."""
        return bool(np.any(self.params_emb > 0))

    def __len__(self) -> int:
        return len(self.loss)

    @property
    def compute(self) -> np.ndarray:
        """C = 6·N_total·T per row (FLOPs)."""
        return 6.0 * self.params_total * self.tokens


def embedding_split(runs, name: str) -> tuple[np.ndarray, np.ndarray, str]:
    """(N_nonemb, N_emb) per row of ``runs`` (a :class:`.runs.Runs`), Kaplan's convention
    (every vocabulary matrix is embedding), and the sentence saying how they were counted: a
    registered table's count or the table's own non-embedding column (:func:`.param_count.param_pieces`,
    the one owner of that rule); else, from a vocabulary column, untied embeddings (input and LM
    head: 2·V·W) unless a ``tied_embeddings`` column says true; else everything counts as
    non-embedding (ε then does not act on that suite)."""
    try:
        n_nonemb, n_emb, how = param_pieces(runs)
        return n_nonemb, n_emb, f"{name}: {how}"
    except ValueError:
        pass  # neither a registration nor a non-embedding column: count from the vocabulary
    total = np.asarray(runs.params, float)
    width = np.asarray(runs.width, float)
    vocab = np.asarray(runs.vocab_size, float)
    tied = np.array([str(v).strip().lower() in ("1", "true", "yes")
                     for v in runs.extra.get("tied_embeddings", [""] * len(total))])
    if np.all(np.isfinite(vocab)):
        emb = np.where(tied, 1.0, 2.0) * vocab * width
        how = ("N_emb = V·W tied, 2·V·W untied (V the table's vocabulary; "
               f"{'tied' if tied.all() else 'untied' if not tied.any() else 'mixed'})")
        return total - emb, emb, f"{name}: {how}; N_nonemb = N_total − N_emb"
    return total, np.zeros_like(total), (f"{name}: no vocabulary and no non-embedding column: every "
                                         "parameter counted as non-embedding (ε does not act on this suite)")


def suite_from_runs(runs, name: str, clusters=None, cluster_name: str = "shape") -> Suite:
    """The suite of ``runs`` (a :class:`.runs.Runs`); a table without one of
    :data:`SHAPE_COLUMNS` is refused, naming it. ``clusters``: a cluster label per row of
    ``runs``, the unit named ``cluster_name`` (None: the shape, depth × width)."""
    missing = [c for c in SHAPE_COLUMNS if not runs.has(c)]
    if missing:
        raise ValueError(f"{name}: the shape fit needs columns {', '.join(SHAPE_COLUMNS)}; this table "
                         f"has no {', '.join(missing)} (map one with --column NAME=COLUMN)")
    keep = (np.isfinite(np.asarray(runs.depth, float)) & np.isfinite(np.asarray(runs.width, float))
            & np.isfinite(runs.params) & np.isfinite(runs.tokens) & np.isfinite(runs.loss))
    if keep.sum() < 5:
        raise ValueError(f"{name}: {int(keep.sum())} rows with depth, width, params, tokens and loss "
                         "all known; the shape fit needs at least 5")
    runs = runs.subset(keep)
    nonemb, emb, note = embedding_split(runs, name)
    # A run's checkpoint series shares one run's noise: its rows are resampled together. By
    # default the shape (depth × width) stands for the run; a suite with several runs per shape
    # is treated conservatively as one cluster per shape.
    labels = (np.array([f"{d}x{w}" for d, w in zip(runs.depth, runs.width)]) if clusters is None
              else np.asarray(clusters).astype(str)[keep])
    run = np.char.add(f"{name}:", labels)
    return Suite(name, np.asarray(runs.depth, float), np.asarray(runs.width, float),
                 np.asarray(runs.tokens, float), np.asarray(runs.loss, float),
                 np.asarray(runs.params, float), nonemb, emb, run, note, cluster_name)
