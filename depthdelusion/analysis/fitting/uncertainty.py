"""A fit's uncertainty at its optimum: the Jacobian intervals and condition, the profile
intervals (computed now or on first request), parameters at a bound and identifiability flags."""
from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from ..formats.interval_text import interval_text
from .problem import RIDGE_TIE, TIE, Problem, open_beyond_support, scale_interval
from .profile import Statistic, profile_intervals
from .profile_roots import fast_profile_intervals
from .solver import FAILED
from .status import STRONG_CORR, number_text

PROFILE_STARTS = 4  # cold starts per profile point, besides the optimum and the neighbours
_PROFILE_RESTARTS = 2  # refits from a lower objective a profile found, at most
PROFILE_ROWS = 2000  # profile intervals by default up to this many rows
_COND_FLAG = 1e8
_BOUND_TOL = 1e-6  # relative to the init range: closer than this to a bound is "at" it
#: A scale bounded below by 0 is at that bound below this share of its smallest start.
_COLLAPSED = 1e-6
#: A null direction of the Jacobian (singular value ≤ 1e-10 of the largest) leaves a parameter
#: unbounded when it loads on it by more than this. A margin, not a physical scale: a ridge's
#: null vector can load on a parameter by a small, real amount that moves with where the solver
#: stopped on the ridge (Gadre's E offsets on Kaplan's N: 3e-6 to 3e-5, stable under the
#: finite-difference step, either side of the old cut 1e-6 by BLAS kernel), so the cut sits
#: decades above such loadings. Below it the ridge moves the parameter by under a thousandth of
#: its own normalised step: it is reported from the Jacobian's other directions (ok).
NULL_LOADING = 1e-3
#: A dead scale's term "revives" at its smallest start (the scale collapsed by itself, at its
#: bound 0) only when its Jacobian column there reaches this multiple of the dead-column floor
#: (1e-9 of the largest column). A margin: where another parameter on a flat direction holds the
#: term down (Gadre's A·N^−α on Kaplan's N, α wherever the solver stopped), the revived column
#: lands where that parameter did, 2× above the floor under OpenBLAS Haswell and 700× below it
#: under SkylakeX, and the status flipped between at_bound and not identified. Below the margin
#: the term is the other parameter's doing: not identified, the weaker claim.
REVIVE_MARGIN = 1e3


#: How each ``profile`` mode finds the interval ends, as the summary's legend says it.
PROFILE_HOW = {"full": "", "fast": "; ends by root-finding (Brent) on Λ from the Wald bracket outward"}


@dataclass(frozen=True)
class Optimum:
    """The profile stage's part of a fit: the search (redescribed where a profile found a lower
    objective than every start), θ at the optimum, its Jacobian uncertainty, and the profile
    intervals — computed (``profiles``, ``ci_profile``, ``profile_statistic``) or, when the fit
    skipped them, the handle that computes them on request (``later``) — and the fit's notes this
    stage adds (the search keeps its own)."""

    search: object
    theta: np.ndarray
    jac: "_Jacobian"
    profiles: dict
    ci_profile: dict | None
    profile_statistic: str
    later: "LaterProfiles | None"
    notes: tuple = ()


@dataclass(frozen=True)
class LaterProfiles:
    """The profiles a fit skipped, computed on first request (``FitResult.conf_int(method=
    "profile")``) from the fit's problem, optimum and cold starts, which it holds; computed once
    and kept."""

    problem: Problem
    theta: np.ndarray
    statistic: Statistic
    cold: np.ndarray
    se_theta: np.ndarray
    warm: bool
    _computed: dict = field(default_factory=dict, repr=False, compare=False)

    def profiles(self) -> tuple[dict, str]:
        """(profiles, statistic text) of every free parameter."""
        if not self._computed:  # the one cache of a frozen fit: what was asked, not how it was fitted
            self._computed["profiles"] = profile_intervals(self.problem, self.theta, self.statistic,
                                                           self.cold, self.se_theta, staged=self.warm)
        return self._computed["profiles"], f"{self.statistic.describe}, {self.statistic.cut}"


