"""Profile-likelihood intervals: fix one parameter, refit the others, find where the fit
gets significantly worse.

For a least-squares fit with Gaussian errors of unknown variance, the profile
likelihood-ratio statistic of parameter ψ is Λ(ψ) = n·ln(RSS(ψ) / RSS_min), where RSS(ψ) is
the best residual sum of squares with ψ held fixed; the 95% interval is {ψ : Λ(ψ) < χ²₁(0.95)
= 3.84} (Venzon & Moolgavkar 1988; Bates & Watts 1988, ch. 6). It follows the curvature of the
objective instead of assuming the quadratic one the Jacobian interval assumes, so it is the
standard for nonlinear parameters such as a kink location. With n ≤ 30 runs the cut is
F-calibrated instead, Λ < n·ln(1 + F₀.₉₅(1, n − k)/(n − k)) for k free parameters (the exact
cut of a linear model; χ²₁ is its large-n limit and at n = 6, k = 3 gives intervals about half
as wide as they should be). For a Huber fit (objective
H = Σ ρ(rᵢ)) we use the same statistic with H in place of the RSS, n·ln(H(ψ)/H_min) — an
approximation, Huber being no likelihood. We tried the Schrader & Hettmansperger (1980)
drop-in-dispersion test 2ξ·(H(ψ) − H_min), ξ = Σψ'/Σψ²: with the 1e-3 threshold on log-loss
residuals of a few percent, ξ rests on the few residuals inside the threshold, which an
L1-like fit interpolates, and its intervals came out far narrower than the bootstrap's (α on
the paper data: [0.096, 0.152] vs bootstrap [0.095, 0.221]); n·ln(H(ψ)/H_min) gave
[0.092, 0.213], and matched the bootstrap as closely on two synthetic tables.
At a parameter's bound (λ = 0, an exponent = 0) the χ²₁ cut is conservative
(the null distribution is then a 50:50 mixture of χ²₀ and χ²₁). One caution for a penalty scale
such as λ: at λ = 0 the penalty's other parameters (κ, γ) no longer affect the fit, and a test
with parameters unidentified under the null (Davies 1987) has a null distribution wider than
χ²₁ — so "λ's profile interval excludes 0" is weaker evidence than it looks; compare the laws
with and without the penalty by AICc/BIC as well.

Each profile point is refitted from several starts — the optimum with ψ replaced, the cold
multi-start points with ψ replaced, then the neighbouring points' solutions — so that a
point does not stay in one basin of a multimodal objective. An interval end is reported as
±inf when the profile never crosses the threshold before the parameter's (infinite) bound, or
crosses it only by a jump: the data do not bound it on that side, and ``Profile.notes`` says
from where. Every law here is continuous in its parameters, so the true profile is continuous
wherever the best fit stays finite, and each computed Λ is an upper bound on it (the best refit
found). A jump left after the bracket is refined 7⁴-fold is then refits losing a ridge of equally
good fits (a scale and an exponent trading along the rows' N), or the best fit running off to
infinity: neither is the data excluding the values beyond. Which point a walk loses the ridge at
turns on the BLAS kernel's last bits (the natural-text study's α ends: 18.0 on OpenBLAS SkylakeX,
44.7 on Haswell, both by a jump), so a jump's number is no end to print; the side is open, which
can only widen the interval (its coverage does not fall). One jump is the data's: a kink's
location passing a row's break (D/ln W for κ), where the kink leaves that row; that end stays,
with a note.
"""
from __future__ import annotations

import numpy as np
from scipy import (
    special,  # the χ² and F quantiles without importing scipy.stats (a second of CPU)
)

from .breaks import held_at_breaks, kink_breaks
from .problem import TIE, Problem, within_support
from .solver import CAPPED, CONVERGED, FAILED, MAX_ITER

from .profile_result import CRITICAL, JUMP, LEVEL, Profile  # noqa: F401 (re-exported)

