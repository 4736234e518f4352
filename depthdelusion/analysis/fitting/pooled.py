"""A fit of our runs pooled with a published table (issue 50): one offset E per source, every
other parameter shared."""
from __future__ import annotations

import dataclasses

from ..table.published import TABLES, pool
from ..table.runs import Runs
from .engine import fit, fit_with
from .options import FitOptions


def fit_pooled(ours, table: str, law, method: str = "lm", *, path=None, allow_modified: bool = False,
               options: FitOptions | None = None, **keywords):
    """Fit ``law`` to our runs pooled with the published ``table``, one offset E per source
    (``ours``, ``table``) and every other parameter shared. The result's first note says what
    was pooled and what the offsets assume. A local copy ``path`` that is not the registered
    source is refused unless ``allow_modified`` (:func:`..table.published.load_table`).
    ``options``: the fit's options whole (``keywords`` then are :func:`.engine.fit_with`'s:
    clusters, progress); without them ``keywords`` are :func:`.engine.fit`'s."""
    runs = pool(ours, table, path, allow_modified=allow_modified)
    n_ours = int((runs.group == "ours").sum())
    meta = TABLES[table]
    # the table's notes open the fit's, so the result is built once, by the fit
    runs = dataclasses.replace(runs, notes=[
        f"pooled fit: {n_ours} of our runs ({_source_of(ours)}) + {len(runs) - n_ours} runs of the "
        f"published table {table!r} ({meta.paper}; license: {meta.license}); one offset E per source "
        f"(E[ours], E[{table}]), every other parameter shared. Assumes the sources differ by a constant "
        "loss offset only (data, tokenizer and evaluation differences are additive); a source "
        "difference in the exponents is read as noise", *runs.notes])
    return (fit(runs, law, method, group_offsets=True, groups=runs.group, **keywords) if options is None
            else fit_with(runs, law, options, group_offsets=True, groups=runs.group, **keywords))


def _source_of(ours) -> str:
    return ours.source if isinstance(ours, Runs) else str(ours)