def optimum_and_profiles(problem, options, search) -> Optimum:
    """θ at the optimum with its Jacobian uncertainty, and the profiles when asked
    (``options.profile``: ``"full"`` the grid walk, ``"fast"`` root-finding, False none: then the
    handle that computes them later); a profile that finds a lower objective restarts the fit
    from it (at most ``_PROFILE_RESTARTS``)."""
    profile = options.profile
    theta, objective = search.theta, search.objective
    jac = _jacobian_uncertainty(problem, theta)
    statistic, profiles, notes = Statistic(problem, objective), {}, []
    for restart in range(_PROFILE_RESTARTS + 1) if profile else ():
        if profile == "fast":
            cold = search.cold(PROFILE_STARTS)
            profiles = fast_profile_intervals(
                problem, theta, statistic, cold, jac.se_theta,
                walk=lambda names: profile_intervals(problem, theta, statistic, cold, jac.se_theta,
                                                     names=names, staged=search.warm))
        else:
            profiles = profile_intervals(problem, theta, statistic, search.cold(PROFILE_STARTS),
                                         jac.se_theta, staged=search.warm)
        better = (better_optimum(problem, profiles, objective, search)
                  if restart < _PROFILE_RESTARTS else None)
        if better is None:
            break
        theta, search = better
        notes.append(f"the profile likelihood found a lower objective than the {search.summary.n_starts} "
                     f"starts ({objective:.6g} → {search.objective:.6g}); the fit was restarted from it")
        objective = search.objective
        jac = _jacobian_uncertainty(problem, theta)
        statistic = Statistic(problem, objective)
    if not profile:
        return Optimum(search, theta, jac, profiles, None, "", LaterProfiles(
            problem, theta, statistic, search.cold(PROFILE_STARTS), jac.se_theta, search.warm),
            tuple(notes))
    return Optimum(search, theta, jac, profiles, {nm: p.interval for nm, p in profiles.items()},
                   f"{statistic.describe}, {statistic.cut}{PROFILE_HOW.get(profile, '')}", None,
                   tuple(notes))


def better_optimum(problem: Problem, profiles: dict, objective: float, search):
    """(θ, search) of a lower objective than ``objective`` that a profile found (polished with
    every parameter free), or None. The search returned describes the new optimum: no start
    reached it, and the tied solutions of the old one no longer apply."""
    found = [p for p in profiles.values() if p.better_theta is not None]
    if not found:
        return None
    finder = min(found, key=lambda p: p.better_fit)
    res = problem.solve(finder.better_theta[None])
    if res.status[0] == FAILED or not res.objective[0] < objective * (1 - TIE):
        return None
    summary, better = search.summary, float(res.objective[0])
    found_by_profile = (
        f"the profile of {finder.name} found a lower objective ({objective:.6g} → "
        f"{better:.6g}) than the best of the {summary.n_starts} starts "
        f"(which {summary.n_at_best} of them reached), and the fit was restarted from it"
        + (f"; {summary.found_by_profile}" if summary.found_by_profile else ""))
    summary = dataclasses.replace(summary, found_by_profile=found_by_profile, n_at_best=0, ridge_params=[],
                                  local_optima=[better, *summary.local_optima])
    return res.theta[0], dataclasses.replace(search, objective=better, summary=summary, ridge_solutions=[])


# --- uncertainty ----------------------------------------------------------------------------------

