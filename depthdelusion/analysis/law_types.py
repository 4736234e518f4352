"""What a scaling law is: its parameters (:class:`Param`), its inputs (:class:`LawInputs`) and
the named law (:class:`Law`). The registry and the laws themselves are :mod:`.laws`; the fitting
engine needs only these types."""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

INF = math.inf


class _Symbol(str):
    """A parameter's symbol standing in for its value in a format string ("{kappa:.3g}" → κ)."""

    def __format__(self, spec: str) -> str:
        return str(self)


@dataclass(frozen=True)
class Param:
    """One law parameter: name, range of starting values, log-space flag, and physical domain
    ``bounds`` (enforced by the fit; a parameter that ends on a bound is flagged)."""

    name: str
    init: tuple[float, float]
    log: bool = False
    bounds: tuple[float, float] = (-INF, INF)
    doc: str = ""
    symbol: str = ""  # how text writes it (e.g. "κ"); the name when empty

    @property
    def shown(self) -> str:
        return self.symbol or self.name

    def __post_init__(self):
        lo, hi = self.init
        if not lo <= hi:
            raise ValueError(f"parameter {self.name!r}: init range {self.init} must have lo <= hi")
        if self.log and lo <= 0:
            raise ValueError(f"parameter {self.name!r}: a log-space parameter needs a positive init range")
        b0, b1 = self.bounds
        if not b0 <= lo <= hi <= b1:
            raise ValueError(f"parameter {self.name!r}: init range {self.init} must lie within its "
                             f"bounds {self.bounds}")


@dataclass(frozen=True)
class LawInputs:
    """Law inputs as float arrays: D (layers), W (width), N (parameters), T (tokens; NaN if unknown)."""

    D: np.ndarray
    W: np.ndarray
    N: np.ndarray
    T: np.ndarray
    # per column: (distinct values, index back to the rows), or None where it would not pay
    _distinct: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def power(self, column: str, exponent):
        """``column ** exponent`` ("D", "W", "N" or "T"; exponent a scalar or (M, 1) column).
        Where a 1-D column repeats its values (a run's checkpoints share D, W and N; runs share
        token budgets) the power is taken once per distinct value and spread back by index: each
        element is the same operation on the same two numbers, so the same bits, for a fraction
        of the powers (measured: 3.6× on a (2,000 × 220) Gemstones batch)."""
        values = getattr(self, column)
        if column not in self._distinct:
            self._distinct[column] = _distinct_values(values)
        split = self._distinct[column]
        e = np.asarray(exponent)
        if split is None or not (e.ndim == 0 or (e.ndim == 2 and e.shape[1] == 1)):
            return values ** exponent
        distinct, index = split
        return (distinct ** exponent)[..., index]

    @classmethod
    def from_runs(cls, runs) -> "LawInputs":
        return cls(np.asarray(runs.depth, float), np.asarray(runs.width, float),
                   np.asarray(runs.params, float), np.asarray(runs.tokens, float))

    @classmethod
    def of(cls, D, W, N, T=np.nan) -> "LawInputs":
        D, W, N, T = np.broadcast_arrays(*(np.asarray(v, float) for v in (D, W, N, T)))
        return cls(D, W, N, T)

    def take(self, idx) -> "LawInputs":
        return LawInputs(self.D[idx], self.W[idx], self.N[idx], self.T[idx])


def _distinct_values(values) -> tuple[np.ndarray, np.ndarray] | None:
    """(distinct values, index) of a 1-D float array with at most half as many distinct values
    as rows; else None (the gather would cost about what it saves)."""
    if not isinstance(values, np.ndarray) or values.ndim != 1 or values.dtype != np.float64 or len(values) < 8:
        return None
    distinct, index = np.unique(values, return_inverse=True)
    return (distinct, index) if 2 * len(distinct) <= len(values) else None


