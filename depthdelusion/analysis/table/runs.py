"""The runs table: one row per training run (depth, width, parameters, tokens, final loss).

Runs come from the trainer's run directories (``summary.json`` + ``metrics.jsonl``), from a
CSV, a pandas DataFrame or a list of dicts with only the columns a law needs (names and aliases:
:mod:`.columns`), or from the bundled reference data (:mod:`.reference`, by the names in
:data:`NAMED_SOURCES`). Columns are plain numpy arrays; pandas is optional.
"""
from __future__ import annotations

import csv
import io
import itertools
import math
import os
from dataclasses import dataclass, field

import numpy as np

from depthdelusion import rundir
from depthdelusion.data.tokenizers import ByteTokenizer, vocab_size

from ..reference import PAPER_TOKENIZER
from .columns import (
    AMBIGUOUS_D,
    AMBIGUOUS_L,
    FIELDS,
    TEXT_FIELDS,
    check_near_misses,
    read_d_column,
    resolve,
    scale_of,
)

#: The vocabulary of the paper's runs (its tokenizer's; the bundled table has no vocab column).
PAPER_VOCAB = vocab_size(PAPER_TOKENIZER)


@dataclass
class GradientProfile:
    """Per-layer gradient norms of one run, by logged step.

    ``weight[step]`` / ``activation[step]`` are arrays of length depth; index 0 is the bottom
    block (nearest the input), index depth-1 the top block.
    """

    weight: dict[int, np.ndarray] = field(default_factory=dict)
    activation: dict[int, np.ndarray] = field(default_factory=dict)
    #: First-order signal of a zero-output block inserted after block l (index l, length depth),
    #: on training batches, when ``depthdelusion expand RUN --probe`` wrote RUN/expansion_probe/.
    insertion_signal: np.ndarray | None = None

    def steps(self, kind: str = "weight") -> list[int]:
        return sorted(self.by_kind(kind))

    def nearest(self, step: int, kind: str = "weight") -> tuple[int, np.ndarray]:
        """The logged (step, norms) nearest to ``step``; ties go to the earlier step."""
        table = self.by_kind(kind)
        if not table:
            raise ValueError(f"no per-layer {kind} gradient norms were logged")
        used = min(sorted(table), key=lambda s: abs(s - step))
        return used, table[used]

    def by_kind(self, kind: str) -> dict[int, np.ndarray]:
        """The logged norms of one kind, 'weight' or 'activation': step -> norms (index 0 the
        bottom block)."""
        if kind == "weight":
            return self.weight
        if kind == "activation":
            return self.activation
        raise ValueError(f"gradient kind must be 'weight' or 'activation', got {kind!r}")


