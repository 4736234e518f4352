"""The values at which a kink law's objective bends (``Roles.breaks``: each row's break, e.g. a
row's N for a size break, D/ln W for the paper's κ), as the search (:func:`.search.scan_breaks`)
and the profile points (``profile``) try them."""
from __future__ import annotations

import numpy as np

# Breaks tried at most, at evenly spaced ranks of the distinct ones: a table of thousands of runs
# would otherwise cost a held fit per run and start.
MAX_BREAKS = 64


def break_values(breaks, bounds, log: bool) -> tuple[np.ndarray, int]:
    """The distinct breaks inside ``bounds`` (on the parameter's scale: logs when ``log``), at
    most ``MAX_BREAKS`` of them at evenly spaced ranks (the smallest and largest kept), and how
    many distinct breaks there were."""
    values = np.unique(np.asarray(breaks, float))
    values = values[(values > bounds[0]) & (values < bounds[1])]
    if log:
        values = np.log(values[values > 0])
    total = len(values)
    if total > MAX_BREAKS:
        values = values[np.unique(np.rint(np.linspace(0, total - 1, MAX_BREAKS)).astype(int))]
    return values, total
