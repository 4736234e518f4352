"""How every per-row output of a fit names a row (outlier lines, the most influential row,
``--json``'s per-row maps and outliers, ``--drop-outliers``, the residual figure): its label and
its row number, since a label alone is not a row."""
from __future__ import annotations


def row_key(name, i: int) -> str:
    """How every per-row output names row ``i`` (0-based) of a fit: its label and its 1-based
    row number, "40Lx3584 (row 17)" — the row of ``rows.csv`` with that ``row``. A label alone
    is not a row: a shape's checkpoints at several token budgets share one."""
    return f"{name} (row {i + 1})"


def row_keys(names) -> list[str]:
    """:func:`row_key` of every row, in row order (the keys of ``--json``'s per-row maps)."""
    return [row_key(nm, i) for i, nm in enumerate(names)]