class _Jacobian:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _jacobian_uncertainty(problem: Problem, theta) -> _Jacobian:
    """Covariance from the Jacobian in θ (log space for scale parameters), with columns scaled
    to unit norm before the pseudo-inverse so that parameters of very different magnitudes do
    not swamp each other (13.6); directions the data do not constrain get infinite variance."""
    names = problem.names
    n, k = len(problem.y), len(names)
    J = _jacobian(problem, theta)
    r = problem.residuals(theta[None])[0]
    flags = []
    if not np.all(np.isfinite(J)):
        flags.append("the Jacobian is not finite at the optimum for some runs: Jacobian intervals unreliable")
        J = np.where(np.isfinite(J), J, 0.0)
    s2 = float(r @ r) / (n - k)
    col_max = np.abs(J).max(axis=0)
    safe_max = np.where(col_max > 0, col_max, 1.0)
    col = col_max * np.linalg.norm(J / safe_max, axis=0)
    dead = col < 1e-9 * max(col.max(), 1e-300)
    vanished = _vanished_by_others(problem, theta, dead, 1e-9 * max(col.max(), 1e-300))
    for nm in np.array(names)[dead]:
        flags.append(f"{nm}: no run's prediction depends on it at the optimum (e.g. the depth "
                     "penalty is inactive for every run): not identifiable")
    Js = J / np.where(col > 0, col, 1.0)
    try:
        _, S, Vt = np.linalg.svd(Js, full_matrices=False)
        cond = float(S[0] / S[-1]) if S[-1] > 0 else math.inf
    except np.linalg.LinAlgError:
        S, Vt, cond = np.zeros(k), np.eye(k), math.inf
    null = S <= 1e-10 * max(S[0], 1e-300)
    inv = np.where(null, 0.0, 1.0 / np.where(null, 1.0, S) ** 2)
    cov_s = s2 * (Vt.T * inv) @ Vt
    se_s = np.sqrt(np.clip(np.diag(cov_s), 0, None))
    # unbounded: a null direction loads on it by more than NULL_LOADING (a margin: see there)
    unbounded = dead | (np.abs(Vt[null]).max(axis=0) > NULL_LOADING if null.any() else np.zeros(k, bool))
    with np.errstate(all="ignore"):
        corr = np.clip(cov_s / np.outer(se_s, se_s), -1.0, 1.0)
    corr[~np.isfinite(corr)] = np.nan
    corr[unbounded, :] = np.nan
    corr[:, unbounded] = np.nan
    np.fill_diagonal(corr, 1.0)
    se_theta = np.where(unbounded, np.inf, se_s / np.where(col > 0, col, 1.0))
    tq = float(special.stdtrit(max(n - k, 1), 0.975))  # Student t quantile
    values = problem.values(theta)
    stderr, ci = {}, {}
    for j, p in enumerate(problem.free):
        v, s = values[p.name], se_theta[j]
        if p.log:
            # v·s in log space: a drifted scale (e^700) times its s.e. overflows a float
            log_se = theta[j] + math.log(s) if np.isfinite(s) and s > 0 else (-math.inf if s == 0 else math.inf)
            stderr[p.name] = math.exp(log_se) if log_se < 709 else math.inf
            ci[p.name] = scale_interval(p, theta[j], tq * s)
        else:  # intersected with the parameter's bounds: values outside are not models
            stderr[p.name] = float(s)
            b0, b1 = p.bounds
            # an end past the values the data can set (15 decades out) is open
            ci[p.name] = open_beyond_support(p, (max(v - tq * s, b0), min(v + tq * s, b1))
                                             if np.isfinite(s) else (b0, b1))
    return _Jacobian(stderr=stderr, ci=ci, corr=corr, cond=cond, flags=flags, se_theta=se_theta,
                     vanished=vanished, ridge=tuple(np.array(names)[unbounded & ~dead]),
                     J=J, r=r)


def _jacobian(problem: Problem, theta) -> np.ndarray:
    """J (n, k): central differences of the predictions (of their log for a Huber fit) in θ."""
    k = len(theta)
    h = 1e-5 * np.maximum(1.0, np.abs(theta))
    pts = np.vstack([theta + np.diag(h), theta - np.diag(h)])
    P = problem.predict_many(pts)
    with np.errstate(all="ignore"):
        if problem.huber:
            P = np.log(P)
        return ((P[:k] - P[k:]) / (2 * h[:, None])).T