SMALL_N = 30  # at or below this many runs the cut is F-calibrated
_OFFSETS = 2.0 ** np.arange(-2, 12)  # multiples of the step h outward from the optimum
_NEAR = 6  # steps up to 2³ h: a staged walk goes beyond only on sides that have not crossed
_REFINE = 6  # interior points evaluated per round in the bracketing interval of a crossing
_ROUNDS = 4  # refinement rounds at most: a bracket still rising by JUMP after them is a jump
FLAT = 0.1   # Λ within this of the level before a jump: the flat stretch
NEIGHBOUR_ROUNDS = 8  # passes from neighbours at most (each only from the points the last improved)
FLAT_SHARE = 0.2  # ... reported when it spans at least this share of the way from the optimum


def critical_value(n: int, k: int, level: float = LEVEL) -> tuple[float, str]:
    """The cut on Λ and its description. With n ≤ ``SMALL_N`` runs and k free parameters, the
    exact small-sample calibration of a linear model: (RSS_ψ − RSS_min)/(RSS_min/(n − k)) ~
    F(1, n − k), i.e. Λ < n·ln(1 + F_level(1, n − k)/(n − k)) (Bates & Watts 1988, §6.1.2);
    χ²₁ is its n → ∞ limit and too narrow at a few runs per parameter."""
    df = n - k
    if n <= SMALL_N and df >= 1:
        f = float(special.fdtri(1, df, level))
        cut = n * float(np.log1p(f / df))
        return cut, f"F(1, {df}) calibration: Λ < n·ln(1 + F₀.₉₅(1, {df})/{df}) = {cut:.2f}"
    cut = float(special.chdtri(1, 1 - level))
    return cut, f"χ²₁(0.95) = {cut:.2f}"


class Statistic:
    """Λ(objective) for profile points, with its description and its cut."""

    def __init__(self, problem: Problem, objective_hat: float):
        n = len(problem.y)
        self.describe = ("Λ = n·ln(H_ψ / H_min), H the Huber objective (approximate)" if problem.huber
                         else "Λ = n·ln(Q_ψ / Q_min), Q the asymmetric objective (approximate)"
                         if getattr(problem, "overestimate_weight", None) else "Λ = n·ln(RSS_ψ / RSS_min)")
        self.critical, self.cut = critical_value(n, problem.k)
        self.n, self.objective_hat = n, objective_hat  # plain numbers: a fit goes between processes

    def __call__(self, obj):
        # a point no start could refit (non-finite predictions) is missing, not a crossing
        with np.errstate(all="ignore"):
            return np.where(np.isfinite(obj), self.n * np.log(np.asarray(obj, float) / self.objective_hat), np.nan)


def _first_crossing(s, critical) -> int | None:
    cross = np.flatnonzero(np.nan_to_num(s, nan=-np.inf) >= critical)
    return int(cross[0]) if len(cross) else None


def _bracket(t_hat, t, s, c):
    """(a, s_a) the last finite point before index c (the optimum when none)."""
    prev = [i for i in range(c) if np.isfinite(s[i])]
    return (t[prev[-1]], s[prev[-1]]) if prev else (t_hat, 0.0)


