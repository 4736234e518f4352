"""Which columns a law needs: found by evaluating the law (an input it needs turns its
prediction non-finite when set to NaN), checked against a runs table with an error that says
how to map a missing column. (The column vocabulary itself is :mod:`.columns`.)"""
from __future__ import annotations

import math

import numpy as np

from ..laws import LawInputs, get_law, list_laws
from .columns import AMBIGUOUS, LAW_INPUTS, names_of

_PROBE = dict(D=np.array([4.0, 12.0, 48.0]), W=np.array([256.0, 512.0, 2048.0]),
              N=np.array([2e7, 8e7, 2e9]), T=np.array([1e9, 4e9, 4e10]))


def law_columns(law, *, with_tokens: bool = True) -> tuple[str, ...]:
    """The canonical columns ``law`` reads (loss always), found by evaluating it: an input it
    needs turns its prediction non-finite when set to NaN. ``with_tokens=False`` probes the
    law as fitted to runs whose tokens do not vary (its optional token term dropped)."""
    law = get_law(law)
    values = {}
    for p in law.params:
        lo, hi = p.init
        values[p.name] = math.sqrt(lo * hi) if p.log else (lo + hi) / 2
    if not with_tokens:
        values.update(law.token_params)

    def finite(**nan):
        cols = {k: np.full(3, np.nan) if k in nan else v for k, v in _PROBE.items()}
        with np.errstate(all="ignore"):
            try:
                out = np.asarray(law(LawInputs(**cols), **values), dtype=float)
            except (ValueError, TypeError, ArithmeticError):
                return False
        return bool(np.all(np.isfinite(out)))

    if not finite():  # the probe point is outside the law's domain: assume it needs everything
        needed = list(LAW_INPUTS)
    else:
        needed = [k for k in LAW_INPUTS if not finite(**{k: True})]
    if law.needs_tokens and "T" not in needed:
        needed.append("T")
    return tuple(LAW_INPUTS[k] for k in LAW_INPUTS if k in needed) + ("loss",)


def law_missing_columns(law, runs) -> list[str]:
    """Columns ``law`` needs that ``runs`` lacks (not known for every run); for tokens, also
    when they are known but do not vary and the law's token term cannot be dropped."""
    law = get_law(law)
    missing = [c for c in law_columns(law, with_tokens=runs.tokens_vary) if not runs.has(c)]
    if law.needs_tokens and "tokens" not in missing and not runs.tokens_vary:
        missing.append("tokens")
    return missing


def check_law_columns(law, runs) -> None:
    """Raise a ValueError naming the columns ``law`` needs and ``runs`` lacks, and how to map them."""
    law = get_law(law)
    missing = law_missing_columns(law, runs)
    if not missing:
        return
    what = []
    for c in missing:
        if c == "tokens" and runs.has("tokens"):
            what.append("per-run token counts that vary (they do not vary here)")
        else:
            what.append(f"{c} (read from: {names_of(c)})")
    hint = ""
    unread = [c for c in runs.unread_columns if c in AMBIGUOUS]
    if unread:
        hint = " " + " ".join(f"Column {c!r} is not read on its own ({AMBIGUOUS[c]}): map it, "
                              f"e.g. --columns {'tokens' if c == 'D' else 'loss'}={c}." for c in unread)
    raise ValueError(f"law {law.name!r} needs {', '.join(what)}, which {runs.source or 'the runs'} "
                     f"lack(s).{hint} Laws this table can fit: {', '.join(laws_for(runs)) or 'none'}")


def laws_for(runs) -> list[str]:
    """Names of the registered laws whose columns ``runs`` has."""
    return [law.name for law in list_laws() if not law_missing_columns(law, runs)]
