"""``--where EXPR``: keep the rows of a runs table that satisfy a small comparison grammar.

Grammar (parsed here, never evaluated as Python)::

    EXPR   := COMPARE ("and" COMPARE)*
    COMPARE:= COLUMN OP VALUE
    OP     := "==" | "!=" | "<" | "<=" | ">" | ">="
    VALUE  := a number | true | false | a word | 'quoted text' | "quoted text"

COLUMN is a canonical column name (``params``, ``tokens``, ``group``, ...), the table's own
name for one, any alias the table reader reads (``N``, ``T``, ``W``, ``C``, ``params_billions``:
:data:`.columns.FIELDS`; a scaled one such as ``params_billions`` compares in its own unit) or
any other column of the table (``lr``, ``seed``, ``dataset``). A number VALUE compares numerically: a cell that
is not a number satisfies only ``!=``. ``true`` / ``false`` (any case) compare with the cells'
text case-insensitively; any other VALUE compares as text (``==`` and ``!=`` only).

Also the table's splits: ``--by COLUMN`` (:func:`split_by`) and the text columns that group its
rows (:func:`grouping_columns`), which the fit's diagnostics and replicate cells read.
"""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass

import numpy as np

OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
       ">": operator.gt, ">=": operator.ge}
_TOKEN = re.compile(r"""\s*(?:(==|!=|<=|>=|<|>)|'([^']*)'|"([^"]*)"|([^\s=!<>'"]+))""")


@dataclass(frozen=True)
class Comparison:
    column: str
    op: str
    value: object  # float, bool or str
    kind: str  # "number", "bool" or "text"

    def __str__(self) -> str:
        shown = self.value if self.kind != "text" else repr(self.value)
        if self.kind == "number":
            shown = f"{self.value:g}"
        return f"{self.column} {self.op} {shown}"


def parse_where(text: str) -> list[Comparison]:
    """The comparisons of ``text`` (joined by ``and``); ValueError naming what is malformed."""
    tokens = _tokens(text)
    out, i = [], 0
    while True:
        part = tokens[i:i + 3]
        if len(part) < 3 or part[0][0] != "word" or part[1][0] != "op" or part[2][0] == "op":
            got = " ".join(t[1] for t in part) or "nothing"
            raise ValueError(f"--where {text!r}: expected COLUMN OP VALUE (OP one of "
                             f"{', '.join(OPS)}), got {got!r}")
        column, op, (vkind, raw) = part[0][1], part[1][1], part[2]
        out.append(_comparison(column, op, raw, quoted=vkind == "quoted", text=text))
        i += 3
        if i == len(tokens):
            return out
        if tokens[i] != ("word", "and") and tokens[i][1].lower() != "and":
            raise ValueError(f"--where {text!r}: comparisons are joined by 'and', got {tokens[i][1]!r}")
        i += 1
        if i == len(tokens):
            raise ValueError(f"--where {text!r}: nothing after the last 'and'")


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = str(text)
    while pos < len(text):
        if not text[pos:].strip():
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"--where {text!r}: cannot read {text[pos:].strip()!r} (an operator "
                             f"is one of {', '.join(OPS)}; quote text with spaces)")
        op, q1, q2, word = m.groups()
        if op:
            out.append(("op", op))
        elif q1 is not None or q2 is not None:
            out.append(("quoted", q1 if q1 is not None else q2))
        else:
            out.append(("word", word))
        pos = m.end()
    if not out:
        raise ValueError("--where '': empty expression; expected COLUMN OP VALUE")
    return out


def _comparison(column: str, op: str, raw: str, *, quoted: bool, text: str) -> Comparison:
    if not quoted:
        try:
            number = float(raw)
        except ValueError:
            number = None
        if number is not None and math.isfinite(number):
            return Comparison(column, op, number, "number")
        if raw.lower() in ("true", "false"):
            kind, value = "bool", raw.lower() == "true"
        else:
            kind, value = "text", raw
    else:
        kind, value = "text", raw
    if op not in ("==", "!="):
        raise ValueError(f"--where {text!r}: {column} {op} {raw}: {op} compares numbers; "
                         f"{kind} values take == or !=")
    return Comparison(column, op, value, kind)


