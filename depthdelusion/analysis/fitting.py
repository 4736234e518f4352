"""Fit a registered law to runs: Levenberg–Marquardt or Huber, multi-start, with uncertainty.

``fit(runs, law)`` minimises the squared loss residuals (nats) by Levenberg–Marquardt
(``scipy.optimize.least_squares(method="lm")``) from a grid of starting points, scale
parameters in log space. ``method="huber"`` minimises a Huber loss (δ = 1e-3) of log-loss
residuals with bounded trust-region reflective steps, the Chinchilla / Epoch AI practice.
Uncertainty comes from the Jacobian at the optimum and from a seeded case bootstrap whose
refits start from the full-data optimum. Runs are weighted equally.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats

from .columns import check_law_columns
from .laws import Law, LawInputs, get_law
from .runs import Runs, load_runs

HUBER_DELTA = 1e-3  # on log-loss residuals, as in Hoffmann et al. 2022
_BAD_RESIDUAL = 1e3  # stands in for non-finite predictions so LM steps back instead of failing
_CORR_FLAG = 0.95
_COND_FLAG = 1e8
_TIE = 1e-8  # relative objective difference below which two optima are equally good
BOOTSTRAP_MAX_NFEV_PER_PARAM = 50  # bootstrap refits start at the optimum: few steps suffice
METHODS = ("lm", "huber")


class _Problem:
    """The free parameters of a law as a vector θ (log for scale parameters) and its residuals."""

    def __init__(self, law: Law, fixed: dict, x: LawInputs, y: np.ndarray, method: str):
        self.law, self.fixed, self.x, self.y, self.method = law, dict(fixed), x, y, method
        self.free = [p for p in law.params if p.name not in self.fixed]
        self.names = [p.name for p in self.free]
        self.is_log = np.array([p.log for p in self.free])
        self._broadcasts = None  # unknown until the law has been called with batched parameters

    def values(self, theta) -> dict:
        vals = dict(self.fixed)
        for p, t in zip(self.free, theta):
            vals[p.name] = float(math.exp(min(max(t, -700.0), 700.0))) if p.log else float(t)
        return vals

    def theta(self, values: dict) -> np.ndarray:
        return np.array([math.log(values[p.name]) if p.log else values[p.name] for p in self.free])

    def predict(self, theta, x: LawInputs) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(self.law(x, **self.values(theta)), dtype=float) * np.ones_like(x.D)

    def predict_many(self, thetas: np.ndarray, x: LawInputs) -> np.ndarray:
        """Predictions (m, n) for m parameter vectors at once: the law is evaluated with
        (m, 1)-shaped parameters broadcasting against the (n,) inputs; laws that do not
        broadcast are evaluated one vector at a time."""
        thetas = np.atleast_2d(thetas)
        m, n = len(thetas), len(x.D)
        if self._broadcasts is not False:
            vals = dict(self.fixed)
            for j, p in enumerate(self.free):
                col = thetas[:, j:j + 1]
                vals[p.name] = np.exp(np.clip(col, -700.0, 700.0)) if p.log else col
            try:
                with np.errstate(all="ignore"):
                    out = np.asarray(self.law(x, **vals), dtype=float) * np.ones((m, n))
                self._broadcasts = True
                return out
            except (ValueError, TypeError):
                self._broadcasts = False
        return np.stack([self.predict(t, x) for t in thetas])

    def jacobian_fn(self, x: LawInputs):
        """Forward-difference Jacobian of the residuals in θ, one batched law evaluation."""
        k = len(self.free)
        huber = self.method == "huber"

        def jacobian(theta):
            h = 1.5e-8 * np.maximum(1.0, np.abs(theta))
            pts = np.vstack([theta, theta + np.diag(h)])
            pred = self.predict_many(pts, x)
            with np.errstate(all="ignore"):
                if huber:
                    pred = np.log(pred)
                J = ((pred[1:] - pred[0]) / h[:, None]).T
            return np.where(np.isfinite(J), J, 0.0).reshape(len(x.D), k)

        return jacobian

    def residual_fn(self, x: LawInputs, y: np.ndarray):
        if self.method == "lm":
            def residual(theta):
                r = self.predict(theta, x) - y
                return np.where(np.isfinite(r), r, _BAD_RESIDUAL)
        else:
            log_y = np.log(y)

            def residual(theta):
                pred = self.predict(theta, x)
                with np.errstate(all="ignore"):
                    r = np.log(pred) - log_y
                return np.where(np.isfinite(r), r, _BAD_RESIDUAL)
        return residual

    def theta_bounds(self):
        lo, hi = [], []
        for p in self.free:
            b0, b1 = p.bounds
            if p.log:
                lo.append(math.log(b0) if b0 > 0 else -np.inf)
                hi.append(math.log(b1) if np.isfinite(b1) else np.inf)
            else:
                lo.append(b0)
                hi.append(b1)
        return np.array(lo), np.array(hi)

    def solve(self, theta0, idx=None, max_nfev=None, refit=False):
        # scipy takes norms of far-off trial steps; their overflow is expected, not an error.
        with np.errstate(over="ignore", invalid="ignore"):
            return self._solve(theta0, idx, max_nfev, refit)

    def _solve(self, theta0, idx, max_nfev, refit):
        """Minimise from ``theta0`` on the runs ``idx`` (all by default). ``refit=True`` is for
        warm-started bootstrap / leave-one-out refits of a least-squares fit: they use scipy's
        trust-region solver, because scipy's MINPACK LM (1.17) returns results that differ
        in the last bits between identical calls, which chaotic refits in flat valleys
        amplify into irreproducible intervals."""
        x, y = (self.x, self.y) if idx is None else (self.x.take(idx), self.y[idx])
        residual, jacobian = self.residual_fn(x, y), self.jacobian_fn(x)
        if self.method == "lm" and refit:
            with np.errstate(over="ignore", invalid="ignore"):  # scipy's norms of far-off trial steps
                return optimize.least_squares(residual, theta0, jac=jacobian, method="trf",
                                              x_scale=1.0, max_nfev=max_nfev)
        if self.method == "lm":
            # Explicit x_scale: scipy's default Jacobian scaling for "lm" gave results that
            # differed in the last bits between identical calls (scipy 1.17), breaking
            # reproducible bootstrap intervals. θ is already log-scaled for scale parameters.
            return optimize.least_squares(residual, theta0, jac=jacobian, method="lm",
                                          x_scale=1.0, max_nfev=max_nfev)
        lo, hi = self.theta_bounds()
        span = np.where(np.isfinite(hi - lo), (hi - lo) * 1e-6, 1e-6)
        theta0 = np.clip(theta0, lo + span, hi - span)
        return optimize.least_squares(residual, theta0, jac=jacobian, method="trf", loss="huber",
                                      f_scale=HUBER_DELTA, bounds=(lo, hi), x_scale=1.0,
                                      max_nfev=max_nfev)


@dataclass
class StartsSummary:
    """What the multi-start search found: how many starts reached the best optimum, and the
    objective values of the distinct local optima (the max(0, ·) kink makes several likely)."""

    n_starts: int
    n_success: int
    n_at_best: int
    local_optima: list  # distinct final objective values, best first
    ridge_params: list = field(default_factory=list)  # differ between starts tied at the best objective


@dataclass
class FitResult:
    """A fitted law. Loss-space statistics (R², RMSE, AIC, ...) are in nats, for either method.

    params / stderr / ci_jacobian / ci_bootstrap are keyed by parameter name (free parameters;
    ``fixed`` holds the others). AIC/BIC count the noise variance as a parameter
    (K = k + 1) under a Gaussian likelihood of the loss residuals.
    """

    law: Law
    method: str
    params: dict
    fixed: dict
    stderr: dict
    ci_jacobian: dict
    ci_bootstrap: dict | None
    bootstrap_params: np.ndarray | None
    n_bootstrap_failed: int
    correlation: np.ndarray
    condition_number: float
    n: int
    k: int
    rss: float
    r2: float
    rmse: float
    aic: float
    aicc: float
    bic: float
    loo_rmse: float
    loo_residuals: np.ndarray
    observed: np.ndarray
    predicted: np.ndarray
    residuals: np.ndarray
    starts: StartsSummary
    run_names: list
    flags: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    source: str = ""
    seed: int = 0

    @property
    def param_names(self) -> list[str]:
        return list(self.params)

    @property
    def all_params(self) -> dict:
        """Free and fixed parameter values together, as the law function takes them."""
        return {**self.fixed, **self.params}

    @property
    def n_bootstrap(self) -> int:
        return 0 if self.bootstrap_params is None else len(self.bootstrap_params)

    def predict(self, runs=None, **columns) -> np.ndarray:
        """Predicted loss (nats) for Runs, LawInputs, or keyword arrays D, W, N[, T]."""
        return predict_with(self.law, self.all_params, runs, **columns)

    def to_dict(self) -> dict:
        def f(v):
            return None if v is None or not np.isfinite(v) else float(v)

        return {
            "law": self.law.name, "formula": self.law.formula, "method": self.method,
            "n": self.n, "k": self.k, "params": self.params, "fixed": self.fixed,
            "stderr": {k: f(v) for k, v in self.stderr.items()},
            "ci_jacobian": {k: [f(a), f(b)] for k, (a, b) in self.ci_jacobian.items()},
            "ci_bootstrap": None if self.ci_bootstrap is None else
            {k: [f(a), f(b)] for k, (a, b) in self.ci_bootstrap.items()},
            "n_bootstrap": self.n_bootstrap, "n_bootstrap_failed": self.n_bootstrap_failed,
            "r2": f(self.r2), "rmse": f(self.rmse), "rss": f(self.rss), "aic": f(self.aic),
            "aicc": f(self.aicc), "bic": f(self.bic), "loo_rmse": f(self.loo_rmse),
            "condition_number": f(self.condition_number),
            "correlation": [[f(v) for v in row] for row in self.correlation],
            "residuals": {n: float(r) for n, r in zip(self.run_names, self.residuals)},
            "starts": {"n_starts": self.starts.n_starts, "n_success": self.starts.n_success,
                       "n_at_best": self.starts.n_at_best, "local_optima": self.starts.local_optima,
                       "ridge_params": self.starts.ridge_params},
            "flags": self.flags, "notes": self.notes, "seed": self.seed,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def summary(self) -> str:
        """A readable table: fit statistics, parameters with intervals, flags and notes."""
        method = {"lm": "Levenberg–Marquardt (least squares, nats)",
                  "huber": f"Huber (δ={HUBER_DELTA:g}) on log-loss residuals"}[self.method]
        lines = [
            f"Law {self.law.name!r}: L = {self.law.formula}",
            f"Method: {method}; {self.n} runs ({self.source}); {self.k} free parameters",
            f"R² = {self.r2:.4f}   RMSE = {self.rmse:.4f} nats   leave-one-out RMSE = {self.loo_rmse:.4f} nats",
            f"AIC = {self.aic:.2f}   AICc = {self.aicc:.2f}   BIC = {self.bic:.2f}   "
            f"condition number = {self.condition_number:.3g}",
            f"Starts: {self.starts.n_at_best}/{self.starts.n_starts} reached the best optimum"
            + (f"; other local optima (objective): {', '.join(f'{v:.4g}' for v in self.starts.local_optima[1:6])}"
               if len(self.starts.local_optima) > 1 else ""),
            "",
        ]
        boot = f"95% CI (bootstrap, {self.n_bootstrap} refits)" if self.ci_bootstrap else "95% CI (bootstrap)"
        header = f"{'parameter':<10} {'value':>11} {'std.err':>10}  {'95% CI (Jacobian)':<24} {boot}"
        lines += [header, "-" * len(header)]
        for name, value in self.params.items():
            lo, hi = self.ci_jacobian[name]
            bci = (f"[{_g(self.ci_bootstrap[name][0])}, {_g(self.ci_bootstrap[name][1])}]"
                   if self.ci_bootstrap else "—")
            lines.append(f"{name:<10} {_g(value):>11} {_g(self.stderr[name]):>10}  "
                         f"{'[' + _g(lo) + ', ' + _g(hi) + ']':<24} {bci}")
        for name, value in self.fixed.items():
            lines.append(f"{name:<10} {_g(value):>11} {'(fixed)':>10}")
        lines.append("")
        lines.append("Identifiability flags:" if self.flags else "Identifiability flags: none")
        lines += [f"  ! {f}" for f in self.flags]
        if self.notes:
            lines.append("Notes:")
            lines += [f"  - {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _g(v) -> str:
    if v is None or not np.isfinite(v):
        return "nan" if v is None or np.isnan(v) else ("inf" if v > 0 else "-inf")
    return f"{v:.4g}"


def predict_with(law, values: dict, runs=None, **columns) -> np.ndarray:
    law = get_law(law)
    if runs is None:
        x = LawInputs.of(columns["D"], columns["W"], columns["N"], columns.get("T", np.nan))
    elif isinstance(runs, LawInputs):
        x = runs
    else:
        x = LawInputs.from_runs(load_runs(runs))
    with np.errstate(all="ignore"):
        return np.asarray(law(x, **values), dtype=float) * np.ones_like(x.D)


def start_grid(problem: _Problem, grid_points: int, max_starts: int, seed: int) -> np.ndarray:
    """Starting θ vectors: a grid over each parameter's init range (log-spaced for scales),
    subsampled (seeded, centre always kept) when it has more than ``max_starts`` points."""
    axes = []
    for p in problem.free:
        lo, hi = p.init
        axis = np.geomspace(lo, hi, grid_points) if p.log else np.linspace(lo, hi, grid_points)
        axes.append(np.log(axis) if p.log else axis)
    grid = np.array(list(itertools.product(*axes)))
    if len(grid) <= max_starts:
        return grid
    centre = len(grid) // 2  # the middle of an odd grid is the all-centre point
    rest = np.delete(np.arange(len(grid)), centre)
    pick = np.random.default_rng(seed).choice(rest, max_starts - 1, replace=False)
    return grid[np.concatenate([[centre], np.sort(pick)])]


def fit(runs, law, method: str = "lm", *, bootstrap: int = 1000, seed: int = 0,
        fixed: dict | None = None, grid_points: int = 3, max_starts: int = 64,
        leave_one_out: bool = True) -> FitResult:
    """Fit ``law`` (a registered name or Law) to ``runs`` (anything :func:`load_runs` takes).

    Scale parameters are fitted in log space from a grid of starts; the best optimum is kept
    and every other local optimum reported. ``bootstrap`` case-resampling refits (seeded by
    ``seed``) start from that optimum. ``fixed`` pins parameters to given values. Token
    parameters of a law are dropped (the term is absorbed into E) unless every run has a
    token count and they vary.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    law = get_law(law)
    runs = load_runs(runs)
    check_law_columns(law, runs)
    fixed = dict(fixed or {})
    notes = list(runs.notes)
    for name in fixed:
        law.param(name)  # raises for unknown names
    if law.needs_tokens and not runs.tokens_vary:
        raise ValueError(f"law {law.name!r} needs per-run token counts that vary; these runs have "
                         f"{_describe_tokens(runs)}. Use a law without a data term (e.g. 'kaplan')")
    if law.token_params:
        if runs.tokens_vary:
            notes.append("token term B·T^−δ included: token counts vary across runs")
        else:
            for k, v in law.token_params.items():
                fixed.setdefault(k, v)
            notes.append(f"token term dropped (absorbed into E): tokens {_describe_tokens(runs)}")
    x, y = LawInputs.from_runs(runs), runs.loss
    problem = _Problem(law, fixed, x, y, method)
    n, k = len(y), len(problem.free)
    if n <= k + 1:
        raise ValueError(f"law {law.name!r} has {k} free parameters; fitting it needs more than "
                         f"{k + 1} runs, got {n}")

    theta, starts = _multistart(problem, grid_points, max_starts, seed)
    # Rounded to 10 significant digits so warm starts do not inherit last-bit (alignment) noise.
    theta = np.array([float(f"{t:.10g}") for t in theta])
    values = problem.values(theta)
    pred = problem.predict(theta, x)
    resid = y - pred
    rss = float(resid @ resid)
    tss = float(((y - y.mean()) ** 2).sum())
    big_k = k + 1
    loglik_term = n * math.log(max(rss, 1e-300) / n)
    aic = loglik_term + 2 * big_k
    aicc = aic + 2 * big_k * (big_k + 1) / (n - big_k - 1) if n - big_k - 1 > 0 else math.inf

    stderr, ci_jac, corr, cond, jac_flags = _jacobian_uncertainty(problem, theta)
    boot, n_failed, n_capped = _bootstrap(problem, theta, bootstrap, seed) if bootstrap else (None, 0, 0)
    if n_capped:
        notes.append(f"{n_capped} of {bootstrap} bootstrap refits stopped at the evaluation cap "
                     "(stalled in a flat direction); kept in the intervals")
    ci_boot = None
    if boot is not None and len(boot):
        ci_boot = {nm: (float(np.percentile(boot[:, i], 2.5)), float(np.percentile(boot[:, i], 97.5)))
                   for i, nm in enumerate(problem.names)}
    loo = _leave_one_out(problem, theta) if leave_one_out else np.full(n, np.nan)

    result = FitResult(
        law=law, method=method, params={nm: values[nm] for nm in problem.names},
        fixed=fixed, stderr=stderr, ci_jacobian=ci_jac, ci_bootstrap=ci_boot,
        bootstrap_params=boot, n_bootstrap_failed=n_failed, correlation=corr,
        condition_number=cond, n=n, k=k, rss=rss, r2=1 - rss / tss if tss > 0 else math.nan,
        rmse=math.sqrt(rss / n), aic=aic, aicc=aicc, bic=loglik_term + big_k * math.log(n),
        loo_rmse=float(np.sqrt(np.nanmean(loo ** 2))) if leave_one_out else math.nan,
        loo_residuals=loo, observed=y.copy(), predicted=pred, residuals=resid, starts=starts,
        run_names=list(runs.name), notes=notes, source=runs.source, seed=seed)
    result.flags = jac_flags + _identifiability_flags(result, problem)
    if method == "huber":
        result.notes.append("Jacobian intervals of a Huber fit treat it as least squares on "
                            "log-loss residuals: approximate; prefer the bootstrap ones")
    return result


