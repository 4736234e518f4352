"""Tables of runs read into :class:`.runs.Runs`: CSV/TSV (a fast column reader, by rows where
it must), parquet, a pandas DataFrame or a list of dicts, with their columns resolved by name or
alias (:mod:`.columns`), every number checked (the error names the file, line and column), and
repeated rows counted.
"""
from __future__ import annotations

import csv
import io
import itertools
import math

import numpy as np

from depthdelusion import rundir

from .columns import (
    AMBIGUOUS_D,
    AMBIGUOUS_L,
    TEXT_FIELDS,
    check_near_misses,
    read_d_column,
    resolve,
    scale_of,
)
from .runs import Runs, some_names


_INTEGER = ("depth", "width", "vocab_size")
_OPTIONAL = ("tokens", "loss_se", "vocab_size", "params_non_embedding", "compute")  # may be empty in some rows


def runs_from_records(records: list[dict], *, where: str, columns: dict | None = None) -> Runs:
    """Build Runs from dicts (one per run) whose keys are column names or aliases
    (:data:`.columns.FIELDS`); ``columns`` maps canonical names to keys; ``where`` names the
    source for errors."""
    if not records:
        raise ValueError(f"{where}: no runs found")
    if not all(isinstance(r, dict) for r in records):
        raise ValueError(f"{where}: expected one dict per run")
    header = list(dict.fromkeys(k for rec in records for k in rec))
    # A run table (docs/run_table.md) lists every run with its status; only finished ones are fitted.
    finished = [(i, r) for i, r in enumerate(records) if str(r.get("status") or "finished").strip() == "finished"]
    unfinished = [r for r in records if str(r.get("status") or "finished").strip() != "finished"]
    if not finished:
        raise ValueError(f"{where}: no finished runs (status: {some_names(sorted({str(r['status']) for r in unfinished}))})")
    found = resolve(header, columns, where)
    rows = [r for _, r in finished]

    def cells(col):
        return [rec.get(col) for rec in rows]

    runs = _runs_from_cells(header, found, cells, lambda: _columns_at_once(cells, found)
                            or _columns_by_row(finished, found, where), where, columns)
    runs.notes += _duplicate_notes(duplicated_rows(records, header), where)
    if unfinished:
        runs.notes.append(f"skipped {len(unfinished)} run(s) not finished: "
                          f"{some_names(str(r.get('name', '?')) + ' (' + str(r['status']) + ')' for r in unfinished)}")
    return runs


def _runs_from_cells(header, found: dict, cells, read_columns, where: str, columns: dict | None) -> Runs:
    """Runs from a table's columns: ``cells(column)`` gives a column's values (one per run),
    ``read_columns()`` the read columns ({canonical name: values}); ``found`` as
    :func:`.columns.resolve` gives it."""
    read_as = {}
    if AMBIGUOUS_D in header and AMBIGUOUS_D not in found.values():
        reading = read_d_column(cells, found, where)
        if reading is not None:
            found[reading[0]] = AMBIGUOUS_D
            read_as[AMBIGUOUS_D] = reading[1]
    misspelled = check_near_misses(header, found, columns, where, cells)
    cols = read_columns()
    if "params" in cols and scale_of(found["params"]) != 1:
        cols["params"] = [float(round(v)) for v in cols["params"]]  # counts are whole
    if "group" in cols:
        cols["group"] = [g or "all" for g in cols["group"]]
    unread = tuple(str(h) for h in header if h not in found.values())
    extra = {h: ["" if v is None else str(v).strip() for v in cells(h)] for h in unread}
    runs = Runs(**cols, source=where, unread_columns=unread, extra=extra,
                column_sources=dict(found), read_as=read_as)
    if found.get("loss") == AMBIGUOUS_L and np.all(runs.loss == np.round(runs.loss)):
        raise ValueError(f"{where}: column 'L' holds whole numbers only ({some_names(np.unique(runs.loss))}): "
                         "layers, not a loss? Name the loss column with --columns loss=NAME "
                         "(and depth=L if L is the depth)")
    runs.notes += misspelled
    return runs


def _duplicate_notes(dup: list[int], where: str) -> list[str]:
    if not dup:
        return []
    return [f"{where}: {len(dup)} row(s) repeat an earlier row in every column (rows "
            f"{some_names([i + 1 for i in dup])}): each counts as another run, which "
            "shrinks standard errors; remove them if they are copies"]


def _columns_by_row(finished, found: dict, where: str) -> dict:
    """The columns read row by row, each field checked (the first bad one raises, naming its
    row)."""
    cols = {k: [] for k in found}
    for i, rec in finished:
        line = f"{where} row {i + 1}"
        for key, src in found.items():
            if key in TEXT_FIELDS:
                raw = rec.get(src)
                is_empty = raw is None or (isinstance(raw, float) and math.isnan(raw))
                cols[key].append("" if is_empty else str(raw).strip())
            else:
                value = _number(rec, src, line, integer=key in _INTEGER and scale_of(src) == 1,
                                optional=key in _OPTIONAL, allow_zero=key == "loss_se")
                cols[key].append(value * scale_of(src))
    return cols


