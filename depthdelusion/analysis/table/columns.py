"""The runs table's columns: their names and the aliases a table may use (which columns a law
needs is :mod:`.law_columns`).

A table (CSV, DataFrame, list of dicts) needs only the columns of the law fitted to it:
``params,loss`` (kaplan), ``params,tokens,loss`` (chinchilla), ``depth,width,params[,tokens],loss``
(the depth laws). Columns are found by their canonical name or an alias (:data:`FIELDS`), or
through an explicit mapping ``{"loss": "val_loss", "params": "N"}`` (``--columns
loss=val_loss,params=N``). The papers' notation is read too: ``N`` (parameters), ``C``,
``flops``, ``compute``, ``budget_flops`` (training compute), ``L`` (loss, when no other column
gives the loss). ``D`` is depth in this project but data (tokens) in Chinchilla's notation: it
is read from its values (:func:`read_d_column`) and the reading is stated, or refused with a
request for an explicit mapping.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Field:
    """A canonical column: its aliases and what it holds."""

    name: str
    aliases: tuple[str, ...]
    doc: str


FIELDS = {f.name: f for f in (
    Field("depth", ("n_layers", "num_layers", "layers", "n_layer"), "layers (transformer blocks)"),
    Field("width", ("d_model", "hidden_size", "n_embd", "model_dim", "W"), "model width (residual dimension)"),
    Field("params", ("N", "n_params", "num_params", "parameters", "params_millions", "params_billions"),
          "parameter count N, as the source counts it"),
    Field("params_non_embedding", ("non_embedding_params", "n_params_non_embedding"),
          "the source's own non-embedding parameter count (used as given by --params non_embedding)"),
    Field("tokens", ("T", "n_tokens", "num_tokens", "tokens_billions"), "training tokens"),
    Field("loss", ("final_loss",), "final loss in nats (per token or per byte; see loss_unit)"),
    Field("loss_se", ("final_loss_se", "loss_stderr"), "standard error of the loss (nats)"),
    Field("group", (), "free label, e.g. a size class or token regime"),
    Field("name", ("run", "run_name"), "run name"),
    Field("tokenizer", (), "tokenizer name (bytes, gpt2, ...)"),
    Field("vocab_size", ("vocab",), "vocabulary size of the model"),
    Field("loss_unit", ("loss_units",), "nats/token or nats/byte"),
    Field("compute", ("C", "flops", "FLOPs", "budget_flops", "compute_flops"),
          "training compute in FLOPs (about 6·N·tokens)"),
)}
#: Source columns whose values are in a larger unit than the canonical column.
SCALE = {"params_millions": 1e6, "params_billions": 1e9, "tokens_billions": 1e9}
#: Names whose meaning depends on the notation, and why.
AMBIGUOUS = {"D": "depth in this project, tokens (data) in Chinchilla's notation",
             "L": "loss in Chinchilla's notation, layers elsewhere"}
AMBIGUOUS_D, AMBIGUOUS_L = "D", "L"
#: The deepest stack a depth column may plausibly hold; a D column beyond it is tokens.
MAX_DEPTH = 1024
#: C within this relative distance of 6·N·D (median over rows) reads D as tokens.
SIX_ND_TOLERANCE = 0.1
#: Columns that hold text; every other column holds numbers.
TEXT_FIELDS = ("group", "name", "tokenizer", "loss_unit")
#: Columns that decide which law is fitted and what it answers: an unread column close to the
#: name of one the table lacks is an error (a misspelling would change the answer silently).
DECISIVE = ("depth", "width", "params", "tokens", "loss", "compute")
#: How alike (difflib's ratio, case-insensitive) an unread column and a name must be for the
#: column to be taken for a misspelling of the name: 'tokenz', 'widht', 'Params', 'loss_sterr'.
NEAR = 0.8
#: Law inputs (LawInputs attributes) and the column each comes from.
LAW_INPUTS = {"D": "depth", "W": "width", "N": "params", "T": "tokens"}


def field_of(name: str) -> str | None:
    """The canonical column that ``name`` (a canonical name or an alias) reads as, else None."""
    for f in FIELDS.values():
        if name == f.name or name in f.aliases:
            return f.name
    return None


def resolve(header, columns: dict | None, where: str) -> dict[str, str]:
    """{canonical name: source column} for the columns of ``header`` a Runs table reads.

    ``columns`` maps canonical names to source columns and wins over aliases. Two source
    columns that alias the same field are an error (say which one with ``columns``).
    """
    header = list(header)
    found: dict[str, str] = {}
    for key, col in (columns or {}).items():
        if key not in FIELDS:
            raise ValueError(f"column mapping {key}={col}: {key!r} is not a column name; valid "
                             f"names: {', '.join(FIELDS)}")
        if col not in header:
            raise ValueError(f"column mapping {key}={col}: {where} has no column {col!r}; its "
                             f"columns: {', '.join(map(str, header))}")
        found[key] = col
    taken = set(found.values())
    for f in FIELDS.values():
        if f.name in found:
            continue
        hits = [h for h in header if field_of(h) == f.name and h not in taken]
        if len(hits) > 1:
            raise ValueError(f"{where}: columns {', '.join(map(repr, hits))} all give {f.name}; keep "
                             f"one, or choose with --columns {f.name}=NAME (API: columns={{"
                             f"'{f.name}': NAME}})")
        if hits:
            found[f.name] = hits[0]
    if "loss" not in found and AMBIGUOUS_L in header and AMBIGUOUS_L not in taken:
        found["loss"] = AMBIGUOUS_L  # Chinchilla's notation; refused later if it holds layers
    if "loss" not in found:
        meant = "".join(f" Column {c!r}: did you mean {name!r}?" for c, name, f in near_misses(header, found)
                        if f == "loss")
        raise ValueError(f"{where}: no loss column (looked for {names_of('loss')}); its columns: "
                         f"{', '.join(map(str, header)) or 'none'}.{meant} Map yours with --columns "
                         "loss=NAME (API: columns={'loss': NAME})")
    return found


def near_misses(header, found: dict) -> list[tuple[str, str, str]]:
    """(column, the name it is close to, that name's field) for each column of ``header`` that
    is not read and is within ``NEAR`` of the name or an alias (two characters or more) of a
    field the table lacks."""
    out = []
    for col in map(str, header):
        if col in found.values() or col in AMBIGUOUS:
            continue
        best = max(((difflib.SequenceMatcher(None, col.lower(), name.lower()).ratio(), name, f.name)
                    for f in FIELDS.values() if f.name not in found
                    for name in (f.name, *f.aliases) if len(name) > 1), default=None)
        if best is not None and best[0] >= NEAR:
            out.append((col, best[1], best[2]))
    return out


def check_near_misses(header, found: dict, columns: dict | None, where: str, cells) -> list[str]:
    """Notes naming each unread column that looks like a misspelled column name
    (:func:`near_misses`) and holds what that column holds (numbers, unless a text field: a
    column ``model`` of model names is no misspelled ``d_model``). One that would decide the law
    (:data:`DECISIVE`) is a ValueError instead, unless ``columns`` names the table's columns
    (then it is left unread, with a note). ``cells(column)`` gives a column's values, one per
    run (:func:`read_d_column`)."""
    notes = []
    for col, name, field in near_misses(header, found):
        if field not in TEXT_FIELDS and not _holds_numbers(cells(col)):
            continue
        text = (f"{where}: column {col!r} is not read: did you mean {name!r}"
                f"{'' if name == field else f' ({field})'}? Rename it, or map it with --columns "
                f"{field}={col}")
        if field in DECISIVE and not columns:
            raise ValueError(f"{text} (API: columns={{'{field}': '{col}'}}); unread, the table has "
                             f"no {field} column, which changes what is fitted. If it holds "
                             "something else, name the columns you mean with --columns and it "
                             "stays unread")
        notes.append(text)
    return notes


def _holds_numbers(cells) -> bool:
    """Every non-empty cell a finite number ≥ 0, and at least one cell non-empty."""
    cells = [c for c in cells if c is not None and str(c).strip() not in ("", "nan")]
    try:
        return bool(cells) and all(math.isfinite(float(c)) and float(c) >= 0 for c in cells)
    except (TypeError, ValueError):
        return False


def read_d_column(cells, found: dict, where: str):
    """(canonical name, sentence) for a table's ``D`` column read from its values: tokens when
    C ≈ 6·N·D (within ``SIX_ND_TOLERANCE``, median over rows) or every value is beyond
    ``MAX_DEPTH``; depth when every value is a whole number in [1, MAX_DEPTH]. None when the
    table already has both a tokens and a depth column; ValueError when the values decide
    neither way, asking for an explicit mapping. ``cells(column)`` gives a column's values, one
    per run (text as read, or numbers)."""
    free = [f for f in ("tokens", "depth") if f not in found]
    if not free:
        return None
    ask = ("say which with --columns tokens=D or --columns depth=D (API: columns={'tokens': 'D'})")
    try:
        d = np.array([float(v) for v in cells(AMBIGUOUS_D)], float)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: column 'D' holds values that are not numbers; {ask}") from None
    if not np.all(np.isfinite(d)) or np.any(d <= 0):
        raise ValueError(f"{where}: column 'D' has empty, zero or negative values; {ask}")
    span = f"{d.min():.3g}–{d.max():.3g}"
    if "tokens" in free:
        ratio = _six_nd_ratio(cells, found, d)
        if ratio is not None and ratio <= SIX_ND_TOLERANCE:
            return "tokens", (f"column D read as tokens: C ≈ 6·N·D (median relative difference "
                              f"{ratio:.1%}); D ranges {span}")
        if d.min() > MAX_DEPTH:
            return "tokens", (f"column D read as tokens: its values ({span}) are far beyond any "
                              f"depth (> {MAX_DEPTH} layers)")
    if "depth" in free and np.all(d == np.round(d)) and d.max() <= MAX_DEPTH:
        return "depth", f"column D read as depth (layers): whole numbers {span}"
    raise ValueError(f"{where}: column 'D' ({span}) is neither depth (whole numbers up to "
                     f"{MAX_DEPTH}) nor tokens (C ≈ 6·N·D, or values beyond {MAX_DEPTH}) by its "
                     f"values, or the table already has the column it would be; {ask}")


def _six_nd_ratio(cells, found, d):
    if "compute" not in found or "params" not in found:
        return None
    try:
        c = np.array([float(v) for v in cells(found["compute"])], float) * scale_of(found["compute"])
        n = np.array([float(v) for v in cells(found["params"])], float) * scale_of(found["params"])
    except (TypeError, ValueError):
        return None
    with np.errstate(all="ignore"):
        rel = np.abs(c / (6 * n * d) - 1)
    rel = rel[np.isfinite(rel)]
    return float(np.median(rel)) if len(rel) else None


def names_of(field: str) -> str:
    """The field's canonical name and its aliases, comma-separated."""
    f = FIELDS[field]
    return ", ".join((f.name, *f.aliases))


def scale_of(source_column: str) -> float:
    return SCALE.get(source_column, 1.0)


def describe_fields() -> str:
    """One line per canonical column with its aliases (for help texts and docs)."""
    lines = [f"{f.name:<10} {f.doc}" + (f"; aliases: {', '.join(f.aliases)}" if f.aliases else "")
             for f in FIELDS.values()]
    lines.append("D          tokens when C ≈ 6·N·D or its values are beyond any depth (> "
                 f"{MAX_DEPTH}), depth when whole numbers up to {MAX_DEPTH}; the reading is "
                 "stated; otherwise map it: --columns tokens=D or depth=D")
    lines.append("L          loss (Chinchilla's notation) when no other column gives the loss; "
                 "refused if it holds whole numbers (layers)")
    lines.append("params_millions, params_billions and tokens_billions are scaled to counts.")
    return "\n".join(lines)


def present_columns(runs) -> list[str]:
    """The columns of a :class:`.runs.Runs` known for every run, in canonical order."""
    return [c for c in FIELDS if runs.has(c)]
