"""Committed report text against regenerated text, number by number within stated tolerances:
the tests of committed studies whose fits' last bits move with the CPU use it."""
from __future__ import annotations

import csv
import re

# Committed text must be identical on any x86-64 machine, but the fits' last bits depend on the
# CPU's floating point (FMA, vector width, BLAS kernels). The report rounds to what the data
# support; this comparison allows, per printed number, 2 units of its last printed digit or
# 1% of its value (whichever is larger). Ends of bootstrap intervals (table columns named
# "bootstrap", and bracketed intervals in sentences that say they come from "bootstrap draws")
# are percentiles of refits that land on machine-dependent points of flat directions: they may
# differ by up to 25% (their Monte Carlo error at 1000 refits is of that order for weakly
# identified parameters). Ends of profile-likelihood intervals in tables (numbers in [ ]) may
# differ by up to 10%: on a multimodal fit whether a profile point's refit finds the deeper basin
# can turn on the last bits (the paper's depth_softplus, α's lower end: 0.0912 or 0.0869 when the
# 30 losses are perturbed by 1e-12 relative). Every word, every table cell's text and the number
# of numbers must match exactly.
REL_TOL, DIGIT_UNITS, BOOTSTRAP_REL_TOL, INTERVAL_REL_TOL = 0.01, 2, 0.25, 0.10
_NUMBER = re.compile(r"[-+−]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _unit(token: str) -> float:
    mantissa, _, exp = token.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 10.0 ** (-decimals + (int(exp) if exp else 0))


def _value(token: str) -> float:
    return float(token.replace("−", "-"))


def _close(a: str, b: str, rel: float, bracket_rel: float | None = None) -> bool:
    """Same words, same count of numbers, each within tolerance; numbers inside [ ] within
    ``bracket_rel`` when given (interval ends)."""
    a_num, b_num = list(_NUMBER.finditer(a)), list(_NUMBER.finditer(b))
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b) or len(a_num) != len(b_num):
        return False
    for x, y in zip(a_num, b_num):
        inside = bracket_rel is not None and a.rfind("[", 0, x.start()) > a.rfind("]", 0, x.start())
        tol = bracket_rel if inside else rel
        vx, vy = _value(x.group()), _value(y.group())
        if abs(vx - vy) > max(tol * abs(vx), DIGIT_UNITS * _unit(x.group())) + 1e-12:
            return False
    return True


def _cells(line: str):
    """A table row's cells (Markdown, LaTeX or CSV), or None for other lines."""
    if line.startswith("|"):
        return [c.strip() for c in line.strip().strip("|").split("|")]
    if line.rstrip().endswith("\\\\") and " & " in line:
        return [c.strip() for c in line.rstrip()[:-2].split(" & ")]
    return None


def text_differences(expected: str, actual: str, csv_file: bool = False,
                     bootstrap_columns: tuple = (), interval_columns: tuple = ()) -> list[str]:
    """Lines where ``actual`` differs from ``expected`` beyond the stated tolerances;
    ``bootstrap_columns`` names columns that hold bootstrap interval ends without saying so in
    their header (gadre.csv's ci95_low, ci95_high), ``interval_columns`` those that hold profile
    interval ends (a study's laws.csv ci_lo, ci_hi: the numbers its report.md prints in [ ])."""
    diffs = []
    a_lines, b_lines = expected.splitlines(), actual.splitlines()
    if len(a_lines) != len(b_lines):
        return [f"{len(b_lines)} lines instead of {len(a_lines)}"]
    header = next(csv.reader([a_lines[0]])) if csv_file and a_lines else []
    for i, (a, b) in enumerate(zip(a_lines, b_lines), 1):
        cells_a = next(csv.reader([a])) if csv_file else _cells(a)
        if cells_a is not None and not csv_file and i < len(a_lines) and (
                a_lines[i].startswith("|---") or (i > 1 and a_lines[i - 2].strip() == r"\toprule")):
            header = cells_a
        if a == b:
            continue
        cells_b = next(csv.reader([b])) if csv_file else _cells(b)
        if cells_a is not None and cells_b is not None and len(cells_a) == len(cells_b) == len(header):
            ok = all(_close(x, y, BOOTSTRAP_REL_TOL, None) if "bootstrap" in h or h in bootstrap_columns
                     else _close(x, y, INTERVAL_REL_TOL, None) if h in interval_columns
                     else _close(x, y, REL_TOL, INTERVAL_REL_TOL)
                     for x, y, h in zip(cells_a, cells_b, header))
        else:  # a sentence: interval ends it says come from bootstrap draws get their tolerance
            ok = _close(a, b, REL_TOL, BOOTSTRAP_REL_TOL if "bootstrap draws" in a else None)
        if not ok:
            diffs.append(f"line {i}:\n  committed: {a}\n  fresh:     {b}")
    return diffs
