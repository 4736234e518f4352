"""isoFLOP profiles (Chinchilla's Approach 2): per compute budget, the loss-optimal model size.

Runs are grouped into compute budgets: C from a ``compute`` column (also read as ``flops``,
``C``, ``budget_flops``) or C = 6·N·D (parameters × tokens); sorted by C, a run joins the
current budget while its C is within ``tolerance`` (relative) of the budget's smallest C, so
rows meant for one budget but rounded differently stay together. Per budget, ordinary least
squares fits the parabola loss = c₀ + c₁x + c₂x² in x = ln N; its vertex x* = −c₁/(2c₂) is
N*(C), with Fieller's 95% interval (t quantile, m − 3 degrees of freedom for m points): the
x where |c₁ + 2c₂x| is not significantly different from zero. D*(C) = C/(6·N*).

A budget is flagged — and left out of the exponent fit unless ``include_flagged`` — when it has
fewer than 3 distinct sizes (no parabola), the parabola opens downwards (no minimum), it is so
flat that its vertex is beyond any float N (no optimum: the losses lie on a line in ln N), or the
vertex lies outside the sampled N range (an extrapolated optimum). Without a vertex a budget is
never used. A table is refused as no isoFLOP sweep when fewer than half its budgets have 3 or
more sizes (its runs sit at compute values of their own: a grid of sizes × token counts). Text
columns pooled into one sweep (datasets as groups) are tested and said as ``fit`` says them
(:func:`.diagnostics.pooled_groups`, on the parabolas' residuals). The exponents come from ordinary least squares of ln N* on ln C over the used
budgets: N* ∝ C^a with the t interval (k − 2 degrees of freedom for k budgets); since
D* = C/(6N*), ln D* = ln C − ln 6 − ln N* and b = 1 − a with the same interval width.

:func:`approach2_bias` measures the method's bias on the user's own grid: it fits the
Chinchilla law to the table, simulates the same (N, D) points from the fitted law plus
Gaussian noise of the fit's residual standard deviation (seeded replicates), runs Approach 2 on
each, and reports the mean of its a and b minus the law's own a = β/(α+β), b = α/(α+β).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from ..formats.interval_text import interval_text
from ..table.load import load_runs
from ..table.runs import Runs
from .diagnostics import pooled_group_flag, pooled_groups
from .options import SEED, engine_method

#: Relative tolerance on C within which runs form one budget.
TOLERANCE = 0.05
#: Columns a table may give its compute (FLOPs) in; the runs reader keeps them as unread text.
#: Simulated replicates of the user's grid for the bias of Approach 2.
BIAS_REPLICATES = 20
LEVEL = 0.95

FEW_POINTS, NO_MINIMUM, OUTSIDE = "fewer_than_3_sizes", "no_minimum", "vertex_outside_sampled_N"
#: An isoFLOP sweep trains several sizes at each of a few budgets: at least this share of its
#: budgets must have SWEEP_SIZES or more distinct sizes. A table of sizes × token counts (Gemstones,
#: Chinchilla's Figure 4 points) has its runs at compute values of their own: cut into budgets by
#: the tolerance, most budgets hold 1 or 2 sizes, and the few with 3 are coincidences of N·D.
SWEEP_SHARE, SWEEP_SIZES = 0.5, 3
#: A minimum so flat that its vertex N* (or D* = C/(6N*)) is beyond any float: no optimum at all.
FLAT = "flat_parabola"
#: Flags of a budget without a usable vertex: never used, not even with include_flagged.
NO_VERTEX = (FEW_POINTS, NO_MINIMUM, FLAT)


@dataclass
class Budget:
    """One compute budget: its runs, the parabola in ln N and the vertex with Fieller's interval."""

    compute: float
    index: np.ndarray  # rows of the table
    points: int
    n_opt: float = math.nan
    n_opt_ci: tuple = (math.nan, math.nan)
    d_opt: float = math.nan
    loss_opt: float = math.nan
    coef: tuple = (math.nan, math.nan, math.nan)  # c0, c1, c2 in x = ln N − centre
    centre: float = 0.0
    n_range: tuple = (math.nan, math.nan)
    flags: list = field(default_factory=list)
    used: bool = False

    def to_dict(self) -> dict:
        return {"compute": self.compute, "points": self.points, "n_opt": _num(self.n_opt),
                "n_opt_ci": [_num(v) for v in self.n_opt_ci], "d_opt": _num(self.d_opt),
                "loss_opt": _num(self.loss_opt), "flags": list(self.flags), "used": self.used}


