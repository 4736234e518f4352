"""FitResult: a fitted law with its intervals (each named by method), flags and diagnostics."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from .laws import Law, LawInputs, get_law
from .problem import HUBER_THRESHOLD, OFFSET, offset_name
from .runs import load_runs

#: What each method minimises, for summaries and reports.
METHOD_DESCRIPTIONS = {
    "lm": "least squares on loss residuals (nats), bounded Levenberg–Marquardt",
    "huber": f"Huber (threshold {HUBER_THRESHOLD:g}) on log-loss residuals, bounded Levenberg–Marquardt",
}


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

    ``params`` / ``stderr`` / ``ci_jacobian`` / ``ci_profile`` / ``ci_bootstrap`` are keyed by
    free parameter name (``fixed`` holds the others). With group offsets the law's E is
    replaced by ``E[group]`` entries. Intervals are 95%:

    - ``ci_jacobian``: from the Jacobian at the optimum (covariance from the column-scaled
      Jacobian); for positive scale parameters (``jacobian_log``) computed in log space, so it
      never spans zero. ``stderr`` is the natural-unit standard error (delta method).
    - ``ci_profile``: profile likelihood (see :mod:`.profile`); ends are ±inf when the data do
      not bound the parameter on that side.
    - ``ci_bootstrap``: percentile interval of case-bootstrap refits, each started cold from
      the multi-start grid.

    AIC/BIC count the noise variance as a parameter (K = k + 1) under a Gaussian likelihood of
    the loss residuals. ``ridge_solutions`` holds every parameter set that ties with the best
    objective (relative tolerance ``tie_tolerance``) at clearly different values; predictions
    outside the data should then be the range over them (:meth:`predict_range`).
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
    ci_profile: dict | None = None
    profiles: dict = field(default_factory=dict)
    jacobian_log: list = field(default_factory=list)
    bounds: dict = field(default_factory=dict)
    at_bound: list = field(default_factory=list)
    ridge_solutions: list = field(default_factory=list)  # all_params dicts, the chosen one first
    tie_tolerance: float = 0.0
    offset_groups: list | None = None
    profile_statistic: str = ""
    bootstrap_scheme: str = ""

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
        """Predicted loss (nats) for Runs, LawInputs, or keyword arrays D, W, N[, T].
        With group offsets, Runs supply their own groups; otherwise pass ``group``."""
        return self._predict_with(self.all_params, runs, group, **columns)

    def predict_range(self, runs=None, group=None, **columns) -> tuple[np.ndarray, np.ndarray]:
        """(lowest, highest) prediction over the solutions tied at the best objective: the
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
            "bounds": {k: [f(a), f(b)] for k, (a, b) in self.bounds.items()},
            "at_bound": self.at_bound, "offset_groups": self.offset_groups,
            "r2": f(self.r2), "rmse": f(self.rmse), "rss": f(self.rss), "aic": f(self.aic),
            "aicc": f(self.aicc), "bic": f(self.bic), "loo_rmse": f(self.loo_rmse),
            "condition_number": f(self.condition_number),
            "correlation": [[f(v) for v in row] for row in self.correlation],
            "residuals": {n: float(r) for n, r in zip(self.run_names, self.residuals)},
            "starts": {"n_starts": self.starts.n_starts, "n_success": self.starts.n_success,
                       "n_at_best": self.starts.n_at_best, "local_optima": self.starts.local_optima,
                       "ridge_params": self.starts.ridge_params},
            "ridge_solutions": self.ridge_solutions, "tie_tolerance": self.tie_tolerance,
            "flags": self.flags, "notes": self.notes, "seed": self.seed,
        }

    def to_json(self) -> str:
        """Strict JSON; an infinite or undefined number (an open interval end, an unbounded
        side, an infinite standard error) is null."""
        return json.dumps(_finite_or_null(self.to_dict()), indent=2, allow_nan=False)

    def summary(self) -> str:
        """A readable table: fit statistics, parameters with each method's interval, flags."""
        lines = [
            f"Law {self.law.name!r}: L = {self.law.formula}",
            f"Method: {METHOD_DESCRIPTIONS[self.method]}; {self.n} runs ({self.source}); "
            f"{self.k} free parameters"
            + (f"; one offset E per group ({', '.join(map(str, self.offset_groups))})"
               if self.offset_groups is not None else ""),
            f"R² = {self.r2:.4f}   RMSE = {self.rmse:.4f} nats   leave-one-out RMSE = {self.loo_rmse:.4f} nats",
            f"AIC = {self.aic:.2f}   AICc = {self.aicc:.2f}   BIC = {self.bic:.2f}   "
            f"condition number = {self.condition_number:.3g}",
            f"Starts: {self.starts.n_at_best}/{self.starts.n_starts} reached the best optimum"
            + (f"; other local optima (objective): {', '.join(f'{v:.4g}' for v in self.starts.local_optima[1:6])}"
               if len(self.starts.local_optima) > 1 else ""),
            "",
        ]
        cols = ["95% CI Jacobian", "95% CI profile",
                f"95% CI bootstrap ({self.n_bootstrap})" if self.ci_bootstrap else "95% CI bootstrap"]
        rows = []
        for name, value in self.params.items():
            jac = format_interval(self.ci_jacobian[name]) + (" log" if name in self.jacobian_log else "")
            prof = format_interval(self.ci_profile[name]) if self.ci_profile and name in self.ci_profile else "—"
            boot = format_interval(self.ci_bootstrap[name]) if self.ci_bootstrap else "—"
            rows.append([name, _g(value), _g(self.stderr[name]), jac, prof, boot])
        for name, value in self.fixed.items():
            rows.append([name, _g(value), "(fixed)", "", "", ""])
        head = ["parameter", "value", "std.err", *cols]
        width = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
        fmt = lambda r: "  ".join(str(c).rjust(w) if i in (1, 2) else str(c).ljust(w)
                                  for i, (c, w) in enumerate(zip(r, width))).rstrip()
        lines += [fmt(head), "-" * len(fmt(head))] + [fmt(r) for r in rows]
        lines.append("Jacobian CI: from the column-scaled Jacobian; 'log' = computed in log space "
                     "(positive scale). Profile CI: " + (self.profile_statistic or "not computed")
                     + "; ±inf = not bounded by the data. Bootstrap: " + (self.bootstrap_scheme or "none") + ".")
        lines.append("")
        lines.append("Identifiability flags:" if self.flags else "Identifiability flags: none")
        lines += [f"  ! {f}" for f in self.flags]
        if self.notes:
            lines.append("Notes:")
            lines += [f"  - {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def _finite_or_null(obj):
    if isinstance(obj, dict):
        return {k: _finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite_or_null(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def _g(v) -> str:
    if v is None or not np.isfinite(v):
        return "nan" if v is None or np.isnan(v) else ("inf" if v > 0 else "-inf")
    return f"{v:.4g}"


def format_interval(pair) -> str:
    """[lo, hi] with open ends as (-inf or inf); — for none."""
    if pair is None:
        return "—"
    lo, hi = pair
    left = "(-inf" if lo == -np.inf else f"[{_g(lo)}"
    right = "inf)" if hi == np.inf else f"{_g(hi)}]"
    return f"{left}, {right}"


def _inputs(runs=None, **columns):
    """LawInputs and per-run groups (None when the source has none)."""
    if runs is None:
        return LawInputs.of(columns["D"], columns["W"], columns["N"], columns.get("T", np.nan)), None
    if isinstance(runs, LawInputs):
        return runs, None
    runs = load_runs(runs)
    return LawInputs.from_runs(runs), runs.group


def predict_with(law, values: dict, runs=None, **columns) -> np.ndarray:
    law = get_law(law)
    x = runs if isinstance(runs, LawInputs) else _inputs(runs, **columns)[0]
    with np.errstate(all="ignore"):
        return np.asarray(law(x, **values), dtype=float) * np.ones_like(x.D)
