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