@dataclass
class Exponent:
    value: float
    ci: tuple
    method: str

    def to_dict(self) -> dict:
        return {"value": _num(self.value), "ci": [_num(v) for v in self.ci], "method": self.method}


@dataclass
class IsoflopResult:
    """Approach 2 on one table: the budgets, N* ∝ C^a and D* ∝ C^b with intervals."""

    budgets: list
    a: Exponent
    b: Exponent
    log_k: float  # ln N* = log_k + a·ln C
    tolerance: float
    compute_source: str
    source: str = ""
    notes: list = field(default_factory=list)
    bias: dict | None = None  # approach2_bias(...).to_dict()
    loss: np.ndarray | None = None
    params: np.ndarray | None = None
    rows: dict = field(default_factory=dict)  # {"read", "kept"[, "where", "group", "by", "value"]}
    #: text columns pooled into one sweep, with a test of the parabolas' residuals between their
    #: values (:func:`.diagnostics.pooled_groups`, as ``fit`` reports them)
    pooled_groups: list = field(default_factory=list)

    @property
    def used(self) -> list:
        return [b for b in self.budgets if b.used]

    def to_dict(self) -> dict:
        out = {"a": self.a.to_dict(), "b": self.b.to_dict(),
               "budgets": [b.to_dict() for b in self.budgets],
               "tolerance": self.tolerance, "compute": self.compute_source, "notes": list(self.notes),
               "rows": dict(self.rows), "pooled_groups": list(self.pooled_groups)}
        if self.bias is not None:
            out["bias"] = self.bias
        return out

    def summary(self) -> str:
        lines = [f"isoFLOP profiles (Approach 2) of {self.source or 'runs'}: {len(self.budgets)} "
                 f"budgets ({self.compute_source}; runs within {self.tolerance:g} relative of a "
                 f"budget's smallest C form it), {len(self.used)} used" + _rows_text(self.rows),
                 "Per budget: OLS parabola of loss in ln N; vertex N* with Fieller's 95% interval "
                 "(t, m − 3 df).", *[f"! {pooled_group_flag(p)}" for p in self.pooled_groups], "",
                 f"{'C':>10} {'pts':>4} {'N*':>10} {'N* 95% CI':>23} {'D*':>10} {'L*':>7}  flags"]
        for b in self.budgets:
            lo, hi = b.n_opt_ci
            lines.append(f"{b.compute:10.3g} {b.points:4d} {_g(b.n_opt):>10} "
                         f"{interval_text((lo, hi), '.3g'):>23} {_g(b.d_opt):>10} "
                         f"{_g(b.loss_opt, 4):>7}  {', '.join(b.flags) or '-'}"
                         + ("" if b.used else "  (not used)"))
        lines += ["", f"N* ∝ C^a: a = {self.a.value:.4f}, 95% CI {interval_text(self.a.ci)} "
                      f"({self.a.method})",
                  f"D* ∝ C^b: b = {self.b.value:.4f}, 95% CI {interval_text(self.b.ci)} "
                  f"({self.b.method})"]
        if self.bias is not None:
            lines += ["", _bias_text(self.bias)]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def compute_of(runs: Runs) -> tuple[np.ndarray, str]:
    """Per-run compute C and where it came from: the table's compute column (any of its
    aliases, analysis/table/columns.py), else 6·N·D."""
    own = runs.compute
    if own is not None and np.isfinite(own).any():
        if not np.all(np.isfinite(own) & (own > 0)):
            i = int(np.flatnonzero(~(np.isfinite(own) & (own > 0)))[0])
            raise ValueError(f"{runs.source} row {i + 1} ({runs.name[i]}): no positive compute; "
                             "give every run's compute, or none (then C = 6·N·D)")
        return own.astype(float), "C from the compute column"
    if not (runs.has("params") and runs.has("tokens")):
        raise ValueError(f"{runs.source}: isoFLOP budgets need a compute column (compute, flops, "
                         "C, ...: `depthdelusion laws --columns`) or params and tokens for every "
                         "run (C = 6·N·D)")
    return 6.0 * runs.params * runs.tokens, "C = 6·N·D"


