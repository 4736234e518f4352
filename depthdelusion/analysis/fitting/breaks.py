"""The values at which a kink law's objective bends (``Roles.breaks``: each row's break, e.g. a
row's N for a size break, D/ln W for the paper's κ), and the fits held at them, as the search
(:func:`.starts.best_break`) and the profile points (``profile``) both try them."""
from __future__ import annotations

import numpy as np

# Breaks tried at most, at evenly spaced ranks of the distinct ones: a table of thousands of runs
# would otherwise cost a held fit per run and start.
MAX_BREAKS = 64


def break_values(breaks, bounds, log: bool, most: int | None = MAX_BREAKS) -> tuple[np.ndarray, int]:
    """The distinct breaks inside ``bounds`` (on the parameter's scale: logs when ``log``), at
    most ``most`` of them at evenly spaced ranks (the smallest and largest kept; None: all), and
    how many distinct breaks there were."""
    values = np.unique(np.asarray(breaks, float))
    values = values[(values > bounds[0]) & (values < bounds[1])]
    if log:
        values = np.log(values[values > 0])
    total = len(values)
    if most is not None and total > most:
        values = values[np.unique(np.rint(np.linspace(0, total - 1, most)).astype(int))]
    return values, total


def kink_breaks(problem, most: int | None = MAX_BREAKS) -> tuple[int, np.ndarray, int] | None:
    """The kink's column in ``problem``, the breaks to hold it at (:func:`break_values`, at most
    ``most``; None: every one) and how many distinct breaks there were; None for a law without
    breaks, a kink held fixed, or no break inside the kink's bounds."""
    roles = problem.law.roles
    if roles.breaks is None or roles.kink not in problem.names:
        return None
    j = problem.names.index(roles.kink)
    p = problem.free[j]
    values, total = break_values(roles.breaks(problem.x), p.bounds, p.log, most)
    return (j, values, total) if len(values) else None


def held_at_breaks(problem, origins, j: int, values, held=None, losses=None):
    """Each of ``origins`` (M, K) refitted with the kink (column ``j``) held at each of ``values``
    in turn and the columns ``held`` (M, K booleans; None: none) held too: the solver's result of
    the M·V fits, origin by origin, and their held columns. ``problem`` may be a subsample.
    ``losses`` (M, N): each origin's own losses in place of the problem's (a replicate's)."""
    starts = np.repeat(np.asarray(origins, float), len(values), axis=0)
    starts[:, j] = np.tile(values, len(origins))
    frozen = np.zeros(starts.shape, bool) if held is None else np.repeat(held, len(values), axis=0)
    frozen[:, j] = True
    per_fit = None if losses is None else np.repeat(np.asarray(losses, float), len(values), axis=0)
    return problem.solve(starts, frozen_MxK=frozen, losses_MxN=per_fit), frozen
