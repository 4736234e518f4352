"""The data exponent of one shape's token sweep: the law L(T) = E + B·T^(−b) fitted to held-out
loss against tokens, the local slopes between budgets, and the verdict of the measured b against
the one the redundancy law predicts (`readout.py`). Numpy and the fitting engine only."""
from __future__ import annotations

import math


def _data_power(x, E, B, beta):
    return E + B * x.T ** -beta


def data_power_law():
    """L = E + B·T^−β at one fixed shape: not in the law registry, since on a table of several
    shapes (where the registry offers laws) it would ignore the shape."""
    from depthdelusion.analysis.laws import INF, Law, Param

    return Law("data_power", _data_power, (
        Param("E", (0.5, 2.5), bounds=(0, INF), doc="irreducible loss (nats)"),
        Param("B", (1.0, 1e5), log=True, bounds=(0, INF), doc="data scale"),
        Param("beta", (0.05, 1.0), bounds=(0, INF), doc="data exponent")),
        formula="E + B·T^−β", source="one shape's token sweep (the redundancy law, analysis/science/redundancy.py)",
        doc="Held-out loss against tokens at one fixed shape; β is the data exponent b.",
        needs_tokens=True)


def fit_data_power(records: list[dict], where: str):
    """The data_power fit (profile intervals, no bootstrap: 5-6 points) of one sweep's records
    (name, depth, width, params, tokens, loss). With so few points the profile's cut is
    F(1, n − 3)-calibrated (analysis/fitting/profile.py), not χ²₁."""
    from depthdelusion.analysis.fitting.engine import fit
    from depthdelusion.analysis.table.table_readers import runs_from_records

    return fit(runs_from_records(records, where=where), data_power_law(), bootstrap=0, leave_one_out=False)


def local_slopes(points) -> list[float]:
    """−Δln L / Δln T between consecutive (tokens, loss) points: constant for a pure power law,
    falling with T under a floor E > 0."""
    return [-math.log(l1 / l0) / math.log(t1 / t0) for (t0, l0), (t1, l1) in zip(points, points[1:])]


def verdict(measured: tuple, predicted: tuple) -> str:
    """'consistent' when the two 95% intervals overlap, else which is larger."""
    (m_lo, m_hi), (p_lo, p_hi) = measured, predicted
    if not all(math.isfinite(v) for v in (p_lo, p_hi)):
        return "no prediction"
    if p_hi < m_lo:
        return "measured > predicted"
    if p_lo > m_hi:
        return "measured < predicted"
    return "consistent"