def group_budgets(compute: np.ndarray, tolerance: float = TOLERANCE) -> list[np.ndarray]:
    """Row indices per budget: sorted by C, a run joins the current budget while C ≤ (1 +
    tolerance)·(the budget's smallest C)."""
    if not tolerance >= 0:
        raise ValueError(f"tolerance {tolerance!r}: must be a relative tolerance ≥ 0 (e.g. 0.05)")
    order = np.argsort(compute, kind="stable")
    groups, current, start = [], [], None
    for i in order:
        if start is None or compute[i] > start * (1 + tolerance):
            if current:
                groups.append(np.array(current))
            current, start = [], compute[i]
        current.append(i)
    if current:
        groups.append(np.array(current))
    return groups


def fit_budget(N: np.ndarray, loss: np.ndarray, compute: float, index) -> Budget:
    """The parabola in ln N for one budget and its vertex with Fieller's interval."""
    budget = Budget(compute=float(compute), index=np.asarray(index), points=len(N))
    x_all = np.log(N)
    budget.n_range = (float(N.min()), float(N.max()))
    if len(np.unique(N)) < 3:
        budget.flags.append(FEW_POINTS)
        return budget
    centre = float(x_all.mean())
    x = x_all - centre
    X = np.stack([np.ones_like(x), x, x * x], axis=1)
    coef, *_ = np.linalg.lstsq(X, loss, rcond=None)
    c0, c1, c2 = (float(v) for v in coef)
    budget.coef, budget.centre = (c0, c1, c2), centre
    if c2 <= 0:
        budget.flags.append(NO_MINIMUM)
        return budget
    xv = -c1 / (2 * c2)
    n_opt = _exp(centre + xv)
    d_opt = compute / (6.0 * n_opt) if n_opt > 0 else math.inf
    if not (0 < n_opt < math.inf and 0 < d_opt < math.inf):
        budget.flags.append(FLAT)
        return budget
    budget.n_opt, budget.d_opt = n_opt, d_opt
    budget.loss_opt = c0 + c1 * xv + c2 * xv * xv
    df = len(N) - 3
    if df >= 1:
        resid = loss - X @ coef
        s2 = float(resid @ resid) / df
        V = s2 * np.linalg.pinv(X.T @ X)
        lo, hi = _fieller(c1, c2, V[1, 1], V[1, 2], V[2, 2], stats.t.ppf(0.5 + LEVEL / 2, df))
        budget.n_opt_ci = (_exp(centre + lo), _exp(centre + hi))
    if not budget.n_range[0] <= budget.n_opt <= budget.n_range[1]:
        budget.flags.append(OUTSIDE)
    return budget


def _exp(x: float) -> float:
    """e^x, 0 below and inf above the float range (a vertex or interval end beyond any N)."""
    with np.errstate(over="ignore", under="ignore"):
        return float(np.exp(x))


