"""A fitted parameter's status (ok, at its bound, not identified), its strongest correlation and
its value as a table prints it: read from a fit's fields (a ``FitResult``), for the result's
summary, the report's tables and the studies. ``result`` is a ``FitResult`` throughout (not
imported: result.py imports this module)."""
from __future__ import annotations

import math

import numpy as np

#: |r| from which a parameter's summary row carries a note naming its partner (the fit's
#: identifiability flags name the pair from the same threshold): the Jacobian then sees mostly
#: one combination of the two, so their standard errors are the least trustworthy part of the row. Not a status:
#: each may still be pinned down (Chinchilla's A and α at r = +1.000 on Gemstones' 220 rows,
#: α's profile interval [0.246, 0.341]).
STRONG_CORR = 0.95

#: Per-parameter status (:func:`parameter_status`): a value a table may print as an estimate
#: only when it is ``OK``.
OK, AT_BOUND, NOT_IDENTIFIED = "ok", "at_bound", "not_identified"
#: An estimate beyond this (or a scale below its inverse) is where the solver stopped drifting
#: along a flat direction (the e^±700 clip), not a value the data chose.
DRIFT = 1e30


def parameter_status(result, name: str) -> str:
    """``"at_bound"`` (the optimum sits within tolerance of the parameter's physical bound,
    unless another parameter killed its term or, without a profile, a ridge lets it leave the
    bound at no cost: :func:`uncertainty.at_bound`),
    ``"not_identified"`` (a ridge of tied starts, an estimate drifted beyond ``DRIFT``, a profile
    interval open at an end; without a profile, an infinite or undefined standard error — a null
    direction of the Jacobian loading on it by more than ``uncertainty.NULL_LOADING`` — or a
    Jacobian interval open at an end) or ``"ok"``. A closed profile interval makes a parameter
    ``"ok"`` even where the Jacobian at the optimum is undefined for it (α and β on Gemstones,
    beside a kink penalty that acts on no shape): the profile refits every other parameter,
    the Jacobian is a local view. Tables print a value as an estimate only when it is
    ``"ok"``. A strong correlation with another parameter is not a
    status (:func:`correlation_note`): the data can bound each of two parameters that the
    Jacobian sees mostly as one combination."""
    if name not in result.params:
        raise ValueError(f"{name!r} is not a free parameter of this fit; free: {', '.join(result.params)}")
    if name in result.at_bound:
        return AT_BOUND
    v, se = result.params[name], result.stderr.get(name, math.nan)
    if name in getattr(result.starts, "ridge_params", []):
        return NOT_IDENTIFIED
    if not np.isfinite(v) or abs(v) >= DRIFT or (name in result.jacobian_log and 0 < v <= 1 / DRIFT):
        return NOT_IDENTIFIED
    prof = (result.ci_profile or {}).get(name)
    if prof is not None:  # refitting every other parameter, the profile outranks the local Jacobian
        return OK if np.isfinite(prof[0]) and np.isfinite(prof[1]) else NOT_IDENTIFIED
    if not np.isfinite(se) or not np.all(np.isfinite(result.ci_jacobian.get(name, (0.0, 0.0)))):
        return NOT_IDENTIFIED
    # an undefined covariance with a parameter the Jacobian does bound; a NaN beside a parameter
    # whose own standard error is infinite (a dead kink penalty) is that parameter's, not this one's
    row = _correlations(result, name)
    others = [nm for nm in result.params if nm != name]
    bounded = np.array([np.isfinite(result.stderr.get(nm, math.nan)) for nm in others], bool)
    if len(row) and np.any(np.isnan(row[bounded[:len(row)]])):
        return NOT_IDENTIFIED
    return OK


def correlation_note(result, name: str) -> str:
    """"r = +0.998 with B" for the parameter most correlated with ``name`` when |r| ≥
    ``STRONG_CORR``, else ""."""
    row = _correlations(result, name)
    others = [nm for nm in result.params if nm != name]
    if not len(row) or not np.any(np.abs(row) >= STRONG_CORR):
        return ""
    i = int(np.nanargmax(np.abs(row)))
    return f"r = {row[i]:+.3f} with {others[i]}"


def _correlations(result, name: str) -> np.ndarray:
    """``name``'s correlations with the other free parameters (in ``params`` order)."""
    j = list(result.params).index(name)
    if j >= len(result.correlation):
        return np.array([])
    return np.delete(np.asarray(result.correlation[j], float), j)


def number_text(v) -> str:
    if v is None or not np.isfinite(v):
        return "nan" if v is None or np.isnan(v) else ("inf" if v > 0 else "-inf")
    return f"{v:.4g}"


def bound_reached(result, name: str) -> float:
    """The bound a parameter at its bound sits on, nearer of the two (the value printed for it:
    the optimizer's last bits — 1.6e-30 on one CPU, 0 on another — are not an estimate)."""
    value = result.all_params[name]
    try:
        low, high = result.law.param(name).bounds
    except (ValueError, AttributeError):
        return value
    return low if not np.isfinite(high) or abs(value - low) <= abs(value - high) else high


def format_estimate(result, name: str, spec: str = ".4g") -> str:
    """A parameter's value as a table prints it: the number when its status is ok, "at bound b"
    (the bound itself) at a bound, "n.i." when not identified (never a number that looks like an
    estimate)."""
    status = parameter_status(result, name)
    v = result.params[name]
    if status == AT_BOUND:
        return f"at bound {format(bound_reached(result, name), spec)}"
    if status == NOT_IDENTIFIED:
        return "n.i."
    return format(v, spec) if np.isfinite(v) else number_text(v)