@dataclass
class Runs:
    """A table of training runs. All columns have one entry per run; only ``loss`` is required.

    depth: layers; width: model dimension; params: parameter count N (as given by the source);
    tokens: tokens trained; loss: final loss in nats (per ``loss_unit``); loss_se: its standard
    error in nats; group: free label (default ``all``); name: run name; profiles: per-layer
    gradient norms (None per run when the source has none); tokenizer, vocab_size, loss_unit
    (``nats/token`` or ``nats/byte``): the runs' own units, when the source records them.
    A column the source lacks is NaN (numbers) or "" (text) for every run: see :meth:`has`.
    depth and width are integer arrays when known for every run.
    """

    depth: np.ndarray | None = None
    width: np.ndarray | None = None
    params: np.ndarray | None = None
    loss: np.ndarray | None = None
    tokens: np.ndarray | None = None
    loss_se: np.ndarray | None = None
    group: np.ndarray | None = None
    name: np.ndarray | None = None
    profiles: list = field(default_factory=list)
    source: str = ""
    notes: list = field(default_factory=list)
    tokenizer: np.ndarray | None = None
    vocab_size: np.ndarray | None = None
    loss_unit: np.ndarray | None = None
    #: Columns of the source table that were not read (e.g. an ambiguous ``D``).
    unread_columns: tuple = ()
    #: The table's own non-embedding parameter count, when it gives one (used as given).
    params_non_embedding: np.ndarray | None = None
    #: The unread columns' values as text (learning rate, seed, ...), for replicate cells.
    extra: dict = field(default_factory=dict)
    #: Training compute C in FLOPs per run, when the table gives it (NaN otherwise).
    compute: np.ndarray | None = None
    #: {canonical name: the source table's column} for the columns read from a table.
    column_sources: dict = field(default_factory=dict)
    #: {source column: sentence} for a column whose meaning was read from its values (``D``).
    read_as: dict = field(default_factory=dict)
    #: How rows were selected (``where``, ``rows_read``, ``rows_kept``, ``dropped``), if they were.
    selection: dict = field(default_factory=dict)
    #: How the table's N counts its vocabulary matrices (:class:`.param_count.EmbeddingCount`),
    #: when its registration says; None otherwise.
    embeddings: object = None

    def __post_init__(self):
        if self.loss is None:
            raise ValueError("Runs: the loss column is required (final loss per run, in nats)")
        self.loss = np.asarray(self.loss, dtype=float).reshape(-1)
        n = len(self.loss)
        for col in ("depth", "width"):
            value = self._column(col, n, float)
            known = np.isfinite(value)
            if known.all() and np.all(value == np.round(value)):
                value = value.astype(np.int64)
            setattr(self, col, value)
        for col in ("params", "tokens", "loss_se", "vocab_size", "params_non_embedding", "compute"):
            setattr(self, col, self._column(col, n, float))
        self.extra = {k: np.asarray(v, dtype=object).reshape(-1) for k, v in dict(self.extra).items()}
        for k, v in self.extra.items():
            if len(v) != n:
                raise ValueError(f"column {k!r} has {len(v)} entries, expected {n} (one per loss)")
        self.group = self._column("group", n, object, "all")
        shaped = self.has("depth") and self.has("width")
        default = [f"{d}Lx{w}" if shaped else f"run{i + 1}"
                   for i, (d, w) in enumerate(zip(self.depth, self.width))]
        self.name = self._column("name", n, object, "")
        self.name = np.array([d if v is None or str(v) == "" else str(v) for v, d in zip(self.name, default)],
                             dtype=object)
        self.tokenizer = self._column("tokenizer", n, object, "")
        if self.loss_unit is None:
            self.loss_unit = [loss_unit_of(t) for t in self.tokenizer]
        self.loss_unit = self._column("loss_unit", n, object, "")
        if not self.profiles:
            self.profiles = [None] * n
        if len(self.profiles) != n:
            raise ValueError(f"column 'profiles' has {len(self.profiles)} entries, expected {n}")
        self.unread_columns = tuple(self.unread_columns)

    def _column(self, col: str, n: int, dtype, fill=math.nan) -> np.ndarray:
        value = getattr(self, col)
        if value is None:
            return np.full(n, fill, dtype=dtype)
        value = np.asarray(value, dtype=dtype).reshape(-1)
        if len(value) != n:
            raise ValueError(f"column {col!r} has {len(value)} entries, expected {n} (one per loss)")
        return value

    def __len__(self) -> int:
        return len(self.loss)

    def has(self, column: str) -> bool:
        """True when ``column`` is known (finite, or non-empty text) for every run."""
        value = getattr(self, column)
        if value.dtype == object:
            return bool(len(value)) and all(str(v) != "" for v in value)
        return bool(len(value)) and bool(np.all(np.isfinite(value)))

    @property
    def columns(self) -> list[str]:
        """The table's columns known for every run, in canonical order."""
        return [c for c in FIELDS if self.has(c)]

    def subset(self, mask) -> "Runs":
        """The runs selected by a boolean mask or an index array."""
        idx = np.arange(len(self))[np.asarray(mask)]
        return Runs(self.depth[idx], self.width[idx], self.params[idx], self.loss[idx],
                    self.tokens[idx], self.loss_se[idx], self.group[idx], self.name[idx],
                    [self.profiles[i] for i in idx], self.source, list(self.notes),
                    self.tokenizer[idx], self.vocab_size[idx], self.loss_unit[idx],
                    self.unread_columns, self.params_non_embedding[idx],
                    {k: v[idx] for k, v in self.extra.items()}, self.compute[idx],
                    dict(self.column_sources), dict(self.read_as), dict(self.selection),
                    self.embeddings)

    def where_group(self, group: str) -> "Runs":
        if group not in set(self.group):
            raise ValueError(f"no runs in group {group!r}; groups present: {sorted(set(self.group))}")
        return self.subset(self.group == group)

    @property
    def groups(self) -> list[str]:
        return sorted(set(self.group))

    @property
    def tokens_vary(self) -> bool:
        """True when every run has a token count and they are not all equal (within 1%)."""
        t = self.tokens
        return bool(np.all(np.isfinite(t)) and np.all(t > 0) and t.max() > 1.01 * t.min())

    def rows(self) -> list[dict]:
        def num(v):
            return float(v) if not isinstance(v, (int, np.integer)) else int(v)

        return [
            {"name": self.name[i], "group": self.group[i], "depth": num(self.depth[i]),
             "width": num(self.width[i]), "params": float(self.params[i]),
             "tokens": float(self.tokens[i]), "loss": float(self.loss[i]),
             "loss_se": float(self.loss_se[i]), "tokenizer": self.tokenizer[i],
             "vocab_size": float(self.vocab_size[i]), "loss_unit": self.loss_unit[i]}
            for i in range(len(self))
        ]

    def to_dataframe(self):
        import pandas as pd  # optional dependency, only when asked for

        return pd.DataFrame(self.rows())

    to_frame = to_dataframe  # the name load_table(NAME).to_frame() is documented with