def _vanished_by_others(problem: Problem, theta, dead, floor: float) -> tuple:
    """The dead scales (bounded below by 0, below their start range) whose term stays dead with
    the scale put back at its smallest start: another parameter killed the term (A·N^−α with α
    at 126, a kink past every run), so the scale's own value is wherever the solver stopped and
    decides nothing. Whatever that value: a scale whose term revives at its smallest start, by
    ``REVIVE_MARGIN`` above the floor, collapsed by itself (λ at 1e-12 with κ and γ held: the
    data want it at 0)."""
    found = []
    for j in np.flatnonzero(dead):
        p = problem.free[j]
        if not (p.log and p.bounds[0] == 0 and theta[j] < math.log(p.init[0])):
            continue
        at_start = np.array(theta, float)
        at_start[j] = math.log(p.init[0])
        column = _jacobian(problem, at_start)[:, j]
        if not np.linalg.norm(np.where(np.isfinite(column), column, 0.0)) >= REVIVE_MARGIN * floor:
            found.append(p.name)
    return tuple(found)


# --- flags ----------------------------------------------------------------------------------------

def at_bound(problem: Problem, theta, fixed=(), vanished=(), ridge=()) -> list[str]:
    """The parameters within tolerance of a physical bound (:func:`near_bound`): the free ones at
    ``theta``, then those of ``fixed`` (the names the user fixed; not the dropped token terms,
    which sit on their bound by design and are said in the notes). A scale in ``vanished``
    (:func:`_vanished_by_others`: its term is dead because of another parameter, e.g. A·N^−α
    with α at 126) is never "at" its bound 0 whatever its value: the value is wherever the
    solver stopped along a direction the data do not see (Gadre's A: 3.2e-8 under one BLAS
    kernel, 2.2e-5 under another), so the collapse test would decide on rounding; it is not
    identified. Nor is a parameter in ``ridge`` (a null direction of the Jacobian loads on it,
    and no profile checks it): along the ridge it leaves the bound at no cost, and where the
    solver stopped decides (Gadre's fitted-ε shape_quadratic E[c4_original]: 0 under one BLAS
    kernel, 0.45 under another, the same RSS)."""
    values = problem.values(theta)
    params = {p.name: p for p in problem.law.params}
    free = [p.name for p in problem.free if near_bound(p, values[p.name])
            and p.name not in vanished and p.name not in ridge]
    pinned = [nm for nm in fixed if nm in params and near_bound(params[nm], problem.fixed[nm])]
    return free + pinned


def near_bound(p, value: float) -> bool:
    """Whether ``value`` of the parameter ``p`` is within tolerance of one of its bounds:
    ``_BOUND_TOL`` of its init range (in log space for a scale), and for a scale bounded below
    by 0 — which log space never reaches — a value below ``_COLLAPSED`` × its smallest start
    (λ at 3.5e−183: the term it scales has vanished, the data want it at 0). A fit's status also
    asks that no other parameter killed its term and no unprofiled ridge lets it leave the bound
    (:func:`at_bound`)."""
    b0, b1 = p.bounds
    if p.log:
        if not value > 0:
            return True
        width = (math.log(p.init[1]) - math.log(p.init[0])) or 1.0
        low = (value <= _COLLAPSED * p.init[0] if b0 == 0
               else math.log(value) <= math.log(b0) + _BOUND_TOL * width)
        high = np.isfinite(b1) and math.log(value) >= math.log(b1) - _BOUND_TOL * width
        return bool(low or high)
    tol = _BOUND_TOL * ((p.init[1] - p.init[0]) or 1.0)
    return bool((np.isfinite(b0) and value <= b0 + tol) or (np.isfinite(b1) and value >= b1 - tol))