def _fieller(c1, c2, v11, v12, v22, t):
    """Fieller's interval for the root x of c1 + 2·c2·x: {x : (c1 + 2c2x)² ≤ t²·Var(c1 + 2c2x)}.
    Bounded only when c2 is significantly non-zero; (−inf, inf) otherwise."""
    qa = 4 * (c2 * c2 - t * t * v22)
    qb = 4 * (c1 * c2 - t * t * v12)
    qc = c1 * c1 - t * t * v11
    disc = qb * qb - 4 * qa * qc
    if qa <= 0 or disc < 0:
        return -math.inf, math.inf
    r = math.sqrt(disc)
    return (-qb - r) / (2 * qa), (-qb + r) / (2 * qa)


def isoflop(runs, *, tolerance: float = TOLERANCE, include_flagged: bool = False,
            group: str | None = None, where: str | None = None, columns: dict | None = None,
            bias: bool = False,
            method: str = "lm", replicates: int = BIAS_REPLICATES, seed: int = SEED,
            loss: str | None = None) -> IsoflopResult:
    """Approach 2 on ``runs`` (anything :func:`load_runs` takes). ``include_flagged`` also uses
    budgets whose vertex lies outside their sampled N range. ``bias=True`` adds
    :func:`approach2_bias` (a Chinchilla fit by ``loss``, ls or huber, or by the older ``method``
    name of it, and ``replicates`` simulations)."""
    method = engine_method(loss, method)
    runs = load_runs(runs, group=group, columns=columns, where=where)
    compute, source = compute_of(runs)
    result = _approach2(runs.params, runs.loss, compute, tolerance, include_flagged)
    result.compute_source, result.source = source, runs.source
    sel = runs.selection
    result.rows = {"read": sel.get("rows_read", len(runs)), "kept": len(runs),
                   **{k: v for k, v in sel.items() if k not in ("rows_read", "rows_kept")}}
    if source == "C = 6·N·D" or not runs.has("tokens"):
        result.notes.append("D* = C/(6·N*), so b = 1 − a by construction")
    else:
        result.notes.append("D* = C/(6·N*) (the compute column's C), so b = 1 − a by construction")
    if len(result.used) < 2:
        raise ValueError(_too_few_budgets(result, include_flagged))
    sized = [b for b in result.budgets if len(np.unique(runs.params[b.index])) >= SWEEP_SIZES]
    if len(sized) < SWEEP_SHARE * len(result.budgets):
        raise ValueError(_not_a_sweep(result, sized, len(runs)))
    result.pooled_groups = pooled_groups(runs, _parabola_residuals(result, runs))
    if bias:
        try:
            result.bias = approach2_bias(runs, result, method=method, replicates=replicates,
                                         seed=seed, include_flagged=include_flagged)
        except ValueError as err:  # e.g. the Chinchilla law cannot be fitted to these runs
            result.notes.append(f"bias not simulated: {str(err).splitlines()[0]}")
    return result


def _too_few_budgets(result: IsoflopResult, include_flagged: bool) -> str:
    """Why a table gives no exponent: its budgets by what each lacks, and what is needed."""
    kinds = {FEW_POINTS: "with fewer than 3 sizes", NO_MINIMUM: "without a minimum",
             FLAT: "too flat for a vertex", OUTSIDE: "with the vertex outside their N"}
    counts = [f"{len(result.used)} usable"] + [
        f"{n} {text}" for flag, text in kinds.items()
        if (n := sum(flag in b.flags and not b.used for b in result.budgets))]
    hint = (" (--include-flagged uses a vertex outside the sampled N)"
            if not include_flagged and any(OUTSIDE in b.flags for b in result.budgets) else "")
    n = len(result.budgets)
    return (f"{result.source}: {n} budget{'s' if n != 1 else ''}: {', '.join(counts)}. Approach 2 "
            "needs at least 2 compute budgets (runs whose C agree within --tolerance "
            f"{result.tolerance:g}), each with at least 3 distinct sizes N whose losses have a "
            f"minimum between the smallest and largest N{hint}: an isoFLOP sweep")


