"""A batched, bounded Levenberg–Marquardt solver for many small fits of the same law at once.

Every fit the analysis makes — the multi-start search, each bootstrap and leave-one-out
replicate, each point of a likelihood profile — is the same small problem (tens of runs, at
most ten parameters) with other starting points, run weights or frozen parameters. Solving
them one at a time with scipy costs milliseconds each in Python overhead; solving them as one
batch costs one vectorised law evaluation per iteration for all of them, which is what lets
bootstrap refits start from many points of the multi-start and still finish in seconds.

The method is Levenberg–Marquardt with Marquardt's diagonal scaling and Nielsen's damping
update, projected onto box bounds: a step is clipped to the bounds, and a parameter sitting
on a bound with the gradient pushing outwards is held for that iteration (the active set).
The objective is Σ wᵢ ρ(rᵢ) with ρ(r) = r²/2 (least squares), the Huber function of
threshold ``huber_threshold``, or, with ``overestimate_weight`` ω, the asymmetric square
ρ(r) = ω·r²/2 for r > 0 (an overestimate: prediction above the loss) and r²/2 otherwise,
whose minimiser is the 1/(1+ω) expectile (Newey & Powell 1987); the Gauss–Newton matrix uses
the IRLS weights ρ'(r)/r.
A start whose objective is not finite is a failed start; trial steps to non-finite
objectives are rejected.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CONVERGED, CAPPED, FAILED = 1, 0, -1
MAX_ITER = 300  # damped Gauss–Newton iterations before a solve counts as CAPPED
#: Rows per block when a problem's normal equations are summed over blocks of rows: above every
#: committed table's size, so those fits keep the dense path's arithmetic bit for bit.
BLOCK_ROWS = 1 << 16
_MU_MIN = 1e-10  # keeps the damped system positive definite in floating point


@dataclass
class BatchResult:
    """theta (M, k) final parameters; objective (M,) Σ wᵢ ρ(rᵢ) (NaN when failed);
    status (M,): CONVERGED, CAPPED (iteration cap reached) or FAILED (non-finite start)."""

    theta: np.ndarray
    objective: np.ndarray
    status: np.ndarray


def _rho(r, huber_threshold, overestimate_weight=None):
    if overestimate_weight is not None:
        return 0.5 * r * r * np.where(r > 0, overestimate_weight, 1.0)
    if huber_threshold is None:
        return 0.5 * r * r
    a = np.abs(r)
    return np.where(a <= huber_threshold, 0.5 * r * r, huber_threshold * (a - 0.5 * huber_threshold))


def irls_weights(r, huber_threshold=None, overestimate_weight=None):
    """Per-residual IRLS weights of the objective at residuals r = predicted − observed: ones
    for least squares, the Huber weights (1 inside the threshold, threshold/|r| beyond), or the
    asymmetric loss's (``overestimate_weight`` where the prediction is above the observation)."""
    if overestimate_weight is not None:
        return np.where(r > 0, overestimate_weight, 1.0)
    if huber_threshold is None:
        return np.ones_like(r)
    a = np.abs(r)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a <= huber_threshold, 1.0, huber_threshold / a)


def objective(residuals_MxN, weights_MxN, huber_threshold=None, overestimate_weight=None) -> np.ndarray:
    """Σ wᵢ ρ(rᵢ) per row; +inf where a weighted residual is not finite."""
    with np.errstate(all="ignore"):
        terms = weights_MxN * _rho(residuals_MxN, huber_threshold, overestimate_weight)
        bad = ~np.isfinite(residuals_MxN) & (weights_MxN > 0)
        terms = np.where(weights_MxN > 0, terms, 0.0)
        out = terms.sum(axis=1)
    out[bad.any(axis=1)] = np.inf
    return out


@dataclass(frozen=True)
class Stopping:
    """When a solve stops: converged when an accepted step gains at most ``ftol`` of the
    objective (relative) or a rejected step is below ``xtol`` (relative to θ); CAPPED after
    ``max_iter`` iterations."""

    max_iter: int = MAX_ITER
    ftol: float = 1e-12
    xtol: float = 1e-10


