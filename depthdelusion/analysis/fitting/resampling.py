"""Resampling a fit: the case and cluster bootstrap (refitted, or one Gauss–Newton step per
resample on large tables) and leave-one-out (refits or the hat matrix). Refits of many loss
vectors at once are :mod:`.refits`."""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from .block_sums import BLOCK_SUMS_FROM_ROWS, BLOCKS, count_blocks, random_blocks, unit_sums
from .clusters import cluster_index
from .leverage import leverage
from .problem import TIE, Problem
from .starts import COMPETING
from .solver import CAPPED, FAILED, MAX_ITER, irls_weights

# Cold starts per leave-one-out refit: with n − 1 of n runs the basins are nearly the full
# data's, and on the paper data 8 starts reached every held-out fit's own optimum (over all 64
# grid starts) for the three depth laws, 4 starts 27–30 of 30.
LOO_STARTS = 8
LOO_REFIT_ROWS = 200  # exact leave-one-out refits up to this many rows, hat-matrix beyond
BOOT_REFIT_ROWS = 2000  # cold bootstrap refits up to this many rows, one-step beyond
_CHUNK_ELEMENTS = 2_000_000  # numbers per block of resampling weights (≈ 16 MB)


@dataclass(frozen=True)
class Bootstrap:
    """The bootstrap stage's part of a fit: the resamples' θ (natural units), the refits that
    failed or stopped at the iteration cap, the scheme in words and the percentile intervals."""

    samples: np.ndarray | None = None
    n_failed: int = 0
    n_capped: int = 0
    scheme: str = ""
    ci: dict | None = None
    notes: tuple = ()  # the fit's notes this stage adds, in order


@dataclass(frozen=True)
class LeaveOneOut:
    """The leave-one-out stage's part of a fit: each row's error (None when skipped) and the
    notes it adds."""

    errors: np.ndarray | None = None
    notes: tuple = ()


@dataclass(frozen=True)
class ResamplePlan:
    """How a bootstrap draws its resamples: ``count`` of them seeded by ``seed``, rows drawn
    within ``strata`` (group labels; None: from all rows) and, with ``clusters`` (a label per
    row), whole clusters drawn instead of rows."""

    count: int
    seed: int
    strata: np.ndarray | None = None
    clusters: np.ndarray | None = None


@dataclass(frozen=True)
class FitSoFar:
    """What the resampling stages start from: the optimum the earlier stages found (its search
    inside), and how rows are drawn: ``strata`` (group labels, resampled within groups; None),
    ``clusters`` (a label per row, drawn whole; None: rows one by one) and ``cluster_name``
    (the column the clusters come from, said in the scheme)."""

    optimum: object  # uncertainty.Optimum: θ, its Jacobian and its search (not imported: resampling needs none of that module)
    strata: np.ndarray | None = None
    clusters: np.ndarray | None = None
    cluster_name: str | None = None


