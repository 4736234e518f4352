"""A law's fitting problem: free parameters as a vector θ, batched predictions and residuals.

θ holds scale parameters (``Param.log``) as their logarithm and the others as they are, with
the parameters' physical bounds mapped to θ-space box bounds. With group offsets the law's
``E`` is replaced by one free offset ``E[group]`` per group, every other parameter shared.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ..law_types import Law, LawInputs, Param
from .solver import MAX_ITER, BatchResult, Stopping, minimize

HUBER_THRESHOLD = 1e-3  # on log-loss residuals, as in Hoffmann et al. 2022
#: Default weight of an overestimate (prediction above the loss) in the asymmetric loss: the
#: fit is the 1/(1 + 4) = 20% expectile, near the lower envelope of the runs.
OVERESTIMATE_WEIGHT = 4.0
OFFSET = "E"  # the additive offset a law must have for per-group offsets
TIE = 1e-6  # relative objective difference below which two optima are equally good
#: Starts that tie this closely (relative) make a ridge (``search._ridge_params``): a margin below
#: ``TIE``. Starts that reach one optimum agree to ~1e-12; one that stopped short on a slow
#: direction lands 1e-7 to 1e-6 off, on either side of ``TIE`` by the CPU's kernel (Gemstones'
#: total-N depth_softplus: a start at E = 1.973 against 2.056 is 8.1e-7 worse under OpenBLAS's
#: Haswell kernel, 1.5e-6 under Sandybridge, not reached under Nehalem), and judged as a ridge it
#: made E "not identified" on one kernel only.
RIDGE_TIE = TIE / 10
#: How far beyond its start range (``Param.init``, the range its law declares plausible) an
#: interval end may lie and still be a number the data set: this many decades for a scale, this
#: many start-range widths for another parameter (:func:`supported_range`). Beyond, the end is
#: where a profile walk or a Jacobian standard error ran out along a flat direction (λ's
#: profile "closing" at 1.065e15, a Jacobian end at e^700 = 1.0142e304), not a measurement.
SUPPORTED_DECADES = 6
SUPPORTED_WIDTHS = 1e3
_BATCH_ELEMENTS = 4_000_000  # numbers per batched Jacobian evaluation (≈ 32 MB)


def offset_name(group) -> str:
    return f"{OFFSET}[{group}]"


def supported_range(p: Param) -> tuple[float, float]:
    """(lowest, highest) value of ``p`` that an interval end may take and still be printed as a
    number (``SUPPORTED_DECADES`` / ``SUPPORTED_WIDTHS`` beyond its start range, within its
    bounds); an end outside is open."""
    b0, b1 = p.bounds
    if p.log:
        factor = 10.0 ** SUPPORTED_DECADES
        return max(p.init[0] / factor, b0), min(p.init[1] * factor, b1)
    reach = SUPPORTED_WIDTHS * max(p.init[1] - p.init[0], abs(p.init[0]), abs(p.init[1]), 1e-3)
    return max(p.init[0] - reach, b0), min(p.init[1] + reach, b1)


def open_beyond_support(p: Param, ci) -> tuple[float, float]:
    """``ci`` with an end outside :func:`supported_range` opened: +inf above; below, the
    parameter's lower bound when it is 0 for a scale (the interval then reaches 0, as an open
    log-space end is written) and −inf otherwise."""
    lo, hi = (float(v) for v in ci)
    s0, s1 = supported_range(p)
    if hi > s1 and s1 < math.inf:
        hi = math.inf
    if lo < s0 and s0 > -math.inf:
        lo = 0.0 if p.log and p.bounds[0] == 0 else -math.inf
    return lo, hi


def within_support(param, lo, hi):
    """((lo, hi), note): a profile interval's end beyond the values an end can be a number for
    (:func:`supported_range`) is open, and the note says where the crossing was; for both
    profile finders (the grid walk and the root-finding)."""
    opened = open_beyond_support(param, (lo, hi))
    if opened == (lo, hi):
        return opened, ""
    s0, s1 = supported_range(param)
    where = ", ".join(f"{end:.4g}" for end, new in zip((lo, hi), opened) if new != end)
    return opened, (f"{param.name}: the profile crosses the cut only at {where}, beyond "
                    f"[{s0:.3g}, {s1:.3g}] ({SUPPORTED_DECADES} decades or {SUPPORTED_WIDTHS:g} "
                    "start-range widths past its start range): where the walk ran out along a "
                    "flat direction, not a limit the data set; that end is open")


def scale_interval(p: Param, log_value: float, half_width: float) -> tuple[float, float]:
    """exp(log_value ± half_width): a scale parameter's interval from a log-space standard error
    (``half_width`` = t·s). Open — (its lower bound, +inf) — when the standard error is not
    finite or the interval would span more than ``SUPPORTED_DECADES`` decades (a standard error
    of several e-folds: the data set no scale, λ's [9e−19, 3.3e15] with a standard error 20×
    its value), and an end beyond :func:`supported_range` open (:func:`open_beyond_support`)."""
    if not np.isfinite(half_width) or 2 * half_width > SUPPORTED_DECADES * math.log(10):
        return float(p.bounds[0]), math.inf
    lo = math.exp(log_value - half_width) if log_value - half_width > -745 else 0.0
    hi = math.exp(log_value + half_width) if log_value + half_width < 709 else math.inf
    return open_beyond_support(p, (lo, hi))


class Problem:
    """The free parameters of ``law`` given ``fixed`` ones, on inputs ``x`` with losses ``y``.

    ``offset_groups`` (sorted labels) and ``gidx`` (per run, index into them) turn on one
    offset per group.
    """

    def __init__(self, law: Law, fixed: dict, x: LawInputs, y: np.ndarray, method: str,
                 offset_groups: list | None = None, gidx: np.ndarray | None = None,
                 overestimate_weight: float | None = None):
        self.law, self.fixed, self.x, self.y, self.method = law, dict(fixed), x, np.asarray(y, float), method
        self.offset_groups = list(offset_groups) if offset_groups is not None else None
        self.gidx = None if gidx is None else np.asarray(gidx, int)
        free = []
        for p in law.params:
            if p.name in self.fixed:
                continue
            if self.offset_groups is not None and p.name == OFFSET:
                free += [replace(p, name=offset_name(g)) for g in self.offset_groups]
            else:
                free.append(p)
        self.free: list[Param] = free
        self.names = [p.name for p in free]
        self.is_log = np.array([p.log for p in free], bool)
        # which columns of θ are group offsets and which are the law's own parameters: looked up
        # once here, not at each of the solver's hundreds of thousands of evaluations
        is_offset = [self.offset_groups is not None and p.name.startswith(OFFSET + "[") for p in free]
        self._offset_cols = [j for j, o in enumerate(is_offset) if o]
        self._param_cols = [(p.name, j) for j, (p, o) in enumerate(zip(free, is_offset)) if not o]
        self.lo, self.hi = self._theta_bounds()
        self.broadcasts = None  # whether the law takes (M, 1) parameter arrays; None: untried
        self.run_names: list | None = None  # for error messages
        self.huber = HUBER_THRESHOLD if method == "huber" else None
        # the asymmetric loss is on loss residuals (nats), like least squares
        self.overestimate_weight = None
        if method == "asymmetric":
            w = OVERESTIMATE_WEIGHT if overestimate_weight is None else float(overestimate_weight)
            if not (np.isfinite(w) and w > 0):
                raise ValueError(f"overestimate weight {overestimate_weight!r}: must be a positive "
                                 "number (1 is least squares; > 1 fits below the mean)")
            self.overestimate_weight = w
        self.target = self.targets_of(self.y)
        self._additive = None  # whether the group offsets are additive (checked once)

    @property
    def k(self) -> int:
        return len(self.free)

    def subset(self, idx) -> "Problem":
        """The same problem on the rows ``idx`` (offset groups kept, even if a group has no row)."""
        idx = np.asarray(idx)
        sub = Problem(self.law, self.fixed, self.x.take(idx), self.y[idx], self.method,
                      self.offset_groups, None if self.gidx is None else self.gidx[idx],
                      self.overestimate_weight)
        sub.broadcasts, sub._additive = self.broadcasts, self._additive
        sub.run_names = None if self.run_names is None else [self.run_names[i] for i in idx]
        return sub

    def _theta_bounds(self):
        lo, hi = [], []
        for p in self.free:
            b0, b1 = p.bounds
            if p.log:
                lo.append(math.log(b0) if b0 > 0 else -np.inf)
                hi.append(math.log(b1) if np.isfinite(b1) else np.inf)
            else:
                lo.append(b0)
                hi.append(b1)
        return np.array(lo, float), np.array(hi, float)

    # --- parameter vectors -------------------------------------------------------------------
    def values(self, theta) -> dict:
        """Natural values of the free parameters (E[group] keys for offsets) and fixed ones."""
        vals = dict(self.fixed)
        for p, t in zip(self.free, np.asarray(theta, float)):
            vals[p.name] = float(math.exp(min(max(t, -700.0), 700.0))) if p.log else float(t)
        return vals

    def natural(self, theta_MxK: np.ndarray) -> np.ndarray:
        t = np.atleast_2d(theta_MxK)
        return np.where(self.is_log, np.exp(np.clip(t, -700.0, 700.0)), t)

    # --- predictions -------------------------------------------------------------------------
    def law_kwargs(self, theta_MxK: np.ndarray, gidx=None) -> dict:
        """Law keyword arguments for M parameter vectors: (M, 1) columns; the offset as
        (M, n) when per-group offsets are on."""
        nat = self.natural(theta_MxK)
        vals = dict(self.fixed)
        for name, j in self._param_cols:
            vals[name] = nat[:, j:j + 1]
        if self._offset_cols:
            gidx = self.gidx if gidx is None else gidx
            vals[OFFSET] = nat[:, self._offset_cols][:, gidx]
        return vals

    def predict_many(self, theta_MxK, x: LawInputs | None = None, gidx=None) -> np.ndarray:
        """Predictions (M, n). Laws that do not broadcast over (M, 1) parameters are evaluated
        one vector at a time."""
        x = self.x if x is None else x
        theta_MxK = np.atleast_2d(np.asarray(theta_MxK, float))
        M, n = len(theta_MxK), len(x.D)
        if self.broadcasts is not False:
            try:
                with np.errstate(all="ignore"):
                    out = np.asarray(self.law(x, **self.law_kwargs(theta_MxK, gidx)), float)
                self.broadcasts = True
                # a fresh (M, n) array as it is: ×1 would change no bit, only cost a pass
                return out if out.shape == (M, n) and out.flags.owndata else out * np.ones((M, n))
            except (ValueError, TypeError):
                if self.broadcasts:
                    raise
                self.broadcasts = False
        rows = []
        gidx = self.gidx if gidx is None else gidx
        for nat in self.natural(theta_MxK):
            kw, offsets = dict(self.fixed), []
            for j, p in enumerate(self.free):
                if self.offset_groups is not None and p.name.startswith(OFFSET + "["):
                    offsets.append(nat[j])
                else:
                    kw[p.name] = float(nat[j])
            if offsets:
                kw[OFFSET] = np.array(offsets)[gidx]
            with np.errstate(all="ignore"):
                rows.append(np.asarray(self.law(x, **kw), float) * np.ones(n))
        return np.stack(rows)

    def predict(self, theta, x: LawInputs | None = None, gidx=None) -> np.ndarray:
        return self.predict_many(np.asarray(theta, float)[None], x, gidx)[0]

    def residuals(self, theta_MxK) -> np.ndarray:
        """Residuals (M, n): prediction − loss (nats) for least squares, ln prediction − ln loss
        for Huber; non-finite where the law is."""
        with np.errstate(all="ignore"):
            return self._model_side(theta_MxK) - self.target

    def _model_side(self, theta_MxK) -> np.ndarray:
        """The prediction (M, n) on the residuals' scale: ln prediction for Huber."""
        pred = self.predict_many(theta_MxK)
        with np.errstate(all="ignore"):
            return np.log(pred) if self.huber else pred

    def targets_of(self, losses_MxN) -> np.ndarray:
        """Losses on the residuals' scale (ln loss for Huber; NaN where not positive)."""
        y = np.asarray(losses_MxN, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(y) if self.huber else y

    def _offset_columns(self, theta_MxK):
        """(indices, fn) of the group offsets' exact Jacobian columns — ∂r/∂E[g] is the
        indicator of group g (times 1/prediction for log-loss residuals) — when the offsets are
        additive in the law (checked once on these starts); None otherwise. With 11 offsets this
        saves 11 of 15 law evaluations per Jacobian."""
        if self.offset_groups is None:
            return None
        idx = np.array([j for j, p in enumerate(self.free) if p.name.startswith(OFFSET + "[")])
        if self._additive is None:
            t0 = np.atleast_2d(theta_MxK)[:1]
            t1 = t0.copy()
            t1[:, idx] = np.log(np.exp(t1[:, idx]) + 0.5) if self.is_log[idx].any() else t1[:, idx] + 0.5
            with np.errstate(all="ignore"):
                d = self.predict_many(t1)[0] - self.predict_many(t0)[0]
            self._additive = (not self.is_log[idx].any()) and bool(np.allclose(d[np.isfinite(d)], 0.5, rtol=0, atol=1e-9))
        if not self._additive:
            return None
        onehot = (self.gidx[:, None] == np.arange(len(self.offset_groups))[None, :]).astype(float)
        if self.huber is None:
            return idx, lambda r, target: np.broadcast_to(onehot, (len(r),) + onehot.shape)
        # r = ln prediction − ln y, so 1/prediction = exp(−r − ln y)
        return idx, lambda r, target: np.exp(-(r + target))[:, :, None] * onehot[None]

    def solve(self, theta0_MxK, weights_MxN=None, frozen_MxK=None, max_iter=MAX_ITER,
              losses_MxN=None, huber_threshold: float | None = None) -> BatchResult:
        """Solve M problems (rows) in batches small enough that one batched Jacobian
        evaluation stays near ``_BATCH_ELEMENTS`` numbers (the problems are independent, so
        batching does not change the results). ``losses_MxN``: each problem's own losses in
        place of the runs' (replicates of a parametric bootstrap). ``huber_threshold``: a Huber
        loss with this threshold on this problem's residuals in place of its own objective (the
        robust fit that judges outliers, :mod:`.robust_fit`)."""
        theta0_MxK = np.atleast_2d(theta0_MxK)
        M, n = len(theta0_MxK), len(self.y)
        targets = self.target[None] if losses_MxN is None else self.targets_of(losses_MxN)
        size = max(1, _BATCH_ELEMENTS // ((self.k + 1) * n))
        parts = []
        for a in range(0, M, size):
            b = slice(a, a + size)
            w = np.ones((len(theta0_MxK[b]), n)) if weights_MxN is None else weights_MxN[b]
            parts.append(minimize(self._model_side, targets if len(targets) == 1 else targets[b],
                                  theta0_MxK[b], w, self.lo, self.hi,
                                  frozen_MxK=None if frozen_MxK is None else frozen_MxK[b],
                                  huber_threshold=self.huber if huber_threshold is None else huber_threshold,
                                  stop=Stopping(max_iter=max_iter),
                                  known_columns=self._offset_columns(theta0_MxK),
                                  overestimate_weight=self.overestimate_weight))
        if len(parts) == 1:
            return parts[0]
        return BatchResult(*(np.concatenate([getattr(p, f) for p in parts])
                             for f in ("theta", "objective", "status")))
