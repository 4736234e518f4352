"""Profile-likelihood interval ends by root-finding (``--profile fast``): the statistic Λ(ψ) of
:mod:`.profile` (the same refits with ψ held, the same cut) solved for Λ(ψ) = cut on each side
of the optimum, instead of walked on a grid.

Each side starts from the Wald bracket: ψ̂ ± √cut·se (the end a quadratic profile would have),
θ-space (log for scales). While Λ stays below the cut there, the bracket's far end moves out,
doubling its distance, until Λ crosses the cut, the far end reaches the parameter's declared
bound (the side is then closed at the bound, as the grid walk closes it), or ``EXPANSIONS``
doublings pass without a crossing: the side is open (±inf, printed "n.i." / one-sided). The
crossing is then found by Brent's method (``scipy.optimize.brentq``; the bracket-and-solve of
lmfit's ``conf_interval``) to ``XTOL`` in θ: a relative 1e-5 of a scale, well below the printed
four digits. Each Λ is the best refit from the nearest point already solved, the optimum and the
cold starts, all with ψ replaced.

What the grid walk does and this does not: it refines brackets where Λ jumps (a kink leaving the
data) and names a flat stretch before a jump; root-finding assumes the profile is continuous
between the optimum and its crossing and returns the crossing it brackets. ``--profile full``
is the walk.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from .problem import Problem
from .profile import FLAT, JUMP, Profile
from .solver import CAPPED, CONVERGED, MAX_ITER

EXPANSIONS = 14  # doublings of the Wald distance: 2¹⁴ ≈ 16,000 standard errors, then open
XTOL = 1e-5  # in θ (log space for scales): an end to a relative 1e-5
_BETTER = -1e-4  # Λ below this: a lower objective than the optimum's


class _Side:
    """Λ along one parameter, memoised: every point solved, with its refitted θ."""

    def __init__(self, problem: Problem, j: int, theta_hat, statistic, cold_starts):
        self.problem, self.j, self.statistic = problem, j, statistic
        self.theta_hat = np.asarray(theta_hat, float)
        self.cold = np.asarray(cold_starts, float).reshape(-1, problem.k)
        self.points = {float(theta_hat[j]): (0.0, self.theta_hat)}

    def __call__(self, t: float) -> float:
        t = float(t)
        if t not in self.points:
            self.points[t] = self._solve(t)
        return self.points[t][0]

    def _solve(self, t: float):
        """Λ at t: the best converged refit from the solved neighbours on either side, the
        optimum and the cold starts; refits stopped at the iteration cap are continued with
        a longer budget (as the grid walk continues them), since a far point on a flat
        direction is where they stop."""
        below = [s for s in self.points if s < t]
        above = [s for s in self.points if s > t]
        near = [max(below)] if below else []
        near += [min(above)] if above else []
        starts = np.vstack([*(self.points[s][1][None] for s in near), self.theta_hat[None], self.cold])
        starts[:, self.j] = t
        res = self._refit(starts)
        capped = np.flatnonzero(res.status == CAPPED)
        objective, theta = np.where(_converged(res), res.objective, np.inf), res.theta
        if len(capped):
            more = self._refit(res.theta[capped], max_iter=3 * MAX_ITER)
            objective = np.concatenate([objective, np.where(_converged(more), more.objective, np.inf)])
            theta = np.concatenate([theta, more.theta])
        if not np.isfinite(objective).any():
            return math.nan, starts[0]
        best = int(np.argmin(objective))
        return float(self.statistic(objective[best])), theta[best]

    def _refit(self, starts, max_iter=MAX_ITER):
        frozen = np.zeros(starts.shape, bool)
        frozen[:, self.j] = True
        return self.problem.solve(starts, frozen_MxK=frozen, max_iter=max_iter)


def _converged(res) -> np.ndarray:
    return (res.status == CONVERGED) & np.isfinite(res.objective)


def fast_profile_intervals(problem: Problem, theta_hat, statistic, cold_starts, se_theta,
                           names=None) -> dict:
    """{name: :class:`.profile.Profile`} for ``names`` (default every free parameter): each
    end the root of Λ(ψ) = cut bracketed from the Wald end outward (module docstring)."""
    critical = statistic.critical
    out = {}
    for name in list(problem.names if names is None else names):
        j = problem.names.index(name)
        side_fn = _Side(problem, j, theta_hat, statistic, cold_starts)
        ends, reached, notes = {}, [], []
        for side in (-1, 1):
            ends[side], at_bound = _end(problem, j, theta_hat[j], side, side_fn, critical,
                                        _wald_distance(problem, j, theta_hat[j], se_theta[j], critical))
            if at_bound:
                reached.append("lower" if side < 0 else "upper")
            elif np.isfinite(ends[side]):
                ends[side], note = _jump_at(problem, j, theta_hat[j], side, side_fn, ends[side], critical)
                notes += [note] if note else []
            if not np.isfinite(ends[side]):
                notes.append(f"{name}: Λ stays below {critical:.2f} out to {EXPANSIONS} doublings "
                             "of the Wald distance on the " + ("lower" if side < 0 else "upper")
                             + " side: the data do not bound it there")
        out[name] = _profile(problem, j, name, side_fn, ends, reached, notes, critical)
    return out


def _wald_distance(problem: Problem, j: int, t_hat: float, se: float, critical: float) -> float:
    """√cut · se in θ, or, where the standard error is not finite or zero, a step of the
    parameter's own scale (1 in log space, its init range or value otherwise)."""
    p = problem.free[j]
    scale = 1.0 if p.log else max(abs(t_hat), abs(p.init[1] - p.init[0]), 1e-3)
    if not (np.isfinite(se) and se > 0):
        return scale
    return float(np.clip(math.sqrt(critical) * se, 1e-4 * scale, 10 * scale))