def _describe_tokens(runs: Runs) -> str:
    t = runs.tokens
    known = np.isfinite(t)
    if not known.any():
        return "unknown for every run"
    if not known.all():
        rest = f" (the others constant at {t[known][0]:.3g})" if np.ptp(t[known]) == 0 else ""
        return f"unknown for {int((~known).sum())} of {len(t)} runs{rest}"
    return f"constant at {t[0]:.3g}"


def _multistart(problem: _Problem, grid_points, max_starts, seed):
    """Solve from every start; keep the best objective. Starts whose objectives tie with the
    best (relative ``_TIE``) are equally good: the first of them in grid order is kept, not the
    one with the smallest last bits, because MINPACK's last bits depend on memory alignment
    (they differ between processes) and on a ridge of equal objective they pick the point."""
    grid = start_grid(problem, grid_points, max_starts, seed)
    finals = []
    for theta0 in grid:
        try:
            res = problem.solve(theta0)
        except (ValueError, FloatingPointError):
            continue
        if res.status > 0 and np.all(np.isfinite(res.x)) and np.isfinite(res.cost):
            finals.append((float(res.cost), res.x))
    if not finals:
        raise ValueError(f"law {problem.law.name!r}: no start converged ({len(grid)} tried); "
                         "check the data or the law's init ranges")
    best_cost = min(cost for cost, _ in finals)
    tied = [theta for cost, theta in finals if cost <= best_cost * (1 + _TIE) + 1e-300]
    best_theta = tied[0]
    # Polish once more so the reported optimum is converged tightly; a gain within the tie
    # tolerance is last-bit noise and would only move the point along a ridge.
    polished = problem.solve(best_theta)
    if polished.status > 0 and polished.cost < best_cost * (1 - _TIE):
        best_cost, best_theta = float(polished.cost), polished.x
    costs = sorted(cost for cost, _ in finals)
    optima = []
    for cost in costs:
        if not optima or cost - optima[-1] > max(1e-4 * optima[-1], 1e-12):
            optima.append(cost)
    at_best = sum(1 for cost in costs if cost - best_cost <= max(1e-4 * best_cost, 1e-12))
    optima[0] = best_cost
    return best_theta, StartsSummary(len(grid), len(finals), at_best, [float(c) for c in optima],
                                     _ridge_params(problem, tied))