def _not_a_sweep(result: IsoflopResult, sized: list, rows: int) -> str:
    """Why a table whose runs are not at shared compute budgets gives no exponent."""
    held = sum(b.points for b in sized)
    return (f"{result.source}: not an isoFLOP sweep: of its {len(result.budgets)} compute budgets "
            f"(runs whose C agree within --tolerance {result.tolerance:g}), {len(sized)} have "
            f"{SWEEP_SIZES} or more distinct sizes N ({held} of {rows} runs); an isoFLOP sweep trains "
            f"several sizes at each of a few budgets (at least {SWEEP_SHARE:.0%} of its budgets with "
            f"{SWEEP_SIZES} or more sizes), while these runs sit at compute values of their own (a grid "
            "of sizes × token counts): fit a law of N and D to them instead (depthdelusion fit)")


def _parabola_residuals(result: IsoflopResult, runs: Runs) -> np.ndarray:
    """Per row: its loss minus its budget's parabola (NaN where the budget has none)."""
    resid = np.full(len(runs), np.nan)
    for b in result.budgets:
        if np.all(np.isfinite(b.coef)):
            x = np.log(runs.params[b.index]) - b.centre
            resid[b.index] = runs.loss[b.index] - (b.coef[0] + b.coef[1] * x + b.coef[2] * x * x)
    return resid


def _rows_text(rows: dict) -> str:
    """" (kept K of R rows: CONDITIONS)" when rows were selected, else ""."""
    if not rows or rows.get("kept") == rows.get("read"):
        return ""
    conditions = ([rows["where"]] if rows.get("where") else []) + (
        [f"group == {rows['group']}"] if rows.get("group") else []) + (
        [f"{rows['by']} == {rows['value']}"] if rows.get("by") else [])
    return f" (kept {rows['kept']} of {rows['read']} rows: {' and '.join(conditions)})"


def _approach2(N, loss, compute, tolerance, include_flagged) -> IsoflopResult:
    N, loss, compute = (np.asarray(v, float) for v in (N, loss, compute))
    if not np.all(np.isfinite(N) & (N > 0)):
        raise ValueError("isoFLOP profiles need the parameter count N (params) of every run")
    # a budget's C: the geometric mean of its runs'
    budgets = [fit_budget(N[i], loss[i], float(np.exp(np.mean(np.log(compute[i])))), i)
               for i in group_budgets(compute, tolerance)]
    for b in budgets:
        b.used = not set(NO_VERTEX) & set(b.flags) and (include_flagged or not b.flags)
    used = [b for b in budgets if b.used]
    notes = []
    method = f"OLS of ln N* on ln C over {len(used)} budgets, t interval ({max(len(used) - 2, 0)} df)"
    if len(used) < 2:
        nan = Exponent(math.nan, (math.nan, math.nan), method)
        notes.append(f"only {len(used)} usable budget(s): the exponents need at least 2 "
                     "(3 for an interval)")
        return IsoflopResult(budgets, nan, Exponent(math.nan, (math.nan, math.nan), method),
                             math.nan, tolerance, "", notes=notes, loss=loss, params=N)
    lc = np.log([b.compute for b in used])
    ln = np.log([b.n_opt for b in used])
    slope, intercept, se = _ols(lc, ln)
    df = len(used) - 2
    half = stats.t.ppf(0.5 + LEVEL / 2, df) * se if df >= 1 else math.inf
    a = Exponent(slope, (slope - half, slope + half), method)
    b = Exponent(1 - slope, (1 - slope - half, 1 - slope + half), "1 − a (D* = C/(6N*))")
    if df < 1:
        notes.append("2 budgets: the line through them has no interval")
    return IsoflopResult(budgets, a, b, intercept, tolerance, "", notes=notes, loss=loss, params=N)


def _ols(x, y):
    X = np.stack([np.ones_like(x), x], axis=1)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    df = len(x) - 2
    if df < 1:
        return float(coef[1]), float(coef[0]), math.inf
    resid = y - X @ coef
    s2 = float(resid @ resid) / df
    cov = s2 * np.linalg.inv(X.T @ X)
    return float(coef[1]), float(coef[0]), math.sqrt(cov[1, 1])