def bootstrap_stage(problem, options, so_far: FitSoFar) -> Bootstrap:
    """The case (or cluster) bootstrap of ``options.bootstrap`` resamples (seeded by
    ``options.seed``): refitted from the optimum and the best starts (``options.bootstrap_refit``)
    or one-step; a note when refits stopped at the iteration cap."""
    bootstrap, optimum = options.bootstrap, so_far.optimum
    search, theta, jac = optimum.search, optimum.theta, optimum.jac
    strata, clusters, cluster_name = so_far.strata, so_far.clusters, so_far.cluster_name
    if not bootstrap:
        return Bootstrap()
    plan = ResamplePlan(count=bootstrap, seed=options.seed, strata=strata, clusters=clusters)
    how = " within groups" if strata is not None else ""
    kind = "case"
    # from BLOCK_SUMS_FROM_ROWS rows a one-step bootstrap without clusters draws random blocks
    blocks = not options.bootstrap_refit and clusters is None and len(problem.y) >= BLOCK_SUMS_FROM_ROWS
    if clusters is not None:
        n_clusters = len(np.unique(np.asarray(clusters).astype(str)))
        kind = f"cluster (whole runs: {n_clusters} clusters, each drawn with all its rows)"
        if cluster_name:
            kind, how = "cluster", how + (f" (cluster = {cluster_name}: {n_clusters} clusters, each "
                                          "drawn whole with all its rows)")
    elif cluster_name:
        how += f" (cluster = {cluster_name}: " + ("rows in random blocks)" if blocks else "rows drawn one by one)")
    if options.bootstrap_refit:
        starts = search.refit_starts(theta)
        first = _OneStep(problem, theta, jac.J, jac.r) if search.warm else None
        samples, n_failed, n_capped = _bootstrap(problem, plan, starts, theta=theta, first_step=first)
        scheme = (f"{bootstrap} {kind} resamples{how}, each refitted from "
                  + ("its own Gauss–Newton step off the full fit's optimum" if search.warm else
                     f"the full fit's optimum and the {len(starts) - 1} best starts")
                  + (f" (the search found no other optimum within {COMPETING:g}× the best "
                     "objective)" if search.n_basins == 1 else ""))
    else:
        step = _OneStep(problem, theta, jac.J, jac.r)
        samples, n_failed, n_capped = _bootstrap_one_step(problem, plan, step), 0, 0
        scheme = (f"{bootstrap} {kind} resamples{how}, each one Gauss–Newton step from "
                  f"the optimum with the Jacobian held fixed (linearised; n = {len(problem.y)} "
                  f"> {BOOT_REFIT_ROWS})" + (f"; the rows dealt at random into {BLOCKS:,} blocks"
                                             + (" (each group its share)" if strata is not None else "")
                                             + ", each drawn whole" if blocks else ""))
    notes = ()
    if n_capped:
        kept = bootstrap - n_failed - n_capped
        notes = (f"{n_capped} of {bootstrap} bootstrap refits stopped at the iteration cap "
                 "even when restarted from the optimum: left out of the bootstrap intervals, "
                 f"which rest on the other {kept}"
                 + (" (more than 5% left out: the bootstrap intervals are unreliable)"
                    if n_capped + n_failed > 0.05 * bootstrap else ""),)
    ci = None
    if len(samples):
        ci = {nm: (float(np.percentile(samples[:, i], 2.5)), float(np.percentile(samples[:, i], 97.5)))
              for i, nm in enumerate(problem.names)}
    return Bootstrap(samples, n_failed, n_capped, scheme, ci, notes)


def loo_stage(problem, options, so_far: FitSoFar) -> LeaveOneOut:
    """Each row's leave-one-out error (``options.leave_one_out``: ``"refit"``, ``"hat"``;
    ``errors`` None when skipped), the hat matrix said in a note."""
    leave_one_out, optimum = options.leave_one_out, so_far.optimum
    search, theta, jac = optimum.search, optimum.theta, optimum.jac
    if leave_one_out == "refit":
        return LeaveOneOut(_leave_one_out(problem, search.refit_starts(theta)[:1] if search.warm
                                          else search.cold_starts[:LOO_STARTS]))
    if leave_one_out == "hat":
        return LeaveOneOut(_leave_one_out_hat(problem, jac.J, jac.r, problem.predict(theta)), (
            "leave-one-out errors from the hat-matrix diagonal of the Jacobian "
            "((observed − predicted)/(1 − hᵢᵢ), no refits)",))
    return LeaveOneOut()


def _bootstrap_weight_blocks(plan: ResamplePlan, n: int, block: int = 1):
    """(``plan.count``, n) resampling counts of n rows, ``block`` resamples at a time, so that
    memory stays at block × n whatever the number of resamples: a case bootstrap, within the
    plan's strata when given; with its clusters a cluster bootstrap: whole clusters drawn with
    replacement, each row weighted by how often its cluster was drawn."""
    if plan.clusters is not None:
        yield from _cluster_weight_blocks(plan, n, block)
        return
    n_boot, strata, rng = plan.count, plan.strata, np.random.default_rng(plan.seed)
    groups = None if strata is None else [np.flatnonzero(strata == g) for g in np.unique(strata)]
    # below 2³² rows numpy draws int64 and uint32 indices from the same 32-bit stream, so both give
    # the same indices; uint32 is half the memory traffic (millions of rows: most of the time)
    small = np.uint32 if n <= np.iinfo(np.uint32).max else np.int64
    for a in range(0, n_boot, block):
        W = np.zeros((min(block, n_boot - a), n))
        for b in range(len(W)):
            if groups is None:
                W[b] = np.bincount(rng.integers(0, n, n, dtype=small), minlength=n)
            else:
                for members in groups:
                    W[b] += np.bincount(rng.choice(members, len(members)), minlength=n)
        yield W


