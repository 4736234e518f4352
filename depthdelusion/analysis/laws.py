"""The law registry: named scaling laws, each a vectorised formula with named parameters.

A law is a plain Python function ``f(x, **params) -> predicted loss (nats)`` where ``x`` is a
:class:`LawInputs` (numpy arrays D layers, W width, N parameters, T tokens). Register your own::

    from depthdelusion.analysis import register_law

    @register_law(params={"E": (1.0, 3.0), "A": (10, 1e4, "log"), "alpha": (0.05, 0.6)},
                  formula="E + A·N^−α")
    def my_law(x, E, A, alpha):
        return E + A * x.N ** -alpha

Parameter specs are ``(init_lo, init_hi[, "log"])`` or :class:`Param`. ``log`` parameters are
positive scales fitted in log space; ``init`` spans the grid of starting points. A
:class:`Param` also takes ``bounds``, the physical domain the fit keeps the parameter in (a
fit that ends on a bound is flagged); tuple specs are unbounded (log ones: positive).

A law with a penalty that switches on somewhere declares its :class:`Roles`, which the fit's
readers (the verdicts, where a kink acts, the report's tables) ask instead of reading parameter
names: ``penalty`` (the parameter whose 0 is the shape-agnostic law), ``kink`` (where the penalty
switches on: the nuisance of the penalty's test) and, for a critical depth, ``d_crit`` (a
function ``d_crit(W, **the parameters it names)`` in layers) with ``d_crit_text``::

    @register_law(params={..., "strength": (0.01, 1.0, "log"), "slope": (1.0, 4.0)}, shape="kink",
                  roles=Roles(penalty="strength", kink="slope", d_crit=lambda W, slope: slope * np.log(W),
                              d_crit_text="{slope:.3g}·ln W"))
"""
from __future__ import annotations

import dataclasses
import inspect
import io
from typing import Callable

import numpy as np

from .law_types import INF, Law, LawInputs, Param, Roles
from .reference import PAPER_PERSISTENCE_EXPONENT

_REGISTRY: dict[str, Law] = {}


def _as_param(name: str, spec) -> Param:
    if isinstance(spec, Param):
        return spec
    spec = tuple(spec)
    if len(spec) not in (2, 3) or (len(spec) == 3 and spec[2] not in ("log", "linear")):
        raise ValueError(f"parameter {name!r}: spec {spec!r}; expected (lo, hi) or (lo, hi, 'log')")
    log = len(spec) == 3 and spec[2] == "log"
    return Param(name, (float(spec[0]), float(spec[1])), log=log,
                 bounds=(0.0, INF) if log else (-INF, INF))


def register_law(func: Callable | None = None, *, params: dict, name: str | None = None,
                 formula: str = "", doc: str | None = None, source: str = "user",
                 token_params: dict | None = None, needs_tokens: bool = False,
                 replace: bool = False, shape: str = "", roles: Roles = Roles()):
    """Register ``func(x, **params)`` as a law; usable as a decorator. Returns the function.
    ``roles``: what its parameters mean (:class:`Roles`); a ``shape="kink"`` law must declare
    its penalty and critical depth."""

    def wrap(f: Callable) -> Callable:
        law_name = name or f.__name__
        if law_name in _REGISTRY and not replace:
            raise ValueError(f"a law named {law_name!r} is already registered (pass replace=True)")
        plist = tuple(_as_param(k, v) for k, v in params.items())
        accepted = inspect.signature(f).parameters
        missing = [p.name for p in plist if p.name not in accepted]
        if missing:
            raise ValueError(f"law {law_name!r}: function {f.__name__} does not accept parameter(s) {missing}")
        if shape not in ("", "kink", "smooth"):
            raise ValueError(f"law {law_name!r}: shape must be '', 'kink' or 'smooth', got {shape!r}")
        _check_roles(law_name, [p.name for p in plist], shape, roles)
        _REGISTRY[law_name] = Law(law_name, f, plist, formula, doc or (inspect.getdoc(f) or ""),
                                  source, dict(token_params or {}), needs_tokens, shape, roles)
        return f

    return wrap(func) if func is not None else wrap