def profile_intervals(problem: Problem, theta_hat: np.ndarray, statistic: Statistic,
                      cold_starts: np.ndarray, se_theta: np.ndarray, names=None,
                      staged: bool = False) -> dict:
    """Profiles of ``names`` (default: every free parameter) around the optimum ``theta_hat``.

    The grid is adaptive: each side walks outward in doubling steps until Λ crosses the cut, then
    the bracketing interval is refined (``_REFINE`` points per round) while Λ still rises by more
    than ``JUMP`` across it, for at most ``_ROUNDS`` rounds. A crossing that remains a jump after
    them is a discontinuity of the profile (e.g. the kink leaving the data): when a flat stretch
    precedes it, the limit is the grid's or the model's, not the data's, and the side is open.

    ``staged``: the walk first takes the steps up to ``_NEAR`` and only the sides that have not
    crossed go on to the far ones (for a fit whose search found a single basin, where nothing
    beyond the crossing can be a better optimum; far points on a flat direction are the costly
    refits; their refits stopped at the iteration cap are continued only up to the first
    crossing). Otherwise every step is refitted, and every capped refit continued, so that a
    better optimum beyond a crossing is found."""
    critical = getattr(statistic, "critical", CRITICAL)
    names = list(problem.names if names is None else names)
    plans = []
    for name in names:
        j = problem.names.index(name)
        h = _step(problem, j, theta_hat, se_theta[j])
        for side in (-1, 1):
            pts = theta_hat[j] + side * h * _OFFSETS
            bound = problem.lo[j] if side < 0 else problem.hi[j]
            if np.isfinite(bound):
                inside = pts[(pts - bound) * side < 0]
                pts = np.append(inside, bound)
            plans.append((name, j, side, pts, bool(np.isfinite(bound))))
    # a staged walk also continues capped refits only up to the first crossing
    evaluate = lambda todo: _evaluate(problem, theta_hat, cold_starts, todo,
                                      statistic if staged else None, critical)
    sides = {}  # (name, side) -> dict(j, t, s, sol, bounded)
    near = [(nm, j, sd, pts[:_NEAR] if staged else pts, b) for nm, j, sd, pts, b in plans]
    for (name, j, side, pts, bounded), (obj, sols) in zip(near, evaluate(near)):
        sides[(name, side)] = dict(j=j, t=np.asarray(pts, float), s=statistic(obj), sol=list(sols),
                                   bounded=bounded)
    far = [(nm, j, sd, pts[_NEAR:], b) for nm, j, sd, pts, b in plans
           if staged and len(pts) > _NEAR and _first_crossing(sides[(nm, sd)]["s"], critical) is None]
    for (name, _, side, pts, _), (obj, sols) in zip(far, evaluate(far)):
        _add_points(sides[(name, side)], side, pts, statistic(obj), sols)
    smooth = lambda: _propagate(problem, sides, statistic)
    smooth()
    _refine(sides, theta_hat, critical, evaluate, statistic, smooth)
    return {name: _profile(problem, name, theta_hat, sides, critical) for name in names}


def _add_points(d, side, t, s, sols) -> None:
    t = np.concatenate([d["t"], t])
    s = np.concatenate([d["s"], s])
    sol = d["sol"] + list(sols)
    order = np.argsort(t * side)
    d["t"], d["s"], d["sol"] = t[order], s[order], [sol[i] for i in order]


def _propagate(problem: Problem, sides, statistic, tol: float = 1e-3, max_rounds: int = 64) -> None:
    """Refit each profile point from a neighbour's solution wherever the neighbour's Λ is lower
    (by more than ``tol``), until no point improves. The profile is continuous where the model
    is, so a point far above both neighbours is a refit that stayed in a worse basin; which
    points do depends on the CPU's last bits, and without this pass so did the interval ends
    (an AMD and an Intel machine gave α ≥ 0.048 and ≥ 0.13 on one fit of the paper's runs)."""
    changed = {key: np.ones(len(d["t"]), bool) for key, d in sides.items()}
    for _ in range(max_rounds):
        rows, frozen, owner, sources = [], [], [], []
        for key, d in sides.items():
            s = np.nan_to_num(d["s"], nan=np.inf)
            for i in range(len(s)):
                for nb in (i - 1, i + 1):
                    if 0 <= nb < len(s) and changed[key][nb] and s[nb] < s[i] - tol:
                        t0 = np.array(d["sol"][nb], float)
                        sources.append(t0.copy())
                        t0[d["j"]] = d["t"][i]
                        rows.append(t0)
                        f = np.zeros(problem.k, bool)
                        f[d["j"]] = True
                        frozen.append(f)
                        owner.append((key, i))
        if not rows:
            return
        rows, frozen, origin = _carried(problem, rows, frozen, sources)
        owner = [owner[i] for i in origin]
        res = problem.solve(rows, frozen_MxK=frozen)
        changed = {key: np.zeros(len(d["t"]), bool) for key, d in sides.items()}
        for r, (key, i) in enumerate(owner):
            d, lam = sides[key], float(statistic(res.objective[r]))
            if res.status[r] == CONVERGED and np.isfinite(lam) and not lam >= np.nan_to_num(d["s"][i], nan=np.inf) - tol:
                d["s"][i], d["sol"][i] = lam, res.theta[r]
                changed[key][i] = True