def minimize(model, targets_MxN, theta0_MxK, weights_MxN, lo_K, hi_K, *, frozen_MxK=None,
             huber_threshold=None, stop: Stopping = Stopping(), known_columns=None,
             overestimate_weight=None) -> BatchResult:
    """Minimise Σ wᵢ ρ(rᵢ(θ)) for M problems at once, with residuals r = model(θ) − target.

    ``model(theta_MxK) -> (M, N)`` evaluates the model side of every row's residuals
    (non-finite allowed); ``targets_MxN``: each problem's targets, or one row (1, N) that every
    problem shares (many starts of one fit) — per-problem rows fit many data sets at once (the
    replicates of a parametric bootstrap). ``frozen_MxK`` (bool) holds parameters at their start
    values (profile likelihood). ``known_columns``: (indices, fn) where
    ``fn(r_MxN, targets_MxN) -> (M, N, len(indices))`` gives those Jacobian columns exactly
    (additive offsets), so only the others are differenced. ``stop``: cap and tolerances.
    Problems of more than ``BLOCK_ROWS`` rows keep Jᵀ ω J and Jᵀ ω r instead of J, summed over
    blocks of rows (memory: a few numbers per row, not the law at K perturbed points on every
    row at once); smaller ones take the dense path, whose arithmetic every committed result
    was made with.
    """
    theta = np.clip(np.array(theta0_MxK, dtype=float), lo_K, hi_K)
    M, K = theta.shape
    targets = np.asarray(targets_MxN, dtype=float)

    def residuals(theta_RxK, rows):
        with np.errstate(all="ignore"):
            return model(theta_RxK) - (targets if len(targets) == 1 else targets[rows])

    if known_columns is not None:
        idx, fn = known_columns
        known_columns = idx, lambda r, rows: fn(r, targets if len(targets) == 1 else targets[rows])
    w = np.asarray(weights_MxN, dtype=float)
    frozen = np.zeros((M, K), bool) if frozen_MxK is None else np.asarray(frozen_MxK, bool)
    r = residuals(theta, np.arange(M))
    F = objective(r, w, huber_threshold, overestimate_weight)
    status = np.full(M, CAPPED)
    status[~np.isfinite(F)] = FAILED
    mu = np.full(M, 1e-3)
    nu = np.full(M, 2.0)
    active = np.flatnonzero(status != FAILED)
    loss = (huber_threshold, overestimate_weight)
    system = _LinearSystems(residuals, known_columns, w, loss, (M, r.shape[1], K))
    if len(active):
        system.refresh(active, theta[active], r[active])
    for _ in range(stop.max_iter):
        if not len(active):
            break
        th, wa, Fa = theta[active], w[active], F[active]
        g, H = system.normal_equations(active, r)
        hold = (frozen[active] | ((th <= lo_K) & (g > 0)) | ((th >= hi_K) & (g < 0)))
        step, bad = _damped_step(H, g, mu[active], hold)
        trial = np.clip(th + step, lo_K, hi_K)
        step = trial - th
        r_trial = residuals(trial, active)
        F_trial = objective(r_trial, wa, huber_threshold, overestimate_weight)
        with np.errstate(all="ignore"):  # rows with a non-finite system are `bad`, handled below
            Hs = (H @ step[:, :, None])[:, :, 0]
            predicted = -np.sum(step * (g + 0.5 * Hs), axis=1)
        gain = Fa - F_trial
        ok = np.isfinite(F_trial) & (gain > 0) & ~bad
        with np.errstate(all="ignore"):
            ratio = np.where(predicted > 0, gain / predicted, 0.0)
        small_step = np.all(np.abs(step) <= stop.xtol * (stop.xtol + np.abs(th)), axis=1)
        done = (ok & (gain <= stop.ftol * Fa)) | (small_step & ~ok) | (Fa == 0) | bad
        # accepted steps
        acc = active[ok]
        theta[acc], r[acc], F[acc] = trial[ok], r_trial[ok], F_trial[ok]
        mu[acc] = np.maximum(mu[acc] * np.maximum(1 / 3, 1 - (2 * np.clip(ratio[ok], 0, 1) - 1) ** 3),
                             _MU_MIN)
        nu[acc] = 2.0
        rej = active[~ok]
        mu[rej] *= nu[rej]
        nu[rej] *= 2.0
        done |= mu[active] > 1e16
        status[active[done & ~bad]] = CONVERGED  # a non-finite system (bad) stays CAPPED
        keep = ~done
        refresh = active[ok & keep]
        if len(refresh):
            system.refresh(refresh, theta[refresh], r[refresh])
        active = active[keep]
    F = np.where(status == FAILED, np.nan, F)
    return BatchResult(theta, F, status)