def column_values(runs, column: str, flag: str = "--where") -> np.ndarray:
    """The values of ``column`` in ``runs`` (canonical name, the table's own name for one, any
    alias the table reader reads (:data:`.columns.FIELDS`; ``params_billions`` in billions), or
    another column of the table); ValueError naming ``flag`` and listing the columns when there
    is none."""
    from .columns import FIELDS, field_of

    sources = getattr(runs, "column_sources", {}) or {}
    if column in FIELDS and column in sources or column in FIELDS and runs.has(column):
        return np.asarray(getattr(runs, column))
    for canonical, source in sources.items():
        if source == column:
            return _in_unit_of(np.asarray(getattr(runs, canonical)), source)
    if column in runs.extra:
        return np.asarray(runs.extra[column], dtype=object)
    canonical = field_of(column)
    if canonical is not None and (canonical in sources or runs.has(canonical)):
        return _in_unit_of(np.asarray(getattr(runs, canonical)), column)
    known = list(dict.fromkeys([*sources.values(), *(c for c in FIELDS if runs.has(c)), *runs.extra]))
    raise ValueError(f"{flag}: no column {column!r} in {runs.source or 'the table'}; its "
                     f"columns: {', '.join(map(str, known)) or 'none'}")


def _in_unit_of(values: np.ndarray, name: str) -> np.ndarray:
    """Counts in the unit a column name says (``params_billions``: billions)."""
    from .columns import scale_of

    scale = scale_of(name)
    return values / scale if scale != 1 and values.dtype != object else values


def row_mask(runs, comparisons: list[Comparison]) -> np.ndarray:
    """Boolean mask of the rows satisfying every comparison."""
    keep = np.ones(len(runs), bool)
    for c in comparisons:
        values = column_values(runs, c.column)
        keep &= np.array([_test(v, c) for v in values], bool)
    return keep


def _test(cell, c: Comparison) -> bool:
    if c.kind == "number":
        try:
            x = float(cell)
        except (TypeError, ValueError):
            x = math.nan
        if math.isnan(x):  # as IEEE NaN: only != holds
            return c.op == "!="
        return bool(OPS[c.op](x, c.value))
    text = "" if cell is None else str(cell).strip()
    if c.kind == "bool":
        return OPS[c.op](text.lower(), "true" if c.value else "false")
    return OPS[c.op](text, c.value)


def apply_where(runs, text: str):
    """``runs`` restricted to the rows ``text`` keeps, with a note saying how many; ValueError
    when none is kept."""
    comparisons = parse_where(text)
    mask = row_mask(runs, comparisons)
    kept = int(mask.sum())
    if kept == 0:
        raise ValueError(f"--where {text!r}: no row of {runs.source or 'the table'} "
                         f"({len(runs)} rows) satisfies it")
    out = runs.subset(mask)
    out.notes.append(f"--where {' and '.join(map(str, comparisons))}: kept {kept} of {len(runs)} rows")
    out.selection = {**getattr(runs, "selection", {}), "where": text, "rows_read": len(runs), "rows_kept": kept}
    return out


def split_by(runs, column: str) -> dict:
    """{value: the runs whose ``column`` holds it}, values in sorted order (``--by COL``)."""
    values = np.array([str(v) for v in column_values(runs, column, "--by")], dtype=object)
    out = {}
    for value in sorted(set(values)):
        part = runs.subset(values == value)
        part.selection = {**part.selection, "by": column, "value": value,
                          "rows_read": runs.selection.get("rows_read", len(runs)), "rows_kept": len(part)}
        out[value] = part
    return out


#: A text column is a grouping when it has this many distinct values (and fewer than rows).
GROUP_VALUES = (2, 50)


def grouping_columns(runs) -> dict:
    """{column: labels per row} for the table's ``group`` column and every other text column
    (not all numbers) with 2–50 distinct values, fewer than the rows."""
    out = {}
    lo, hi = GROUP_VALUES
    candidates = {"group": runs.group, **runs.extra}
    for col, values in candidates.items():
        values = np.asarray(values, dtype=object)
        distinct = set(values.tolist())  # a set first: on 100,000 rows the per-row work below is skipped
        if not lo <= len(distinct) <= hi or len(distinct) >= len(values):
            continue
        text = {v: "" if v is None else str(v).strip() for v in distinct}
        if col != "group" and _all_numbers(text.values()):
            continue
        out[col] = np.array([text[v] for v in values.tolist()], dtype=object)
    return out


def _all_numbers(values) -> bool:
    for v in values:
        if v == "":
            continue
        try:
            float(v)
        except ValueError:
            return False
    return True
