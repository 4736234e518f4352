"""Where runs come from, in one entry point: :func:`load_runs` takes a :class:`.runs.Runs`, a table
file, a pandas DataFrame, a list of dicts, a directory of run directories (local or gs://) or a
bundled dataset's name, then applies the row selection (``where``, ``group``) and the unit check.
"""
from __future__ import annotations

import math
import os

import numpy as np

from depthdelusion import rundir
from depthdelusion.data.tokenizers import vocab_size

from .run_dirs import read_run_dirs
from ..reference import PAPER_TOKENIZER
from .run_table import check_schema_version
from .runs import Runs, check_units, some_names
from .table_readers import load_csv, read_table, runs_from_dataframe, runs_from_records


#: The vocabulary of the paper's runs (its tokenizer's; the bundled table has no vocab column).
PAPER_VOCAB = vocab_size(PAPER_TOKENIZER)


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
    units (tokenizers) are refused, and so is a run table of another ``schema_version``
    (docs/run_table.md). ``where`` keeps the rows satisfying a comparison
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
    if "schema_version" in runs.extra:  # a run table (docs/run_table.md): its rows' versions
        check_schema_version(runs.extra["schema_version"], runs.source)
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


def load_run_dirs(root) -> Runs:
    """Runs from every run directory at or below ``root`` (:func:`.run_dirs.read_run_dirs`), with
    their gradient profiles; the unfinished runs skipped and the runs whose loss units are
    unchecked said in the notes."""
    records, profiles, skipped = read_run_dirs(root)
    runs = runs_from_records(records, where=str(root))
    runs.profiles = profiles
    runs.source = str(root)
    if skipped:
        runs.notes.append(f"skipped {len(skipped)} run(s) not finished: {', '.join(skipped)}")
    unknown = [str(n) for n, t in zip(runs.name, runs.tokenizer) if not t]
    if unknown and len(unknown) < len(runs):
        runs.notes.append(f"{len(unknown)} run(s) do not record their tokenizer, so their loss "
                          f"units are unchecked: {some_names(unknown)}")
    return runs


def _is_dataframe(obj) -> bool:
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "columns")
