"""The per-row diagnostics of a fit as files: ``rows.csv`` and ``residuals.png``."""
from __future__ import annotations

from ..fitting.diagnostics import group_labels, row_table


def write_rows(out, runs, result) -> list:
    """Write ``rows.csv`` (:func:`row_table`) and ``residuals.png`` into the directory ``out``;
    returns their paths. Without matplotlib (the light install) only the CSV, and a warning."""
    import sys
    from pathlib import Path

    from ..formats.table_text import write_csv

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    columns, rows = row_table(runs, result)
    csv_path = write_csv(out / "rows.csv", columns, rows)
    try:
        from . import plots
    except ImportError:
        print("warning: residuals.png not written: it needs matplotlib (pip install matplotlib); "
              f"{csv_path} holds the same numbers", file=sys.stderr)
        return [csv_path]
    png = plots.residual_diagnostics(runs, result, group_labels(runs, result), out / "residuals.png")
    return [csv_path, png]