def loss_unit_of(tokenizer: str) -> str:
    """The unit of a loss measured with ``tokenizer``: nats per byte for the byte tokenizer,
    nats per token for any other; "" when the tokenizer is unknown."""
    if not tokenizer:
        return ""
    return "nats/byte" if tokenizer == ByteTokenizer.name else "nats/token"


def check_units(runs: Runs) -> None:
    """Refuse runs whose losses are in different units (nats/byte vs nats/token) or measured
    with different tokenizers; the error names the runs of each kind."""
    for col, why in (("loss_unit", "losses in different units cannot be fitted together"),
                     ("tokenizer", "per-token losses of different tokenizers are in different units")):
        values = getattr(runs, col)
        kinds = sorted({str(v) for v in values if str(v) != ""})
        if len(kinds) > 1:
            by_kind = "; ".join(f"{k}: {_some(runs.name[values == k])}" for k in kinds)
            raise ValueError(f"{runs.source or 'runs'}: {col} differs between runs ({by_kind}) — "
                             f"{why}; select one kind (e.g. with --group) or fit them separately")


def _some(names, limit: int = 6) -> str:
    names = [str(n) for n in names]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def load_reference(name: str):
    """A bundled dataset (:mod:`.reference`): ``"depth_delusion"`` (the paper's 30 runs, as
    :class:`Runs`) or ``"llm_shapes"`` (published LLM shapes, as ``reference.ModelShapes``)."""
    from .. import reference as ref

    if name not in ref.DATASETS:
        raise ValueError(f"unknown reference dataset {name!r}; known: {', '.join(sorted(ref.DATASETS))}")
    if name == "llm_shapes":
        return ref.load_llm_shapes()
    runs = load_csv(ref.REFERENCE_DIR / ref.DATASETS[name])
    n = len(runs)
    return Runs(
        runs.depth, runs.width, runs.params, runs.loss,
        tokens=np.where(runs.group == "baseline", ref.PAPER_BASELINE_TOKENS, np.nan),
        loss_se=np.array([ref.PAPER_LOSS_SE.get((int(d), int(w)), math.nan)
                          for d, w in zip(runs.depth, runs.width)]),
        group=runs.group, name=runs.name, source="paper (bundled: depth_delusion_runs.csv)",
        tokenizer=[ref.PAPER_TOKENIZER] * n, vocab_size=np.full(n, PAPER_VOCAB))


def _paper_runs() -> Runs:
    return load_reference("depth_delusion")


#: Named sources for :func:`load_runs` (name -> loader).
NAMED_SOURCES = {"paper": _paper_runs, "depth_delusion": _paper_runs}


