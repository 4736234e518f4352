"""``--drop-outliers``: a table without the rows a first fit marks as outliers (|robust z| above
a threshold, :mod:`.diagnostics`), the dropped rows named."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..formats.row_keys import row_key
from .diagnostics import NAMED_ROWS
from .engine import fit_with
from .options import FitOptions
from .setup import options_for_law


def without_outliers(runs, law, options: FitOptions = FitOptions()):
    """``runs`` without the rows whose |robust z| exceeds ``options.outlier_threshold`` in a fit
    of ``law`` under ``options`` without intervals, the dropped rows named in ``runs.notes`` and
    ``runs.selection["dropped"]`` (``--drop-outliers``). One pass: the fit to the rest is not
    searched for new outliers."""
    threshold = options.outlier_threshold
    first = fit_with(runs, law, dataclasses.replace(options_for_law(options, law).without_intervals(),
                                                    diagnostics=True))
    mask = first.diagnostics.outlier_mask
    # named by row (label and row number of ``runs``): a label may repeat over token budgets
    dropped = [row_key(first.run_names[i], i) for i in np.flatnonzero(mask)]
    kept = runs.subset(~mask)
    kept.selection = {**runs.selection, "rows_read": runs.selection.get("rows_read", len(runs)),
                      "rows_kept": len(kept), "dropped": dropped}
    shown = ", ".join(dropped[:NAMED_ROWS]) + (f" and {len(dropped) - NAMED_ROWS} more"
                                               if len(dropped) > NAMED_ROWS else "")
    kept.notes.append(f"--drop-outliers: {len(dropped)} row(s) with |robust z| > {threshold:g} in a "
                      f"first fit of {first.law.name} (no intervals) were left out"
                      + (f": {shown}" if dropped else "") + "; the fit uses the other "
                      f"{len(kept)} rows")
    return kept