# --- the bias of Approach 2 on the user's grid ------------------------------------------------

@dataclass
class Bias:
    """Approach 2 on simulations of the user's grid from the fitted Chinchilla law."""

    law_a: float
    law_a_ci: tuple
    law_b: float
    law_b_ci: tuple
    sim_a: np.ndarray
    sim_b: np.ndarray
    noise_sd: float
    replicates: int
    seed: int
    method: str
    disagree: list
    #: Simulations in which a budget the table used had no usable vertex (FLAT, NO_MINIMUM or,
    #: without include_flagged, OUTSIDE): Approach 2 used fewer budgets there, as it would.
    short: int = 0

    @property
    def a(self) -> float:
        return float(np.mean(self.sim_a)) - self.law_a

    @property
    def b(self) -> float:
        return float(np.mean(self.sim_b)) - self.law_b

    def to_dict(self) -> dict:
        n = len(self.sim_a)
        se = (lambda v: float(np.std(v, ddof=1) / math.sqrt(n)) if n > 1 else math.nan)
        return {"a": _num(self.a), "b": _num(self.b),
                "a_mc_se": _num(se(self.sim_a)), "b_mc_se": _num(se(self.sim_b)),
                "law_a": {"value": _num(self.law_a), "ci": [_num(v) for v in self.law_a_ci]},
                "law_b": {"value": _num(self.law_b), "ci": [_num(v) for v in self.law_b_ci]},
                "replicates": self.replicates, "replicates_with_exponents": n,
                "replicates_short": self.short,
                "noise_sd": _num(self.noise_sd), "seed": self.seed, "fit_method": self.method,
                "disagree": list(self.disagree)}


def approach2_bias(runs, iso: IsoflopResult, *, method: str = "lm",
                   replicates: int = BIAS_REPLICATES, seed: int = SEED,
                   include_flagged: bool = False, fit_result=None) -> dict:
    """Fit the Chinchilla law (``method``; bare fit: no bootstrap, no profile), simulate the
    table's exact (N, D) from it with Gaussian noise of the fit's residual RMS (nats; for Huber
    the log-loss residual RMS, multiplicative), ``replicates`` times (seeded), run Approach 2
    with the same budgets on each, and compare. Returns :meth:`Bias.to_dict`."""
    from ..laws import LawInputs, get_law
    from .engine import fit

    runs = load_runs(runs)
    compute, _ = compute_of(runs)
    table = runs
    if not runs.has("tokens"):  # compute column only: D from C = 6ND
        table = runs.subset(np.arange(len(runs)))
        table.tokens = compute / (6.0 * runs.params)
    if fit_result is None:
        fit_result = fit(table, "chinchilla", method, bootstrap=0, profile=False,
                         leave_one_out=False, seed=seed)
    p = fit_result.params
    alpha, beta = p["alpha"], p["beta"]
    law_a, law_b = beta / (alpha + beta), alpha / (alpha + beta)
    ga = np.array([-beta, alpha]) / (alpha + beta) ** 2  # ∂a/∂(α, β); ∂b = −∂a
    names = list(fit_result.params)
    ia, ib = names.index("alpha"), names.index("beta")
    cov = fit_result.cov[np.ix_([ia, ib], [ia, ib])]
    se = math.sqrt(float(ga @ cov @ ga)) if np.all(np.isfinite(cov)) else math.inf
    t = stats.t.ppf(0.5 + LEVEL / 2, max(fit_result.n - fit_result.k, 1))
    law_a_ci, law_b_ci = (law_a - t * se, law_a + t * se), (law_b - t * se, law_b + t * se)
    mean = np.asarray(get_law("chinchilla")(LawInputs.from_runs(table), **fit_result.all_params), float)
    log_scale = method == "huber"
    sd = float(np.sqrt(np.mean((np.log(table.loss) - np.log(mean)) ** 2))) if log_scale else fit_result.rmse
    rng = np.random.default_rng(seed)
    sim_a, sim_b, short = [], [], 0
    for _ in range(replicates):
        e = rng.normal(0.0, sd, len(mean))
        y = mean * np.exp(e) if log_scale else mean + e
        r = _approach2(table.params, y, compute, iso.tolerance, include_flagged)
        short += any(ours.used and not sim.used for ours, sim in zip(iso.budgets, r.budgets))
        if np.isfinite(r.a.value):
            sim_a.append(r.a.value)
            sim_b.append(r.b.value)
    if not sim_a:
        raise ValueError(f"none of the {replicates} simulations had 2 usable budgets")
    bias = Bias(law_a, law_a_ci, law_b, law_b_ci, np.array(sim_a), np.array(sim_b), sd,
                replicates, seed, method, [], short)
    for name, ours, law_ci in (("a", iso.a, law_a_ci), ("b", iso.b, law_b_ci)):
        lo, hi = ours.ci
        if np.isfinite(ours.value) and (hi < law_ci[0] or lo > law_ci[1]):
            bias.disagree.append(f"Approach 2's {name} = {ours.value:.4f} [{lo:.4f}, {hi:.4f}] and the "
                                 f"Chinchilla fit's {name} = {law_a if name == 'a' else law_b:.4f} "
                                 f"[{law_ci[0]:.4f}, {law_ci[1]:.4f}] disagree beyond their 95% "
                                 "intervals")
    return bias.to_dict()


