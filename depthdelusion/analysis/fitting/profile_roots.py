"""Profile-likelihood interval ends by root-finding (``--profile fast``): the statistic Λ(ψ) of
:mod:`.profile` (the same refits with ψ held, the same cut) solved for Λ(ψ) = cut on each side
of the optimum, instead of walked on a grid.

Each side starts from the Wald bracket: ψ̂ ± √cut·se (the end a quadratic profile would have),
θ-space (log for scales). While Λ stays below the cut there, the bracket's far end moves out,
doubling its distance, until Λ crosses the cut, the far end reaches the parameter's declared
bound (the side is then closed at the bound, as the grid walk closes it), or ``EXPANSIONS``
doublings pass without a crossing: the side is open (±inf, printed "n.i." / one-sided). The
crossing is then found by a bracketing root-finder to ``XTOL`` in θ (a relative 1e-5 of a scale,
well below the printed four digits): Chandrupatla's method (``scipy.optimize.elementwise.
find_root``, SciPy ≥ 1.15), which steps every end of every parameter together so that each step
is one batched solve, or, on an older SciPy, Brent's (``scipy.optimize.brentq``; the
bracket-and-solve of lmfit's ``conf_interval``) one end at a time. Each Λ is the best refit from
the solved points next to it on either side, the optimum and the cold starts, all with ψ
replaced; refits stopped at the iteration cap are continued, as the walk continues them.

Root-finding assumes the profile is continuous between the optimum and its crossing. Where Λ
jumps across the cut at the root found (a kink leaving the data, or a refit that missed a basin),
that parameter's interval is the grid walk's (:func:`.profile.profile_intervals`, ``--profile
full``), which refines the jump and tells a flat stretch before it (open) from a limit.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from .problem import Problem, within_support
from .profile_result import JUMP, Profile
from .solver import CAPPED, CONVERGED, MAX_ITER

try:  # SciPy ≥ 1.15: every end stepped together
    from scipy.optimize.elementwise import find_root
except ImportError:  # pragma: no cover - the lock pins a newer SciPy
    find_root = None

EXPANSIONS = 14  # doublings of the Wald distance: 2¹⁴ ≈ 16,000 standard errors, then open
XTOL = 1e-5  # in θ (log space for scales): an end to a relative 1e-5
_BETTER = -1e-4  # Λ below this: a lower objective than the optimum's
_STEPS = 64  # root-finding iterations at most (Chandrupatla needs about 10 here)


class _Profiles:
    """Λ along each free parameter, memoised per parameter (every point solved, with its
    refitted θ); :meth:`batch` solves many (parameter, value) points in one call."""

    def __init__(self, problem: Problem, theta_hat, statistic, cold_starts):
        self.problem, self.statistic = problem, statistic
        self.theta_hat = np.asarray(theta_hat, float)
        self.cold = np.asarray(cold_starts, float).reshape(-1, problem.k)
        self.points = [{float(self.theta_hat[j]): (0.0, self.theta_hat)} for j in range(problem.k)]

    def batch(self, js, ts) -> np.ndarray:
        """Λ at each (js[i], ts[i]), solving the points not met before in one batched call."""
        todo = list(dict.fromkeys((int(j), float(t)) for j, t in zip(js, ts)
                                  if float(t) not in self.points[int(j)]))
        if todo:
            self._solve(todo)
        return np.array([self.points[int(j)][float(t)][0] for j, t in zip(js, ts)])

    def _solve(self, todo) -> None:
        starts, frozen, owner = [], [], []
        for i, (j, t) in enumerate(todo):
            memo = self.points[j]
            below, above = [s for s in memo if s < t], [s for s in memo if s > t]
            near = ([memo[max(below)][1]] if below else []) + ([memo[min(above)][1]] if above else [])
            for start in (*near, self.theta_hat, *self.cold):
                row = np.array(start, float)
                row[j] = t
                starts.append(row)
                frozen.append(np.arange(self.problem.k) == j)
                owner.append(i)
        starts, frozen, owner = np.array(starts), np.array(frozen), np.array(owner)
        res = self.problem.solve(starts, frozen_MxK=frozen)
        objective, theta = np.where(_converged(res), res.objective, np.inf), res.theta
        capped = np.flatnonzero(res.status == CAPPED)
        if len(capped):  # a far point on a flat direction is where refits stop at the cap
            more = self.problem.solve(res.theta[capped], frozen_MxK=frozen[capped], max_iter=3 * MAX_ITER)
            objective = np.concatenate([objective, np.where(_converged(more), more.objective, np.inf)])
            theta, owner = np.concatenate([theta, more.theta]), np.concatenate([owner, owner[capped]])
        for i, (j, t) in enumerate(todo):
            rows = np.flatnonzero(owner == i)
            best = rows[np.argmin(objective[rows])]
            self.points[j][t] = ((float(self.statistic(objective[best])), theta[best])
                                 if np.isfinite(objective[best]) else (math.nan, starts[rows[0]]))


def _converged(res) -> np.ndarray:
    return (res.status == CONVERGED) & np.isfinite(res.objective)


def fast_profile_intervals(problem: Problem, theta_hat, statistic, cold_starts, se_theta,
                           walk, names=None) -> dict:
    """{name: :class:`.profile.Profile`} for ``names`` (default every free parameter): each
    end the root of Λ(ψ) = cut bracketed from the Wald end outward (module docstring). A
    parameter whose Λ jumps across the cut is walked instead: ``walk(names)``, the grid walk
    (``profile.profile_intervals``, handed in so that neither finder imports the other), and its
    notes say so."""
    critical = statistic.critical
    names = list(problem.names if names is None else names)
    lam = _Profiles(problem, theta_hat, statistic, cold_starts)
    ends = [(problem.names.index(nm), side) for nm in names for side in (-1, 1)]
    distance = [_wald_distance(problem, j, theta_hat[j], se_theta[j], critical) for j, _ in ends]
    brackets = _brackets(problem, theta_hat, ends, distance, lam, critical)
    roots = _roots(theta_hat, ends, brackets, lam, critical)
    notes = {nm: [] for nm in names}
    for e, (j, side) in enumerate(ends):
        if brackets[e][2] == "open":
            notes[problem.names[j]].append(
                f"{problem.names[j]}: Λ stays below {critical:.2f} out to {EXPANSIONS} doublings of "
                f"the Wald distance on the {'lower' if side < 0 else 'upper'} side: the data do not "
                "bound it there")
    walked = [problem.names[j] for j in sorted(_jumping(theta_hat, ends, brackets, roots, lam, critical))]
    out = walk(walked) if walked else {}
    for nm in walked:
        out[nm].notes.append(f"{nm}: Λ jumps across the cut: its interval is the grid walk's "
                             "(--profile full), which judges a jump")
    for nm in (nm for nm in names if nm not in walked):
        j = problem.names.index(nm)
        mine = [e for e, (jj, _) in enumerate(ends) if jj == j]
        reached = ["lower" if ends[e][1] < 0 else "upper" for e in mine if brackets[e][2] == "bound"]
        out[nm] = _profile(problem, j, nm, lam.points[j], {ends[e][1]: roots[e] for e in mine},
                           reached, notes[nm], critical)
    return out


def _brackets(problem: Problem, theta_hat, ends, distance, lam: _Profiles, critical: float) -> list:
    """Per end [inner, outer, state]: state "crossed" (Λ(inner) < cut ≤ Λ(outer)), "bound" (no
    crossing up to the declared bound: closed there) or "open" (no crossing in ``EXPANSIONS``
    doublings). Every end still expanding is evaluated in one batch per doubling."""
    state = [[float(theta_hat[j]), None, ""] for j, _ in ends]
    for step in range(EXPANSIONS + 1):
        active = [e for e in range(len(ends)) if not state[e][2]]
        if not active:
            break
        ts = []
        for e in active:
            j, side = ends[e]
            bound = problem.lo[j] if side < 0 else problem.hi[j]
            t = theta_hat[j] + side * distance[e] * 2.0 ** step
            ts.append(float(bound) if np.isfinite(bound) and (t - bound) * side >= 0 else float(t))
        values = lam.batch([ends[e][0] for e in active], ts)
        for e, t, v in zip(active, ts, values):
            j, side = ends[e]
            bound = problem.lo[j] if side < 0 else problem.hi[j]
            if np.isfinite(v) and v >= critical:
                state[e][1:] = [t, "crossed"]
            elif t == bound:
                state[e][1:] = [t, "bound"]
            elif np.isfinite(v):  # a point no refit reached is neither inside nor a crossing
                state[e][0] = t
    for e, (j, side) in enumerate(ends):
        if not state[e][2]:
            state[e][1:] = [side * math.inf, "open"]
    return state


def _roots(theta_hat, ends, brackets, lam: _Profiles, critical: float) -> list:
    """Each end in θ: the crossing of a "crossed" bracket solved to ``XTOL``; the bound or ±inf
    as :func:`_brackets` left it otherwise."""
    roots = [b[1] for b in brackets]
    crossed = [e for e, b in enumerate(brackets) if b[2] == "crossed" and b[0] != b[1]]
    if not crossed:
        return roots
    js = np.array([ends[e][0] for e in crossed])

    def below_cut(t, idx):
        # a point no refit reached counts as inside: the crossing is where Λ is seen to cross
        value = lam.batch(js[np.asarray(idx, int)].ravel(), np.asarray(t, float).ravel())
        return np.where(np.isfinite(value), value - critical, -critical).reshape(np.shape(t))

    lo = np.array([min(brackets[e][:2]) for e in crossed])
    hi = np.array([max(brackets[e][:2]) for e in crossed])
    if find_root is not None:
        found = find_root(below_cut, (lo, hi), args=(np.arange(len(crossed)),), maxiter=_STEPS,
                          tolerances=dict(xatol=XTOL, xrtol=4 * np.finfo(float).eps, fatol=0, frtol=0))
        xs = found.x
    else:
        xs = [brentq(lambda t, i=i: float(below_cut(np.array([t]), np.array([i]))[0]), a, b,
                     xtol=XTOL, rtol=4 * np.finfo(float).eps) for i, (a, b) in enumerate(zip(lo, hi))]
    for e, x in zip(crossed, xs):
        roots[e] = float(x)
    return roots


def _jumping(theta_hat, ends, brackets, roots, lam: _Profiles, critical: float) -> set:
    """The parameters (indices) with an end where Λ jumps across the cut (by more than
    ``profile.JUMP`` within 10·``XTOL`` of the root), is still below the cut just past the root,
    or falls back below it farther out (at twice the root's distance from the optimum, within
    the bounds): a change of regime (a kink leaving the data) or a refit that missed a basin —
    one failed refit's high Λ closes a bracket the profile itself does not (λ "≤ 5.3e4" where
    the walk finds no end) — which the grid walk judges (flat stretch or not) and root-finding
    cannot. Evaluated in one batch."""
    crossed = [e for e, b in enumerate(brackets) if b[2] == "crossed"]
    step = [10 * XTOL * max(1.0, abs(roots[e] - theta_hat[ends[e][0]])) for e in crossed]
    js = [ends[e][0] for e in crossed]
    beyond = [_beyond(lam.problem, theta_hat, ends[e], roots[e]) for e in crossed]
    around = lam.batch(js * 3, [roots[e] - ends[e][1] * h for e, h in zip(crossed, step)]
                       + [roots[e] + ends[e][1] * h for e, h in zip(crossed, step)] + beyond)
    n = len(crossed)
    before, after, far = around[:n], around[n:2 * n], around[2 * n:]
    return {ends[e][0] for e, b, a, f in zip(crossed, before, after, far)
            if not (np.isfinite(b) and np.isfinite(a)) or a - b > JUMP or a < critical
            or (np.isfinite(f) and f < critical)}


def _beyond(problem: Problem, theta_hat, end, root: float) -> float:
    """The point at twice the root's distance from the optimum, on its side, held within the
    parameter's bound (where Λ must still be above the cut if the root is a crossing)."""
    j, side = end
    t = root + (root - theta_hat[j])
    bound = problem.lo[j] if side < 0 else problem.hi[j]
    return float(bound) if np.isfinite(bound) and (t - bound) * side > 0 else float(t)