def _cluster_weight_blocks(plan: ResamplePlan, n: int, block: int):
    """Cluster-bootstrap counts: per resample, as many clusters as there are (per stratum, as
    many as the stratum has) drawn with replacement; a row's weight is its cluster's count."""
    idx, cluster_strata = cluster_index(plan.clusters, n, plan.strata)
    k = int(idx.max()) + 1 if n else 0
    for counts in count_blocks(cluster_strata, k, plan.count, plan.seed, block):
        yield counts[:, idx]


def _best_of_starts(res, n_problems: int, n_starts: int):
    """Per problem, the first start (in start order) whose finite objective ties with the lowest
    (relative ``TIE``): (index into res, failed mask). Not the plain argmin: among tied optima
    the last bits pick one, and they depend on the CPU (as in the multi-start)."""
    obj = np.where((res.status != FAILED) & np.isfinite(res.objective), res.objective, np.inf)
    obj = obj.reshape(n_problems, n_starts)
    best = obj.min(axis=1, keepdims=True)
    pick = np.argmax(obj <= best * (1 + TIE) + 1e-300, axis=1)
    failed = ~np.isfinite(obj[np.arange(n_problems), pick])
    return np.arange(n_problems) * n_starts + pick, failed


def _rows_per_block(n: int, copies: int) -> int:
    return max(1, _CHUNK_ELEMENTS // max(n * copies, 1))


def _bootstrap(problem: Problem, plan: ResamplePlan, starts, *, theta, first_step=None):
    """The ``plan``'s bootstrap refits, each from every one of ``starts`` (best kept), or, with
    ``first_step`` (a :class:`_OneStep`), each from its own resample's Gauss–Newton step off the
    optimum (a start nearer its optimum than the optimum is: fewer iterations, the same
    solution). A refit whose best start stopped at the iteration cap is continued from where it
    stopped and restarted from the full fit's optimum ``theta`` (a longer budget); one that
    still does not converge is left out and counted. Returns (θ samples, failed, not converged)."""
    n, s = len(problem.y), 1 if first_step is not None else len(starts)
    samples, n_failed, n_capped = [], 0, 0
    for W in _bootstrap_weight_blocks(plan, n, _rows_per_block(n, s)):
        first = first_step(W) if first_step is not None else np.tile(starts, (len(W), 1))
        res = problem.solve(first, np.repeat(W, s, axis=0))
        rows, failed = _best_of_starts(res, len(W), s)
        thetas, status = res.theta[rows], res.status[rows]
        capped = np.flatnonzero(~failed & (status == CAPPED))
        if len(capped):
            again = np.stack([res.theta[rows[capped]], np.broadcast_to(theta, (len(capped), len(theta)))], 1)
            res2 = problem.solve(again.reshape(-1, len(theta)), np.repeat(W[capped], 2, axis=0),
                                 max_iter=3 * MAX_ITER)
            rows2, failed2 = _best_of_starts(res2, len(capped), 2)
            thetas[capped] = res2.theta[rows2]
            status[capped] = np.where(failed2, CAPPED, res2.status[rows2])
        keep = ~failed & (status != CAPPED)
        n_failed += int(failed.sum())
        n_capped += int(np.sum(~failed & (status == CAPPED)))
        samples.append(problem.natural(thetas[keep]))
    return np.concatenate(samples).reshape(-1, problem.k), n_failed, n_capped


class _OneStep:
    """θ of resample weights W (rows): one Gauss–Newton (IRLS for Huber) step from the optimum
    θ̂ with the Jacobian J held fixed, clipped to the bounds. Cost O(n·k²) per resample, no law
    evaluation."""

    def __init__(self, problem: Problem, theta, J, r):
        k = J.shape[1]
        col = np.linalg.norm(J, axis=0)
        self.col = np.where(col > 0, col, 1.0)
        Js = J / self.col
        omega = irls_weights(r, problem.huber, problem.overestimate_weight)
        # Jᵀ diag(w·ω) J is symmetric: its k(k+1)/2 distinct entries only, each row's products
        # made in place (millions of rows: n × k² temporaries were gigabytes)
        self.upper = np.triu_indices(k)
        self.JJ = np.empty((len(Js), len(self.upper[0])))
        for c, (i, j) in enumerate(zip(*self.upper)):
            np.multiply(Js[:, i], Js[:, j], out=self.JJ[:, c])
            self.JJ[:, c] *= omega
        self.Jr = Js * (omega * r)[:, None]
        self.problem, self.theta, self.k = problem, np.asarray(theta, float), k

    def summed(self, labels: np.ndarray, units: int) -> "_OneStep":
        """The same step for weights given per unit (``labels``: the unit of each row): the
        rows' products summed within units."""
        summed = copy.copy(self)
        summed.JJ, summed.Jr = unit_sums(labels, units, self.JJ), unit_sums(labels, units, self.Jr)
        return summed

    def __call__(self, W) -> np.ndarray:
        H = np.empty((len(W), self.k, self.k))
        H[:, self.upper[0], self.upper[1]] = H[:, self.upper[1], self.upper[0]] = W @ self.JJ
        g = W @ self.Jr
        step = -np.einsum("bkl,bl->bk", np.linalg.pinv(H, hermitian=True), g) / self.col
        return np.clip(self.theta + step, self.problem.lo, self.problem.hi)


def _bootstrap_one_step(problem: Problem, plan: ResamplePlan, step: _OneStep):
    """The ``plan``'s bootstrap linearised at the optimum (``step``, a :class:`_OneStep`, per
    resample); it approximates the refitted bootstrap where the fit is close to linear over the
    bootstrap spread, i.e. on large tables. From ``BLOCK_SUMS_FROM_ROWS`` rows the units drawn
    (clusters, else random blocks of rows) enter through their sums (:mod:`.block_sums`)."""
    n, k = len(problem.y), step.k
    if n >= BLOCK_SUMS_FROM_ROWS:
        labels, unit_strata = (cluster_index(plan.clusters, n, plan.strata) if plan.clusters is not None
                               else random_blocks(n, plan.seed, plan.strata))
        units = int(labels.max()) + 1
        step = step.summed(labels, units)
        draws = count_blocks(unit_strata, units, plan.count, plan.seed, _rows_per_block(units, 1))
    else:
        draws = _bootstrap_weight_blocks(plan, n, _rows_per_block(n, 1))
    return np.concatenate([problem.natural(step(W)) for W in draws]).reshape(-1, k)


def _leave_one_out(problem: Problem, cold_starts) -> np.ndarray:
    """Errors (observed − predicted) of each run by the fit to the others, refitted cold
    (held-out runs a block at a time: memory block × n)."""
    n, s = len(problem.y), len(cold_starts)
    errors = np.full(n, np.nan)
    block = _rows_per_block(n, s)
    for a in range(0, n, block):
        held = np.arange(a, min(a + block, n))
        W = np.ones((len(held), n))
        W[np.arange(len(held)), held] = 0.0
        res = problem.solve(np.tile(cold_starts, (len(held), 1)), np.repeat(W, s, axis=0))
        rows, failed = _best_of_starts(res, len(held), s)
        pred = problem.predict_many(res.theta[rows])  # row j: the fit without run held[j]
        e = problem.y[held] - pred[np.arange(len(held)), held]
        e[failed] = np.nan
        errors[held] = e
    return unfitted_offsets_nan(problem, errors)


def _leave_one_out_hat(problem: Problem, J, r, pred) -> np.ndarray:
    """Leave-one-out errors from the hat-matrix diagonal h of the (IRLS-weighted) Jacobian:
    (observed − predicted)/(1 − hᵢᵢ), the one-step deletion formula (exact for a linear model).
    h comes from a pivoted thin QR, the rank cut where the data do not constrain a direction."""
    h, _ = leverage(J, irls_weights(r, problem.huber, problem.overestimate_weight))
    with np.errstate(divide="ignore", invalid="ignore"):
        errors = np.where(1 - h > 1e-8, (problem.y - pred) / (1 - h), np.nan)
    return unfitted_offsets_nan(problem, errors)


def unfitted_offsets_nan(problem: Problem, errors):
    if problem.offset_groups is not None:  # a group's only run: its offset was not fitted
        sizes = np.bincount(problem.gidx, minlength=len(problem.offset_groups))
        errors[sizes[problem.gidx] == 1] = np.nan
    return errors
