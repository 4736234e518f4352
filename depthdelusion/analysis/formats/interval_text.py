"""How an interval is written for a reader: the formatter of an interval's ends for the
terminal (``fit``, ``isoflop``, ``persistence`` summaries, a fit's flags) and the report's
tables, so that an open end reads the same there and is never ``None``, ``nan`` or ``inf``.
(The studies' t and bootstrap intervals, always finite, are still written by their own code.)"""
from __future__ import annotations

import math

#: How an open (infinite) end is written: the data do not bound the interval on that side.
UNBOUNDED = "unbounded"
#: (lower, upper) open ends for the terminal.
OPEN_ENDS = (UNBOUNDED, UNBOUNDED)
#: An end that is not a number (no interval on that side could be computed).
NO_NUMBER = "—"


def end_text(v, spec: str = ".4g", open_ends: tuple[str, str] = OPEN_ENDS) -> str:
    """One end: the number to ``spec`` (a signed zero as "0"), ``open_ends[0]`` / ``[1]`` for
    −inf / +inf, "—" for None or NaN."""
    if v is None or math.isnan(v):
        return NO_NUMBER
    if math.isinf(v):
        return open_ends[0] if v < 0 else open_ends[1]
    out = format(v, spec)
    zero = out.lstrip("-+") in ("0", "0.0", "0.00", "0.000", "0.0000")
    return "0" if zero and spec.endswith("g") else out


def interval_text(ci, spec: str = ".4g", open_ends: tuple[str, str] = OPEN_ENDS) -> str:
    """``[lo, hi]`` with each end as :func:`end_text` writes it; "—" when there is no interval."""
    if ci is None or len(ci) == 0:
        return NO_NUMBER
    lo, hi = ci
    return f"[{end_text(lo, spec, open_ends)}, {end_text(hi, spec, open_ends)}]"


#: A parameter's interval that the data close on neither side.
NOT_IDENTIFIED_TEXT = "n.i."


def one_sided_text(ci, bounds=(-math.inf, math.inf), spec: str = ".4g") -> str:
    """A parameter's interval as a reader should take it: "≥ lo" when only the upper end is open
    (infinite), "≤ hi" when only the lower one is, "n.i." when both are or when the one closed
    end is the parameter's own bound (``bounds``: the data then bound it on no side), else
    :func:`interval_text`'s "[lo, hi]" — never an open end printed as a number."""
    if ci is None or len(ci) == 0:
        return NO_NUMBER
    lo, hi = (math.nan if v is None else float(v) for v in ci)
    lo_open, hi_open = lo == -math.inf, hi == math.inf
    if (hi_open and (lo_open or lo <= bounds[0])) or (lo_open and hi >= bounds[1]):
        return NOT_IDENTIFIED_TEXT
    if hi_open:
        return f"≥ {end_text(lo, spec)}"
    if lo_open:
        return f"≤ {end_text(hi, spec)}"
    return interval_text(ci, spec)