def _refine(sides, theta_hat, critical, evaluate, statistic, smooth) -> None:
    """Refine each side's bracket of its first crossing while Λ jumps across it (the first
    round always), at most ``_ROUNDS`` rounds; ``smooth`` after each round."""
    for rnd in range(_ROUNDS):
        refine = []
        for (name, side), d in sides.items():
            c = _first_crossing(d["s"], critical)
            if c is None:
                continue
            a, s_a = _bracket(theta_hat[d["j"]], d["t"], d["s"], c)
            if rnd > 0 and d["s"][c] - s_a <= JUMP:
                continue  # smooth enough for linear interpolation
            inner = np.linspace(a, d["t"][c], _REFINE + 2)[1:-1]
            refine.append(((name, side), (name, d["j"], side, inner, False)))
        if not refine:
            break
        for (key, plan), (obj, sols) in zip(refine, evaluate([p for _, p in refine])):
            _add_points(sides[key], key[1], plan[3], statistic(obj), sols)
        smooth()


def _profile(problem: Problem, name, theta_hat, sides, critical) -> Profile:
    """One parameter's Profile from its two walked sides: the interval ends, the notes on its
    shape, and any lower objective the walk found."""
    j = problem.names.index(name)
    all_t, all_s, ends, at_bound, better, notes = [theta_hat[j]], [0.0], {}, [], None, []
    all_sol = [theta_hat]
    for side in (-1, 1):
        d = sides[(name, side)]
        t, s = d["t"], d["s"]
        all_sol += d["sol"]
        all_t += list(t)
        all_s += list(s)
        ends[side], hit = _end(theta_hat[j], t, s, side, d["bounded"], critical)
        if hit:
            at_bound.append("lower" if side < 0 else "upper")
        ends[side], note = _shape_at_limit(problem, j, theta_hat[j], t, s, side, ends[side], critical)
        if note:
            notes.append(note)
            if not hit and ends[side] == _open_end(problem, j, side) and np.isfinite(ends[side]):
                at_bound.append("lower" if side < 0 else "upper")
    left_out = int(np.sum(np.isnan(all_s)))
    if left_out:
        notes.append(f"{name}: {left_out} profile point(s) still at the iteration cap after "
                     "a longer continued refit: left out; the interval rests on the others")
    finite = np.isfinite(all_s)
    lowest = np.nanmin(np.where(finite, all_s, np.nan)) if finite.any() else 0.0
    better_theta = None
    if lowest < -1e-4:
        better = float(lowest)
        better_theta = np.asarray(all_sol[int(np.nanargmin(np.where(finite, all_s, np.nan)))])
    order = np.argsort(all_t)
    tt = np.asarray(all_t)[order]
    vals = np.exp(np.clip(tt, -700, 700)) if problem.is_log[j] else tt
    lo = _natural(problem, j, ends[-1])
    hi = _natural(problem, j, ends[1])
    if problem.is_log[j] and ends[-1] == -np.inf:
        lo = 0.0 if problem.free[j].bounds[0] == 0 else lo
    (lo, hi), note = within_support(problem.free[j], lo, hi)
    if note:
        notes.append(note)
    return Profile(name, vals, np.asarray(all_s)[order], (lo, hi), at_bound, better,
                   better_theta, notes, critical)


def _shape_at_limit(problem, j, t_hat, t, s, side, end, critical):
    """(end, note): a limit reached by a jump is no limit (the side becomes open, to the
    parameter's bound where it has one; see the module text) unless it is a kink's at a row's
    break; the note names the last point below the cut, or where the profile went flat."""
    name, nat = problem.names[j], (lambda v: _natural(problem, j, v))
    rel = "≥" if side > 0 else "≤"
    c = _first_crossing(s, critical)
    if c is None:
        if not np.isfinite(end):
            stretch = _flat_stretch(t_hat, t, s, len(t))
            if stretch is not None:
                return end, (f"{name} {rel} {nat(stretch[0]):.2g}: the profile is flat beyond "
                             f"(Λ ≈ {max(stretch[1], 0):.1f} < {critical:.2f}); the data do not bound it")
        return end, ""
    a, s_a = _bracket(t_hat, t, s, c)
    if s[c] - s_a <= JUMP:
        return end, ""
    stretch = _flat_stretch(t_hat, t, s, c)
    if stretch is not None:
        return _open_end(problem, j, side), (
            f"{name} {rel} {nat(stretch[0]):.2g}: the profile is flat beyond (Λ ≈ {max(s_a, 0):.1f} up "
            f"to {nat(a):.3g}, then jumps to {s[c]:.1f}); the data do not bound it")
    if _at_a_break(problem, j, a, t[c]):
        return end, (f"{name}: the profile jumps across the cut at {nat(t[c]):.3g} (Λ {s_a:.1f} → "
                     f"{s[c]:.1f}), where the kink passes a row's break: beyond it the rows past "
                     "the kink change, a limit the design sets, not a smooth likelihood limit")
    return _open_end(problem, j, side), (
        f"{name} {rel} {nat(a):.2g}: the profile jumps across the cut beyond (Λ {s_a:.1f} → {s[c]:.1f} "
        f"at {nat(t[c]):.3g}): the refits lose the fit there, which is no likelihood limit; the data "
        "do not bound it")


