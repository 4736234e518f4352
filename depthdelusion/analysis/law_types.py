"""What a scaling law is: its parameters (:class:`Param`), its inputs (:class:`LawInputs`) and
the named law (:class:`Law`). The registry and the laws themselves are :mod:`.laws`; the fitting
engine needs only these types."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

INF = math.inf


@dataclass(frozen=True)
class Param:
    """One law parameter: name, range of starting values, log-space flag, and physical domain
    ``bounds`` (enforced by the fit; a parameter that ends on a bound is flagged)."""

    name: str
    init: tuple[float, float]
    log: bool = False
    bounds: tuple[float, float] = (-INF, INF)
    doc: str = ""

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


@dataclass(frozen=True)
class Law:
    """A named law. ``token_params`` are dropped (fixed so the term vanishes) when the runs'
    token counts are unknown or constant; ``needs_tokens`` laws then refuse to fit."""

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
