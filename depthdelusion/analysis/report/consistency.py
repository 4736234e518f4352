"""Consistency audit of a runs table: do the printed parameter counts follow from (D, W)?

Each named convention maps (D, W) to a parameter count. Per group, the convention that
reproduces the printed counts best (lowest median relative error) is taken as the group's own;
rows more than ``tolerance`` (1%) off it are flagged, with the width or depth that would
reproduce the printed count. Groups following different conventions are reported too.
Only what is in the table can be checked; :attr:`ConsistencyAudit.unchecked` says what is not.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import optimize

from ..table.param_count import PARAM_CONVENTIONS as TABLE_CONVENTIONS
from ..table.param_count import with_params
from ..table.load import PAPER_VOCAB as VOCAB
from ..table.load import load_runs


def _baseline(D, W, V=VOCAB):
    return D * (12 * W ** 2 + 12 * W) + 2 * V * W + 516 * W + V


def _large_scale(D, W, V=VOCAB):
    return D * (12 * W ** 2 + 4 * W) + 2 * V * W + 2048 * W


def blocks_plus_embeddings(D, W, V=VOCAB):
    """N = 12·D·W² + 2·V·W: attention and a 4W FFN per block, input and output embeddings (no
    biases, no norms); V = 0 gives the blocks alone."""
    return 12 * D * W ** 2 + 2 * V * W


def _trainer_default(D, W, V=VOCAB):
    # depthdelusion's own model with its defaults (gelu 4W, biases, LayerNorm, rope, untied head
    # with bias): depthdelusion.model_size.count_params
    return D * (12 * W ** 2 + 13 * W) + 2 * V * W + V + 2 * W


def _blocks_only(D, W, V=VOCAB):
    return blocks_plus_embeddings(D, W, 0)


#: name -> (formula, function of (D, W, V)).
CONVENTIONS = {
    "paper_baseline": ("D(12W² + 12W) + 2VW + 516W + V", _baseline),
    "paper_large_scale": ("D(12W² + 4W) + 2VW + 2048W", _large_scale),
    "blocks_plus_embeddings": ("12DW² + 2VW", blocks_plus_embeddings),
    "blocks_only": ("12DW² (non-embedding)", _blocks_only),
    "depthdelusion": ("D(12W² + 13W) + 2VW + V + 2W (this trainer's defaults)", _trainer_default),
}


@dataclass
class ConventionFit:
    group: str
    convention: str
    n_rows: int
    median_rel_error: float
    max_rel_error: float
    n_within_tolerance: int


@dataclass
class RowFinding:
    """A row whose printed count is off its group's convention by more than the tolerance."""

    name: str
    group: str
    depth: int
    width: int
    printed: float
    expected: float
    rel_error: float
    implied_width: float
    implied_depth: float
    explanation: str


@dataclass
class ConsistencyAudit:
    convention_fits: list
    best: dict              # group -> convention name
    findings: list          # RowFinding
    table_findings: list    # strings about the table as a whole
    unchecked: list         # what the table cannot tell us
    tolerance: float
    vocab: int = VOCAB
    ratio_findings: list = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"Parameter-count audit (V = {self.vocab}, flag threshold {self.tolerance:.0%}):"]
        for group, conv in self.best.items():
            fits = {f.convention: f for f in self.convention_fits if f.group == group}
            f = fits[conv]
            lines.append(f"  group {group!r}: best convention {conv} = {CONVENTIONS[conv][0]} "
                         f"(median error {f.median_rel_error:.3%}, {f.n_within_tolerance}/{f.n_rows} rows within "
                         f"{self.tolerance:.0%})")
        for t in self.table_findings:
            lines.append(f"  ! {t}")
        for r in self.findings:
            lines.append(f"  ! {r.explanation}")
        for r in self.ratio_findings:
            lines.append(f"  ! {r}")
        if not self.findings and not self.table_findings and not self.ratio_findings:
            lines.append("  no inconsistencies found")
        lines += [f"  (not checkable: {u})" for u in self.unchecked]
        return "\n".join(lines)


def _implied_width(D, N, fn, V):
    f = lambda w: fn(D, w, V) - N  # noqa: E731  increasing in w
    if f(1.0) > 0 or f(1e7) < 0:
        return float("nan")
    return float(optimize.brentq(f, 1.0, 1e7))