def _at_a_break(problem, j, a, b) -> bool:
    """Whether ψ = column j is the kink's location and a row's break lies between a and b (θ
    space): the one jump of a continuous law that is the data's and not the refits'. Past the
    break the kink leaves that row; just before it the penalty's scale runs off to fit the row
    exactly, so the profile jumps there on every machine, at a place the rows fix."""
    kink = kink_breaks(problem, most=None)  # every break: the one crossed may be any of them
    if kink is None or kink[0] != j:
        return False
    values = kink[1]
    lo, hi = min(a, b), max(a, b)
    return bool(np.any((values >= lo) & (values <= hi)))


def _open_end(problem, j, side) -> float:
    """An open side's end: the parameter's finite bound on that side (θ space), else ±inf."""
    bound = problem.lo[j] if side < 0 else problem.hi[j]
    return float(bound) if np.isfinite(bound) else side * np.inf


def _flat_stretch(t_hat, t, s, c):
    """(start, level) of the stretch of points before index c whose Λ stays within ``FLAT`` of
    the last one's, when it has ≥ 3 points and spans at least ``FLAT_SHARE`` of the way from the
    optimum (a smooth profile is steep just before its crossing); else None."""
    idx = [i for i in range(c) if np.isfinite(s[i])]
    ts = [t_hat] + [t[i] for i in idx]  # the optimum (Λ = 0) opens the walk
    ss = [0.0] + [s[i] for i in idx]
    if len(ts) < 3:
        return None
    level, k = ss[-1], len(ts) - 1
    while k > 0 and abs(ss[k - 1] - level) <= FLAT:
        k -= 1
    start, span = ts[k], abs(ts[-1] - ts[k])
    if len(ts) - k < 3 or span < FLAT_SHARE * abs(ts[-1] - t_hat):
        return None
    return start, float(level)


def _natural(problem, j, t):
    if not np.isfinite(t):
        return float(t)
    return float(np.exp(np.clip(t, -700, 700))) if problem.is_log[j] else float(t)


def _step(problem: Problem, j: int, theta_hat, se) -> float:
    """A step of about one standard error, clipped to a sane range for the parameter."""
    p = problem.free[j]
    if p.log:
        lo, hi = 0.02, 2.0
    else:
        scale = max(abs(theta_hat[j]), abs(p.init[1] - p.init[0]), 1e-3)
        lo, hi = 0.01 * scale, scale
    return float(np.clip(se if np.isfinite(se) and se > 0 else hi, lo, hi))


def _end(t_hat, t, s, side, bounded, critical=CRITICAL):
    """The first crossing of ``critical`` walking outward (linear interpolation between the
    bracketing points). Without one: the bound when the walk ended at a finite bound (closed
    there), else ±inf (open). Returns (end, reached_bound)."""
    prev_t, prev_s = t_hat, 0.0
    for ti, si in zip(t, s):
        if not np.isfinite(si):
            continue
        if si >= critical:
            frac = (critical - prev_s) / (si - prev_s) if si > prev_s else 0.0
            return prev_t + np.clip(frac, 0.0, 1.0) * (ti - prev_t), False
        prev_t, prev_s = ti, si
    if bounded:
        return t[-1], True
    return side * np.inf, False


