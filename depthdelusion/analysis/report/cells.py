"""The report's cells: each kind of number rounded once, to the digits the data support
(estimates, intervals with their open ends, notes), for its tables (:mod:`.tables`) and its
prose (:mod:`.markdown`) alike."""
from __future__ import annotations

import re

import numpy as np

from ..fitting.result import DRIFT, OK, bound_reached, parameter_status
from ..formats.interval_text import end_text, interval_text

SPAN_LIMIT = 1e3  # a scale parameter whose interval spans more than this factor is not determined

#: The report's open interval ends and infinite numbers: its tables' notation, explained in
#: report.md's notes (the terminal writes "unbounded": interval_text.OPEN_ENDS).
REPORT_OPEN_ENDS = ("−∞", "∞")


def fmt(v, spec=".4g") -> str:
    """A number to ``spec``; "—" for None/NaN, "∞"/"−∞"; a signed zero as "0"."""
    return end_text(v, spec, REPORT_OPEN_ENDS)


def interval(ci, spec=".3g") -> str:
    return interval_text(ci, spec, REPORT_OPEN_ENDS)


def _is_scale(f, name: str) -> bool:
    try:
        return bool(f.law.param(name).log)
    except (ValueError, AttributeError):
        return False


def _drift_unbounded(ci) -> tuple:
    """An end beyond ``DRIFT`` (set by how far the optimiser drifted along a flat direction) as
    unbounded."""
    return tuple(np.inf if c > DRIFT else -np.inf if c < -DRIFT else float(c) for c in ci)


def supported_ends(f, name: str, ci) -> tuple[float, float]:
    """An interval's ends as numbers the data support: an end beyond ``DRIFT`` is unbounded
    (`_drift_unbounded`), and so is a scale parameter's upper end beyond ``SPAN_LIMIT``× its
    lower end (set by numerical flatness; its digits would differ between machines)."""
    lo, hi = _drift_unbounded(ci)
    if lo > 0 and np.isfinite(hi) and hi / lo > SPAN_LIMIT and _is_scale(f, name):
        hi = np.inf
    return lo, hi


def param_interval(f, name: str, ci, spec=".3g") -> str:
    """An interval as the data support it: a scale parameter's interval spanning more than
    ``SPAN_LIMIT``× (its ends are then set by numerical flatness, not by the data) is printed as
    such instead of as two machine-dependent digits, and another positive parameter's upper end
    beyond ``SPAN_LIMIT``× its lower end as "> SPAN_LIMIT × lower"; an end beyond ``DRIFT`` is
    printed as unbounded (`_drift_unbounded`); an interval with an open end as `fit` writes it:
    "≥ lo", "≤ hi", or "n.i." where the closed end is the parameter's own bound (issue 63 item 2:
    an open end is never printed as a number, nor as an interval reaching ∞)."""
    if ci:
        ci = _drift_unbounded(ci)
    if ci and not (np.isfinite(ci[0]) and np.isfinite(ci[1])):
        return _open_interval_text(f, name, ci, spec)
    if ci and ci[0] > 0 and np.isfinite(ci[1]) and ci[1] / ci[0] > SPAN_LIMIT:
        if _is_scale(f, name):
            return f"[spans > {SPAN_LIMIT:.0e}×]".replace("1e+03", "10³")
        return f"[{fmt(ci[0], spec)}, > {fmt(SPAN_LIMIT * ci[0], spec)}]"  # the upper end: flatness
    return interval(ci, spec)

_STALLED_REFITS = re.compile(r"(\d+) of (\d+) bootstrap refits (.*)")


def is_numerical_note(note: str) -> bool:
    """A note on how the numerics went (bootstrap refits left out at the iteration cap), not on
    the data or the design."""
    return bool(_STALLED_REFITS.match(note))


def rounded_note(note: str) -> str:
    """A count of stalled bootstrap refits depends on the CPU's last bits: give it as a share
    rounded to one significant digit."""
    m = _STALLED_REFITS.match(note)
    if not m:
        return note
    share = int(m.group(1)) / max(int(m.group(2)), 1)
    return f"about {float(f'{share:.1g}'):.1%} of {m.group(2)} bootstrap refits {m.group(3)}".replace(".0%", "%")


