"""Published run tables by name, with their provenance, license and the fit their paper reports,
and pooled fits of our runs with one of them (one offset E per source).

``load_table(NAME)`` returns the same :class:`.runs.Runs` table the reader returns for a CSV;
``depthdelusion fit --table NAME`` fits it. A table ships in the package only when its license
allows (``redistributable``) and its file is bundled in ``reference/`` (``shipped``); otherwise
it is *registered*: its reader knows the source's file format and selection, and
``load_table(NAME, path=FILE)`` reads the file a user downloads (the error without ``path`` says
where from). Each registration carries its paper's published fit and, where the paper reports
them, its compute-optimal exponents (``exponents``: N* ∝ C^a, D* ∝ C^b).
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from depthdelusion import rundir

from .reference import PAPER_KAPPA, REFERENCE_DIR
from .runs import Runs, load_reference, load_runs


@dataclass(frozen=True)
class PublishedFit:
    """A fit as its source reports it: law, method, and (value, tolerance) per parameter;
    ``interval`` says what the tolerance is (a published interval, or the optimiser's
    tolerance where the source gives its optimum without one)."""

    law: str
    method: str
    values: dict
    how: str
    interval: str = "± the published interval"


@dataclass(frozen=True)
class PublishedExponents:
    """Compute-optimal exponents as a paper reports them: N*(C) ∝ C^a, D*(C) ∝ C^b, each
    ``(value, (low, high))``; ``interval`` says what (low, high) is, ``caveat`` how far the
    registered table can be expected to reproduce them."""

    approach: str
    a: tuple
    b: tuple
    interval: str
    caveat: str = ""


@dataclass(frozen=True)
class PublishedTable:
    name: str
    title: str
    paper: str
    source: str
    license: str
    redistributable: bool
    reader: Callable[..., Runs]
    #: the file's name in ``reference/`` when bundled (None: never bundled, the license forbids it)
    file: str | None = None
    fit: PublishedFit | None = None
    exponents: tuple = field(default_factory=tuple)
    notes: tuple = field(default_factory=tuple)

    @property
    def shipped(self) -> bool:
        return self.redistributable and self.file is not None and (REFERENCE_DIR / self.file).is_file()

    def describe(self) -> str:
        if self.shipped:
            where = "shipped in the package"
        elif self.redistributable:
            where = f"not bundled in this installation, though its license allows it (download it: {self.source})"
        else:
            where = f"not shipped: its license does not allow it (download it: {self.source})"
        lines = [f"{self.name}: {self.title}", f"  paper: {self.paper}", f"  source: {self.source}",
                 f"  license: {self.license}", f"  {where}"]
        if self.fit:
            values = ", ".join(f"{k} {v:g} ± {tol:g}" for k, (v, tol) in self.fit.values.items())
            lines.append(f"  published fit ({self.fit.law}, {self.fit.method}): {values} ({self.fit.interval})")
        for e in self.exponents:
            lines.append(f"  published exponents, {e.approach}: a {e.a[0]:g} {list(e.a[1])}, "
                         f"b {e.b[0]:g} {list(e.b[1])} ({e.interval})")
        return "\n".join(lines)


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


#: The Gemstones file as the authors release it, bundled under this name when shipped.
GEMSTONES_FILE = "gemstones_hot.jsonl"
GEMSTONES_SOURCE = ("https://github.com/mcleish7/gemstone-scaling-laws (wandb_dfs/"
                    "wandb_df_for_fitting_hot.jsonl, commit 5f420478f6057b0cbb4d13405fb10ca64675bccb)")
_GEMSTONES_FIELDS = ("run_name", "width", "depth", "params_active_precise", "tokens", "final_loss")
#: The authors' tokenizer's vocabulary (their depth_width.py, which subtracts 50304·width for
#: non-embedding counts).
GEMSTONES_VOCAB = 50304


def gemstones(path=None) -> Runs:
    """The Gemstones suite's fitting table (McLeish et al. 2025): 22 shapes (width × depth), each
    one training run with a constant learning rate ("hot": no cool-down) read at 10 checkpoints
    from 10B to 100B tokens. JSON Lines as the authors release it, one object per checkpoint:
    ``run_name``, ``width``, ``depth``, ``params_active_precise`` (N, embeddings included),
    ``tokens``, ``final_loss`` (nats/token; other keys are ignored)."""
    if path is None:
        path = REFERENCE_DIR / GEMSTONES_FILE
        if not path.is_file():
            raise ValueError("table 'gemstones' is not bundled in this installation (its MIT license "
                             f"allows it; reference/PROVENANCE.md): download it from {GEMSTONES_SOURCE} "
                             "and give its path (load_table('gemstones', path=FILE); "
                             "fit --table gemstones=FILE)")
    path = rundir.as_path(path)
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{number}: not a JSON object ({err.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
        missing = [k for k in _GEMSTONES_FIELDS if k not in row]
        if missing:
            raise ValueError(f"{path}:{number}: not the Gemstones fitting table (no field(s) "
                             f"{', '.join(missing)}; expected {', '.join(_GEMSTONES_FIELDS)})")
        for key in _GEMSTONES_FIELDS[1:]:
            if isinstance(row[key], bool) or not isinstance(row[key], (int, float)):
                raise ValueError(f"{path}:{number}: field {key!r} is {row[key]!r}, not a number")
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no rows (expected JSON Lines with fields {', '.join(_GEMSTONES_FIELDS)})")
    column = {k: np.array([float(r[k]) for r in rows]) for k in _GEMSTONES_FIELDS[1:]}
    names = [f"{r['run_name']}@{float(r['tokens']) / 1e9:.0f}B" for r in rows]
    runs = Runs(depth=column["depth"], width=column["width"], params=column["params_active_precise"],
                tokens=column["tokens"], loss=column["final_loss"], name=names, source=str(path),
                vocab_size=np.full(len(rows), GEMSTONES_VOCAB))
    shapes = len({(r["width"], r["depth"]) for r in rows})
    runs.notes.append(f"Gemstones: {len(rows)} checkpoints of {shapes} shapes (width × depth); the "
                      "checkpoints of one shape come from one constant-learning-rate run, so they are "
                      "not independent runs (a bootstrap over rows understates the spread)")
    return runs


TABLES = {t.name: t for t in (
    PublishedTable(
        "depth_delusion", "The Depth Delusion paper's 30 runs (Appendix C), as printed",
        "The Depth Delusion: Why Transformers Should Be Wider, Not Deeper (arXiv 2601.20994, 2026)",
        "the paper's Appendix C (reference/PROVENANCE.md)",
        "numbers transcribed from the paper (facts; its printed inconsistencies are in PROVENANCE.md)",
        True, _depth_delusion, file="depth_delusion_runs.csv",
        notes=(f"The paper's own fit (κ = {PAPER_KAPPA} [2.09, 2.77], R² 0.922) is not reproduced by a "
               "refit of its printed table: analysis/paper_refit/ compares them.",)),
    PublishedTable(
        "epoch_chinchilla", "Epoch AI's reconstruction of the Chinchilla data (245 points, 240 fitted)",
        "Besiroglu, Erdil, Barnett, You: Chinchilla Scaling: A replication attempt (arXiv 2404.10102, 2024)",
        "https://github.com/epoch-research/analyzing-chinchilla (data/svg_extracted_data.csv, "
        "commit 92258837425e1b5f2851d624287f0120583a3d0e)",
        "none: no LICENSE file in any commit of the repository (so not redistributed here)",
        False, epoch_chinchilla,
        fit=PublishedFit("chinchilla", "huber",
                         {"E": (1.82, 0.03), "alpha": (0.35, 0.02), "beta": (0.37, 0.02)},
                         "Huber loss (δ = 1e-3) of log-loss residuals, L = E + A·N^−α + B·D^−β "
                         "(log-sum-exp form), L-BFGS from a grid; intervals from a bootstrap"),
        exponents=(
            PublishedExponents(
                "Approach 2 (isoFLOP profiles), Hoffmann et al. 2022 Table 2", (0.49, (0.462, 0.534)),
                (0.51, (0.483, 0.529)), "10th and 90th percentiles of a bootstrap (80% of the data, 100 times)",
                "Hoffmann et al. fitted all their isoFLOP runs (their Figure 3, 9 budgets from 6e18 to "
                "3e21 FLOP); Epoch's points are digitised from Figure 4, a subset, and their FLOP values "
                "are read off a colour scale, so they lie near, not on, the 9 budgets: budgets must be "
                "formed with a relative tolerance, and agreement is expected only roughly"),
            PublishedExponents(
                "Approach 3 (parametric fit), Hoffmann et al. 2022 Table 2", (0.46, (0.454, 0.455)),
                (0.54, (0.542, 0.543)), "10th and 90th bootstrap percentiles, as printed (0.46 and 0.54 are rounded)",
                "Epoch's refit of the same law gives a = β/(α+β) ≈ 0.51 instead (Besiroglu et al.)"),
        )),
    PublishedTable(
        "gemstones", "The Gemstones suite: 22 shapes (width × depth) at 10 checkpoints each, 10B–100B tokens",
        "McLeish, Kirchenbauer, Miller, Singh, Bhatele, Goldblum, Panda, Goldstein: Gemstones: A Model "
        "Suite for Multi-Faceted Scaling Laws (arXiv 2502.06857, NeurIPS 2025)",
        GEMSTONES_SOURCE, "MIT (the repository's LICENSE, © 2025 the authors)", True, gemstones,
        file=GEMSTONES_FILE,
        fit=PublishedFit("chinchilla", "huber",
                         {"E": (2.1431, 0.002), "alpha": (0.29287, 0.002), "beta": (0.71287, 0.002)},
                         "the authors' released optimum (parameters_delta-3/approach_3_parameters_"
                         "grid_search_0_hot.json: E = e^0.76226, A = e^5.36134, α 0.29287, B = "
                         "e^15.41599, β 0.71287; Huber objective 0.0019816): Huber (δ = 1e-3) of "
                         "log-loss residuals, L-BFGS-B from a 5·5·6·6·5 grid, on all 220 rows",
                         interval="no interval is released: ± the optimiser's tolerance"),
        notes=("N is params_active_precise (embeddings included); the authors also fit width and "
               "depth laws (their depth_width.py), which are not registered here.",)),
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