def _evaluate(problem: Problem, theta_hat, cold_starts, plans, statistic=None, critical=CRITICAL):
    """Refit every planned point; returns per plan (objective (P,), solutions (P, k)).
    ``statistic`` (Λ of an objective) limits the continued refits to the points up to each
    plan's first crossing of ``critical`` (:func:`_continue_capped`)."""
    if not plans:
        return []
    k = problem.k
    rows, frozen, owner = [], [], []
    for pi, (_, j, _, pts, _) in enumerate(plans):
        for pos, tj in enumerate(pts):
            for start in (theta_hat, *cold_starts):
                t0 = np.array(start, float)
                t0[j] = tj
                rows.append(t0)
                f = np.zeros(k, bool)
                f[j] = True
                frozen.append(f)
                owner.append((pi, pos))
    rows, frozen = np.array(rows), np.array(frozen)
    res = problem.solve(rows, frozen_MxK=frozen)
    best = _best_per_point(plans, owner, res)
    _scan_breaks_at_points(problem, plans, best)
    # then start each point from its neighbours' solutions, again from the points that improved,
    # so that a deeper basin found at one point reaches the points beside it
    changed = [np.ones(len(p[3]), bool) for p in plans]
    for _ in range(NEIGHBOUR_ROUNDS):
        changed = _from_neighbours(problem, plans, best, changed)
        if not any(c.any() for c in changed):
            break
    _continue_capped(problem, plans, best, statistic, critical)
    return [(obj, sols) for obj, sols, _ in best]


def _carried(problem: Problem, rows, frozen, sources) -> tuple:
    """The starts ``rows`` (a neighbour's solution with the profiled parameter moved) twice: as
    they are, and first fitted, the profiled parameter held, to the predictions of the solution
    they came from (``sources``): moving one parameter alone shifts every prediction (an exponent
    moved with its scale held), and a refit from there can settle in another basin than the one
    the neighbour was in; the carried start keeps the neighbour's curve. Returns (rows, frozen,
    index of each row's origin)."""
    rows, frozen = np.asarray(rows, float), np.asarray(frozen, bool)
    carried = problem.solve(rows, frozen_MxK=frozen, losses_MxN=problem.predict_many(np.asarray(sources, float)))
    ok = carried.status != FAILED
    n = len(rows)
    return (np.vstack([rows, carried.theta[ok]]), np.vstack([frozen, frozen[ok]]),
            np.concatenate([np.arange(n), np.flatnonzero(ok)]))


def _from_neighbours(problem: Problem, plans, best, changed) -> list:
    """Refit each point beside a point of ``changed`` from that neighbour's solution; returns
    per plan the points whose objective improved (beyond ``TIE``)."""
    rows, frozen, owner, sources = [], [], [], []
    for pi, (_, j, _, pts, _) in enumerate(plans):
        for pos, tj in enumerate(pts):
            for nb in (pos - 1, pos + 1):
                if 0 <= nb < len(pts) and changed[pi][nb] and np.isfinite(best[pi][0][nb]):
                    t0 = best[pi][1][nb].copy()
                    sources.append(t0.copy())
                    t0[j] = tj
                    rows.append(t0)
                    f = np.zeros(problem.k, bool)
                    f[j] = True
                    frozen.append(f)
                    owner.append((pi, pos))
    improved = [np.zeros(len(p[3]), bool) for p in plans]
    if not rows:
        return improved
    rows, frozen, origin = _carried(problem, rows, frozen, sources)
    owner = [owner[i] for i in origin]
    cand = _best_per_point(plans, owner, problem.solve(rows, frozen_MxK=frozen))
    for pi in range(len(plans)):
        better = cand[pi][0] < best[pi][0] * (1 - TIE)
        improved[pi] = better
        for part in range(3):
            best[pi][part][better] = cand[pi][part][better]
    return improved