def identifiability_flags(result, problem: Problem) -> list[str]:
    """The identifiability flags of ``result`` (a FitResult): strongly correlated pairs, parameters
    at a bound (fixed or fitted), intervals spanning zero, a better optimum, ill-conditioning."""
    flags = []
    names = problem.names
    for i, j in itertools.combinations(range(len(names)), 2):
        c = result.correlation[i, j]
        if np.isfinite(c) and abs(c) >= STRONG_CORR:
            flags.append(f"{names[i]} and {names[j]} are correlated (r = {c:+.3f}): the Jacobian "
                         "sees mostly a combination of them")
    for p in problem.free:
        nm, v = p.name, result.params[p.name]
        if nm in result.at_bound:
            b0, b1 = p.bounds
            flags.append(f"{nm} = {number_text(v)} is at its bound (allowed: [{number_text(b0)}, {number_text(b1)}]): the fit "
                         "wants it beyond the physical range; its Jacobian interval is not valid")
        lo, hi = result.ci_jacobian[nm]
        prof = result.ci_profile.get(nm) if result.ci_profile else None
        if prof is not None and prof[0] <= 0 <= prof[1]:
            flags.append(f"{nm}: profile 95% interval {interval_text(prof)} includes 0")
        elif np.isfinite(lo) and np.isfinite(hi) and lo < 0 < hi:
            flags.append(f"{nm}: Jacobian 95% interval [{number_text(lo)}, {number_text(hi)}] spans zero")
        elif result.ci_bootstrap and result.ci_bootstrap[nm][0] < 0 < result.ci_bootstrap[nm][1]:
            flags.append(f"{nm}: bootstrap 95% interval spans zero")
        elif not np.isfinite(result.stderr[nm]):
            flags.append(f"{nm}: standard error is not finite")
    for nm in result.fixed:
        if nm in result.at_bound:
            b0, b1 = problem.law.param(nm).bounds
            flags.append(f"{nm} = {number_text(result.fixed[nm])} (fixed) is at its bound (allowed: "
                         f"[{number_text(b0)}, {number_text(b1)}])")
    better = {nm: pr.better_fit for nm, pr in result.profiles.items() if pr.better_fit is not None}
    if better:
        flags.append("the profile of " + ", ".join(better) + " found a lower objective than the "
                     "multi-start optimum (likelihood-ratio statistic "
                     + ", ".join(f"{v:.3g}" for v in better.values())
                     + "): the reported optimum is a local one; add starts (grid_points, max_starts)")
    if result.condition_number > _COND_FLAG:
        flags.append(f"ill-conditioned: condition number {result.condition_number:.3g} "
                     "of the column-normalised Jacobian")
    dropped = result.n_bootstrap_failed + result.n_bootstrap_not_converged
    if dropped > 0.05 * max(result.n_bootstrap + dropped, 1):
        flags.append(f"{dropped} of {result.n_bootstrap + dropped} bootstrap refits failed or did "
                     "not converge (left out of the intervals): the bootstrap intervals are unreliable")
    if result.starts.ridge_params:
        flags.append(f"{', '.join(result.starts.ridge_params)}: starts that reach the chosen optimum's objective "
                     f"(within {RIDGE_TIE:g} relative) end at different values (a ridge of equally good "
                     "fits): not identified; predictions outside the data are the range over "
                     f"the {max(len(result.ridge_solutions), 2)} tied solutions (predict_range)")
    if getattr(result.starts, "found_by_profile", ""):
        flags.append(f"no start reached the optimum: {result.starts.found_by_profile}; the "
                     "objective has several local optima (more starts: grid_points, max_starts)")
    elif result.starts.n_at_best < 0.5 * result.starts.n_starts:
        flags.append(f"only {result.starts.n_at_best} of {result.starts.n_starts} starts reached the "
                     "best optimum: the objective has several local optima")
    return flags
