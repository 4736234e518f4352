"""FitResult: a fitted law with its intervals (each named by method), flags and diagnostics."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..formats import json_text
from ..formats.row_keys import row_keys
from ..laws import Law, LawInputs, get_law
from ..table.load import load_runs
from .options import SEED, FitOptions
from .status import (  # noqa: F401 (re-exported: a result's status is read where results are)
    AT_BOUND,
    DRIFT,
    NOT_IDENTIFIED,
    OK,
    bound_reached,
    correlation_note,
    format_estimate,
    parameter_status,
)
from .problem import OFFSET, offset_name, open_beyond_support, scale_interval
from .summary_text import METHOD_DESCRIPTIONS, fit_summary  # noqa: F401 (re-exported)

if TYPE_CHECKING:  # the search makes it; a result only holds it
    from .starts import StartsSummary

class _derived(functools.cached_property):
    """A view of a FitResult computed from its fields on first use and kept (statsmodels'
    ``cache_readonly``); the result being frozen, it cannot be set."""


@dataclass(frozen=True)
class FitResult:
    """A fitted law. Loss-space statistics (R², RMSE, AIC, ...) are in nats, for either method.

    ``params`` / ``stderr`` / ``ci_jacobian`` / ``ci_profile`` / ``ci_bootstrap`` are keyed by
    free parameter name (``fixed`` holds the others). With group offsets the law's E is
    replaced by ``E[group]`` entries. Intervals are 95%:

    - ``ci_jacobian``: from the Jacobian at the optimum (covariance from the column-scaled
      Jacobian); for positive scale parameters (``jacobian_log``) computed in log space, so it
      never spans zero. ``stderr`` is the natural-unit standard error (delta method).
    - ``ci_profile``: profile likelihood (see :mod:`.profile`); ends are ±inf when the data do
      not bound the parameter on that side.
    - ``ci_bootstrap``: percentile interval of case-bootstrap refits, each started from the
      optimum and the best multi-start starts (``bootstrap_scheme``); refits that did not
      converge are left out and counted (``n_bootstrap_failed``, ``n_bootstrap_not_converged``).

    AIC/BIC count the noise variance as a parameter (K = k + 1) under a Gaussian likelihood of
    the loss residuals. The statistics that follow from other fields (``residuals``, ``rss``,
    ``r2``, ``rmse``, ``aic``, ``aicc``, ``bic``, ``loo_rmse``: from ``observed``, ``predicted``,
    ``loo_residuals``, ``n`` and ``k``) are views computed on first use and kept, not stored
    fields; they cannot be set. ``ridge_solutions`` holds every parameter set that ties with the chosen
    optimum's objective (relative tolerance ``tie_tolerance``) at clearly different values; predictions
    outside the data should then be the range over them (:meth:`predict_range`).

    A FitResult is built once, by the fitting engine, and frozen: no field is set after it is
    made (the derived views are computed on first use and kept; profiles the fit skipped are
    computed on request through the problem handle ``profile_source`` and kept there).
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
    loo_residuals: np.ndarray
    observed: np.ndarray
    predicted: np.ndarray
    starts: StartsSummary
    run_names: list
    flags: tuple = ()
    notes: tuple = ()
    source: str = ""
    seed: int = SEED
    n_bootstrap_not_converged: int = 0  # refits left out: still at the iteration cap after a restart
    ci_profile: dict | None = None
    profiles: dict = field(default_factory=dict)
    jacobian_log: list = field(default_factory=list)
    bounds: dict = field(default_factory=dict)
    #: parameters within tolerance of a physical bound, free or fixed (:func:`.uncertainty.near_bound`)
    at_bound: list = field(default_factory=list)
    ridge_solutions: list = field(default_factory=list)  # all_params dicts, the chosen one first
    tie_tolerance: float = 0.0
    offset_groups: list | None = None
    profile_statistic: str = ""
    bootstrap_scheme: str = ""
    #: how the optimum was searched for (variable projection or multi-start), for the summary
    search: str = ""
    #: θ at the optimum (log for scale parameters) and its Jacobian standard errors
    theta: np.ndarray | None = field(default=None, repr=False)
    se_theta: np.ndarray | None = field(default=None, repr=False)
    #: the fit's problem and optimum, which compute the profiles on request when the fit skipped
    #: them (:class:`.uncertainty.LaterProfiles`)
    profile_source: object = field(default=None, repr=False, compare=False)
    #: the options the fit was made with, its stage sizes resolved (None: not recorded)
    options: FitOptions | None = field(default=None, repr=False, compare=False)
    #: per-row residuals, robust z, leverage, Cook's distance, outliers and the refit without
    #: them (:class:`.diagnostics.RowDiagnostics`); None when not computed
    diagnostics: object = field(default=None, repr=False)
    #: text columns the fit pooled, with a test of their residuals (:func:`.diagnostics.pooled_groups`)
    pooled_groups: list = field(default_factory=list)
    #: {source column: how it was read} for columns read from their values (``D``)
    column_readings: dict = field(default_factory=dict)
    #: how the table's rows were selected (``where``, ``rows_read``, ``rows_kept``, ``dropped``)
    selection: dict = field(default_factory=dict)

    # --- derived views: computed on first use from the fields above, then kept ----------------
    @_derived
    def residuals(self) -> np.ndarray:
        """Loss residuals, observed − predicted (nats)."""
        return self.observed - self.predicted

    @_derived
    def rss(self) -> float:
        return float(self.residuals @ self.residuals)

    @_derived
    def r2(self) -> float:
        y = self.observed
        tss = float(((y - y.mean()) ** 2).sum())
        return 1 - self.rss / tss if tss > 0 else math.nan

    @_derived
    def rmse(self) -> float:
        return math.sqrt(self.rss / self.n)

    @property
    def _loglik_term(self) -> float:
        """n·ln(RSS/n): −2 × the Gaussian log-likelihood at the ML variance, less constants."""
        return self.n * math.log(max(self.rss, 1e-300) / self.n)

    @_derived
    def aic(self) -> float:
        return self._loglik_term + 2 * (self.k + 1)

    @_derived
    def aicc(self) -> float:
        big_k, n = self.k + 1, self.n
        return self.aic + 2 * big_k * (big_k + 1) / (n - big_k - 1) if n - big_k - 1 > 0 else math.inf

    @_derived
    def bic(self) -> float:
        return self._loglik_term + (self.k + 1) * math.log(self.n)

    @_derived
    def loo_rmse(self) -> float:
        """RMS of the finite leave-one-out errors (NaN when none: leave-one-out skipped)."""
        errors = self.loo_residuals[np.isfinite(self.loo_residuals)]
        return float(np.sqrt(np.mean(errors ** 2))) if len(errors) else math.nan

    # --- the results API (statsmodels / lmfit names) ----------------------------------------
    @property
    def status(self) -> dict:
        """{parameter: "ok" | "at_bound" | "not_identified"} (:func:`parameter_status`)."""
        return {nm: parameter_status(self, nm) for nm in self.params}

    @property
    def bse(self) -> dict:
        """Standard errors in natural units (delta method from the Jacobian; inf where the
        data do not constrain the parameter)."""
        return dict(self.stderr)

    @property
    def cov(self) -> np.ndarray:
        """Covariance of the free parameters (order of :attr:`params`), natural units, from the
        Jacobian (delta method for scale parameters); inf on the diagonal and NaN off it for a
        direction the data do not constrain."""
        se = np.array([self.stderr[nm] for nm in self.params], float)
        corr = np.asarray(self.correlation, float)
        with np.errstate(invalid="ignore", over="ignore"):
            out = corr * np.outer(se, se)
        out[~np.isfinite(out)] = np.nan
        np.fill_diagonal(out, se ** 2)
        return out

    def conf_int(self, alpha: float = 0.05, method: str = "profile") -> dict:
        """{parameter: (lo, hi)} at level 1 − ``alpha``. ``method``: ``"profile"`` (likelihood
        ratio; computed now if the fit skipped it), ``"wald"`` (the Jacobian's, in log space for
        scale parameters, within the physical bounds) or ``"bootstrap"`` (percentiles)."""
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        if method == "wald":
            return self._wald(alpha)
        if method == "bootstrap":
            if self.bootstrap_params is None or not len(self.bootstrap_params):
                raise ValueError("this fit has no bootstrap: fit with bootstrap > 0")
            q = (100 * alpha / 2, 100 * (1 - alpha / 2))
            return {nm: tuple(float(v) for v in np.percentile(self.bootstrap_params[:, i], q))
                    for i, nm in enumerate(self.params)}
        if method == "profile":
            profiles = self._profiles()
            if abs(alpha - 0.05) < 1e-12:
                return {nm: p.interval for nm, p in profiles.items()}
            from scipy import stats

            crit = float(stats.chi2.ppf(1 - alpha, 1))
            return {nm: open_beyond_support(self._param(nm), _profile_interval(
                profiles[nm], self.params[nm], crit, self.bounds.get(nm, (-np.inf, np.inf)),
                nm in self.jacobian_log)) for nm in self.params}
        raise ValueError(f"method must be 'profile', 'wald' or 'bootstrap', got {method!r}")

    def _param(self, name: str):
        """The law's Param of the free parameter ``name`` (a group offset ``E[g]``: E's)."""
        return self.law.param(OFFSET if name.startswith(OFFSET + "[") else name)

    def _profiles(self) -> dict:
        """The fit's profiles, or, where it skipped them, those its problem handle computes now
        (once; the result itself is not changed: its ``ci_profile`` stays None)."""
        if self.ci_profile is not None:
            return self.profiles
        if self.profile_source is None:
            raise ValueError("this fit has no profile intervals and cannot compute them")
        return self.profile_source.profiles()[0]

    def _wald(self, alpha: float) -> dict:
        from scipy import stats

        if self.theta is None or self.se_theta is None:
            raise ValueError("this fit does not carry its Jacobian standard errors")
        t = float(stats.t.ppf(1 - alpha / 2, max(self.n - self.k, 1)))
        out = {}
        for j, nm in enumerate(self.params):
            s, th = self.se_theta[j], self.theta[j]
            b0, b1 = self.bounds.get(nm, (-np.inf, np.inf))
            if not np.isfinite(s):
                out[nm] = (b0, b1)
            elif nm in self.jacobian_log:  # in log space, open where it sets no scale
                out[nm] = scale_interval(self._param(nm), th, t * s)
            else:
                out[nm] = open_beyond_support(self._param(nm), (max(th - t * s, b0), min(th + t * s, b1)))
        return {nm: (float(lo), float(hi)) for nm, (lo, hi) in out.items()}

    def to_frame(self):
        """A pandas DataFrame, one row per free parameter: value, bse, status and each computed
        95% interval (lower/upper per method). Needs pandas."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("FitResult.to_frame() needs pandas: pip install pandas "
                              "(or use to_dict())") from None
        rows = []
        for nm, v in self.params.items():
            row = {"parameter": nm, "value": v, "bse": self.stderr[nm], "status": parameter_status(self, nm)}
            for method, (lo, hi) in self.intervals(nm).items():
                row[f"{method}_lower"], row[f"{method}_upper"] = lo, hi
            rows.append(row)
        return pd.DataFrame(rows).set_index("parameter")

    @property
    def param_names(self) -> list[str]:
        return list(self.params)

    @property
    def all_params(self) -> dict:
        """Free and fixed parameter values together. Without group offsets this is what the
        law function takes; with them it holds E[group] entries instead of E (use
        :meth:`law_params`)."""
        return {**self.fixed, **self.params}

    def law_params(self, group=None) -> dict:
        """The law's keyword arguments; with group offsets, E is ``group``'s offset."""
        p = self.all_params
        if self.offset_groups is None:
            return p
        if group not in self.offset_groups:
            raise ValueError(f"this fit has one offset per group ({', '.join(map(str, self.offset_groups))}); "
                             f"name one of them, got {group!r}")
        out = {k: v for k, v in p.items() if not k.startswith(OFFSET + "[")}
        out[OFFSET] = p[offset_name(group)]
        return out

    @property
    def n_bootstrap(self) -> int:
        return 0 if self.bootstrap_params is None else len(self.bootstrap_params)

    def intervals(self, name: str) -> dict:
        """{method: (lo, hi)} for one parameter, for the methods that were computed."""
        out = {"jacobian": self.ci_jacobian[name]}
        if self.ci_profile is not None and name in self.ci_profile:
            out["profile"] = self.ci_profile[name]
        if self.ci_bootstrap is not None:
            out["bootstrap"] = self.ci_bootstrap[name]
        return out

    def predict(self, runs=None, group=None, **columns) -> np.ndarray:
        """Predicted loss (nats) for Runs, a table (DataFrame or list of dicts; no loss column
        needed), LawInputs, or keyword arrays (depth/D, width/W, params/N, tokens/T).
        With group offsets, Runs supply their own groups; otherwise pass ``group``."""
        return self._predict_with(self.all_params, runs, group, **columns)

    def predict_range(self, runs=None, group=None, **columns) -> tuple[np.ndarray, np.ndarray]:
        """(lowest, highest) prediction over the solutions tied with the chosen optimum: the
        range a ridge of equally good fits allows. Equal to (predict, predict) without one."""
        preds = np.array([self._predict_with(p, runs, group, **columns)
                          for p in (self.ridge_solutions or [self.all_params])])
        with np.errstate(all="ignore"):
            return np.min(preds, axis=0), np.max(preds, axis=0)

    def _predict_with(self, values: dict, runs, group, **columns):
        x, groups = _inputs(runs, **columns)
        if self.offset_groups is None:
            return predict_with(self.law, values, x)
        if groups is None:
            if group is None:
                raise ValueError("this fit has one offset per group: pass Runs (with groups) or group=...")
            groups = np.full(np.shape(x.D), group, dtype=object)
        groups = np.asarray(groups, dtype=object)
        fitted = {str(g): g for g in self.offset_groups}
        unknown = sorted({str(g) for g in groups.ravel()} - set(fitted))
        if unknown:
            raise ValueError(f"no fitted offset for group(s) {unknown}; fitted groups: "
                             f"{', '.join(fitted)}")
        E = np.array([values[offset_name(fitted[str(g)])] for g in groups.ravel()],
                     float).reshape(groups.shape)
        law_vals = {k: v for k, v in values.items() if not k.startswith(OFFSET + "[")}
        return predict_with(self.law, {**law_vals, OFFSET: E}, x)

    def to_dict(self) -> dict:
        """Every field as JSON data (plain dicts and lists; an undefined number is None)."""
        return self._doc(None)

    def json_doc(self) -> dict:
        """:meth:`to_dict` with each per-row mapping as a :class:`.json_text.Rows` over the
        arrays, for :func:`.json_text.dump` to write the same text without building
        dicts of n entries (a million-row fit's JSON)."""
        return self._doc(json_text.Rows)

    def _doc(self, rows) -> dict:
        def f(v):
            return None if v is None or not np.isfinite(v) else float(v)

        def ci(d):
            return None if d is None else {k: [f(a), f(b)] for k, (a, b) in d.items()}

        return {
            "law": self.law.name, "formula": self.law.formula, "method": self.method,
            "n": self.n, "k": self.k, "params": self.params, "fixed": self.fixed,
            "stderr": {k: f(v) for k, v in self.stderr.items()},
            "ci_jacobian": ci(self.ci_jacobian), "jacobian_log": self.jacobian_log,
            "ci_profile": ci(self.ci_profile), "profile_statistic": self.profile_statistic,
            "ci_bootstrap": ci(self.ci_bootstrap), "bootstrap_scheme": self.bootstrap_scheme,
            "n_bootstrap": self.n_bootstrap, "n_bootstrap_failed": self.n_bootstrap_failed,
            "n_bootstrap_not_converged": self.n_bootstrap_not_converged,
            "bounds": {k: [f(a), f(b)] for k, (a, b) in self.bounds.items()},
            "at_bound": self.at_bound, "status": self.status, "offset_groups": self.offset_groups,
            "r2": f(self.r2), "rmse": f(self.rmse), "rss": f(self.rss), "aic": f(self.aic),
            "aicc": f(self.aicc), "bic": f(self.bic), "loo_rmse": f(self.loo_rmse),
            "condition_number": f(self.condition_number),
            "correlation": [[f(v) for v in row] for row in self.correlation],
            "residuals": (rows(row_keys(self.run_names), self.residuals) if rows
                          else {n: float(r) for n, r in zip(row_keys(self.run_names), self.residuals)}),
            "starts": {"n_starts": self.starts.n_starts, "n_success": self.starts.n_success,
                       "n_at_best": self.starts.n_at_best, "local_optima": self.starts.local_optima,
                       "ridge_params": self.starts.ridge_params, "search": self.search,
                       "found_by_profile": getattr(self.starts, "found_by_profile", "")},
            "ridge_solutions": self.ridge_solutions, "tie_tolerance": self.tie_tolerance,
            "flags": self.flags, "notes": self.notes, "profile_notes": self.profile_notes,
            "seed": self.seed,
            "pooled_groups": self.pooled_groups, "column_readings": self.column_readings,
            "rows": {"read": self.selection.get("rows_read", self.n), "kept": self.n,
                     **{k: v for k, v in self.selection.items() if k not in ("rows_read", "rows_kept")}},
            **self._diagnostics_dict(rows),
        }

    def _diagnostics_dict(self, rows) -> dict:
        d = self.diagnostics
        if d is None:
            return {}
        return {"outliers": list(d.outliers), "without_outliers": d.without_outliers,
                "diagnostics": d.to_dict(rows)}

    def to_json(self) -> str:
        """Strict JSON; an infinite or undefined number (an open interval end, an unbounded
        side, an infinite standard error) is null."""
        return json_text.dumps(self.json_doc(), null_nonfinite=True)

    def summary(self) -> str:
        """A readable table: fit statistics, parameters with each method's interval, flags
        (:func:`.summary_text.fit_summary`)."""
        return fit_summary(self)

    @property
    def profile_notes(self) -> list:
        """What the profiles say about their own limits: flat stretches, jumps, points left out
        because their refit did not converge."""
        return [n for p in (self.profiles or {}).values() for n in getattr(p, "notes", [])]

    def __str__(self) -> str:
        return self.summary()


def _exp(t) -> float:
    return math.inf if t > 709 else (0.0 if t < -745 else math.exp(t))


def _profile_interval(profile, value, crit: float, bounds, log: bool) -> tuple:
    """The interval {ψ: Λ(ψ) < crit} read off a computed profile curve (linear interpolation
    at the first crossing on each side, in log space for a scale parameter, as the profile
    itself does); a side without a crossing ends at the bound the curve reached, else is open."""
    v, st = np.asarray(profile.values, float), np.asarray(profile.statistic, float)
    if log:
        with np.errstate(divide="ignore"):
            lo, hi = _profile_interval(type(profile)(profile.name, np.log(v), st, (), profile.reaches_bound),
                                       math.log(value), crit,
                                       (math.log(bounds[0]) if bounds[0] > 0 else -math.inf,
                                        math.log(bounds[1]) if np.isfinite(bounds[1]) else math.inf), False)
        return (_exp(lo) if np.isfinite(lo) or lo > 0 else 0.0, _exp(hi) if np.isfinite(hi) else math.inf)
    ends = []
    for side in (-1, 1):
        pick = (v - value) * side > 0
        order = np.argsort((v[pick] - value) * side)
        xs, ys = v[pick][order], st[pick][order]
        prev_x, prev_y, end = value, 0.0, None
        for x, y in zip(xs, ys):
            if not np.isfinite(y):
                continue
            if y >= crit:
                frac = (crit - prev_y) / (y - prev_y) if y > prev_y else 0.0
                end = prev_x + min(max(frac, 0.0), 1.0) * (x - prev_x)
                break
            prev_x, prev_y = x, y
        if end is None:
            reached = ("lower" if side < 0 else "upper") in profile.reaches_bound
            end = (bounds[0] if side < 0 else bounds[1]) if reached else side * math.inf
        ends.append(float(end))
    return tuple(ends)


_KEYWORDS = {"depth": "D", "width": "W", "params": "N", "tokens": "T"}  # predict(params=...)


def _inputs(runs=None, **columns):
    """LawInputs and per-run groups (None when the source has none). A table (DataFrame, list
    of dicts) needs no loss column to be predicted."""
    if runs is None:
        given = {_KEYWORDS.get(k, k): v for k, v in columns.items()}
        unknown = sorted(set(given) - {"D", "W", "N", "T"})
        if unknown:
            raise ValueError(f"predict: unknown input(s) {unknown}; give D/depth, W/width, "
                             "N/params, T/tokens (the ones the law reads)")
        if not given:
            raise ValueError("predict: give a table or the law's inputs (e.g. params=..., tokens=...)")
        return LawInputs.of(*(given.get(k, np.nan) for k in ("D", "W", "N", "T"))), None
    if isinstance(runs, LawInputs):
        return runs, None
    try:
        runs = load_runs(runs)
    except ValueError as err:
        unlabelled = _with_unknown_loss(runs)
        if "no loss column" not in str(err) or unlabelled is None:
            raise
        runs = load_runs(unlabelled)
    return LawInputs.from_runs(runs), runs.group


def _with_unknown_loss(table):
    """The in-memory table with a placeholder loss (the reader requires one; prediction reads
    only the inputs), or None."""
    if hasattr(table, "assign") and hasattr(table, "columns"):  # a pandas DataFrame
        return table.assign(loss=1.0)
    if isinstance(table, (list, tuple)) and all(isinstance(r, dict) for r in table):
        return [{**r, "loss": 1.0} for r in table]
    return None


def predict_with(law, values: dict, runs=None, **columns) -> np.ndarray:
    law = get_law(law)
    x = runs if isinstance(runs, LawInputs) else _inputs(runs, **columns)[0]
    with np.errstate(all="ignore"):
        out = np.asarray(law(x, **values), dtype=float) * np.ones_like(x.D)
    _check_inputs(law, x, out)
    return out


def _check_inputs(law, x: LawInputs, predicted: np.ndarray) -> None:
    """Refuse a prediction left undefined because an input the law reads was not given (a NaN
    prediction would look like an answer)."""
    from ..table.columns import LAW_INPUTS
    from ..table.law_columns import law_columns

    bad = ~np.isfinite(predicted)
    if not bad.any():
        return
    reads = [c for c in law_columns(law) if c != "loss"]
    missing = [col for key, col in LAW_INPUTS.items() if col in reads and not np.all(
        np.isfinite(np.broadcast_to(getattr(x, key), predicted.shape)[bad]))]
    if not missing:
        return  # every input given: the law itself is undefined there
    rows = np.flatnonzero(bad.ravel()) + 1
    where = ("for every row" if bad.all() else f"for {len(rows)} of {bad.size} rows (row"
             f"{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows[:6]))}"
             f"{', ...' if len(rows) > 6 else ''})")
    raise ValueError(f"predict: law {law.name!r} reads {', '.join(reads)}; {', '.join(missing)} "
                     f"{'is' if len(missing) == 1 else 'are'} missing {where}: give "
                     f"{'it' if len(missing) == 1 else 'them'} (a column of the table, or "
                     f"{', '.join(f'{c}=...' for c in missing)})")


def has_token_term(fit_or_law, values: dict | None = None) -> bool:
    """Whether the law, as fitted, has a data term of its own (a free token parameter)."""
    if isinstance(fit_or_law, FitResult):
        law, free = fit_or_law.law, fit_or_law.params
    else:
        law, free = get_law(fit_or_law), dict(values or {})
        free = {k: v for k, v in free.items() if not (k in law.token_params and v == law.token_params[k])}
    return law.needs_tokens or any(k in free for k in law.token_params)