def _ridge_params(problem: _Problem, tied: list) -> list[str]:
    """Free parameters that take clearly different values (> 1% of their init range, or of
    the value) at starts tied at the best objective: the data do not determine them."""
    if len(tied) < 2:
        return []
    thetas = np.array(tied)
    names = []
    for j, p in enumerate(problem.free):
        spread = np.ptp(thetas[:, j])  # log-space spread for scale parameters
        scale = 1.0 if p.log else max(abs(p.init[1] - p.init[0]), np.abs(thetas[:, j]).max(), 1e-12)
        if spread > 0.01 * scale:
            names.append(p.name)
    return names


def _model_jacobian(problem: _Problem, theta) -> np.ndarray:
    """d prediction / d parameter (natural units; log-loss for Huber), central differences."""
    values = problem.values(theta)
    names = problem.names

    def pred(vals):
        with np.errstate(all="ignore"):
            p = np.asarray(problem.law(problem.x, **vals), dtype=float) * np.ones_like(problem.x.D)
        return np.log(p) if problem.method == "huber" else p

    cols = []
    for nm in names:
        v = values[nm]
        h = 1e-6 * max(abs(v), 1e-3)
        up, down = dict(values), dict(values)
        up[nm], down[nm] = v + h, v - h
        cols.append((pred(up) - pred(down)) / (2 * h))
    return np.column_stack(cols)