def load_runs(source, *, group: str | None = None, columns: dict | None = None,
              where: str | None = None) -> Runs:
    """Load runs from a Runs, a table file (CSV/TSV/parquet: :func:`read_table`), a pandas
    DataFrame, a list of dicts, a run
    directory tree, or a bundled dataset name (``"paper"``).

    A table needs only the columns of the law to be fitted (see :mod:`.columns` for names and
    aliases); ``columns`` maps canonical names to the table's own, e.g. ``{"params": "N"}``.
    A directory is searched recursively for ``summary.json``; runs whose status is not
    ``finished`` are skipped and counted in ``Runs.notes``. Runs whose losses are in different
    units (tokenizers) are refused. ``where`` keeps the rows satisfying a comparison
    (:mod:`.row_filter`: ``"params >= 1e8 and dataset == web"``), ``group`` then the rows of one
    group; the kept count is in ``Runs.notes`` and ``Runs.selection``.
    """
    if columns and (isinstance(source, Runs) or (isinstance(source, (str, os.PathLike)) and (
            str(source) in NAMED_SOURCES or rundir.as_path(source).is_dir()))):
        raise ValueError("a column mapping applies to tables (CSV, DataFrame, list of dicts), "
                         f"not to {source if isinstance(source, (str, os.PathLike)) else 'a Runs table'}")
    if isinstance(source, Runs):
        runs = source
    elif _is_dataframe(source):
        runs = runs_from_dataframe(source, columns=columns)
    elif isinstance(source, (list, tuple)):
        runs = runs_from_records(list(source), where="list of runs", columns=columns)
    elif isinstance(source, (str, os.PathLike)):
        text = str(source)
        if text in NAMED_SOURCES:
            runs = NAMED_SOURCES[text]()
        else:
            path = rundir.as_path(text)  # local or remote (gs://)
            if not path.exists():
                raise FileNotFoundError(f"{path}: no such file or directory (expected a CSV, a "
                                        f"directory of run directories, or {' / '.join(map(repr, NAMED_SOURCES))})")
            runs = load_run_dirs(path) if path.is_dir() else read_table(path, columns=columns)
    else:
        raise ValueError(f"cannot load runs from {type(source).__name__}; give a path, a pandas "
                         "DataFrame, a list of dicts, a Runs table or 'paper'")
    if where:
        from .row_filter import apply_where

        runs = apply_where(runs, where)
    check_units(runs)
    if not group:
        return runs
    kept = runs.where_group(group)
    kept.selection = {**runs.selection, "group": group, "rows_read": runs.selection.get("rows_read", len(runs)),
                      "rows_kept": len(kept)}
    return kept


def _is_dataframe(obj) -> bool:
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "columns")


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
        raise ValueError(f"{where}: no finished runs (status: {_some(sorted({str(r['status']) for r in unfinished}))})")
    found = resolve(header, columns, where)
    rows = [r for _, r in finished]

    def cells(col):
        return [rec.get(col) for rec in rows]

    runs = _runs_from_cells(header, found, cells, lambda: _columns_at_once(cells, found)
                            or _columns_by_row(finished, found, where), where, columns)
    runs.notes += _duplicate_notes(duplicated_rows(records, header), where)
    if unfinished:
        runs.notes.append(f"skipped {len(unfinished)} run(s) not finished: "
                          f"{_some(str(r.get('name', '?')) + ' (' + str(r['status']) + ')' for r in unfinished)}")
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
        raise ValueError(f"{where}: column 'L' holds whole numbers only ({_some(np.unique(runs.loss))}): "
                         "layers, not a loss? Name the loss column with --columns loss=NAME "
                         "(and depth=L if L is the depth)")
    runs.notes += misspelled
    return runs


