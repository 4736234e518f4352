"""Model shape from a fitted law: critical depth, compute-optimal shape, audit of published LLMs.

The optimum is found numerically, never from the paper's bookkeeping: for each budget the
fitted law is evaluated on a grid of integer depths D = 1..depth_max and log-spaced widths,
with a parabolic refinement in ln W around each depth's best width.

Units are the runs' own: ``param_count(D, W)`` is the N the law was fitted with (by default the
trainer's exact count, :func:`trainer_counts`, with the runs' vocabulary), and compute is
``C = flops_per_token(D, W) · T`` — by default 6·N_total (the Kaplan/Chinchilla convention), or
the trainer's ``flops_per_token`` (which adds attention scores and differs from 6·N; the
difference is stated). A law with its own fitted token term is solved at fixed compute with
T = C / flops_per_token(D, W) substituted. A law without one has no data term, so at fixed
compute it would put every FLOP into parameters: it is solved only at fixed N (= fixed tokens),
or at fixed compute with a data term the caller states explicitly (``token_term=(B, β)``).

A law whose depth penalty vanishes below D_crit has a *plateau* of optimal shapes: every
D ≤ D_crit(W) with the same N gives the same loss. We report the plateau's depth range and
take the deepest unpenalised shape as "the" optimum (the paper's D* = D_crit reading).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..fitting.result import FitResult, has_token_term
from ..laws import LawInputs, get_law
from ..reference import PAPER_KAPPA, ModelShapes, load_llm_shapes
from .consistency import blocks_plus_embeddings

PLATEAU_TOL = 1e-5  # nats: shapes within this of the minimum count as equally optimal
_PROBE_TOKENS = 1e10  # any finite T: at fixed N and T the token term is the same for every shape


@dataclass(frozen=True)
class Counts:
    """Vectorised N(D, W) and FLOPs per token, with the formulas they stand for."""

    params: Callable
    flops_per_token: Callable
    params_formula: str
    flops_formula: str


def _quadratic_in_width(fn, depth_values=(1, 2), widths=(192.0, 384.0, 576.0)):
    """fn(D, W) as D·(a2W² + a1W + a0) + (b2W² + b1W + b0), from exact evaluations (the trainer's
    counts are of that form; widths are multiples of 192 so SwiGLU's rounded F is exact too)."""
    rows = []
    for d in depth_values:
        vals = [float(fn(d, w)) for w in widths]
        rows.append(np.polyfit(np.array(widths), np.array(vals), 2))
    per_layer = rows[1] - rows[0]
    base = rows[0] - per_layer
    return lambda D, W: (np.asarray(D, float) * np.polyval(per_layer, np.asarray(W, float))
                         + np.polyval(base, np.asarray(W, float)))


def trainer_counts(vocab: int, *, non_embedding: bool = False, compute: str = "6N",
                   **model) -> Counts:
    """The trainer's exact parameter count (``depthdelusion.model_size``) for a model with
    vocabulary ``vocab`` and the given ModelConfig fields (defaults: the trainer's), as a
    function of (D, W). ``non_embedding`` counts blocks and the final norm only (the N a fit
    on non-embedding counts used). ``compute``: ``"6N"`` (6 × total N FLOPs per token) or
    ``"trainer"`` (``size.flops_per_token``: matmuls incl. attention scores and the LM head)."""
    from depthdelusion import model_size as size
    from depthdelusion.config import ModelConfig  # JAX-free: plain dataclasses and yaml

    if compute not in ("6N", "trainer"):
        raise ValueError(f"compute convention must be '6N' or 'trainer', got {compute!r}")

    def cfg(d, w):
        return ModelConfig(**{**model, "depth": int(d), "width": int(w), "vocab_size": int(vocab)})

    total = _quadratic_in_width(lambda d, w: size.count_params(cfg(d, w)))
    n_fn = _quadratic_in_width(lambda d, w: size.non_embedding_params(cfg(d, w))) if non_embedding else total
    desc = "non-embedding N (blocks + final norm)" if non_embedding else "total N"
    params_formula = (f"{desc} = the trainer's exact count (depthdelusion.model_size) for V = {vocab}"
                      + (f", {model}" if model else ", default model (GELU, LayerNorm, biases, RoPE)"))
    if compute == "6N":
        flops = lambda D, W: 6.0 * total(D, W)  # noqa: E731
        flops_formula = ("C = 6·N_total·T (Kaplan/Chinchilla convention; the trainer's "
                         "flops_per_token also counts attention scores, 6·S·W per layer with "
                         "S the sequence length, and omits embeddings)")
    else:
        flops = _quadratic_in_width(lambda d, w: size.flops_per_token(cfg(d, w)))
        flops_formula = "C = flops_per_token(D, W)·T (the trainer's model-FLOPs count)"
    return Counts(n_fn, flops, params_formula, flops_formula)


def simple_counts(vocab: int | None = None) -> Counts:
    """N = 12·D·W² (+ 2·V·W with a vocabulary), C = 6·N·T: for laws fitted on such counts."""
    fn = lambda D, W: blocks_plus_embeddings(np.asarray(D, float), np.asarray(W, float), vocab or 0)  # noqa: E731
    formula = f"N = 12·D·W² + 2·V·W (V = {vocab})" if vocab else "N = 12·D·W²"
    return Counts(fn, lambda D, W: 6.0 * fn(D, W), formula, "C = 6·N·T")


def critical_depth(fit_or_params, width, law=None) -> np.ndarray:
    """D_crit(W) in layers of a fit, or of parameter values of ``law`` (a name or Law): the
    law's declared critical depth (:meth:`..law_types.Law.critical_depth`)."""
    if isinstance(fit_or_params, FitResult):
        return fit_or_params.law.critical_depth(fit_or_params.all_params, width)
    if law is None:
        raise ValueError("critical_depth of parameter values needs law= (whose D_crit they give)")
    return get_law(law).critical_depth(dict(fit_or_params), width)


@dataclass
class ShapeOptimum:
    budget: float           # C in FLOPs, or N in parameters for the fixed-N search
    depth: float            # the deepest depth on the optimal plateau (layers)
    width: float            # its optimal width
    depth_min: float        # shallowest depth on the plateau
    params: float
    tokens: float
    loss: float             # nats


@dataclass
class OptimalShape:
    """Optimal (D, W) per budget and the fitted exponents D* ∝ budget^a, W* ∝ budget^b."""

    constraint: str  # "compute" (FLOPs) or "params" (N fixed, tokens fixed)
    law: str
    rows: list
    depth_exponent: float
    width_exponent: float
    depth_exponent_ci: tuple | None = None
    width_exponent_ci: tuple | None = None
    n_bootstrap: int = 0
    assumptions: list = field(default_factory=list)
    params_exponent: float = math.nan

    @property
    def determined(self) -> bool:
        return bool(np.isfinite(self.depth_exponent))

    def summary(self) -> str:
        unit = "C (FLOPs)" if self.constraint == "compute" else "N (params)"
        lines = [f"Optimal shape of {self.law!r} at fixed {unit}:",
                 f"{unit:>12} {'D*':>6} {'D range':>10} {'W*':>8} {'N':>10} {'T':>10} {'loss':>7}"]
        for r in self.rows:
            lines.append(f"{r.budget:>12.3g} {r.depth:>6.0f} {f'{r.depth_min:.0f}–{r.depth:.0f}':>10} "
                         f"{r.width:>8.0f} {r.params:>10.3g} {r.tokens:>10.3g} {r.loss:>7.4f}")
        lines.append(f"D* ∝ budget^{_exp(self.depth_exponent, self.depth_exponent_ci)}, "
                     f"W* ∝ budget^{_exp(self.width_exponent, self.width_exponent_ci)}"
                     + (f" (bootstrap over {self.n_bootstrap} parameter draws)" if self.n_bootstrap else ""))
        lines += [f"  - {a}" for a in self.assumptions]
        return "\n".join(lines)


def _exp(v, ci) -> str:
    if not np.isfinite(v):
        return "undetermined"
    return f"{v:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


class _Search:
    """Evaluates the law at (budget, D, W) under the constraint."""

    def __init__(self, law, counts: Counts, constraint, token_term, tokens):
        self.law, self.counts, self.constraint = law, counts, constraint
        self.token_term, self.tokens = token_term, tokens

    def loss(self, values, D, W, budget):
        N = self.counts.params(D, W)
        if self.constraint == "compute":
            T = budget / self.counts.flops_per_token(D, W)
        else:
            T = np.full(np.broadcast(budget, N).shape, float(self.tokens))
        x = LawInputs(*np.broadcast_arrays(np.asarray(D, float), np.asarray(W, float), N, T))
        with np.errstate(all="ignore"):
            loss = np.asarray(self.law(x, **values), float) * np.ones(x.D.shape)
            if self.token_term is not None:
                loss = loss + self.token_term[0] * x.T ** -self.token_term[1]
        return loss, x.N, x.T

    def width_for_params(self, D, N):
        """Positive root W of param_count(D, W) = N (quadratic in W)."""
        c0 = self.counts.params(D, 0.0)
        c1 = self.counts.params(D, 1.0) - c0
        c2 = 0.5 * (self.counts.params(D, 2.0) - 2 * self.counts.params(D, 1.0) + c0)
        c1 = c1 - c2
        with np.errstate(all="ignore"):
            return (-c1 + np.sqrt(c1 ** 2 + 4 * c2 * (N - c0))) / (2 * c2)


def _optimise(search: _Search, values, budgets, depth_max, widths):
    budgets = np.asarray(budgets, float)
    D = np.arange(1, depth_max + 1, dtype=float)
    if search.constraint == "compute":
        loss, _, _ = search.loss(values, D[None, :, None], widths[None, None, :], budgets[:, None, None])
        finite = np.where(np.isfinite(loss), loss, np.inf)
        j = np.argmin(finite, axis=2)  # best width per depth
        lw = np.log(widths)
        jc = np.clip(j, 1, len(widths) - 2)
        take = lambda a, jj: np.take_along_axis(a, jj[..., None], axis=2)[..., 0]  # noqa: E731
        y0, y1, y2 = take(finite, jc - 1), take(finite, jc), take(finite, jc + 1)
        h = lw[1] - lw[0]
        denom = y0 - 2 * y1 + y2
        with np.errstate(all="ignore"):
            shift = np.where(np.isfinite(denom) & (denom > 0), 0.5 * h * (y0 - y2) / denom, 0.0)
        shift = np.clip(np.nan_to_num(shift), -h, h)
        w_refined = np.exp(lw[jc] + shift)
        refined, _, _ = search.loss(values, D[None, :], w_refined, budgets[:, None])
        # Keep the refinement only where it improves on the grid point.
        w_best = np.where(refined <= take(finite, j), w_refined, widths[j])
    else:
        w_best = search.width_for_params(D[None, :], budgets[:, None])
    loss_d, N_d, T_d = search.loss(values, D[None, :], w_best, budgets[:, None])
    rows = []
    for i, budget in enumerate(budgets):
        ld = np.where(np.isfinite(loss_d[i]), loss_d[i], np.inf)
        best = float(ld.min())
        if not np.isfinite(best):
            rows.append(ShapeOptimum(float(budget), math.nan, math.nan, math.nan, math.nan, math.nan, math.inf))
            continue
        plateau = np.flatnonzero(ld <= best + PLATEAU_TOL)
        k = plateau.max()
        rows.append(ShapeOptimum(float(budget), float(D[k]), float(w_best[i, k]),
                                 float(D[plateau.min()]), float(N_d[i, k]), float(T_d[i, k]), best))
    return rows


def _shape_free(law, values, counts, depth_max) -> bool:
    """True when, at fixed N (and fixed T), every depth is equally good (the law ignores shape)."""
    probe = _Search(law, counts, "params", None, _PROBE_TOKENS)
    rows = _optimise(probe, values, np.geomspace(1e8, 1e12, 5), depth_max, None)
    return all(r.depth_min == 1 and r.depth == depth_max for r in rows)


def _slope(budgets, values) -> float:
    values = np.asarray(values, float)
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        return math.nan
    if np.ptp(np.log(values)) == 0:
        return 0.0
    return float(np.polyfit(np.log(budgets), np.log(values), 1)[0])


def _law_values(values: dict) -> dict:
    """The law's own parameters from a fit's values. A fit with one offset per group has
    ``E[group]`` instead of ``E``; an additive offset does not move the optimum, so the first
    group's is used (its loss column is that group's)."""
    offsets = sorted(k for k in values if k.startswith("E["))
    out = {k: v for k, v in values.items() if not k.startswith("E[")}
    if offsets and "E" not in out:
        out["E"] = values[offsets[0]]
    return out


def optimal_shape(fit, budgets=None, *, constraint: str = "compute", counts: Counts | None = None,
                  token_term=None, tokens: float | None = None, depth_max: int = 200,
                  bootstrap: int = 200, width_range=(64.0, 131072.0), width_points: int = 240,
                  values: dict | None = None) -> OptimalShape:
    """Minimise the fitted law over (D, W) at each budget.

    ``fit``: a FitResult, or a law name with ``values`` (its parameters).
    ``constraint="compute"``: budgets are FLOPs, T = C / flops_per_token(D, W). Needs a data
    term: the law's own fitted token term, or ``token_term=(B, β)`` given explicitly (added as
    B·T^−β and stated as assumed). ``constraint="params"``: budgets are N at fixed tokens
    ``tokens`` (needed only when the law has a token term; the fixed-token mode).
    ``counts``: N(D, W) as the law was fitted and FLOPs per token (see :func:`trainer_counts`);
    required — the search uses the runs' own units, never an assumed vocabulary.
    ``bootstrap`` re-solves with that many of the fit's bootstrap parameter draws to give
    intervals on the exponents.
    """
    if constraint not in ("compute", "params"):
        raise ValueError(f"constraint must be 'compute' or 'params', got {constraint!r}")
    if counts is None:
        raise ValueError("optimal_shape needs counts=: the N(D, W) the law was fitted with and the "
                         "FLOPs per token (shape.trainer_counts(vocab) for the trainer's models, "
                         "shape.simple_counts() for N = 12·D·W²)")
    if isinstance(fit, FitResult):
        law, vals, draws_from = fit.law, _law_values(fit.all_params), fit
    else:
        law, vals, draws_from = get_law(fit), dict(values or {}), None
    own_tokens = has_token_term(fit, vals) if isinstance(fit, FitResult) else has_token_term(law, vals)
    if budgets is None:
        budgets = np.geomspace(1e19, 1e25, 13) if constraint == "compute" else np.geomspace(1e8, 1e12, 9)
    budgets = np.asarray(budgets, float)
    if len(budgets) < 2 or np.any(budgets <= 0):
        raise ValueError("budgets must be at least two positive numbers")
    offsets = sorted(k for k in (fit.all_params if isinstance(fit, FitResult) else vals) if k.startswith("E["))
    token_term, assumptions = _search_assumptions(law, counts, constraint, own_tokens, token_term,
                                                  tokens, depth_max, width_range, offsets)
    search = _Search(law, counts, constraint, token_term, tokens if tokens is not None else _PROBE_TOKENS)
    widths = np.geomspace(*width_range, width_points)
    rows = _optimise(search, vals, budgets, depth_max, widths)
    if _shape_free(law, vals, counts, depth_max):
        assumptions.append("the law does not depend on shape here (every depth is optimal): "
                           "no optimal shape exists")
        return OptimalShape(constraint, law.name, rows, math.nan, math.nan, assumptions=assumptions)
    if any(r.depth == depth_max for r in rows):
        assumptions.append(f"D* reached the search limit {depth_max} for some budgets")
    if any(r.width >= 0.99 * width_range[1] or r.width <= 1.01 * width_range[0] for r in rows):
        assumptions.append("W* reached the width search limit for some budgets")
    a = _slope(budgets, [r.depth for r in rows])
    b = _slope(budgets, [r.width for r in rows])
    result = OptimalShape(constraint, law.name, rows, a, b, assumptions=assumptions,
                          params_exponent=_slope(budgets, [r.params for r in rows]))
    boot = getattr(draws_from, "bootstrap_params", None)
    draws = boot[:bootstrap] if (bootstrap and boot is not None) else []
    if len(draws):
        _bootstrap_exponents(result, search, draws_from, draws, budgets, depth_max, widths)
    return result


def _search_assumptions(law, counts: Counts, constraint: str, own_tokens: bool, token_term, tokens,
                        depth_max: int, width_range, offsets) -> tuple:
    """(token_term as floats or None, the search's assumptions in words); rejects a data term
    that is missing (fixed compute without one) or doubled (given to a law that has its own)."""
    assumptions = [counts.params_formula, f"D integer 1..{depth_max}; W continuous in "
                   f"[{width_range[0]:g}, {width_range[1]:g}]",
                   f"plateau: shapes within {PLATEAU_TOL:g} nats of the minimum are equally optimal; "
                   "D* is the deepest of them (at large budgets the plateau's shallow end is cut "
                   "by the width limit)"]
    if offsets:
        assumptions.append(f"the fit has one offset per group; losses use {offsets[0]} (an additive "
                           "offset does not move the optimum)")
    if constraint == "compute":
        assumptions.insert(0, counts.flops_formula + "; T = C / (FLOPs per token)")
        if own_tokens:
            if token_term is not None:
                raise ValueError(f"law {law.name!r} has its own fitted token term; do not add token_term")
            assumptions.append("data term: the law's own, fitted from the runs")
        elif token_term is None:
            raise ValueError(f"law {law.name!r} was fitted without a token term (tokens constant or "
                             "unknown), so it says nothing about trading parameters for tokens: use "
                             "constraint='params' (fixed tokens), or pass token_term=(B, beta) to "
                             "assume a data term explicitly")
        else:
            token_term = tuple(float(v) for v in token_term)
            assumptions.append(f"data term B·T^−β with B = {token_term[0]:g}, β = {token_term[1]:g} "
                               "added: assumed by the caller, not fitted from the runs")
    else:
        if token_term is not None:
            raise ValueError("token_term only applies at fixed compute")
        if own_tokens and tokens is None:
            raise ValueError(f"law {law.name!r} has a token term: fixed-N search needs tokens= "
                             "(the fixed-token mode)")
        assumptions.append(f"fixed tokens T = {tokens:.3g}" if own_tokens else
                           "the law has no token term: the optimum at fixed N holds for any fixed token count")
    return token_term, assumptions


def _bootstrap_exponents(result: OptimalShape, search: _Search, fit: FitResult, draws, budgets,
                         depth_max: int, widths) -> None:
    """Re-solve with each bootstrap parameter draw of ``fit``: 95% percentile intervals of the
    exponents (set on ``result`` with the number of draws that gave finite exponents)."""
    exps = []
    for draw in draws:
        v = _law_values({**fit.fixed, **dict(zip(fit.param_names, draw))})
        r = _optimise(search, v, budgets, depth_max, widths)
        exps.append((_slope(budgets, [x.depth for x in r]), _slope(budgets, [x.width for x in r])))
    exps = np.array(exps)
    ok = np.all(np.isfinite(exps), axis=1)
    if ok.sum() >= 2:
        result.depth_exponent_ci = tuple(np.percentile(exps[ok, 0], [2.5, 97.5]).tolist())
        result.width_exponent_ci = tuple(np.percentile(exps[ok, 1], [2.5, 97.5]).tolist())
    result.n_bootstrap = int(ok.sum())


@dataclass
class ShapeAudit:
    """D / D_crit(W) for published models, from a fit and from the paper's κ."""

    model: list
    depth: np.ndarray
    width: np.ndarray
    d_crit: np.ndarray
    ratio: np.ndarray
    d_crit_paper: np.ndarray
    ratio_paper: np.ndarray

    def summary(self) -> str:
        lines = [f"{'model':<26} {'D':>4} {'W':>6} {'D_crit':>7} {'D/D_crit':>8} "
                 f"{f'D_crit(κ={PAPER_KAPPA})':>15} {'D/D_crit':>8}"]
        for i, m in enumerate(self.model):
            lines.append(f"{m:<26} {self.depth[i]:>4d} {self.width[i]:>6d} {self.d_crit[i]:>7.1f} "
                         f"{self.ratio[i]:>8.2f} {self.d_crit_paper[i]:>15.1f} {self.ratio_paper[i]:>8.2f}")
        return "\n".join(lines)


def audit_shapes(fit_or_params, shapes: ModelShapes | None = None, law=None) -> ShapeAudit:
    """For every model in ``shapes`` (default: the bundled LLM shapes): D, W, D_crit(W), D/D_crit
    (``law``: whose D_crit parameter values give)."""
    shapes = shapes or load_llm_shapes()
    d_crit = critical_depth(fit_or_params, shapes.width, law)
    paper = PAPER_KAPPA * np.log(shapes.width.astype(float))
    with np.errstate(divide="ignore"):  # D_crit = 0 (κ at its bound): every depth is beyond it
        ratio = shapes.depth / d_crit
    return ShapeAudit(list(shapes.model), shapes.depth, shapes.width, d_crit, ratio, paper,
                      shapes.depth / paper)