def _check_roles(law_name: str, names: list, shape: str, roles: Roles) -> None:
    """The roles name parameters of the law (one-line errors naming the role)."""
    penalty, d_crit = roles.penalty, roles.d_crit
    for role, value in (("penalty", penalty), ("kink", roles.kink), ("width_exponent", roles.width_exponent),
                        ("capacity_exponent", roles.capacity_exponent),
                        ("d_crit_width_exponent", roles.d_crit_width_exponent)):
        if value and value not in names:
            raise ValueError(f"law {law_name!r}: {role}={value!r} is not one of its parameters "
                             f"({', '.join(names)})")
    if d_crit is not None:
        unknown = [n for n in list(inspect.signature(d_crit).parameters)[1:] if n not in names]
        if unknown:
            raise ValueError(f"law {law_name!r}: d_crit takes {', '.join(unknown)}, not among its "
                             f"parameters ({', '.join(names)}); d_crit(W, <parameters>)")
    if shape == "kink" and not (penalty and d_crit is not None):
        raise ValueError(f"law {law_name!r}: a shape='kink' law declares its penalty parameter and "
                         "its critical depth (roles=Roles(penalty=NAME, d_crit=lambda W, ...: layers))")


def get_law(law) -> Law:
    """The registered Law for a name (or the Law itself); unknown names list the known ones."""
    if isinstance(law, Law):
        return law
    if law not in _REGISTRY:
        raise ValueError(f"unknown law {law!r}; known laws: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[law]


def list_laws() -> list[Law]:
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def signed_penalty(law) -> Law:
    """``law`` (a name or Law) with its penalty (its declared ``penalty``, λ) free in sign: a
    negative λ is a depth that helps past D_crit, which the registered laws (λ ≥ 0, fitted in log
    space) can only meet at λ = 0. λ is then fitted as it is, starts spanning ±(its positive
    start range's top); the law keeps its name. A law without a penalty is a one-line error
    naming the laws that have one."""
    law = get_law(law)
    if not law.penalty:
        having = [w.name for w in list_laws() if w.penalty]
        raise ValueError(f"--signed-penalty: law {law.name!r} has no depth penalty λ (its parameters: "
                         f"{', '.join(law.param_names)}); laws with one: {', '.join(having)}")
    top = law.param(law.penalty).init[1]
    free = Param(law.penalty, (-top, top), log=False, bounds=(-INF, INF),
                 doc="depth-penalty scale, free in sign (negative: deeper is better past D_crit)")
    return dataclasses.replace(law, params=tuple(free if p.name == law.penalty else p for p in law.params),
                               formula=law.formula + "  (λ free in sign)")


def shape_kind(law) -> str:
    """"kink", "smooth" or "" for a law (its name or Law); a law registered without ``shape``
    that declares a critical depth counts as a kink law."""
    law = get_law(law)
    return law.shape or ("kink" if law.has_critical_depth else "")


# ---------------------------------------------------------------------------------------------
# Built-in laws. Units: N parameters, T tokens, D layers, W model width; loss in nats.

_PAPER = "Depth Delusion (arXiv 2601.20994), Eq. 5-6"
_E = Param("E", (0.5, 2.5), bounds=(0, INF), doc="irreducible loss (nats)")
_A = Param("A", (10.0, 1e4), log=True, bounds=(0, INF), doc="capacity scale")
_ALPHA = Param("alpha", (0.05, 0.6), bounds=(0, INF), doc="capacity exponent", symbol="α")
_LAM = Param("lam", (0.01, 1.0), log=True, bounds=(0, INF), doc="depth-penalty scale (nats per layer at W=1)", symbol="λ")
_KAPPA = Param("kappa", (1.0, 4.0), bounds=(0, INF), doc="critical-depth slope: D_crit = κ ln W", symbol="κ")
_GAMMA = Param("gamma", (0.0, 0.8), bounds=(0, INF), doc="width exponent of the depth penalty", symbol="γ")
_B = Param("B", (10.0, 1e4), log=True, bounds=(0, INF), doc="data scale")
_BETA = Param("beta", (0.1, 0.5), bounds=(0, INF), doc="data exponent", symbol="β")
_TOKENS_OFF = {"B": 0.0, "beta": 0.0}


def _per_distinct(term, *params):
    """``term(*params)`` for (M, 1) parameter columns, computed once per run of equal
    consecutive rows of ``params`` (compared bit for bit) and spread back to the M rows. A
    finite-difference Jacobian evaluates the law at the points that each move one parameter,
    one problem's points next to each other, so runs of them share a term's parameters; each
    element is the same operation on the same numbers, hence the same value. Runs, not
    distinct rows: finding those sorted the rows, which cost as much as the term it saved.
    Scalars, other shapes and rows without a repeat evaluate the term as it is. Worth it only
    for a costly term (the softplus' logaddexp): a power costs less than the gather."""
    cols = [np.asarray(p) for p in params]
    m = cols[0].shape[0] if cols[0].ndim == 2 else 0
    if m < 3 or any(c.shape != (m, 1) or c.dtype != np.float64 for c in cols):
        return term(*params)
    keys = np.concatenate(cols, axis=1).view(np.int64)
    new_run = np.ones(m, bool)
    new_run[1:] = np.any(keys[1:] != keys[:-1], axis=1)
    first = np.flatnonzero(new_run)
    if len(first) == m:
        return term(*params)
    out = term(*(c[first] for c in cols))
    return out[np.cumsum(new_run) - 1] if np.ndim(out) == 2 and len(out) == len(first) else term(*params)


def _token_term(x: LawInputs, B, beta):
    # B = 0 (fixed) marks the dropped term; T may then be NaN (unknown), which must not leak.
    return 0.0 if np.ndim(B) == 0 and B == 0 else B * x.power("T", -beta)


def _depth_delusion(x, A, alpha, lam, kappa, gamma, E, B=0.0, beta=0.0):
    excess = np.maximum(0.0, x.D - kappa * np.log(x.W))
    return A * x.power("N", -alpha) + _token_term(x, B, beta) + lam * excess * x.power("W", -gamma) + E


def _depth_delusion_relative(x, A, alpha, lam, kappa, gamma, E, B=0.0, beta=0.0):
    d_crit = kappa * np.log(x.W)
    excess = np.maximum(0.0, x.D - d_crit) / d_crit
    return A * x.power("N", -alpha) + _token_term(x, B, beta) + lam * excess * x.power("W", -gamma) + E


def _depth_delusion_power(x, A, alpha, lam, c, p, gamma, E, B=0.0, beta=0.0):
    excess = np.maximum(0.0, x.D - c * x.power("W", p))
    return A * x.power("N", -alpha) + _token_term(x, B, beta) + lam * excess * x.power("W", -gamma) + E


def _shape_quadratic(x, A, alpha, q, m, E, B=0.0, beta=0.0):
    return A * x.power("N", -alpha) + _token_term(x, B, beta) + q * (np.log(x.D / x.W) - m) ** 2 + E


SOFTPLUS_MIN_WIDTH = 2.0  # layers: a bend sharper than this is the kink's, not a smooth law's


def _depth_softplus(x, A, alpha, lam, kappa, s, gamma, E, B=0.0, beta=0.0):
    # s·ln(1 + e^(z/s)): → max(0, z) as s → 0, ≈ s·ln 2 + z/2 near z = 0 for large s
    excess = _per_distinct(lambda kappa, s: s * np.logaddexp(0.0, (x.D - kappa * np.log(x.W)) / s), kappa, s)
    return A * x.power("N", -alpha) + _token_term(x, B, beta) + lam * excess * x.power("W", -gamma) + E


def _size_kink(x, A, alpha, lam, N_c, E, B=0.0, beta=0.0):
    excess = np.maximum(0.0, np.log(x.N / N_c))
    return A * x.power("N", -alpha) + _token_term(x, B, beta) + lam * excess + E


def _kaplan(x, E, A, alpha):
    return E + A * x.power("N", -alpha)


def _chinchilla(x, E, A, alpha, B, beta):
    return E + A * x.power("N", -alpha) + B * x.power("T", -beta)


def kappa_ln_w(W, kappa):
    """The paper's critical depth, D_crit = κ·ln W (a law whose ``Roles.d_crit`` is this one
    has the paper's κ as its kink)."""
    return kappa * np.log(W)


def papers_kappa(law: Law) -> str:
    """The law's parameter that estimates the paper's κ: its kink where its critical depth is the
    paper's κ·ln W (:func:`kappa_ln_w`), whatever the parameter's name; "" for any other law."""
    return law.kink if law.roles.d_crit is kappa_ln_w else ""


def _power_of_width(W, c, p):
    return c * W ** p


#: The roles of the laws whose penalty λ switches on past D_crit = κ·ln W.
def _kappa_breaks(x):
    """κ at which each row's depth is D_crit (D = κ·ln W): the kink's objective bends there."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return x.D / np.log(x.W)


_KAPPA_KINK = Roles(penalty="lam", kink="kappa", width_exponent="gamma", capacity_exponent="alpha",
                    d_crit=kappa_ln_w, d_crit_text="{kappa:.3g}·ln W", breaks=_kappa_breaks)
#: the laws with the capacity term A·N^−α and no penalty of their own
_CAPACITY = Roles(capacity_exponent="alpha")

_DD_PARAMS = {"A": _A, "alpha": _ALPHA, "lam": _LAM, "kappa": _KAPPA, "gamma": _GAMMA, "E": _E,
              "B": _B, "beta": _BETA}
register_law(
    _depth_delusion, name="depth_delusion", params=_DD_PARAMS, source=_PAPER, shape="kink", roles=_KAPPA_KINK,
    formula="A·N^−α [+ B·T^−β] + λ·max(0, D − κ·ln W)·W^−γ + E",
    token_params=_TOKENS_OFF,
    doc="The paper's critical-depth ansatz: a capacity term, an optional data term (only when "
        "token counts are known and vary), and a linear penalty for depth beyond "
        "D_crit(W) = κ·ln W, shrinking with width as W^−γ.")
register_law(
    _depth_delusion_relative, name="depth_delusion_relative", params=_DD_PARAMS, source=_PAPER + " (variant)",
    shape="kink", roles=_KAPPA_KINK,
    formula="A·N^−α [+ B·T^−β] + λ·max(0, D − D_crit)/D_crit·W^−γ + E,  D_crit = κ·ln W",
    token_params=_TOKENS_OFF,
    doc="As depth_delusion, with the excess depth measured relative to D_crit (the paper "
        "does not say which form it fitted).")
register_law(
    _depth_delusion_power, name="depth_delusion_power", shape="kink",
    roles=Roles(penalty="lam", kink="c", width_exponent="gamma", capacity_exponent="alpha",
                d_crit_width_exponent="p", d_crit=_power_of_width, d_crit_text="{c:.3g}·W^{p:.3g}"),
    params={"A": _A, "alpha": _ALPHA, "lam": _LAM,
            "c": Param("c", (0.3, 5.0), log=True, bounds=(0, INF), doc="critical-depth scale"),
            "p": Param("p", (0.2, 0.6), bounds=(0, INF), doc="critical-depth exponent: D_crit = c·W^p "
                       f"(comparable to the persistence exponent, {PAPER_PERSISTENCE_EXPONENT} in the paper)"),
            "gamma": _GAMMA, "E": _E, "B": _B, "beta": _BETA},
    source=_PAPER + " (variant: D_crit ∝ ℓ(W) ∝ W^p, Hypothesis 3.3)",
    formula="A·N^−α [+ B·T^−β] + λ·max(0, D − c·W^p)·W^−γ + E",
    token_params=_TOKENS_OFF,
    doc="As depth_delusion, with the power-law critical depth D_crit = c·W^p that the "
        "persistence-length argument predicts (p is the persistence exponent).")
register_law(
    _shape_quadratic, name="shape_quadratic", shape="smooth", roles=_CAPACITY,
    params={"A": _A, "alpha": _ALPHA,
            "q": Param("q", (1e-3, 0.1), log=True, bounds=(0, INF),
                       doc="curvature of the shape penalty (nats per (ln D/W)²)"),
            "m": Param("m", (-6.0, -3.0), doc="ln(D/W) of the loss-optimal aspect ratio"),
            "E": _E, "B": _B, "beta": _BETA},
    source="Kaplan et al. 2020 (arXiv 2001.08361), §3.1 and Fig. 5: at fixed N the loss is a "
           "shallow bowl in the aspect ratio, a few percent over a 40× range; its lowest-order "
           "smooth form",
    formula="A·N^−α [+ B·T^−β] + q·(ln(D/W) − m)² + E",
    token_params=_TOKENS_OFF,
    doc="Smooth shape alternative (5 parameters without the data term): a quadratic penalty in "
        "the log aspect ratio around an optimum m, no critical depth. A critical depth must fit "
        "better than this bowl to be evidence of a kink.")
register_law(
    _depth_softplus, name="depth_softplus", shape="smooth", roles=dataclasses.replace(_KAPPA_KINK, breaks=None),
    params={"A": _A, "alpha": _ALPHA, "lam": _LAM, "kappa": _KAPPA,
            "s": Param("s", (2.0, 8.0), log=True, bounds=(SOFTPLUS_MIN_WIDTH, INF),
                       doc="width of the bend (layers); at its lower bound the bend is as sharp "
                           "as a smooth law may be"),
            "gamma": _GAMMA, "E": _E, "B": _B, "beta": _BETA},
    source=_PAPER + " with the kink smoothed: a softplus (Dugas et al. 2001) of fitted width",
    formula="A·N^−α [+ B·T^−β] + λ·s·ln(1 + e^((D − κ·ln W)/s))·W^−γ + E",
    token_params=_TOKENS_OFF,
    doc="Smooth alternative (7 parameters without the data term): the depth penalty bends over "
        f"s ≥ {SOFTPLUS_MIN_WIDTH:g} layers instead of at a point. s → 0 is the kink "
        "(depth_delusion), large s a penalty linear in depth; a bend sharper than "
        f"{SOFTPLUS_MIN_WIDTH:g} layers is the kink law's domain, so the two are told apart by "
        "whether the data need one.")
#: The rival a depth kink must beat: the same penalty shape, switched on past a model size.
SIZE_KINK = "size_kink"
register_law(
    _size_kink, name=SIZE_KINK, roles=Roles(penalty="lam", kink="N_c", capacity_exponent="alpha",
                                            breaks=lambda x: x.N),
    params={"A": _A, "alpha": _ALPHA,
            "lam": Param("lam", (0.01, 1.0), log=True, bounds=(0, INF), symbol="λ",
                         doc="size-penalty scale (nats per e-fold of N past N_c)"),
            "N_c": Param("N_c", (1e7, 1e11), log=True, bounds=(0, INF), symbol="N_c",
                         doc="model size past which the penalty acts (parameters)"),
            "E": _E, "B": _B, "beta": _BETA},
    source="this project: the rival of a depth kink that a break in model size would mimic "
           "(issue 63: on Chinchilla's runs the depth kink acts on the largest models only)",
    formula="A·N^−α [+ B·T^−β] + λ·max(0, ln N − ln N_c) + E",
    token_params=_TOKENS_OFF,
    doc="Shape-agnostic law with a break in model size: the paper's kink penalty (linear past "
        "a threshold) in ln N instead of in depth, switched on past N_c. No critical depth: a "
        "depth kink whose gain this law matches is not distinguished from a size break.")
register_law(
    _kaplan, name="kaplan", params={"E": _E, "A": _A, "alpha": _ALPHA}, roles=_CAPACITY,
    source="Kaplan et al. 2020 (with an irreducible term); shape-agnostic baseline",
    formula="E + A·N^−α",
    doc="Shape-agnostic baseline: loss depends on the parameter count only.")
register_law(
    _chinchilla, name="chinchilla", roles=_CAPACITY,
    params={"E": _E, "A": _A, "alpha": _ALPHA, "B": _B, "beta": _BETA},
    source="Hoffmann et al. 2022 (Chinchilla), Approach 3", needs_tokens=True,
    formula="E + A·N^−α + B·T^−β",
    doc="Shape-agnostic baseline with a data term; needs per-run token counts that vary.")


_GEMSTONES = ("McLeish et al., Gemstones: A Model Suite for Multi-Faceted Scaling Laws (arXiv 2502.06857, "
              "NeurIPS 2025), §3 width-depth law; their depth_width.py --num_parameters 4 "
              "(github.com/mcleish7/gemstone-scaling-laws)")


def _gemstones_width_depth(x, E, Aw, aw, Ad, ad, A, alpha, B, beta):
    return E + Aw * x.power("W", -aw) + Ad * x.power("D", -ad) + A * x.power("N", -alpha) + B * x.power("T", -beta)


_AW = Param("Aw", (0.5, 20.0), log=True, bounds=(0, INF), doc="width-term scale")
_AW_EXP = Param("aw", (0.1, 0.6), bounds=(0, INF), doc="width exponent")
_AD = Param("Ad", (0.2, 5.0), log=True, bounds=(0, INF), doc="depth-term scale")
_AD_EXP = Param("ad", (0.1, 0.8), bounds=(0, INF), doc="depth exponent")
register_law(
    _gemstones_width_depth, name="gemstones_width_depth", shape="smooth", needs_tokens=True, roles=_CAPACITY,
    params={"E": _E, "Aw": _AW, "aw": _AW_EXP, "Ad": _AD, "ad": _AD_EXP,
            "A": _A, "alpha": _ALPHA, "B": _B, "beta": _BETA},
    source=_GEMSTONES,
    formula="E + Aw·W^−aw + Ad·D^−ad + A·N^−α + B·T^−β",
    doc="The Gemstones authors' width-depth law (four exponents: width, depth, parameters, "
        "tokens), fitted by them as log L = LSE(ln Aw − aw·ln W, ln Ad − ad·ln D, ln A − α·ln N, "
        "ln B − β·ln T, ln E) under a Huber loss of log residuals (the same function). Smooth: "
        "loss falls with width and with depth at any shape, no critical depth. Kaplan and "
        "Chinchilla are its Aw = Ad = 0 (and B = 0) cases.")


_INVERSE_DEPTH = ("Liu, Kangaslahti, Liu and Gore, Inverse Depth Scaling From Most Layers Being Similar "
                  "(arXiv 2602.05970, ICML 2026), their additive law; fitting code "
                  "github.com/liuyz0/DepthScaling Scaling/held_out_validation.py @ 07360e3")


def _inverse_depth(x, E, Aw, aw, Ad, ad, B, beta):
    return E + Aw * x.power("W", -aw) + Ad * x.power("D", -ad) + B * x.power("T", -beta)


register_law(
    _inverse_depth, name="inverse_depth", shape="smooth", needs_tokens=True,
    params={"E": _E, "Aw": _AW, "aw": _AW_EXP, "Ad": _AD,
            "ad": Param("ad", (0.3, 1.5), bounds=(0, INF), doc="depth exponent"),
            "B": _B, "beta": _BETA},
    source=_INVERSE_DEPTH,
    formula="E + Aw·W^−aw + Ad·D^−ad + B·T^−β",
    doc="Liu et al.'s inverse-depth law: additive width, depth and data terms and no parameter-count "
        "term (their c_W·W^−a_W + c_D·D^−a_D + c_T·T^−a_T; a_D near 1 is the inverse depth scaling "
        "that most layers being similar predicts). They fit ln L by least squares on Chinchilla's runs "
        "less the 40 highest losses; here it is fitted like every other law. Smooth: deeper and wider "
        "always help, no critical depth. gemstones_width_depth is this law plus A·N^−α.")

#: The laws every fresh interpreter registers (a worker process among them): those above.
_BUILT_IN: dict[str, Law] = dict(_REGISTRY)


def fresh_process_fits(law) -> bool:
    """Whether a fresh process fits the same ``law`` as this one: a built-in law, by name, not
    replaced since (a worker process looks it up by name), whose fits pickle (no lambda among
    its roles), so that they come back from the worker."""
    name = law.name if isinstance(law, Law) else law
    built_in = _BUILT_IN.get(name)
    if built_in is None or _REGISTRY.get(name) is not built_in or (isinstance(law, Law) and law is not built_in):
        return False
    return loads_in_a_fresh_process(built_in)


def loads_in_a_fresh_process(obj) -> bool:
    """Whether ``obj`` pickles into something a spawned process can load: no lambda or class
    defined inside a function, and nothing of a ``__main__`` that a fresh process cannot import
    (a notebook's, the REPL's, ``python -c``'s; a script's is re-run there under its guard)."""
    import pickle
    import sys

    main_reloads = getattr(sys.modules.get("__main__"), "__file__", None) is not None

    class _Probe(pickle.Pickler):
        def reducer_override(self, item):
            owner = item if isinstance(item, type) or inspect.isroutine(item) else type(item)
            if getattr(owner, "__module__", None) == "__main__" and not main_reloads:
                raise pickle.PicklingError(f"{owner!r} is defined in a __main__ a fresh process cannot import")
            return NotImplemented

    try:
        _Probe(io.BytesIO()).dump(obj)
    except (pickle.PicklingError, AttributeError, TypeError):
        return False
    return True