def _scan_breaks_at_points(problem: Problem, plans, best) -> None:
    """For a law whose kink bends the objective at every row's break (``Roles.breaks``), each
    profile point is also refitted with the kink held at each break (from the point's best
    solution), then freed from the best of them: a point's refit otherwise stops at whichever
    bend is nearest its start, which can turn on the machine's last bits, and the profile's ends
    with it. The held fits are :func:`.breaks.held_at_breaks`, as the search's for the optimum
    (:func:`.starts.best_break`), here from each point's solution with the profiled parameter
    held too, on every row."""
    kink = kink_breaks(problem)
    if kink is None:
        return
    jk, values, _ = kink
    origins, held_columns, owner = [], [], []
    for pi, (_, j, _, pts, _) in enumerate(plans):
        if j == jk:
            continue
        for pos in range(len(pts)):
            if np.isfinite(best[pi][0][pos]):
                origins.append(best[pi][1][pos])
                held_columns.append(np.arange(problem.k) == j)
                owner += [(pi, pos)] * len(values)
    if not origins:
        return
    held = _best_per_point(plans, owner, held_at_breaks(problem, np.array(origins), jk, values,
                                                        np.array(held_columns))[0])
    starts, frozen, owner = [], [], []
    for pi, (_, j, _, pts, _) in enumerate(plans):
        for pos in np.flatnonzero(np.isfinite(held[pi][0])):
            starts.append(held[pi][1][pos])
            frozen.append(np.arange(problem.k) == j)
            owner.append((pi, pos))
    freed = _best_per_point(plans, owner, problem.solve(np.array(starts), frozen_MxK=np.array(frozen)))
    for pi in range(len(plans)):
        for cand in (held, freed):
            better = cand[pi][0] < best[pi][0] * (1 - TIE)
            for part in range(3):
                best[pi][part][better] = cand[pi][part][better]


def _continue_capped(problem: Problem, plans, best, statistic=None, critical=CRITICAL) -> None:
    """A point whose best refit stopped at the iteration cap (from the optimum, the cold starts
    and its neighbours alike) is continued from there with a longer budget; one that still does
    not converge is left out of the profile (NaN: neither a crossing nor a bracket).

    With ``statistic``, only the points up to a plan's first crossing are continued (again
    after a continued crossing point fell below the cut): a capped point's objective is an
    upper bound on the profile there, so a point beyond the first crossing cannot move it, and
    it keeps that bound. Far-out points on a flat direction are the ones that reach the cap."""
    done = set()
    while True:
        todo = [(pi, pos) for pi in range(len(plans)) for pos in _capped_to_continue(best[pi], statistic, critical)
                if (pi, pos) not in done]
        if not todo:
            return
        done.update(todo)
        _continue(problem, plans, best, todo)


def _capped_to_continue(best_plan, statistic, critical):
    capped = np.flatnonzero(best_plan[2] == CAPPED)
    if statistic is None or not len(capped):
        return capped
    c = _first_crossing(statistic(best_plan[0]), critical)
    return capped if c is None else capped[capped <= c]


def _continue(problem: Problem, plans, best, todo) -> None:
    k = problem.k
    frozen = np.zeros((len(todo), k), bool)
    for r, (pi, _) in enumerate(todo):
        frozen[r, plans[pi][1]] = True
    res = problem.solve(np.array([best[pi][1][pos] for pi, pos in todo]), frozen_MxK=frozen,
                        max_iter=3 * MAX_ITER)
    for r, (pi, pos) in enumerate(todo):
        ok = res.status[r] == CONVERGED and np.isfinite(res.objective[r])
        best[pi][0][pos] = res.objective[r] if ok else np.nan
        best[pi][1][pos] = res.theta[r] if ok else best[pi][1][pos]
        best[pi][2][pos] = CONVERGED if ok else CAPPED


def _best_per_point(plans, owner, res):
    """Per plan [objective (P,), θ (P, k), status (P,)] of the best refit of each point."""
    best = [[np.full(len(p[3]), np.inf), np.full((len(p[3]), len(res.theta[0])), np.nan),
             np.full(len(p[3]), FAILED)] for p in plans]
    for row, (pi, pos) in enumerate(owner):
        obj = res.objective[row]
        if res.status[row] != FAILED and np.isfinite(obj) and obj < best[pi][0][pos]:
            best[pi][0][pos] = obj
            best[pi][1][pos] = res.theta[row]
            best[pi][2][pos] = res.status[row]
    return best
