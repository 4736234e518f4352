"""``depthdelusion tables list|show|get``: the published run tables by name (analysis/table/published.py),
their provenance, and each one written in the run-table schema (docs/run_table.md)."""
from __future__ import annotations

import json
import math
from pathlib import PurePosixPath

import numpy as np

from .table.published import TABLES, load_table, table_entry
from .table.published_files import cache_dir

#: Run-table columns a published table fills, from the Runs the reader returns.
_NUMBERS = {"depth": "depth", "width": "width", "vocab_size": "vocab_size", "params": "params",
            "params_non_embedding": "params_non_embedding", "tokens": "tokens", "flops": "compute",
            "loss": "loss", "loss_se": "loss_se"}


def run_tables(*, action: str, name: str | None = None, json_output: bool = False,
               out: str | None = None) -> int:
    from depthdelusion import exit_codes

    if action == "list":
        print(listing())
        return exit_codes.OK
    if name is None:
        raise ValueError(f"tables {action}: give NAME (one of {', '.join(TABLES)})")
    if action == "show":
        print(json.dumps(provenance(name), indent=2) if json_output else show(name))
        return exit_codes.OK
    from .table.run_table import SCHEMA_VERSION, to_csv, write

    rows = run_table_rows(name)
    if out is None:
        print(to_csv(rows, list(rows[0])), end="")
    else:
        write(rows, out, list(rows[0]))
        print(f"wrote {len(rows)} runs of {name} (schema_version {SCHEMA_VERSION}) to {out}")
    return exit_codes.OK


def listing() -> str:
    lines = [f"{'name':<20} {'rows':>5}  {'license':<12} where", "-" * 72]
    for t in TABLES.values():
        where = "bundled" if t.shipped else t.cache_state()
        lines.append(f"{t.name:<20} {t.rows:>5}  {short_license(t.license):<12} {where}")
    lines.append(f"cache: {cache_dir()} (DEPTHDELUSION_CACHE); `depthdelusion tables show NAME` for provenance")
    return "\n".join(lines)


def short_license(text: str) -> str:
    """The SPDX id (or "none stated") that a registration's license text starts with."""
    return text.split(" (")[0].split(":")[0]


def provenance(name: str) -> dict:
    t = table_entry(name)
    fit = t.fit and {"law": t.fit.law, "method": t.fit.method, "how": t.fit.how, "interval": t.fit.interval,
                     "values": {k: {"value": v, "tolerance": tol} for k, (v, tol) in t.fit.values.items()}}
    return {"name": t.name, "title": t.title, "citation": t.paper, "source": t.source,
            "license": t.license, "rows": t.rows, "bundled": t.shipped, "cached": t.cached,
            "cache_state": "bundled" if t.shipped else t.cache_state(),
            "files": [{"repo": f.repo, "commit": f.commit, "path": f.path, "url": f.raw_url,
                       "sha256": f.sha256} for f in t.files],
            "compute": t.flop_convention, "parameters": t.parameters(), "columns": columns(name),
            "published_fit": fit,
            "notes": list(t.notes)}


def show(name: str) -> str:
    t = table_entry(name)
    cols = columns(name)
    known = ", ".join(cols) if cols is not None else "known once downloaded (`depthdelusion tables get NAME`)"
    return "\n".join([t.describe(), f"  columns: {known}"] + [f"  note: {n}" for n in t.notes])


def columns(name: str) -> list[str] | None:
    """The run-table columns the table fills; None while it is neither bundled nor cached
    (showing provenance never downloads)."""
    t = table_entry(name)
    if not (t.shipped or t.cached):
        return None
    return list(run_table_rows(name)[0])


def run_table_rows(name: str) -> list[dict]:
    """Every row of the table (status ``excluded`` for those its source's analysis leaves out) in
    the run-table schema, with the columns the source gives (in the schema's order; a column it
    never gives is left out, so that the table reads back as it was published); the source's
    FLOP convention is stated in each row's ``source``."""
    from .table.run_table import COLUMNS, SCHEMA_VERSION

    t = table_entry(name)
    runs = load_table(name, all_rows=True)
    flops = f" (flops: {t.flop_convention})" if t.flop_convention and np.isfinite(runs.compute).any() else ""
    where = [url + flops for url in row_files(t, runs)]
    status = runs.extra.get("status", ["finished"] * len(runs))
    steps, lrs, heads = (runs.extra.get(k, [""] * len(runs)) for k in ("step", "lr", "heads"))
    rows = []
    for i in range(len(runs)):
        row = dict.fromkeys(COLUMNS, "")
        row.update(schema_version=SCHEMA_VERSION, name=runs.name[i], group=runs.group[i],
                   status=status[i], steps=steps[i], lr=lrs[i], heads=heads[i], tokenizer=runs.tokenizer[i],
                   loss_unit=runs.loss_unit[i], source=where[i],
                   params_convention=f"as published ({t.name})" if np.isfinite(runs.params[i]) else "")
        row.update({col: _number(getattr(runs, attr)[i]) for col, attr in _NUMBERS.items()})
        rows.append(row)
    given = [c for c in COLUMNS if any(r[c] not in (None, "") for r in rows)]
    return [{c: r[c] for c in given} for r in rows]


def row_files(t, runs) -> list[str]:
    """Per row, the URL of the source file it was read from. A table of many files (one run
    per file: gadre2024, olmo_ladder) names each row by its file's stem, which maps it back."""
    if len(t.files) <= 1:
        return [t.files[0].raw_url if t.files else t.source] * len(runs)
    by_stem = {PurePosixPath(f.path).stem: f.raw_url for f in t.files}
    unknown = [n for n in runs.name if n not in by_stem]
    if unknown:  # a reader that stopped naming rows by their file: no row gets another's URL
        raise ValueError(f"{t.name}: row {unknown[0]!r} is named after none of the table's files")
    return [by_stem[n] for n in runs.name]


def _number(value):
    value = float(value)
    if math.isnan(value):
        return ""
    return int(value) if value.is_integer() else value
