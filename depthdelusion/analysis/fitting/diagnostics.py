"""What a fit's rows say about it: outlying and influential rows, and groups pooled in silence.

Per row, at the optimum θ̂ of a fit:

- residual: observed − fitted loss (nats);
- robust z: the working residual (loss for least squares, log-loss for Huber) at a fit the
  outliers cannot pull (:mod:`.robust_fit`: the Huber fit itself, or a Huber refit with
  δ = 1.345·σ̂), over 1.4826·MAD of those residuals, the median absolute deviation from their
  median scaled to σ under Gaussian noise (so wild rows inflate neither the fit nor the scale
  that judge them);
- leverage hᵢᵢ: the diagonal of the hat matrix of the (IRLS-weighted, column-scaled) Jacobian
  at θ̂, from its thin pivoted QR (Σ_j Qᵢⱼ² over the rank the data determine): cost O(n·k²),
  no n × n matrix;
- Cook's distance: wᵢ eᵢ² hᵢᵢ / (p s² (1 − hᵢᵢ)²), s² = Σ w e² / (n − p), p the rank — the
  linearised change of every prediction when row i is left out.

Rows with |robust z| above a threshold (default 4) are outliers: the fit is refitted without
them (weight 0, warm-started from θ̂ and from the fit's best cold start; no intervals) so the
user sees how far they move the parameters. The fit itself keeps every row.

A text column with 2–50 distinct values that the fit pooled is named with its residuals per
value and a Kruskal–Wallis test of whether they differ (rank-based, so robust to the outliers
above; it assumes rows are independent and ignores that the residuals come from one fit).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..table.row_filter import grouping_columns
from ..formats.row_keys import row_key, row_keys
from .leverage import leverage
from .options import OUTLIER_Z
from .robust import MAD_TO_SIGMA, mad_scale, robust_residuals
from .solver import irls_weights

#: Rows named in a summary line, then a count.
NAMED_ROWS = 10


#: Kruskal–Wallis p-value below which residuals "differ between groups beyond noise".
GROUP_P = 0.01
#: Cold starts besides θ̂ for the refit without outliers (the best grid start: a second chance
#: should the outliers have held θ̂ in another basin; each costs about 7 warm refits).
REFIT_COLD_STARTS = 1


@dataclass(frozen=True)
class RowDiagnostics:
    """Per-row diagnostics of a fit (arrays in row order) and its refit without outliers."""

    names: list
    residual: np.ndarray  # observed − fitted, nats
    robust_z: np.ndarray
    leverage: np.ndarray
    cooks_distance: np.ndarray
    scale: float  # 1.4826·MAD of the working residuals at the robust reference
    threshold: float
    outlier_rows: list = field(default_factory=list)  # 0-based row indices, by |z| descending
    without_outliers: dict | None = None  # {"params": {...}, "n": k}
    moved: str = ""  # one sentence on how the parameters moved without the outliers
    working: str = "loss residuals (nats)"
    judged_by: str = ""  # the fit the robust z is measured from (:mod:`.robust_fit`)

    @property
    def outliers(self) -> list[str]:
        """The outlying rows by |z| descending, each as :func:`row_key` names it."""
        return [row_key(self.names[i], i) for i in self.outlier_rows]

    @property
    def outlier_mask(self) -> np.ndarray:
        return np.abs(self.robust_z) > self.threshold

    def to_dict(self, rows=None) -> dict:
        """The diagnostics as JSON data; a per-row array as ``rows(names, array)`` (the
        :class:`~..formats.json_text.Rows` a writer streams), a ``{row key: value}`` dict by
        default (:func:`row_key`: label and row number, so repeated labels stay apart)."""
        keys = row_keys(self.names)

        def by_row(a):
            return rows(keys, a) if rows else {n: float(v) for n, v in zip(keys, a)}

        return {"threshold": self.threshold, "scale": self.scale,
                "scale_method": f"{MAD_TO_SIGMA}·MAD of the {self.working}",
                "judged_by": self.judged_by,
                "robust_z": by_row(self.robust_z), "leverage": by_row(self.leverage),
                "cooks_distance": by_row(self.cooks_distance), "moved": self.moved}

    def summary_lines(self) -> list[str]:
        lines = []
        head = (f"Outlying rows (|robust z| > {self.threshold:g}; z = residual / ({MAD_TO_SIGMA}·MAD) "
                f"of the {self.working}" + (f" of {self.judged_by}" if self.judged_by else "") + ")")
        if self.outliers:
            shown = []
            for i in self.outlier_rows[:NAMED_ROWS]:
                shown.append(f"{self.names[i]} (row {i + 1}, z = {self.robust_z[i]:+.1f})")
            more = len(self.outliers) - NAMED_ROWS
            lines.append(f"{head}: {len(self.outliers)}: " + ", ".join(shown)
                         + (f" and {more} more" if more > 0 else ""))
            lines.append(f"  {self.moved}")
        else:
            lines.append(f"{head}: none (largest |z| {np.nanmax(np.abs(self.robust_z)):.1f})")
        if len(self.cooks_distance) and np.any(np.isfinite(self.cooks_distance)):
            i = int(np.nanargmax(self.cooks_distance))
            lines.append(f"Most influential row: {row_key(self.names[i], i)} (Cook's distance "
                         f"{self.cooks_distance[i]:.3g}, leverage {self.leverage[i]:.3g})")
        return lines


def robust_z(e) -> tuple[np.ndarray, float]:
    """(e / (1.4826·MAD), the scale). The MAD is about the median; when it is 0 (more than half
    the rows fitted exactly) the mean absolute deviation (×√(π/2)) stands in, and 0 stays 0."""
    e = np.asarray(e, float)
    ok = e[np.isfinite(e)]
    if not len(ok):
        return np.full_like(e, np.nan), math.nan
    med = np.median(ok)
    scale = mad_scale(ok)
    if scale <= 0:
        scale = math.sqrt(math.pi / 2) * float(np.mean(np.abs(ok - med)))
    if scale <= 0:
        return np.zeros_like(e), 0.0
    return e / scale, scale


def row_diagnostics(problem, theta, J, *, names, stderr: dict, cold_starts=None,
                    threshold: float = OUTLIER_Z, status: dict | None = None) -> RowDiagnostics:
    """Residuals, robust z, leverage and Cook's distance of every row at ``theta`` (J: the
    Jacobian of the working predictions there, (n, k)), and the refit without the rows whose
    |robust z| exceeds ``threshold`` (``stderr``: the fit's standard errors, to say how far the
    parameters moved)."""
    if not threshold > 0:
        raise ValueError(f"outlier threshold must be a positive robust z, got {threshold}")
    theta = np.asarray(theta, float)
    e = -problem.residuals(theta[None])[0]  # observed − fitted, working scale
    pred = problem.predict(theta)
    resid = problem.y - pred
    robust_e, judged_by = robust_residuals(problem, theta, cold_starts)
    z, scale = robust_z(robust_e)
    w = irls_weights(-e, problem.huber, problem.overestimate_weight)
    h, rank = leverage(J, w)
    n = len(e)
    with np.errstate(divide="ignore", invalid="ignore"):
        s2 = float(np.nansum(w * e ** 2)) / max(n - rank, 1)
        cook = np.where(h < 1 - 1e-12, w * e ** 2 * h / (max(rank, 1) * s2 * (1 - h) ** 2), np.inf)
    if not s2 > 0:
        cook = np.zeros(n)
    names = [str(v) for v in names]
    out_idx = np.flatnonzero(np.abs(z) > threshold)
    out_idx = out_idx[np.argsort(-np.abs(z[out_idx]), kind="stable")]
    without, moved = (_refit_without(problem, theta, out_idx, stderr, cold_starts, status) if len(out_idx)
                      else (None, ""))
    return RowDiagnostics(names=names, residual=resid, robust_z=z, leverage=h, cooks_distance=cook,
                          scale=scale, threshold=float(threshold),
                          outlier_rows=[int(i) for i in out_idx], without_outliers=without, moved=moved,
                          working="log-loss residuals" if problem.huber else "loss residuals (nats)",
                          judged_by=judged_by)


def _refit_without(problem, theta, out_idx, stderr: dict, cold_starts, status=None):
    n, k = len(problem.y), problem.k
    kept = n - len(out_idx)
    what = f"{len(out_idx)} outlying row{'s' if len(out_idx) > 1 else ''}"
    if kept <= k + 1:
        return None, (f"Not refitted without the {what}: {kept} rows would remain for {k} free "
                      "parameters")
    starts = [theta[None]]
    if cold_starts is not None and len(cold_starts):
        starts.append(np.asarray(cold_starts, float)[:REFIT_COLD_STARTS])
    starts = np.vstack(starts)
    weights = np.ones(n)
    weights[out_idx] = 0.0
    res = problem.solve(starts, np.broadcast_to(weights, (len(starts), n)))  # a view, not S × n numbers
    obj = np.where(np.isfinite(res.objective), res.objective, np.inf)
    if not np.isfinite(obj.min()):
        return None, f"The refit without the {what} failed (no start reached a finite objective)"
    best = res.theta[int(np.argmin(obj))]
    full, refit = problem.values(theta), problem.values(best)
    params = {nm: refit[nm] for nm in problem.names}
    return {"params": params, "n": kept}, movement_sentence(full, params, stderr, what, status)


def movement_sentence(before: dict, after: dict, stderr: dict, what: str,
                      status: dict | None = None) -> str:
    """One sentence: the parameters that moved by more than one standard error (or by more
    than 1% where the standard error is not finite), else that none did. Parameters at a bound
    or not identified in the full fit (``status``) are named, not compared: their estimates are
    not numbers to move."""
    moved, still = [], []
    skipped = [nm for nm in after if (status or {}).get(nm, "ok") != "ok"]
    for nm, v1 in after.items():
        if nm in skipped:
            continue
        v0, se = before[nm], stderr.get(nm, math.nan)
        if np.isfinite(se) and se > 0:
            size, unit = (v1 - v0) / se, "s.e."
            big = abs(size) > 1
        else:
            size = (v1 - v0) / abs(v0) * 100 if v0 else math.inf
            unit, big = "%", abs(size) > 1
        (moved if big else still).append((nm, v0, v1, size, unit))
    words = {"at_bound": "at a bound", "not_identified": "not identified"}
    tail_skip = (f" ({', '.join(f'{nm} {words.get(status[nm], status[nm])}' for nm in skipped)}"
                 " in the full fit, not compared)" if skipped else "")
    if not moved:
        worst = max(still, key=lambda m: abs(m[3]) if m[4] == "s.e." else 0, default=None)
        tail = f" (largest: {worst[0]}, {worst[3]:+.2f} s.e.)" if worst and worst[4] == "s.e." else ""
        return f"Without the {what} no parameter moves by more than one standard error{tail}{tail_skip}."
    parts = [f"{nm} {v0:.4g} → {v1:.4g} ({size:+.1f} {unit})" for nm, v0, v1, size, unit in moved]
    rest = f"; {', '.join(m[0] for m in still)} move less than one standard error" if still else ""
    return f"Without the {what}: {', '.join(parts)}{rest}{tail_skip}."


# --- groups pooled in silence ------------------------------------------------------------------


def pooled_groups(runs, residuals, *, offset_column: str | None = None) -> list[dict]:
    """For every grouping column the fit pooled (all but ``offset_column``): its values with
    rows and median residual, and a Kruskal–Wallis test of the residuals between them."""
    resid = np.asarray(residuals, float)
    found = []
    for col, labels in grouping_columns(runs).items():
        if col == offset_column:
            continue
        values = sorted(set(labels))
        per = {v: resid[(labels == v) & np.isfinite(resid)] for v in values}
        per = {v: r for v, r in per.items() if len(r)}
        if len(per) < 2:
            continue
        from scipy import stats  # here: importing scipy.stats costs a second of CPU

        try:
            h, p = stats.kruskal(*per.values())
        except ValueError:  # every residual equal
            h, p = 0.0, 1.0
        found.append({"column": col, "values": {v: {"rows": int(len(r)), "median_residual": float(np.median(r))}
                                                for v, r in per.items()},
                      "test": "Kruskal–Wallis", "statistic": float(h), "p": float(p),
                      "differ": bool(p < GROUP_P)})
    return found


def pooled_group_flag(item: dict) -> str:
    """The summary's sentence for one entry of :func:`pooled_groups`."""
    col, values = item["column"], item["values"]
    order = sorted(values, key=lambda v: -abs(values[v]["median_residual"]))
    shown = [f"{v}: {values[v]['rows']} row{'s' if values[v]['rows'] != 1 else ''}, median residual "
             f"{values[v]['median_residual']:+.3g} nats" for v in order[:8]]
    more = f" and {len(order) - 8} more" if len(order) > 8 else ""
    verdict = ("the residuals differ between them beyond noise" if item["differ"] else
               "the residuals do not differ between them beyond noise")
    how = ("--group VALUE for one, --by group for each side by side" if col == "group" else
           f"--where '{col} == VALUE' for one, --by {col} for each side by side")
    return (f"pooled groups: column {col!r} holds {len(values)} values fitted as one law "
            f"({'; '.join(shown)}{more}); {verdict} ({item['test']} H = {item['statistic']:.3g}, "
            f"p = {item['p']:.2g}, threshold {GROUP_P:g}; rows assumed independent); fit them "
            f"separately with {how}")


