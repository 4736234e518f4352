"""Clusters of rows (the rows of one training run, resampled or simulated together): the
cluster number of each row and the stratum of each cluster."""
from __future__ import annotations

import numpy as np


def cluster_index(clusters, n: int, strata=None) -> tuple[np.ndarray, np.ndarray | None]:
    """(cluster number per row, stratum per cluster or None) for ``clusters``, labels per row;
    a cluster that spans two strata is an error (a run belongs to one source)."""
    labels = np.asarray(clusters)
    if labels.shape != (n,):
        raise ValueError(f"clusters: expected one label per run ({n}), got {labels.size}")
    names, idx = np.unique(labels.astype(str), return_inverse=True)
    if strata is None:
        return idx, None
    per_cluster = np.zeros(len(names), dtype=np.asarray(strata).dtype)
    per_cluster[idx] = strata
    if np.any(per_cluster[idx] != strata):
        raise ValueError("clusters: a cluster (run) spans two groups; each run must lie in one group")
    return idx, per_cluster


#: ``--cluster row``: each row its own cluster, the plain case bootstrap
ROW = "row"


def cluster_labels(runs, column: str | None = None) -> tuple[np.ndarray | None, str]:
    """(labels per row, or None for the row bootstrap; the cluster's name for the output) of
    ``column`` in ``runs`` (a ``Runs`` table): its values, each within its group (a run lies in
    one group), or ``"row"`` for no clustering. ``None``: the table's run column where it has
    one and a run has several rows; else, for a table without a run column, the shape
    (depth × width) where shapes repeat (Gemstones' checkpoints, Chinchilla's token budgets of
    one shape); else rows. A column the table lacks is a one-line error listing its columns."""
    from ..table.row_filter import column_values

    if column == ROW:
        return None, ROW
    if column is not None:
        values = np.asarray(column_values(runs, column, flag="--cluster")).astype(str)
        return _within_groups(runs, values), column
    if "name" in (getattr(runs, "column_sources", {}) or {}):
        names = np.asarray(runs.name).astype(str)
        return (_within_groups(runs, names), "run") if _repeats(names) else (None, ROW)
    if runs.has("depth") and runs.has("width"):
        shapes = np.array([f"{d}x{w}" for d, w in zip(runs.depth, runs.width)])
        if _repeats(shapes):
            return _within_groups(runs, shapes), "shape"
    return None, ROW


def _repeats(labels: np.ndarray) -> bool:
    return len(np.unique(labels)) < len(labels)


def _within_groups(runs, labels: np.ndarray) -> np.ndarray:
    """``labels`` made distinct across groups: the rows of one label in two groups (sources,
    token regimes) are two clusters, so that a cluster nests in the strata of a group fit."""
    groups = np.asarray(runs.group).astype(str)
    if len(np.unique(groups)) < 2:
        return labels
    return np.char.add(np.char.add(groups, "/"), labels)


def cluster_kwargs(cluster: str | None, runs) -> dict:
    """``clusters`` and ``cluster_name`` of ``fitting.fit`` for the table ``runs``: the labels of
    the ``--cluster`` column ``cluster`` (None: the default's), or the row bootstrap named as such.
    (Here, not on ``FitOptions``: the options stay a leaf of the import graph.)"""
    labels, name = cluster_labels(runs, cluster)
    return dict(clusters=labels, cluster_name=name)