def _jacobian_uncertainty(problem: _Problem, theta):
    names = problem.names
    n, k = len(problem.y), len(names)
    J = _model_jacobian(problem, theta)
    pred = problem.predict(theta, problem.x)
    r = (np.log(pred) - np.log(problem.y)) if problem.method == "huber" else pred - problem.y
    s2 = float(r @ r) / (n - k)
    flags = []
    # Column norms scaled by the column's largest entry: squares of steep columns (e.g. W^−γ
    # at large |γ|) would overflow although the norm itself is finite.
    col_max = np.abs(J).max(axis=0)
    safe_max = np.where(col_max > 0, col_max, 1.0)
    col_norm = col_max * np.linalg.norm(J / safe_max, axis=0)
    scale = np.array([max(abs(problem.values(theta)[nm]), 1e-3) for nm in names])
    dead = col_norm * scale < 1e-9 * max(np.max(col_norm * scale), 1e-300)
    for nm in np.array(names)[dead]:
        flags.append(f"{nm}: no run's prediction depends on it at the optimum (e.g. the depth "
                     "penalty is inactive for every run): not identifiable")
    with np.errstate(all="ignore"):
        Jn = J / np.where(col_norm > 0, col_norm, 1.0)
        sv = np.linalg.svd(Jn, compute_uv=False)
        cond = float(sv[0] / sv[-1]) if sv[-1] > 0 else math.inf
        cov = s2 * np.linalg.pinv(J.T @ J)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    if dead.any() or not np.isfinite(cond):
        se = np.where(dead, np.inf, se)
    tq = stats.t.ppf(0.975, max(n - k, 1))
    values = problem.values(theta)
    stderr = {nm: float(se[i]) for i, nm in enumerate(names)}
    ci = {nm: (values[nm] - tq * se[i], values[nm] + tq * se[i]) for i, nm in enumerate(names)}
    with np.errstate(all="ignore"):
        corr = cov / np.outer(se, se)
    corr[~np.isfinite(corr)] = np.nan
    np.fill_diagonal(corr, 1.0)
    return stderr, ci, corr, cond, flags


