"""The runs table: one row per training run (depth, width, parameters, tokens, final loss), as
the type :class:`Runs` (with :class:`GradientProfile`, a run's per-layer gradient norms) and the
checks of its units. Runs are read by :func:`.load.load_runs` from the trainer's run directories
(:mod:`.run_dirs`), from tables — a CSV, parquet, a pandas DataFrame or a list of dicts with only
the columns a law needs (:mod:`.table_readers`; names and aliases: :mod:`.columns`) — or from the
bundled reference data. Columns are plain numpy arrays; pandas is optional.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from depthdelusion.data.tokenizers import ByteTokenizer


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
            by_kind = "; ".join(f"{k}: {some_names(runs.name[values == k])}" for k in kinds)
            raise ValueError(f"{runs.source or 'runs'}: {col} differs between runs ({by_kind}) — "
                             f"{why}; select one kind (e.g. with --group) or fit them separately")


def some_names(names, limit: int = 6) -> str:
    names = [str(n) for n in names]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