def _columns_at_once(cells, found: dict) -> dict | None:
    """The numeric columns converted a column at a time (millions of rows: no Python float per
    field), the text ones as :func:`_columns_by_row` reads them; None when a numeric field is
    empty, not a number or out of range, so that the row-by-row reading names the first one.
    ``cells(column)``: the column's values, one per run."""
    cols = {}
    for key, src in found.items():
        raw = cells(src)
        if key in TEXT_FIELDS:
            cols[key] = ["" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v).strip()
                         for v in raw]
            continue
        try:
            values = np.array(raw, dtype=np.float64)
        except (TypeError, ValueError):
            return None
        integer = key in _INTEGER and scale_of(src) == 1
        low_ok = values >= 0 if key == "loss_se" else values > 0
        if not (np.all(np.isfinite(values) & low_ok) and (not integer or np.all(values == np.trunc(values)))):
            return None  # None (NaN here), empty, 0, negative, inf or fractional: read by row
        cols[key] = values.astype(np.int64) if integer else values * scale_of(src)
    return cols


def duplicated_rows(records: list[dict], header) -> list[int]:
    """Indices of rows identical in every column to an earlier row."""
    seen, dup = set(), []
    for i, rec in enumerate(records):
        key = tuple(str(rec.get(h)) for h in header)
        if key in seen:
            dup.append(i)
        seen.add(key)
    return dup


def _number(rec: dict, key: str, line: str, *, integer=False, optional=False, allow_zero=False):
    raw = rec.get(key)
    if raw is None or (isinstance(raw, str) and raw.strip() == "") or (
            isinstance(raw, float) and math.isnan(raw)):
        if optional:
            return math.nan
        raise ValueError(f"{line}: field {key!r} is empty; expected a positive number")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{line}: field {key!r} = {raw!r} is not a number; expected a positive "
                         "number such as 1.5e9" + (", or empty" if optional else "")) from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{line}: field {key!r} = {raw!r}; expected a positive finite number")
    if integer:
        if value != int(value):
            raise ValueError(f"{line}: field {key!r} = {raw!r}; expected a whole number")
        return int(value)
    return value


PARQUET_SUFFIXES = (".parquet", ".pq")
DELIMITERS = ",\t;"


def read_table(path, *, columns: dict | None = None) -> Runs:
    """Runs from a table file: CSV / TSV / semicolon-separated text (delimiter sniffed, UTF-8
    with or without a byte-order mark) or parquet (through pandas and pyarrow); ``columns``
    maps canonical names to the file's own (:func:`runs_from_records`)."""
    path = rundir.as_path(path)
    if str(path).lower().endswith(PARQUET_SUFFIXES):
        return load_parquet(path, columns=columns)
    return load_csv(path, columns=columns)


def load_csv(path, *, columns: dict | None = None) -> Runs:
    """Runs from a delimited text table with a header row (comma, tab or semicolon, sniffed
    from the header; a UTF-8 byte-order mark is skipped); columns as in :func:`runs_from_records`."""
    path = rundir.as_path(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.start}); save the table as UTF-8 "
                         "CSV, or give a parquet file") from None
    delimiter = _delimiter(text, path)
    check_header(next(csv.reader(_lines(text), delimiter=delimiter), []), str(path))
    runs = _csv_by_columns(text, delimiter, str(path), columns)
    if runs is None:  # the reader of dicts, which names the first bad field by its row
        records = list(csv.DictReader(_lines(text), delimiter=delimiter))
        runs = runs_from_records(records, where=str(path), columns=columns)
    runs.source = str(path)
    return runs


_CSV_BLOCK = 65_536  # rows parsed per block by the column reader
_TEXT_BLOCK = 1 << 20  # characters per io.StringIO in _lines


def _lines(text: str):
    """The lines of ``io.StringIO(text, newline="")``, through one StringIO per block of about
    ``_TEXT_BLOCK`` characters cut after a newline (the same lines: a block ends where a line
    does); one StringIO of the whole text holds 4 bytes per character of a 3M-row table."""
    a = 0
    while a < len(text):
        b = text.find("\n", a + _TEXT_BLOCK)
        b = len(text) if b < 0 else b + 1
        yield from io.StringIO(text[a:b], newline="")
        a = b