@dataclass(frozen=True)
class Roles:
    """What a law's parameters mean, declared so that readers of a fit (the verdicts, where a
    kink acts, the report) ask the law instead of reading parameter names. ``penalty``: the
    parameter whose 0 turns the law into its shape-agnostic baseline (the paper's λ). ``kink``:
    where the penalty switches on, the parameter not identified when the penalty is 0 (the
    nuisance of the penalty's test; "" when the law has none or fixes it). ``d_crit(W, **values)``:
    the critical depth in layers, taking the law's parameters it names (None: the law has no
    critical depth), and ``d_crit_text`` its formula as a format string over the values (e.g.
    ``"{kappa:.3g}·ln W"``). ``breaks(x)``: per row, the value of ``kink`` at which the penalty
    starts to act on it (a break in model size: the row's N); the objective bends at each, so
    the search also tries the kink at every one (None: no such scan). ``width_exponent``: the
    parameter by which the penalty falls with width, W^−γ (the paper's γ; "" when none).
    ``capacity_exponent``: the exponent of the size term, N^−α (the paper's α; "" when none).
    ``d_crit_width_exponent``: the exponent of W in a power-law critical depth c·W^p (the
    paper's persistence exponent p; "" when D_crit is not of that form)."""

    penalty: str = ""
    kink: str = ""
    width_exponent: str = ""
    capacity_exponent: str = ""
    d_crit_width_exponent: str = ""
    d_crit: Callable | None = None
    d_crit_text: str = ""
    breaks: Callable | None = None


@dataclass(frozen=True)
class Law:
    """A named law. ``token_params`` are dropped (fixed so the term vanishes) when the runs'
    token counts are unknown or constant; ``needs_tokens`` laws then refuse to fit. ``roles``:
    what its parameters mean (:class:`Roles`), asked by the fit's readers."""

    name: str
    func: Callable
    params: tuple[Param, ...]
    formula: str = ""
    doc: str = ""
    source: str = "user"
    token_params: dict = field(default_factory=dict)
    needs_tokens: bool = False
    #: "kink" (a depth penalty with a critical depth), "smooth" (a shape penalty without one:
    #: the alternatives a critical depth must beat) or "" (no shape term)
    shape: str = ""
    roles: Roles = Roles()

    @property
    def penalty(self) -> str:
        return self.roles.penalty

    @property
    def kink(self) -> str:
        return self.roles.kink

    @property
    def param_names(self) -> list[str]:
        return [p.name for p in self.params]

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise ValueError(f"law {self.name!r} has no parameter {name!r}; parameters: {self.param_names}")

    def __call__(self, x: LawInputs, **values) -> np.ndarray:
        return self.func(x, **values)

    @property
    def has_critical_depth(self) -> bool:
        return self.roles.d_crit is not None

    @property
    def d_crit_params(self) -> tuple[str, ...]:
        """The parameters D_crit depends on (those ``d_crit`` names), () without one."""
        d_crit = self.roles.d_crit
        return () if d_crit is None else tuple(inspect.signature(d_crit).parameters)[1:]

    def shown(self, name: str) -> str:
        """How text writes parameter ``name`` (its symbol, e.g. κ; else its name)."""
        return self.param(name).shown if name in self.param_names else name

    def critical_depth(self, values: dict, width) -> np.ndarray:
        """D_crit(W) in layers at the law's parameter ``values`` (fixed ones included)."""
        if self.roles.d_crit is None:
            raise ValueError(f"law {self.name!r} has no critical depth (parameters: "
                             f"{', '.join(self.param_names)}); fit a law that declares one (Roles(d_crit=...))")
        names = self.d_crit_params
        missing = [n for n in names if n not in values]
        if missing:
            raise ValueError(f"law {self.name!r}: D_crit needs {', '.join(missing)}, not among the "
                             f"values given ({', '.join(sorted(values))})")
        return np.asarray(self.roles.d_crit(np.asarray(width, float), **{n: values[n] for n in names}), float)

    def critical_depth_formula(self) -> str:
        """"D_crit = κ·ln W": the declared formula with the parameters' symbols."""
        return self.critical_depth_text({n: _Symbol(self.shown(n)) for n in self.d_crit_params})

    def critical_depth_text(self, values: dict) -> str:
        """"D_crit = 4.6·ln W": the declared formula at ``values`` (the law's name if none)."""
        return "D_crit = " + (self.roles.d_crit_text.format(**values) if self.roles.d_crit_text
                              else f"D_crit(W) of {self.name}")