def _duplicate_notes(dup: list[int], where: str) -> list[str]:
    if not dup:
        return []
    return [f"{where}: {len(dup)} row(s) repeat an earlier row in every column (rows "
            f"{_some([i + 1 for i in dup])}): each counts as another run, which "
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


def load_run_dirs(root) -> Runs:
    """Runs from every run directory (one holding ``summary.json``) at or below ``root``, local
    or remote (gs://), with the tokenizer (``data.tokenizer``) and vocabulary
    (``model.vocab_size``) each run records. The files are read by :mod:`depthdelusion.rundir`."""
    root = rundir.as_path(root)
    run_dirs = rundir.find_runs(root)
    if not run_dirs:
        raise FileNotFoundError(f"{root}: no {rundir.SUMMARY} found in it or below it")
    records, profiles, skipped = [], [], []
    for run_dir in run_dirs:
        summary = rundir.read_summary(run_dir)
        where = str(run_dir / rundir.SUMMARY)
        status = summary.get("status")
        if status != "finished":
            skipped.append(f"{run_dir.name} (status {status!r})")
            continue
        model = summary.get("model")
        if not isinstance(model, dict):
            raise ValueError(f"{where}: field 'model' is missing or not an object")
        data = summary.get("data") if isinstance(summary.get("data"), dict) else {}
        tokenizer, vocab = data.get("tokenizer"), model.get("vocab_size")
        if tokenizer is None:  # a summary written before runs recorded it: the resolved config has it
            tokenizer, vocab = _units_from_config(run_dir, vocab)
        records.append({
            "name": summary.get("name") or run_dir.name,
            "group": summary.get("group") or "all",
            "depth": _field(model, "depth", where + " model"),
            "width": _field(model, "width", where + " model"),
            "params": _field(summary, "params", where),
            "tokens": summary.get("tokens"),
            "loss": _field(summary, "final_loss", where),
            "loss_se": summary.get("final_loss_se"),
            "tokenizer": tokenizer,
            "vocab_size": vocab,
        })
        profile = read_gradient_profile(run_dir, int(model["depth"]))
        if profile is not None:
            profile.insertion_signal = read_insertion_signal(
                run_dir / INSERTION_PROBE / "probe.json", int(model["depth"]))
        profiles.append(profile)
    if not records:
        raise ValueError(f"{root}: no finished runs ({len(skipped)} skipped: {', '.join(skipped)})")
    runs = runs_from_records(records, where=str(root))
    runs.profiles = profiles
    runs.source = str(root)
    if skipped:
        runs.notes.append(f"skipped {len(skipped)} run(s) not finished: {', '.join(skipped)}")
    unknown = [str(n) for n, t in zip(runs.name, runs.tokenizer) if not t]
    if unknown and len(unknown) < len(runs):
        runs.notes.append(f"{len(unknown)} run(s) do not record their tokenizer, so their loss "
                          f"units are unchecked: {_some(unknown)}")
    return runs


def _units_from_config(run_dir, vocab):
    """(data.tokenizer, model.vocab_size) from a run's config.yaml; (None, vocab) if it is
    absent or unreadable."""
    try:
        config = rundir.read_config_dict(run_dir)
    except (OSError, ValueError):
        return None, vocab
    if config is None:
        return None, vocab
    data, model = config.get("data"), config.get("model")
    tokenizer = data.get("tokenizer") if isinstance(data, dict) else None
    if vocab is None and isinstance(model, dict):
        vocab = model.get("vocab_size")
    return tokenizer, vocab


def _field(obj: dict, key: str, where: str):
    if key not in obj:
        raise ValueError(f"{where}: field {key!r} is missing")
    return obj[key]


INSERTION_PROBE = "expansion_probe"  # where `depthdelusion expand RUN --probe` writes by default


def read_insertion_signal(path, depth: int) -> np.ndarray | None:
    """The training-batch first-order signal after each block (length depth, NaN where not
    probed) from an expansion probe's ``probe.json``; None when the file is absent."""
    path = rundir.as_path(path)
    if not path.exists():
        return None
    probe = rundir.read_json_object(path)
    signal = np.full(depth, np.nan)
    for row in probe.get("signal", []):
        after = int(_field(row, "after", f"{path}: 'signal' row"))
        if not 0 <= after < depth:
            raise ValueError(f"{path}: signal after block {after}, but the run has {depth} blocks")
        signal[after] = float(_field(row, "signal_train", f"{path}: 'signal' row"))
    return signal


def read_gradient_profile(run_dir, depth: int) -> GradientProfile | None:
    """Per-layer gradient norms from a run directory's ``metrics.jsonl`` (None if it has none)."""
    run_dir = rundir.as_path(run_dir)
    profile = GradientProfile()
    for entry in rundir.read_metrics(run_dir):
        for key, table in (("per_layer_grad_norm", profile.weight),
                           ("per_layer_act_grad_norm", profile.activation)):
            if key not in entry:
                continue
            where = f"{run_dir / rundir.METRICS} step {entry.get('step')}"
            norms = np.asarray(entry[key], dtype=float)
            if norms.shape != (depth,):
                raise ValueError(f"{where}: {key!r} has {norms.size} values, expected depth = {depth}")
            if "step" not in entry:
                raise ValueError(f"{where}: field 'step' is missing")
            table[int(entry["step"])] = norms
    return profile if (profile.weight or profile.activation) else None