class _LinearSystems:
    """The Gauss–Newton systems (g = Jᵀ ω r, H = Jᵀ ω J) of M problems of N rows and K
    parameters, ω the IRLS weights. Dense (N ≤ BLOCK_ROWS): the Jacobians J (M, N, K) are kept
    and the systems formed from them at each iteration. Blocked: the systems themselves are
    kept, made when the Jacobian is refreshed — J and r change only on an accepted step, so
    they are the ones the dense path would form — one parameter's column at a time and summed
    over blocks of rows."""

    def __init__(self, residuals, known_columns, w_MxN, loss, shape_MNK):
        M, N, K = shape_MNK
        self.residuals, self.known_columns, self.w, self.loss = residuals, known_columns, w_MxN, loss
        self.blocked = N > BLOCK_ROWS
        self.g, self.H = np.zeros((M, K)), np.zeros((M, K, K))
        # dense: which problems' systems are still to be formed from their J (a rejected step
        # leaves J, r and the weights as they were, so its system is the one already formed)
        self.stale = np.zeros(M, bool)
        if not self.blocked:
            self.J = np.zeros((M, N, K))

    def refresh(self, rows, theta_RxK, r_RxN):
        """New Jacobians (dense) or systems (blocked) for the problems ``rows`` at θ, r."""
        if self.blocked:
            J = _jacobian_columns(self.residuals, rows, theta_RxK, r_RxN, self.known_columns)
            self.g[rows], self.H[rows] = _blocked_normal_equations(J, r_RxN, self.w[rows], self.loss)
        else:
            self.J[rows] = _jacobian(self.residuals, rows, theta_RxK, r_RxN, self.known_columns)
            self.stale[rows] = True

    def normal_equations(self, active, r_MxN):
        """(g, H) of the problems ``active`` at their residuals (rows of ``r_MxN``)."""
        todo = active[self.stale[active]]
        if len(todo):
            self.g[todo], self.H[todo] = self._formed(todo, r_MxN[todo], self.w[todo])
            self.stale[todo] = False
        return self.g[active], self.H[active]

    def _formed(self, rows, ra, wa):
        Ja = self.J[rows]
        omega = wa * irls_weights(ra, *self.loss)
        omega = np.where(wa > 0, omega, 0.0)
        ra0 = np.where(wa > 0, ra, 0.0)
        Jt = Ja.transpose(0, 2, 1)
        with np.errstate(all="ignore"):
            g = (Jt @ (omega * ra0)[:, :, None])[:, :, 0]
            H = Jt @ (Ja * omega[:, :, None])
        return g, H


def _blocked_normal_equations(J_RxKxN, r_RxN, w_RxN, loss):
    """g = Jᵀ ω r and H = Jᵀ ω J (rows of zero weight left out), summed over blocks of rows."""
    R, K, N = J_RxKxN.shape
    g, H = np.zeros((R, K)), np.zeros((R, K, K))
    for a in range(0, N, BLOCK_ROWS):
        b = slice(a, a + BLOCK_ROWS)
        wb, rb, Jb = w_RxN[:, b], r_RxN[:, b], J_RxKxN[:, :, b]
        omega = np.where(wb > 0, wb * irls_weights(rb, *loss), 0.0)
        with np.errstate(all="ignore"):
            g += (Jb @ (omega * np.where(wb > 0, rb, 0.0))[:, :, None])[:, :, 0]
            H += Jb @ (Jb * omega[:, None, :]).transpose(0, 2, 1)
    return g, H


def _damped_step(H, g, mu, hold):
    """The Levenberg–Marquardt step of each problem: (H + μ·diag(H))·step = −g with Marquardt's
    diagonal scaling (floored, so a dead direction stays solvable), the ``hold`` parameters
    fixed. Returns (step, bad): bad marks a non-finite system (its step is 0)."""
    K = H.shape[1]
    diag = np.einsum("akk->ak", H).copy()
    floor = 1e-12 * np.maximum(diag.max(axis=1, keepdims=True), 1e-300)
    diag = np.maximum(diag, floor)
    with np.errstate(all="ignore"):
        A = H + (mu[:, None] * diag)[:, :, None] * np.eye(K)
    A = np.where(hold[:, :, None] | hold[:, None, :], 0.0, A)
    A[:, np.arange(K), np.arange(K)] = np.where(hold, 1.0, A[:, np.arange(K), np.arange(K)])
    rhs = np.where(hold, 0.0, -g)
    bad = ~np.all(np.isfinite(A), axis=(1, 2)) | ~np.all(np.isfinite(rhs), axis=1)
    A[bad] = np.eye(K)
    rhs[bad] = 0.0
    return _solve_scaled(A, rhs), bad


