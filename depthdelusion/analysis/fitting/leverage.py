"""Leverage: the hat-matrix diagonal of a fit's Jacobian, for the row diagnostics
(:mod:`.diagnostics`) and the hat-matrix leave-one-out (:mod:`.resampling`)."""
from __future__ import annotations

import numpy as np


def leverage(J, weights=None) -> tuple[np.ndarray, int]:
    """(hat-matrix diagonal, rank) of the Jacobian J (n, k) with row weights, from its thin
    pivoted QR after scaling columns to unit norm; directions the data do not determine
    (|R_jj| below 1e-10 of the largest) are left out."""
    from scipy.linalg import qr

    J = np.asarray(J, float)
    if weights is not None:
        J = J * np.sqrt(np.asarray(weights, float))[:, None]
    J = np.where(np.isfinite(J), J, 0.0)
    col = np.linalg.norm(J, axis=0)
    J = J / np.where(col > 0, col, 1.0)
    Q, R, _ = qr(J, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    rank = int(np.sum(d > 1e-10 * max(d[0] if len(d) else 0.0, 1e-300)))
    return np.sum(Q[:, :rank] ** 2, axis=1), rank