def _bias_text(bias: dict) -> str:
    lines = [f"Approach 2's bias on this grid: simulated {bias['replicates']} times (seed "
             f"{bias['seed']}) from the Chinchilla law fitted to the table ({bias['fit_method']}, "
             f"Gaussian noise sd {_g(bias['noise_sd'], 3)} = the fit's residual RMS"
             + (", on ln loss" if bias["fit_method"] == "huber" else ", nats") + "), the same (N, D)"]
    for k in ("a", "b"):
        law = bias[f"law_{k}"]
        # JSON's null here is an infinite end (the law's standard error is infinite)
        ci = [end if v is None else v for v, end in zip(law["ci"], (-math.inf, math.inf))]
        lines.append(f"  {k}: law's own {law['value']:.4f} {interval_text(ci)} "
                     f"(delta method from the Jacobian, t); Approach 2 on the simulations minus it: "
                     f"{bias[k]:+.4f} ± {_g(bias[k + '_mc_se'], 2)} (Monte Carlo s.e.)")
    if bias["replicates_with_exponents"] < bias["replicates"]:
        lines.append(f"  {bias['replicates'] - bias['replicates_with_exponents']} simulations had "
                     "fewer than 2 usable budgets (left out)")
    if bias.get("replicates_short"):
        lines.append(f"  {bias['replicates_short']} simulations lost a budget the table used (its "
                     "parabola had no minimum, was too flat for a vertex, or its vertex left the "
                     "sampled N): Approach 2 used the others there, as it would on such data")
    lines += [f"  {d}" for d in bias["disagree"]] or ["  Approach 2 and the Chinchilla fit agree "
                                                      "within their 95% intervals"]
    return "\n".join(lines)


# --- side by side ------------------------------------------------------------------------------

def file_label(value) -> str:
    """A column value as a file-name part."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in str(value))


def _num(v, digits: int = 6):
    """A JSON number rounded to ``digits`` significant digits (the same on any machine); None
    when not finite."""
    v = float(v)
    return float(f"{v:.{digits}g}") if math.isfinite(v) else None


def _g(v, digits: int = 3) -> str:
    if v is None or not np.isfinite(v):
        return "-" if v is None or np.isnan(v) else ("inf" if v > 0 else "-inf")
    return f"{v:.{digits}g}"