def _bootstrap(problem: _Problem, theta, n_boot: int, seed: int):
    """Case-bootstrap refits warm-started at ``theta``. A refit that reaches the evaluation cap
    has stalled in a flat valley (e.g. λ → 0 with the penalty off): it is kept and counted,
    since its objective has converged even if a parameter keeps drifting."""
    rng = np.random.default_rng(seed)
    n, k = len(problem.y), len(problem.names)
    samples, failed, capped = [], 0, 0
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        try:
            res = problem.solve(theta, idx=idx, max_nfev=BOOTSTRAP_MAX_NFEV_PER_PARAM * (k + 1),
                                refit=True)
        except (ValueError, FloatingPointError):
            failed += 1
            continue
        if res.status >= 0 and np.all(np.isfinite(res.x)) and np.isfinite(res.cost):
            capped += res.status == 0
            vals = problem.values(res.x)
            samples.append([vals[nm] for nm in problem.names])
        else:
            failed += 1
    return np.array(samples).reshape(-1, k), failed, capped


def _leave_one_out(problem: _Problem, theta) -> np.ndarray:
    n = len(problem.y)
    errors = np.full(n, np.nan)
    for i in range(n):
        keep = np.delete(np.arange(n), i)
        res = problem.solve(theta, idx=keep, refit=True)
        if res.status > 0:
            errors[i] = problem.y[i] - problem.predict(res.x, problem.x.take([i]))[0]
    return errors