def _wald_distance(problem: Problem, j: int, t_hat: float, se: float, critical: float) -> float:
    """√cut · se in θ, or, where the standard error is not finite or zero, a step of the
    parameter's own scale (1 in log space, its init range or value otherwise)."""
    p = problem.free[j]
    scale = 1.0 if p.log else max(abs(t_hat), abs(p.init[1] - p.init[0]), 1e-3)
    if not (np.isfinite(se) and se > 0):
        return scale
    return float(np.clip(math.sqrt(critical) * se, 1e-4 * scale, 10 * scale))


def _profile(problem: Problem, j: int, name: str, points: dict, ends, reached, notes, critical) -> Profile:
    """The Profile of the points solved along parameter j (sorted), its interval in natural
    units, and a lower objective when one was met."""
    t = np.array(sorted(points))
    s = np.array([points[v][0] for v in t])
    natural = lambda v: (float(np.exp(np.clip(v, -700, 700))) if problem.is_log[j] else float(v)) \
        if np.isfinite(v) else float(v)
    lo, hi = natural(ends[-1]), natural(ends[1])
    if problem.is_log[j] and ends[-1] == -math.inf and problem.free[j].bounds[0] == 0:
        lo = 0.0  # as the grid walk reports a scale open towards its bound 0
    (lo, hi), note = within_support(problem.free[j], lo, hi)  # the grid walk's rule, the same
    if note:
        notes = [*notes, note]
    better = better_theta = None
    finite = np.isfinite(s)
    if finite.any() and np.nanmin(np.where(finite, s, np.nan)) < _BETTER:
        i = int(np.nanargmin(np.where(finite, s, np.nan)))
        better, better_theta = float(s[i]), np.asarray(points[t[i]][1])
    values = np.array([natural(v) for v in t])
    return Profile(name, values, s, (lo, hi), reached, better, better_theta, notes, critical, "roots")