def _solve_scaled(A_MxKxK, rhs_MxK) -> np.ndarray:
    """Solve A·step = rhs with A scaled to unit diagonal (A is symmetric positive definite in
    exact arithmetic); a system singular in floating point falls back to the pseudo-inverse,
    that system alone, so that a problem's step never depends on which others share its batch."""
    d = np.sqrt(np.einsum("akk->ak", A_MxKxK))
    d = np.where(np.isfinite(d) & (d > 0), d, 1.0)
    As = A_MxKxK / (d[:, :, None] * d[:, None, :])
    bs = rhs_MxK / d
    try:
        x = np.linalg.solve(As, bs[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:
        x = np.stack([_solve_one(a, b) for a, b in zip(As, bs)]) if len(bs) else np.zeros_like(bs)
    return x / d


def _solve_one(A_KxK, rhs_K) -> np.ndarray:
    try:
        return np.linalg.solve(A_KxK[None], rhs_K[None, :, None])[0, :, 0]
    except np.linalg.LinAlgError:
        return np.linalg.pinv(A_KxK[None])[0] @ rhs_K


def _jacobian(residuals, rows, theta_MxK, r_MxN, known_columns=None) -> np.ndarray:
    """Forward differences, all perturbed points in one evaluation: (M, N, K), for the problems
    ``rows``. Columns in ``known_columns`` come from its function instead (no law evaluation)."""
    M, K = theta_MxK.shape
    differenced = np.ones(K, bool)
    if known_columns is not None:
        differenced[known_columns[0]] = False
    diff = np.flatnonzero(differenced)
    J = np.zeros((M, r_MxN.shape[1], K))
    if len(diff):
        h = 1.5e-8 * np.maximum(1.0, np.abs(theta_MxK[:, diff]))
        pts = np.repeat(theta_MxK[:, None, :], len(diff), axis=1)
        pts[:, np.arange(len(diff)), diff] += h
        with np.errstate(all="ignore"):
            rp = residuals(pts.reshape(M * len(diff), K), np.repeat(rows, len(diff))).reshape(M, len(diff), -1)
            Jd = (rp - r_MxN[:, None, :]) / h[:, :, None]
        J[:, :, diff] = np.transpose(np.where(np.isfinite(Jd), Jd, 0.0), (0, 2, 1))
    if known_columns is not None:
        idx, fn = known_columns
        with np.errstate(all="ignore"):
            Jk = fn(r_MxN, rows)
        J[:, :, idx] = np.where(np.isfinite(Jk), Jk, 0.0)
    return J


def _jacobian_columns(residuals, rows, theta_RxK, r_RxN, known_columns=None) -> np.ndarray:
    """The forward differences of :func:`_jacobian` as (R, K, N), one parameter's perturbed
    evaluation at a time (a law evaluated on R × N, not R·K × N, points at once)."""
    R, K = theta_RxK.shape
    J = np.empty((R, K, r_RxN.shape[1]))
    known = () if known_columns is None else set(np.atleast_1d(known_columns[0]).tolist())
    for j in range(K):
        if j in known:
            continue
        h = 1.5e-8 * np.maximum(1.0, np.abs(theta_RxK[:, j]))
        pts = theta_RxK.copy()
        pts[:, j] += h
        with np.errstate(all="ignore"):
            Jj = (residuals(pts, rows) - r_RxN) / h[:, None]
        J[:, j] = np.where(np.isfinite(Jj), Jj, 0.0)
    if known_columns is not None:
        idx, fn = known_columns
        with np.errstate(all="ignore"):
            Jk = fn(r_RxN, rows)
        for c, j in enumerate(np.atleast_1d(idx)):
            J[:, j] = np.where(np.isfinite(Jk[:, :, c]), Jk[:, :, c], 0.0)
    return J