def value(f, name: str, spec=".3g") -> str:
    """The point estimate; "at bound v" on a bound; "n.i." (not identified) where any point
    would be arbitrary."""
    v = f.all_params.get(name)
    if name in f.params and parameter_status(f, name) != OK:
        return f"at bound {fmt(bound_reached(f, name), spec)}" if parameter_status(f, name) == "at_bound" else NOT_IDENTIFIED
    return fmt(v, spec)


NOT_IDENTIFIED = "n.i."


def is_not_identified(f, name: str) -> bool:
    """The estimate prints "n.i." (:func:`value`): then no interval is printed beside it either,
    since a bootstrap of a ridge can return one value over and over (a zero-width interval)."""
    return name in f.params and parameter_status(f, name) not in (OK, "at_bound")


def _not_identified_text(f, name: str, ci, spec) -> str:
    """"n.i.", with the one end the data close ("n.i. (≥ 0.39)") when exactly one end is finite
    and off the parameter's bound: a one-sided bound says something, two finite ends beside
    "n.i." (a zero-width bootstrap of a ridge) would read as an estimate."""
    lo, hi = _drift_unbounded(ci) if ci else (-np.inf, np.inf)
    low_bound, high_bound = _bounds(f, name)
    if np.isfinite(lo) and not np.isfinite(hi) and lo > low_bound:
        return f"{NOT_IDENTIFIED} (≥ {fmt(lo, spec)})"
    if np.isfinite(hi) and not np.isfinite(lo) and hi < high_bound:
        return f"{NOT_IDENTIFIED} (≤ {fmt(hi, spec)})"
    return NOT_IDENTIFIED


def _open_interval_text(f, name: str, ci, spec) -> str:
    lo, hi = ci
    low_bound, high_bound = _bounds(f, name)
    if (not np.isfinite(hi) and (not np.isfinite(lo) or lo <= low_bound)) or (not np.isfinite(lo) and hi >= high_bound):
        return NOT_IDENTIFIED
    return f"≥ {fmt(lo, spec)}" if not np.isfinite(hi) else f"≤ {fmt(hi, spec)}"


def _bounds(f, name: str) -> tuple:
    try:
        return f.law.param(name).bounds
    except (ValueError, AttributeError):
        return -np.inf, np.inf


def estimate_with_interval(f, name: str, estimate: str, ci, spec=".4g") -> str:
    """A parameter's estimate text (``fitting.status.format_estimate``'s) with its interval: "n.i."
    with at most the one end the data close ("n.i. (≥ 10.4)"), an estimate whose interval is open
    on both sides as "at bound 0 (interval n.i.)", else "estimate [lo, hi]"."""
    if is_not_identified(f, name):
        return _not_identified_text(f, name, ci, spec)
    shown = param_interval(f, name, ci, spec) if ci else ""
    return f"{estimate} (interval {NOT_IDENTIFIED})" if shown == NOT_IDENTIFIED else f"{estimate} {shown}".rstrip()


def estimate_cell(f, name: str, ci, spec=".2g") -> str:
    """The estimate and its interval in one cell ("1.2 [0.9, 1.6]"); for a parameter not
    identified, "n.i." and at most the one end the data close."""
    if is_not_identified(f, name):
        return _not_identified_text(f, name, ci, spec)
    shown = param_interval(f, name, ci, spec)
    return f"{value(f, name)} (interval {NOT_IDENTIFIED})" if shown == NOT_IDENTIFIED else f"{value(f, name)} {shown}"


def interval_cell(f, name: str, ci, spec=".3g") -> str:
    """An interval column's cell, "n.i." (and at most one closed end) for a parameter that is
    not identified."""
    return _not_identified_text(f, name, ci, spec) if is_not_identified(f, name) else param_interval(f, name, ci, spec)


def profile_ci(f, name):
    return (getattr(f, "ci_profile", None) or {}).get(name)


def millions(n) -> str:
    """A parameter count in millions, to 3 significant digits (0.123, 12.3, 123, 1234)."""
    m = n / 1e6
    return fmt(m, ".0f") if abs(m) >= 100 else fmt(m, ".3g")


def shape_unit(constraint: str) -> str:
    return "C (FLOPs)" if constraint == "compute" else "N (params)"