def _implied_depth(W, N, fn, V):
    base, per_layer = fn(0.0, W, V), fn(1.0, W, V) - fn(0.0, W, V)
    return float((N - base) / per_layer)


def audit_param_counts(runs, *, tolerance: float = 0.01, vocab: int = VOCAB,
                       depth_width_ratio=None) -> ConsistencyAudit:
    """Check printed parameter counts (and D/W ratios, if given) against (D, W).

    ``depth_width_ratio``: optional printed D/W per run (the paper prints it; the bundled CSV
    does not have it).
    """
    runs = load_runs(runs)
    D, W, N = runs.depth.astype(float), runs.width.astype(float), runs.params
    fits, best, findings, table_findings = [], {}, [], []
    for group in runs.groups:
        rows = np.flatnonzero(runs.group == group)
        for name, (_, fn) in CONVENTIONS.items():
            err = np.abs(fn(D[rows], W[rows], vocab) / N[rows] - 1)
            fits.append(ConventionFit(group, name, len(rows), float(np.median(err)), float(err.max()),
                                      int((err <= tolerance).sum())))
        group_fits = [f for f in fits if f.group == group]
        best[group] = min(group_fits, key=lambda f: (f.median_rel_error, f.convention)).convention
        fn = CONVENTIONS[best[group]][1]
        for i in rows:
            expected = fn(D[i], W[i], vocab)
            rel = expected / N[i] - 1
            if abs(rel) <= tolerance:
                continue
            iw, idp = _implied_width(D[i], N[i], fn, vocab), _implied_depth(W[i], N[i], fn, vocab)
            near_w = round(iw)
            explanation = (f"{runs.name[i]} ({group}): printed {_millions(N[i])}M, but {best[group]} gives "
                           f"{_millions(expected)}M ({rel:+.1%}); the printed count implies W ≈ {iw:.1f} "
                           f"at D = {int(D[i])} ({int(D[i])}L×{near_w} gives {_millions(fn(D[i], near_w, vocab))}M)"
                           f" or D ≈ {idp:.1f} at W = {int(W[i])}")
            findings.append(RowFinding(str(runs.name[i]), group, int(D[i]), int(W[i]), float(N[i]),
                                       float(expected), float(rel), iw, idp, explanation))
    if len(set(best.values())) > 1:
        parts, distinct = [], False
        for group, conv in best.items():
            others = [g for g in best if g != group]
            off = [f.median_rel_error for f in fits if f.group == group and f.convention in
                   {best[o] for o in others}]
            own = next(f.median_rel_error for f in fits if f.group == group and f.convention == conv)
            distinct |= max(off) > own + 0.0005  # tell conventions apart only beyond print rounding
            parts.append(f"{group} rows follow {conv} (under the other group's convention their median "
                         f"error is {max(off):.2%})")
        if distinct:
            table_findings.append("the table mixes parameter-count conventions: " + "; ".join(parts))
    ratio_findings, unchecked = [], []
    if depth_width_ratio is None:
        unchecked.append("D/W ratios — the data has no D/W column")
    else:
        ratio = np.asarray(depth_width_ratio, float)
        for i in np.flatnonzero(np.isfinite(ratio)):
            actual = D[i] / W[i]
            if abs(ratio[i] / actual - 1) > tolerance:
                ratio_findings.append(f"{runs.name[i]}: printed D/W {ratio[i]:.4g} is not {int(D[i])}/{int(W[i])} "
                                      f"= {actual:.4g}; it is {int(D[i])}/{D[i] / ratio[i]:.0f}")
    unchecked.append("numbers printed elsewhere (other tables, the text) are not in the data")
    return ConsistencyAudit(fits, best, findings, table_findings, unchecked, tolerance, vocab,
                            ratio_findings)


# ---------------------------------------------------------------------------------------------
# Parameter-count conventions for fitting: which N a law sees.

#: name -> what N means under it.
PARAM_CONVENTIONS = {
    "total": "N as printed (embeddings and LM head included); rows more than 1% off their "
             "group's own convention refitted with N recomputed from (D, W)",
    "non_embedding": "non-embedding N = D·(12W² + 13W) (attention 4W² + 4W, GELU FFN 8W² + 5W, "
                     "two LayerNorms 4W per block: the trainer's count for its default model), or "
                     "the runs' own non-embedding count when they carry one",
    "recomputed": "N recomputed from (D, W) for every row by its group's convention (the "
                  "consistency audit's best fit)",
    "nonembedding": TABLE_CONVENTIONS["nonembedding"],
}
NON_EMBEDDING_FORMULA = "D·(12W² + 13W)"