def _identifiability_flags(result: FitResult, problem: _Problem) -> list[str]:
    flags = []
    names = problem.names
    for i, j in itertools.combinations(range(len(names)), 2):
        c = result.correlation[i, j]
        if np.isfinite(c) and abs(c) >= _CORR_FLAG:
            flags.append(f"{names[i]} and {names[j]} are correlated (r = {c:+.3f}): the data "
                         "pin down a combination of them, not each")
    for nm in names:
        lo, hi = result.ci_jacobian[nm]
        if np.isfinite(lo) and np.isfinite(hi) and lo < 0 < hi:
            flags.append(f"{nm}: Jacobian 95% interval [{_g(lo)}, {_g(hi)}] spans zero")
        elif result.ci_bootstrap and result.ci_bootstrap[nm][0] < 0 < result.ci_bootstrap[nm][1]:
            flags.append(f"{nm}: bootstrap 95% interval spans zero")
        elif not np.isfinite(result.stderr[nm]):
            flags.append(f"{nm}: standard error is not finite")
    for p in problem.free:
        v = result.params[p.name]
        b0, b1 = p.bounds
        width = (p.init[1] - p.init[0]) or 1.0
        if p.log and v < 1e-6 * p.init[0]:
            flags.append(f"{p.name} = {_g(v)} has collapsed towards 0 (the term it scales vanishes)")
        elif (np.isfinite(b0) and v <= b0 + 1e-6 * width) or (np.isfinite(b1) and v >= b1 - 1e-6 * width):
            flags.append(f"{p.name} = {_g(v)} is at or beyond its bound [{_g(b0)}, {_g(b1)}]")
    if result.condition_number > _COND_FLAG:
        flags.append(f"ill-conditioned: condition number {result.condition_number:.3g} "
                     "of the column-normalised Jacobian")
    if result.n_bootstrap_failed > 0.05 * max(result.n_bootstrap + result.n_bootstrap_failed, 1):
        flags.append(f"{result.n_bootstrap_failed} bootstrap refits failed to converge "
                     "(excluded from the intervals)")
    if result.starts.ridge_params:
        flags.append(f"{', '.join(result.starts.ridge_params)}: starts that reach the best objective "
                     "end at different values (a ridge of equally good fits): not identified; "
                     "predictions outside the data depend on the point chosen")
    if result.starts.n_at_best < 0.5 * result.starts.n_starts:
        flags.append(f"only {result.starts.n_at_best} of {result.starts.n_starts} starts reached the "
                     "best optimum: the objective has several local optima")
    return flags
