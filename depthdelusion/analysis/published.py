"""Published run tables by name, with their provenance, license and the fit their paper reports,
and pooled fits of our runs with one of them (one offset E per source).

``load_table(NAME)`` returns the same :class:`.runs.Runs` table the reader returns for a CSV;
``depthdelusion fit --table NAME`` fits it. A table ships in the package only when its license
allows; a table whose source has no license is *registered but not shipped*: its reader knows
the source's file format and selection, and ``load_table(NAME, path=FILE)`` reads the file a
user downloads (the error without ``path`` says where from).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from depthdelusion import rundir

from .reference import PAPER_KAPPA
from .runs import Runs, load_reference, load_runs


@dataclass(frozen=True)
class PublishedFit:
    """A fit as its paper reports it: law, method, and value ± half-width (95%) per parameter."""

    law: str
    method: str
    values: dict
    how: str


@dataclass(frozen=True)
class PublishedTable:
    name: str
    title: str
    paper: str
    source: str
    license: str
    shipped: bool
    reader: Callable[..., Runs]
    fit: PublishedFit | None = None
    notes: tuple = field(default_factory=tuple)

    def describe(self) -> str:
        where = "shipped in the package" if self.shipped else f"not shipped (download it: {self.source})"
        return (f"{self.name}: {self.title}\n  paper: {self.paper}\n  source: {self.source}\n"
                f"  license: {self.license}\n  {where}")


def _depth_delusion(path=None) -> Runs:
    if path is not None:
        raise ValueError("table 'depth_delusion' ships in the package; it takes no path")
    return load_reference("depth_delusion")


#: Epoch AI's selection: the 5 runs with the highest loss are left out (245 -> 240 points).
EPOCH_EXCLUDED = 5


def epoch_chinchilla(path=None) -> Runs:
    """Epoch AI's reconstruction of Hoffmann et al.'s Figure 4 (``data/svg_extracted_data.csv``
    of github.com/epoch-research/analyzing-chinchilla): columns ``Model Size`` (N), ``Training
    FLOP`` (C), ``loss``; tokens D = C / (6 N) and the 5 highest losses left out, as Epoch did."""
    if path is None:
        raise ValueError("table 'epoch_chinchilla' is not shipped: its source repository states no "
                         "license. Download data/svg_extracted_data.csv from "
                         "https://github.com/epoch-research/analyzing-chinchilla and give its path "
                         "(load_table('epoch_chinchilla', path=FILE); fit --table epoch_chinchilla=FILE)")
    path = rundir.as_path(path)
    rows = list(csv.DictReader(io.StringIO(path.read_text(), newline="")))
    missing = {"Model Size", "Training FLOP", "loss"} - set(rows[0] if rows else ())
    if missing:
        raise ValueError(f"{path}: not Epoch AI's svg_extracted_data.csv (no column(s) {', '.join(sorted(missing))})")
    try:
        n = np.array([float(r["Model Size"]) for r in rows])
        flop = np.array([float(r["Training FLOP"]) for r in rows])
        loss = np.array([float(r["loss"]) for r in rows])
    except ValueError as err:
        raise ValueError(f"{path}: a value is not a number ({err})") from None
    keep = loss < np.sort(loss)[-EPOCH_EXCLUDED]
    runs = Runs(params=n[keep], tokens=flop[keep] / (6 * n[keep]), loss=loss[keep], source=str(path),
                tokenizer=["chinchilla-sentencepiece"] * int(keep.sum()))
    runs.notes.append(f"Epoch AI's selection: {len(rows)} points, the {EPOCH_EXCLUDED} with the highest "
                      f"loss left out ({int(keep.sum())} fitted); tokens = FLOP / (6 N)")
    return runs


TABLES = {t.name: t for t in (
    PublishedTable(
        "depth_delusion", "The Depth Delusion paper's 30 runs (Appendix C), as printed",
        "The Depth Delusion: Why Transformers Should Be Wider, Not Deeper (arXiv 2601.20994, 2026)",
        "the paper's Appendix C (reference/PROVENANCE.md)",
        "numbers transcribed from the paper (facts; its printed inconsistencies are in PROVENANCE.md)",
        True, _depth_delusion,
        notes=(f"The paper's own fit (κ = {PAPER_KAPPA} [2.09, 2.77], R² 0.922) is not reproduced by a "
               "refit of its printed table: analysis/paper_refit/ compares them.",)),
    PublishedTable(
        "epoch_chinchilla", "Epoch AI's reconstruction of the Chinchilla data (245 points, 240 fitted)",
        "Besiroglu, Erdil, Barnett, You: Chinchilla Scaling: A replication attempt (arXiv 2404.10102, 2024)",
        "https://github.com/epoch-research/analyzing-chinchilla (data/svg_extracted_data.csv)",
        "none stated in the repository (so not redistributed here)", False, epoch_chinchilla,
        fit=PublishedFit("chinchilla", "huber",
                         {"E": (1.82, 0.03), "alpha": (0.35, 0.02), "beta": (0.37, 0.02)},
                         "Huber loss (δ = 1e-3) of log-loss residuals, L = E + A·N^−α + B·D^−β "
                         "(log-sum-exp form), L-BFGS from a grid; intervals from a bootstrap")),
)}


def load_table(name: str, path=None) -> Runs:
    """The published table ``name`` (:data:`TABLES`) as :class:`.runs.Runs`; ``path`` for a
    registered table that is not shipped (its source file)."""
    if name not in TABLES:
        raise ValueError(f"unknown published table {name!r}; known: {', '.join(TABLES)}")
    return TABLES[name].reader(path)


def parse_table_arg(text: str) -> tuple[str, str | None]:
    """``NAME`` or ``NAME=PATH`` (the --table option) -> (name, path)."""
    name, sep, path = text.partition("=")
    if sep and not path:
        raise ValueError(f"--table {text!r}: expected NAME or NAME=PATH")
    return name.strip(), (path.strip() or None)


def pool(ours, table: str, path=None) -> Runs:
    """Our runs (anything :func:`.runs.load_runs` takes) and the published table ``table`` as
    one Runs whose ``group`` is the source: ``ours`` or the table's name. The loss units must
    agree (checked as for any table)."""
    mine = load_runs(ours)
    theirs = load_table(table, path)
    columns = ("depth", "width", "params", "loss", "tokens", "loss_se")
    merged = {c: np.concatenate([np.asarray(getattr(mine, c), float), np.asarray(getattr(theirs, c), float)])
              for c in columns}
    text = {c: np.concatenate([getattr(mine, c), getattr(theirs, c)]) for c in ("name", "tokenizer", "loss_unit")}
    vocab = np.concatenate([mine.vocab_size, theirs.vocab_size])
    runs = Runs(**merged, group=["ours"] * len(mine) + [table] * len(theirs), name=text["name"],
                tokenizer=text["tokenizer"], loss_unit=text["loss_unit"], vocab_size=vocab,
                profiles=list(mine.profiles) + list(theirs.profiles),
                source=f"{mine.source or 'our runs'} + published table {table}")
    runs.notes += [f"ours: {n}" for n in mine.notes] + [f"{table}: {n}" for n in theirs.notes]
    return load_runs(runs)  # the unit check of any table


def fit_pooled(ours, table: str, law, method: str = "lm", *, path=None, **options):
    """Fit ``law`` to our runs pooled with the published ``table``, one offset E per source
    (``ours``, ``table``) and every other parameter shared. The result's first note says what
    was pooled and what the offsets assume."""
    from .fitting import fit

    runs = pool(ours, table, path)
    result = fit(runs, law, method, group_offsets=True, groups=runs.group, **options)
    n_ours = int((runs.group == "ours").sum())
    meta = TABLES[table]
    result.notes.insert(0, (
        f"pooled fit: {n_ours} of our runs ({_source_of(ours)}) + {len(runs) - n_ours} runs of the "
        f"published table {table!r} ({meta.paper}; license: {meta.license}); one offset E per source "
        f"(E[ours], E[{table}]), every other parameter shared. Assumes the sources differ by a constant "
        "loss offset only (data, tokenizer and evaluation differences are additive); a source "
        "difference in the exponents is read as noise"))
    return result


def _source_of(ours) -> str:
    return ours.source if isinstance(ours, Runs) else str(ours)