def _csv_by_columns(text: str, delimiter: str, where: str, columns: dict | None) -> Runs | None:
    """Runs from CSV text read a block of rows at a time into columns, the read numeric columns
    as float arrays (millions of rows: no dict and no Python float per row); the same Runs,
    notes included, as :func:`runs_from_records` gives for the csv module's dicts. None when
    the table needs that reader (which names the first bad field by its row): a ``status``
    column, a row whose field count differs from the header's, a header without a loss column,
    or a read numeric column with an empty, non-numeric or out-of-range cell."""
    reader = csv.reader(_lines(text), delimiter=delimiter)
    header = next(reader, [])
    if not header or "status" in header:
        return None
    try:
        found = resolve(header, columns, where)
    except ValueError:
        return None
    numeric = {src for key, src in found.items() if key not in TEXT_FIELDS}
    parts, hashes = {h: [] for h in header}, []
    while block := list(itertools.islice(reader, _CSV_BLOCK)):
        block = [row for row in block if row]  # the csv module's dicts skip blank lines too
        if any(len(row) != len(header) for row in block):
            return None
        hashes.append(np.fromiter(map(hash, map(tuple, block)), np.int64, len(block)))
        for j, h in enumerate(header):
            cells = [row[j] for row in block]
            if h not in numeric:
                parts[h] += cells
                continue
            try:
                parts[h].append(np.array(cells, dtype=np.float64))
            except ValueError:
                return None
    table = {h: np.concatenate(v) if h in numeric else v for h, v in parts.items()} if hashes else {}
    if not table or not len(next(iter(table.values()))):
        return None

    def read_columns():  # after a D column's reading has added it to ``found``
        cols = _columns_at_once(table.__getitem__, found)
        if cols is None:
            raise _ReadByRows
        return cols

    try:
        runs = _runs_from_cells(header, found, table.__getitem__, read_columns, where, columns)
    except _ReadByRows:
        return None
    runs.notes += _duplicate_notes(_repeated_rows(np.concatenate(hashes), table), where)
    return runs


class _ReadByRows(Exception):
    """A field the column reader cannot take: the row-by-row reader names it."""


def _repeated_rows(hashes: np.ndarray, table: dict) -> list[int]:
    """:func:`duplicated_rows` of a table by columns: rows whose fields hash as an earlier row's
    (``hashes``: one per row, of its fields' text), confirmed on every column's values."""
    order = np.argsort(hashes, kind="stable")
    ranked = hashes[order]
    same = ranked[1:] == ranked[:-1]
    if not same.any():
        return []
    start = np.maximum.accumulate(np.where(np.r_[True, ~same], np.arange(len(ranked)), 0))
    later, first = order[1:][same], order[start[1:][same]]
    return sorted(int(i) for i, f in zip(later, first)
                  if all(table[h][i] == table[h][f] for h in table))


def check_header(names, where: str) -> None:
    """Refuse a header that names a column twice: a reader keeps only one of the two (the last,
    for csv and pandas), silently."""
    names = [str(n) for n in names]
    for name in dict.fromkeys(names):
        at = [i + 1 for i, n in enumerate(names) if n == name]
        if len(at) > 1:
            raise ValueError(f"{where}: column {name!r} appears {len(at)} times in the header "
                             f"(columns {', '.join(map(str, at))}); rename or remove all but one")


def _delimiter(text: str, path) -> str:
    """The header line's delimiter: whichever of comma, tab, semicolon splits it into the most
    fields (a header has no quoted delimiters in practice); comma for a one-column header."""
    header = text.split("\n", 1)[0]
    counts = {d: header.count(d) for d in DELIMITERS}
    best = max(DELIMITERS, key=lambda d: counts[d])
    if counts[best] == 0:
        return ","
    return best


def load_parquet(path, *, columns: dict | None = None) -> Runs:
    """Runs from a parquet file through pandas (pyarrow or fastparquet as its engine)."""
    path = rundir.as_path(path)
    try:
        import pandas as pd
    except ImportError:
        raise ValueError(f"{path}: reading parquet needs pandas and pyarrow, which are not "
                         "installed: pip install pandas pyarrow (or save the table as CSV)") from None
    try:
        frame = pd.read_parquet(str(path))
    except ImportError as err:
        raise ValueError(f"{path}: reading parquet needs a parquet engine for pandas ({err}): "
                         "pip install pyarrow (or save the table as CSV)") from None
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a readable parquet file ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else 'no detail'})") from None
    check_header(frame.columns, str(path))
    runs = runs_from_records(frame.to_dict(orient="records"), where=str(path), columns=columns)
    runs.source = str(path)
    return runs


def runs_from_dataframe(frame, *, columns: dict | None = None) -> Runs:
    """Runs from a pandas DataFrame; columns as in :func:`runs_from_records`."""
    check_header(frame.columns, "DataFrame")
    return runs_from_records(frame.to_dict(orient="records"), where="DataFrame", columns=columns)