def non_embedding_params(depth, width):
    """D·(12W² + 13W): blocks of the trainer's default model (GELU FFN 4W, biases, LayerNorm)."""
    D, W = np.asarray(depth, float), np.asarray(width, float)
    return D * (12.0 * W ** 2 + 13.0 * W)


def table_vocab(runs) -> int | None:
    """The one vocabulary size the runs state (None when unknown for some run or mixed)."""
    own = getattr(runs, "vocab_size", None)
    own = np.asarray([] if own is None else own, float).ravel()
    if len(own) and np.all(np.isfinite(own)) and np.all(own == own[0]):
        return int(own[0])
    return None


def with_param_convention(runs, convention: str = "total", *, tolerance: float = 0.01,
                          vocab: int | None = None):
    """The runs with ``params`` replaced according to ``convention`` (see
    :data:`PARAM_CONVENTIONS`); returns ``(runs, notes)``, the notes naming every changed row."""
    import dataclasses

    if convention not in PARAM_CONVENTIONS:
        raise ValueError(f"unknown parameter-count convention {convention!r}; known: "
                         f"{', '.join(PARAM_CONVENTIONS)}")
    runs = load_runs(runs)
    if convention == "nonembedding" or (convention == "total" and runs.embeddings is not None):
        # one count per table, whichever command reads it: a registered table's counts as its
        # authors published them, Kaplan's non-embedding N from the same registration
        return with_params(runs, convention)
    if not (runs.has("depth") and runs.has("width")):
        if convention != "total":
            raise ValueError(f"the {convention} parameter count needs depth and width for every "
                             "run; this table has no shape: use the total N it gives")
        return runs, ["N convention: total (as given; the table has no depth and width to check it)"]
    if vocab is None:  # the runs' own vocabulary when they state one; never an assumed constant
        vocab = table_vocab(runs)
    D, W = runs.depth.astype(float), runs.width.astype(float)
    if convention == "non_embedding":
        own = np.asarray(getattr(runs, "params_non_embedding", np.full(len(runs), np.nan)), float)
        params = np.where(np.isfinite(own) & (own > 0), own, non_embedding_params(D, W))
        how = ("the runs' own non-embedding counts" if np.all(np.isfinite(own) & (own > 0))
               else f"non-embedding N = {NON_EMBEDDING_FORMULA}")
        return dataclasses.replace(runs, params=params), [f"N convention: {how}"]
    if vocab is None:
        if convention == "recomputed":
            raise ValueError("--params recomputed needs the vocabulary size: the table has no "
                             "vocab_size column (one value for every run); give --vocab V")
        return runs, ["N convention: total (as given; not checked against the shapes: the table "
                      "gives no vocab_size and no --vocab was given)"]
    audit = audit_param_counts(runs, tolerance=tolerance, vocab=vocab)
    params = runs.params.copy()
    notes = []
    if convention == "recomputed":
        for group, conv in audit.best.items():
            rows = runs.group == group
            params[rows] = CONVENTIONS[conv][1](D[rows], W[rows], vocab)
        notes.append("N convention: recomputed from (D, W) by each group's convention ("
                     + "; ".join(f"{g}: {CONVENTIONS[c][0]}" for g, c in audit.best.items())
                     + f", V = {vocab})")
        return dataclasses.replace(runs, params=params), notes
    for finding in audit.findings:
        i = int(np.flatnonzero(runs.name == finding.name)[0])
        params[i] = finding.expected
        notes.append(f"N convention: total; {finding.name}'s printed N ({finding.printed / 1e6:.1f}M) "
                     f"disagrees with its shape ({audit.best[finding.group]} gives "
                     f"{finding.expected / 1e6:.1f}M, {finding.rel_error:+.1%}): fitted with the "
                     "recomputed count")
    if not notes:
        notes.append("N convention: total (as printed; every row within "
                     f"{tolerance:.0%} of its group's convention)")
    return dataclasses.replace(runs, params=params), notes


def _millions(n: float) -> str:
    """A parameter count in millions: 1 decimal from 100M up (3029.1), 3 significant digits below
    (0.123, 12.3), so a byte-level toy model is not printed as 0.0M."""
    m = n / 1e6
    return f"{m:.1f}" if abs(m) >= 100 else f"{m:.3g}"
