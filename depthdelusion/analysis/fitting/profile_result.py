"""What a profile-likelihood interval is, apart from how it is found: :class:`Profile` and the
constants both finders judge by (the grid walk, :mod:`.profile`, and the root-finding,
:mod:`.profile_roots`). A leaf of the import graph, so the two finders need not import each other."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import special  # the χ² quantile without importing scipy.stats

LEVEL = 0.95
CRITICAL = float(special.chdtri(1, 1 - LEVEL))  # 3.841: χ²₁ quantile
JUMP = 1.0   # a rise of Λ (about a quarter of the cut) inside a bracket refined 7⁴-fold


@dataclass
class Profile:
    """One parameter's profile: natural values, statistic Λ at each, and the interval.

    ``interval`` ends are ±inf when open (not crossed before an infinite bound, or crossed only
    by a jump after a flat stretch) and equal to the bound when the profile reaches a finite
    bound without crossing (``reaches_bound`` names the side). ``notes`` say where the profile
    is flat or jumps at a limit, and how many points were left out (NaN in ``statistic``)
    because their refit did not converge."""

    name: str
    values: np.ndarray
    statistic: np.ndarray
    interval: tuple
    reaches_bound: list = field(default_factory=list)
    better_fit: float | None = None  # Λ < 0 found: a lower objective than the optimum
    better_theta: np.ndarray | None = None  # the θ (all free parameters) where it was found
    notes: list = field(default_factory=list)
    critical: float = CRITICAL
    #: "walk" (this module's grid: a dense path) or "roots" (:mod:`.profile_roots`: the points
    #: its root-finding met, too sparse for a path's total variation)
    method: str = "walk"
