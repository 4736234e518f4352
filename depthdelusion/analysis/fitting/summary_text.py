"""A fit's summary as text (``FitResult.summary()``, what ``depthdelusion fit`` prints): the law
and how it was fitted, the fit statistics, a table of parameters with each method's interval, the
legend, the identifiability flags, the row diagnostics and the notes. Computes nothing: every
number is a field or a view of the result. ``result`` is a ``FitResult`` throughout (not imported:
result.py imports this module)."""
from __future__ import annotations

import numpy as np

from ..formats.interval_text import interval_text, one_sided_text
from .problem import HUBER_THRESHOLD, SUPPORTED_DECADES, SUPPORTED_WIDTHS
from .status import STRONG_CORR, bound_reached, correlation_note, format_estimate, number_text

#: What each method minimises, for summaries and reports.
METHOD_DESCRIPTIONS = {
    "lm": "least squares on loss residuals (nats), bounded Levenberg–Marquardt",
    "huber": f"Huber (threshold {HUBER_THRESHOLD:g}) on log-loss residuals, bounded Levenberg–Marquardt",
    "asymmetric": "asymmetric squares on loss residuals (nats), overestimates weighted more (see "
                  "notes): a lower envelope, not the mean; bounded Levenberg–Marquardt",
}

STATUS_LEGEND = (
    "at bound: the optimum is on the parameter's physical bound (the data want it beyond); n.i.: "
    "not identified (a ridge, a drifted estimate, an open profile interval, or without a profile "
    "an infinite or undefined standard error or an open Jacobian interval): no estimate is printed; "
    f"note r = … with X: |r| ≥ {STRONG_CORR:g}, the Jacobian sees mostly a combination of the two "
    "(its standard error is then the least reliable; the profile and bootstrap intervals say what "
    "the data bound).")


def fit_summary(result) -> str:
    """The readable summary of ``result``: header, parameter table, legend, flags, notes."""
    head, rows = _parameter_table(result)
    return "\n".join([*_header(result), "", *_aligned(head, rows), STATUS_LEGEND,
                      _interval_legend(result), "", *_flags_and_notes(result)])


def _rows_kept(result) -> str:
    """The rows kept, " (kept 20 of 30 rows where ...; 2 outlying rows dropped
    (--drop-outliers))", or "" when the table's rows were not selected."""
    selection = result.selection
    if selection.get("rows_read") is None:
        return ""
    conditions = ([selection["where"]] if selection.get("where") else []) + (
        [f"group == {selection['group']}"] if selection.get("group") else []) + (
        [f"{selection['by']} == {selection['value']}"] if selection.get("by") else [])
    where = f" where {' and '.join(conditions)}" if conditions else ""
    dropped = (f"; {len(selection['dropped'])} outlying rows dropped (--drop-outliers)"
               if selection.get("dropped") else "")
    return f" (kept {result.n} of {selection['rows_read']} rows{where}{dropped})"


def _header(result) -> list[str]:
    """The law, the method and the data, the fit statistics and the starts."""
    readings = "".join(f"; {v}" for v in result.column_readings.values())
    offsets = (f"; one offset E per group ({', '.join(map(str, result.offset_groups))})"
               if result.offset_groups is not None else "")
    search = f"; search: {result.search}" if result.search else ""
    return [
        f"Law {result.law.name!r}: L = {result.law.formula}{readings}",
        f"Method: {METHOD_DESCRIPTIONS[result.method]}; {result.n} runs{_rows_kept(result)} "
        f"({result.source}); {result.k} free parameters{offsets}{search}",
        f"R² = {result.r2:.4f}   RMSE = {result.rmse:.4f} nats   leave-one-out RMSE = "
        f"{result.loo_rmse:.4f} nats",
        f"AIC = {result.aic:.2f}   AICc = {result.aicc:.2f}   BIC = {result.bic:.2f}   "
        f"condition number = {result.condition_number:.3g}",
        _starts_line(result.starts),
    ]


def _starts_line(starts) -> str:
    """How many starts reached the best optimum (or that a profile found it), and the others."""
    if getattr(starts, "found_by_profile", ""):
        line = (f"Starts: none of {starts.n_starts} reached the best optimum; a profile found it "
                "(see the flags)")
    else:
        line = f"Starts: {starts.n_at_best}/{starts.n_starts} reached the best optimum"
    if len(starts.local_optima) > 1:
        line += ("; other local optima (objective): "
                 + ", ".join(f"{v:.4g}" for v in starts.local_optima[1:6]))
    return line


def _parameter_table(result) -> tuple[list, list]:
    """(head, rows): a row per free parameter (value, standard error, each method's interval,
    its correlation note), then a row per fixed one; the note column only when a row has one."""
    cols = ["95% CI Jacobian", "95% CI profile",
            f"95% CI bootstrap ({result.n_bootstrap})" if result.ci_bootstrap else "95% CI bootstrap"]
    rows = [_free_row(result, name) for name in result.params]
    for name, value in result.fixed.items():
        shown = f"at bound {number_text(bound_reached(result, name))}" if name in result.at_bound else number_text(value)
        rows.append([name, shown, "(fixed)", "", "", "", ""])
    head = ["parameter", "value", "std.err", *cols, "note"]
    if not any(r[-1] for r in rows):
        return head[:-1], [r[:-1] for r in rows]
    return head, rows


def _free_row(result, name: str) -> list:
    bounds = result.bounds.get(name, (-np.inf, np.inf))
    jac = one_sided_text(result.ci_jacobian[name], bounds) + (" log" if name in result.jacobian_log else "")
    prof = (one_sided_text(result.ci_profile[name], bounds)
            if result.ci_profile and name in result.ci_profile else "—")
    boot = interval_text(result.ci_bootstrap[name]) if result.ci_bootstrap else "—"
    return [name, format_estimate(result, name), number_text(result.stderr[name]), jac, prof, boot,
            correlation_note(result, name)]


def _aligned(head: list, rows: list) -> list[str]:
    """The table's lines: columns padded to their widest cell (value and std.err to the
    right), the head underlined."""
    width = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]

    def line(r):
        return "  ".join(str(c).rjust(w) if i in (1, 2) else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(r, width))).rstrip()
    return [line(head), "-" * len(line(head)), *map(line, rows)]


def _interval_legend(result) -> str:
    return ("Jacobian CI: from the column-scaled Jacobian; 'log' = computed in log space "
            "(positive scale). Profile CI: " + (result.profile_statistic or "not computed")
            + "; unbounded = not bounded by the data. Bootstrap: " + (result.bootstrap_scheme or "none")
            + ". An interval open at an end (not closed by the data, or only beyond "
            f"{SUPPORTED_DECADES} decades / {SUPPORTED_WIDTHS:g} widths past the parameter's "
            "start range) is '≥ x' or '≤ x'; open at both (or open and reaching its bound): n.i.")


def _flags_and_notes(result) -> list[str]:
    lines = ["Identifiability flags:" if result.flags else "Identifiability flags: none"]
    lines += [f"  ! {f}" for f in result.flags]
    if result.diagnostics is not None:
        lines += result.diagnostics.summary_lines()
    profile_notes = result.profile_notes
    if result.notes or profile_notes:
        lines.append("Notes:")
        lines += [f"  - {n}" for n in result.notes]
        lines += [f"  - profile: {n}" for n in profile_notes]
    return lines