def _end(problem: Problem, j: int, t_hat: float, side: int, lam, critical: float, distance: float):
    """(end in θ, closed at the bound?): bracket from ``distance`` outward, then Brent."""
    bound = problem.lo[j] if side < 0 else problem.hi[j]
    inner = t_hat
    for _ in range(EXPANSIONS + 1):
        outer = t_hat + side * distance
        at_bound = np.isfinite(bound) and (outer - bound) * side >= 0
        outer = bound if at_bound else outer
        value = lam(outer)
        if np.isfinite(value) and value >= critical:
            root = brentq(lambda t: _below_cut(lam, t, critical), inner, outer, xtol=XTOL,
                          rtol=4 * np.finfo(float).eps) if inner != outer else outer
            return root, False
        if at_bound:
            return outer, True
        if np.isfinite(value):  # a point no refit reached is neither inside nor a crossing
            inner = outer
        distance *= 2
    return side * math.inf, False


def _jump_at(problem: Problem, j: int, t_hat: float, side: int, lam, end: float, critical: float):
    """(end, note) as the grid walk judges a crossing: where Λ jumps across the cut (by more
    than ``profile.JUMP`` within ``XTOL`` of the root) after a flat stretch (Λ within
    ``profile.FLAT`` of its level there at ¼, ½ and ¾ of the way from the optimum), the limit
    is the model's (a kink leaving the data), not the data's: the side is open. A jump alone
    is named; a smooth crossing passes."""
    step = 10 * XTOL * max(1.0, abs(end - t_hat))
    before, after = lam(end - side * step), lam(end + side * step)
    name, rel = problem.names[j], "≥" if side > 0 else "≤"
    nat = lambda v: float(np.exp(np.clip(v, -700, 700))) if problem.is_log[j] else float(v)
    if not (np.isfinite(before) and np.isfinite(after)) or after - before <= JUMP:
        return end, ""
    way = [lam(t_hat + f * (end - t_hat)) for f in (0.25, 0.5, 0.75)]
    if all(np.isfinite(v) and abs(v - before) <= FLAT for v in way):
        start = t_hat + 0.25 * (end - t_hat)
        return side * math.inf, (f"{name} {rel} {nat(start):.2g}: the profile is flat beyond "
                                 f"(Λ ≈ {max(before, 0):.1f} up to {nat(end):.3g}, then jumps to "
                                 f"{after:.1f}); the data do not bound it")
    return end, (f"{name}: the profile jumps across the cut at {nat(end):.3g} (Λ {before:.1f} → "
                 f"{after:.1f}): that limit marks a change of regime of the fit, not a smooth "
                 "likelihood limit")


def _below_cut(lam, t: float, critical: float) -> float:
    # a point no refit reached counts as inside: the crossing is where Λ is seen to cross
    value = lam(t)
    return value - critical if np.isfinite(value) else -critical


def _profile(problem: Problem, j: int, name: str, side_fn: _Side, ends, reached, notes, critical) -> Profile:
    """The Profile of the points the root-finding solved (sorted), its interval in natural
    units, and a lower objective when one was met."""
    t = np.array(sorted(side_fn.points))
    s = np.array([side_fn.points[v][0] for v in t])
    natural = lambda v: (float(np.exp(np.clip(v, -700, 700))) if problem.is_log[j] else float(v)) \
        if np.isfinite(v) else float(v)
    lo, hi = natural(ends[-1]), natural(ends[1])
    if problem.is_log[j] and ends[-1] == -math.inf and problem.free[j].bounds[0] == 0:
        lo = 0.0  # as the grid walk reports a scale open towards its bound 0
    better = better_theta = None
    finite = np.isfinite(s)
    if finite.any() and np.nanmin(np.where(finite, s, np.nan)) < _BETTER:
        i = int(np.nanargmin(np.where(finite, s, np.nan)))
        better, better_theta = float(s[i]), np.asarray(side_fn.points[t[i]][1])
    values = np.array([natural(v) for v in t])
    return Profile(name, values, s, (lo, hi), reached, better, better_theta, notes, critical)
