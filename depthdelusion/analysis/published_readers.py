"""Readers of published tables' own file formats into :class:`.runs.Runs` (analysis/published.py
registers them): one function per format, each naming the file, line and field of bad input."""
from __future__ import annotations

import csv
import io

import numpy as np

from depthdelusion import rundir

from .runs import Runs

#: Open-Athena/scaling-law-analysis's extracted isoFLOP tables (data/isoflops/extract/*/isoflops.csv).
ISOFLOP_FIELDS = ("source", "dataset", "tokens", "params", "budget", "loss")


def read_csv_records(path, fields, what: str) -> list[dict]:
    """The rows of CSV ``path`` as dicts; refuses a file without ``fields`` (naming ``what`` it
    should be)."""
    path = rundir.as_path(path)
    rows = list(csv.DictReader(io.StringIO(path.read_text(), newline="")))
    missing = [f for f in fields if f not in (rows[0] if rows else {})]
    if missing:
        raise ValueError(f"{path}: not {what} (no column(s) {', '.join(missing)}; expected "
                         f"{', '.join(fields)})")
    return rows


def numbers(rows: list[dict], key: str, path) -> np.ndarray:
    """Column ``key`` of ``rows`` as floats; a cell that is not a number is named by its line."""
    out = np.empty(len(rows))
    for i, row in enumerate(rows):
        try:
            out[i] = float(row[key])
        except (TypeError, ValueError):
            raise ValueError(f"{path}:{i + 2}: column {key!r} is {row[key]!r}, not a number") from None
    return out


def isoflop_table(path, fitted_condition: str | None = None) -> Runs:
    """One experiment of Open-Athena's isoFLOP compilation: columns ``source, dataset, condition,
    tokens, params, budget, loss`` (budget: the sweep's nominal compute C in FLOPs, ≈ 6·N·D); the
    group is the condition where there is one (else the dataset), the compute the nominal budget,
    so the isoFLOP budgets are the source's. With ``fitted_condition``, rows of any other
    condition (another transform of the same points) have status ``excluded``."""
    rows = read_csv_records(path, ISOFLOP_FIELDS, "an Open-Athena isoFLOP table (data/isoflops/extract/*/isoflops.csv)")
    col = {k: numbers(rows, k, path) for k in ("tokens", "params", "budget", "loss")}
    group = [r.get("condition") or r["dataset"] for r in rows]
    names = [f"{g}@{float(r['budget']):.3g}/N={float(r['params']):.4g}" for g, r in zip(group, rows)]
    status = ["finished" if fitted_condition in (None, g) else "excluded" for g in group]
    runs = Runs(params=col["params"], tokens=col["tokens"], loss=col["loss"], compute=col["budget"],
                group=group, name=names, source=str(path), extra={"status": status})
    budgets = len(set(col["budget"]))
    runs.notes.append(f"{rows[0]['source']}: {len(rows)} rows in {budgets} isoFLOP budgets; compute is "
                      "the nominal budget of each sweep (≈ 6·N·D), as Open-Athena compiled it")
    if fitted_condition:
        runs.notes.append(f"only condition {fitted_condition!r} is fitted; the other condition(s) "
                          f"({', '.join(sorted(set(group) - {fitted_condition}))}) transform the same "
                          "points and stay in the table with status 'excluded'")
    return runs