# --- the rows table ------------------------------------------------------------------------------

def group_labels(runs, result) -> np.ndarray:
    """Per-row labels to tell groups apart: the group column when it holds several values,
    else the first other text column the fit pooled (e.g. a dataset column), else the group
    column."""
    if len(set(runs.group)) > 1 or not result.pooled_groups:
        return np.asarray(runs.group, dtype=object)
    return grouping_columns(runs)[result.pooled_groups[0]["column"]]


#: rows.csv's columns (inputs the table lacks are left out).
ROW_COLUMNS = ("row", "name", "depth", "width", "params", "tokens", "loss", "fitted", "residual",
               "robust_z", "leverage", "cooks_distance", "outlier", "group")


def row_table(runs, result) -> tuple[list, list]:
    """(columns, rows) of the per-row diagnostics: row (1-based, as :func:`row_key` numbers it),
    name, the law's inputs the table has, loss,
    fitted, residual, robust z, leverage, Cook's distance, outlier (true/false), group."""
    d = result.diagnostics
    if d is None:
        raise ValueError("this fit has no row diagnostics: fit with diagnostics=True")
    inputs = [c for c in ("depth", "width", "params", "tokens") if runs.has(c)]
    columns = [c for c in ROW_COLUMNS if c not in ("depth", "width", "params", "tokens") or c in inputs]
    out = d.outlier_mask
    labels = group_labels(runs, result)
    rows = []
    for i in range(len(runs)):
        row = {"row": str(i + 1), "name": runs.name[i], "group": labels[i], "loss": _num(runs.loss[i]),
               "fitted": _num(result.predicted[i]), "residual": _num(d.residual[i]),
               "robust_z": _num(d.robust_z[i], 4), "leverage": _num(d.leverage[i], 4),
               "cooks_distance": _num(d.cooks_distance[i], 4), "outlier": str(bool(out[i])).lower()}
        for c in inputs:
            row[c] = _num(getattr(runs, c)[i])
        rows.append(row)
    return columns, rows


def _num(v, digits: int = 6) -> str:
    """Digits fixed here (not by the CSV writer), so the file is the same on any machine up to
    what the data supports."""
    v = float(v)
    if not np.isfinite(v):
        return "" if np.isnan(v) else ("inf" if v > 0 else "-inf")
    return f"{v:.{digits}g}"
