"""Published run tables by name, with their provenance, license and the fit their paper reports,
and pooled fits of our runs with one of them (one offset E per source).

``load_table(NAME)`` returns the same :class:`.runs.Runs` table the reader returns for a CSV;
``depthdelusion fit --table NAME`` fits it. Only the paper's own table ships in the package
(``file``, in ``reference/``); every other table is downloaded from its source repository,
pinned by commit and sha256, into a cache (``files``; analysis/table/published_files.py), and its
reader maps the source's file format to the run table. ``load_table(NAME, path=FILE)`` reads a
local copy instead. Each registration carries its paper's published fit and, where the paper
reports them, its compute-optimal exponents (``exponents``: N* ∝ C^a, D* ∝ C^b).
"""
from __future__ import annotations

import csv
import functools
import io
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable

import numpy as np

from depthdelusion import rundir

from ..reference import PAPER_KAPPA, REFERENCE_DIR
from .param_count import EmbeddingCount
from .published_files import SourceFile, fetch, files_under, sha256_of
from .published_readers import (
    CHINCHILLA_EMBEDDINGS,
    EPOCH_EXCLUDED,
    GADRE_EMBEDDINGS,
    chinchilla_shapes_runs,
    gadre_runs,
    highest_losses_excluded,
    isoflop_table,
    olmo_ladder_runs,
    renamed_columns,
)
from .load import load_reference, load_runs
from .runs import Runs


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
    #: the source's format read into a run table (``published_readers.py``); None when ``columns``
    #: says it: a CSV whose columns are the run table's renamed needs no reader of its own
    reader: Callable[..., Runs] | None = None
    #: the file's name in ``reference/`` when bundled (only the paper's own table)
    file: str | None = None
    fit: PublishedFit | None = None
    exponents: tuple = field(default_factory=tuple)
    notes: tuple = field(default_factory=tuple)
    #: the source files downloaded for it (:class:`.published_files.SourceFile`), pinned by commit
    files: tuple = field(default_factory=tuple)
    #: rows of the table as published (before any selection for fitting)
    rows: int = 0
    #: how the source counts training compute, where the table gives it
    flop_convention: str = ""
    #: how its N counts the vocabulary matrices (tied or not), where registered: the one rule that
    #: --params uses for it (analysis/table/param_count.py)
    embeddings: EmbeddingCount | None = None
    #: {run-table column: the source's column} of a CSV source read without a reader of its own
    #: (:func:`.published_readers.renamed_columns`); exactly one of ``reader`` and ``columns``
    columns: dict = field(default_factory=dict)

    def __post_init__(self):
        if (self.reader is None) == (not self.columns):
            raise ValueError(f"published table {self.name!r}: give its reader or its columns (a CSV's "
                             "run-table columns by the source's names), one of them")

    def read(self, path) -> Runs:
        """The table's source file (or folder) at ``path`` as a run table."""
        if self.reader is not None:
            return self.reader(path)
        return renamed_columns(path, self.columns, f"the {self.name} table's source")

    @property
    def shipped(self) -> bool:
        return self.file is not None and (REFERENCE_DIR / self.file).is_file()

    @property
    def cached(self) -> bool:
        """Every file in the cache, each with its registered sha256."""
        return self.cache_state() == "cached"

    def cache_state(self) -> str:
        """What the cache holds of the table, checked by sha256 (``tables list`` and ``show``):
        ``cached``, ``altered`` (a copy whose sha256 is not the registered one: never used, and
        downloaded again on next use), ``partly cached`` or ``not cached``."""
        states = [f.cache_state() for f in self.files]
        if "altered" in states:
            return "altered"
        if states and all(state == "verified" for state in states):
            return "cached"
        return "partly cached" if "verified" in states else "not cached"

    def announcement(self) -> str:
        """The licence and citation, printed when the table is first downloaded."""
        return f"{self.name}: license {self.license}; cite {self.paper}"

    def reference(self) -> str:
        """Where the table comes from and whom to cite: the line a report of it carries."""
        return f"{self.name} from {self.source}; license {self.license}; cite {self.paper}"

    def parameters(self) -> str:
        """How the table counts N and whether its embeddings are tied (``tables show``)."""
        if self.embeddings is None:
            return ("as the source gives them; which vocabulary matrices they count is not registered "
                    "(--params nonembedding uses the table's own non-embedding column, if it has one)")
        return f"as published. {self.embeddings.describe()}"

    def describe(self) -> str:
        if self.shipped:
            where = "shipped in the package"
        else:
            state = {"not cached": "not cached yet",
                     "altered": "the cached copy is altered, its sha256 not the registered one: "
                                "never used, downloaded again on next use"}.get(self.cache_state(), self.cache_state())
            where = f"downloaded from its source on first use ({state})"
        lines = [f"{self.name}: {self.title}", f"  paper: {self.paper}", f"  source: {self.source}",
                 f"  license: {self.license}", f"  rows: {self.rows}", f"  {where}"]
        for f in self.files:
            lines.append(f"  file: {f.raw_url}\n    sha256 {f.sha256}")
        if self.flop_convention:
            lines.append(f"  compute: {self.flop_convention}")
        lines.append(f"  parameters: {self.parameters()}")
        if self.fit:
            values = ", ".join(f"{k} {v:g} ± {tol:g}" for k, (v, tol) in self.fit.values.items())
            lines.append(f"  published fit ({self.fit.law}, {self.fit.method}): {values} ({self.fit.interval})")
        for e in self.exponents:
            lines.append(f"  published exponents, {e.approach}: a {e.a[0]:g} {list(e.a[1])}, "
                         f"b {e.b[0]:g} {list(e.b[1])} ({e.interval})")
        return "\n".join(lines)


def _depth_delusion(path) -> Runs:
    if path is not None:
        raise ValueError("table 'depth_delusion' ships in the package; it takes no path")
    return load_reference("depth_delusion")


def epoch_chinchilla(path) -> Runs:
    """Epoch AI's reconstruction of Hoffmann et al.'s Figure 4 (``data/svg_extracted_data.csv``
    of github.com/epoch-research/analyzing-chinchilla): columns ``Model Size`` (N), ``Training
    FLOP`` (C), ``loss``; tokens D = C / (6 N). Every point is kept; the 5 highest losses, which
    Epoch left out before fitting, have status ``excluded`` (extra column), so a fit leaves
    them out too (:func:`load_table`)."""
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
    status = highest_losses_excluded(loss)
    keep = status == "finished"
    runs = Runs(params=n, tokens=flop / (6 * n), loss=loss, compute=flop, source=str(path),
                tokenizer=["chinchilla-sentencepiece"] * len(rows), extra={"status": status})
    runs.notes.append(f"Epoch AI's selection: {len(rows)} points, the {EPOCH_EXCLUDED} with the highest "
                      f"loss left out ({int(keep.sum())} fitted; all {len(rows)} would move β from "
                      "0.366 to 0.453); tokens = FLOP / (6 N)")
    return runs


GEMSTONES_REPO, GEMSTONES_COMMIT = "mcleish7/gemstone-scaling-laws", "5f420478f6057b0cbb4d13405fb10ca64675bccb"
GEMSTONES_SOURCE = f"https://github.com/{GEMSTONES_REPO} (wandb_dfs/, commit {GEMSTONES_COMMIT})"
_GEMSTONES_FIELDS = ("run_name", "width", "depth", "params_active_precise", "tokens", "final_loss")
#: The authors' tokenizer's vocabulary (their depth_width.py, which subtracts 50304·width for
#: non-embedding counts).
GEMSTONES_VOCAB = 50304


#: Gemstones' count, measured on the hot table (22 shapes; the other two tables give the same to
#: 0.01%): least squares gives N = 15.0·D·W² − 6.6·D·W + 100,525·W, and 100,525 ≈ 2·50,304.
GEMSTONES_EMBEDDINGS = EmbeddingCount(
    GEMSTONES_VOCAB, 2, False,
    "N is params_active_precise as published: N ≈ 15.0·D·W² − 6.6·D·W + 100,525·W (least squares on "
    "the 22 shapes, within 1.5%), the W term ≈ 2V: an untied input embedding and LM head. The table's "
    "params_non_embedding column is the authors' --no_embeds count (N − V·W: the LM head still in), "
    "not Kaplan's")


def gemstones(path) -> Runs:
    """The Gemstones suite's fitting table (McLeish et al. 2025): 22 shapes (width × depth), each
    one training run with a constant learning rate ("hot": no cool-down) read at 10 checkpoints
    from 10B to 100B tokens. JSON Lines as the authors release it, one object per checkpoint:
    ``run_name``, ``width``, ``depth``, ``params_active_precise`` (N, embeddings included),
    ``tokens``, ``step``, ``final_loss`` (nats/token; other keys are ignored)."""
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
                vocab_size=np.full(len(rows), GEMSTONES_VOCAB),
                params_non_embedding=column["params_active_precise"] - GEMSTONES_VOCAB * column["width"],
                extra={"step": [r.get("step", "") for r in rows]})
    shapes = len({(r["width"], r["depth"]) for r in rows})
    runs.notes.append(f"Gemstones: {len(rows)} checkpoints of {shapes} shapes (width × depth); the "
                      "checkpoints of one shape come from one constant-learning-rate run, so they are "
                      "not independent runs (the bootstrap resamples whole shapes by default, --cluster; "
                      "profile intervals treat the rows as independent and are too narrow)")
    return runs


GEMSTONES_LICENSE = "MIT (the repository's LICENSE, © 2025 the authors)"
GEMSTONES_PAPER = ("McLeish, Kirchenbauer, Miller, Singh, Bhatele, Goldblum, Panda, Goldstein: Gemstones: "
                   "A Model Suite for Multi-Faceted Scaling Laws (arXiv 2502.06857, NeurIPS 2025)")
#: Approach 2's exponent a (N* ∝ C^a) on the digitised Llama 3 points, in Open-Athena's analysis.
LLAMA3_APPROACH2_A = 0.4632
OPEN_ATHENA = ("Open-Athena/scaling-law-analysis", "3e0656ee3dce1a2c89aa67691920f5eb9d30f0fc")
OPEN_ATHENA_LICENSE = "none stated (no LICENSE file in the repository; so not redistributed here)"


def _gemstones_file(kind: str) -> SourceFile:
    return SourceFile(GEMSTONES_REPO, GEMSTONES_COMMIT, f"wandb_dfs/wandb_df_for_fitting_{kind}.jsonl")


def _gemstones_variant(name: str, kind: str, what: str, rows: int, fit=None, notes=()) -> PublishedTable:
    return PublishedTable(name, f"The Gemstones suite, {what}", GEMSTONES_PAPER, GEMSTONES_SOURCE,
                          GEMSTONES_LICENSE, True, gemstones, rows=rows, files=(_gemstones_file(kind),),
                          fit=fit, embeddings=GEMSTONES_EMBEDDINGS, notes=notes)


#: The hot runs read on past 100B tokens (measured on the files: every row of ``gemstones`` is a
#: row of the 100b+ table with the same loss, and the 120b+ table is its rows from 120B on).
GEMSTONES_LATER_NOTES = (
    "the same 22 constant-learning-rate runs as gemstones, read every 10B tokens to 350B; the "
    "checkpoints to 100B are gemstones' rows, loss for loss, so the tables are not independent "
    "evidence; no cool-down: a checkpoint is mid-run",)


def _gemstones_width_depth_fit(kind: str, E: float, exponents: tuple, coefficients: tuple,
                               objective: float) -> PublishedFit:
    """The authors' released width-depth optimum for one table (their parameters_delta-3/
    approach_3_width_depth_parameters_grid_search_0_{kind}.json: exponents and ln-coefficients
    in the order width, depth, parameters, tokens, and ln E; Huber δ = 1e-3, the threshold of
    this package's ``huber`` method). The scales are not compared: they trade off against the
    exponents along the valley the authors' grid search and ours both end in."""
    aw, ad, alpha, beta = exponents
    lnAw, lnAd, lnA, lnB = coefficients
    return PublishedFit(
        "gemstones_width_depth", "huber",
        {"E": (math.exp(E), 0.05), "aw": (aw, 0.02), "ad": (ad, 0.02), "alpha": (alpha, 0.02),
         "beta": (beta, 0.02)},
        f"the authors' released optimum (parameters_delta-3/approach_3_width_depth_parameters_grid_"
        f"search_0_{kind}.json: E = e^{E:.5f}, Aw = e^{lnAw:.5f}, Ad = e^{lnAd:.5f}, A = e^{lnA:.5f}, "
        f"B = e^{lnB:.5f}; Huber objective {objective:.7g}): Huber (δ = 1e-3) of log-loss residuals, "
        "L-BFGS-B from a 5^4·6^4·5 grid, N = params_active_precise (embeddings included)",
        interval="no interval is released: ± a tolerance for the flat valley (0.05 on E, 0.02 on "
                 "each exponent)")


#: The authors' Huber objective at their released width-depth optimum, per table (δ = 1e-3).
GEMSTONES_WIDTH_DEPTH_OBJECTIVE = {"cool_end": 0.0008107426, "lr_ablation_hot": 0.0010089106}
#: The authors' released width-depth optimum per table (Huber δ = 1e-3): ln E, the exponents
#: (width, depth, parameters, tokens) and their ln-coefficients in the same order. The hot
#: table's is released only at δ = 1e-4 (parameters_delta-4/), so it is a test constant.
GEMSTONES_WIDTH_DEPTH_RELEASED = {
    "cool_end": (0.5874913187, (0.3540096969, 0.464087269, 0.3941362557, 0.5364845902),
                 (1.5262220266, -0.1780173948, 6.3319550722, 11.5393125864)),
    "lr_ablation_hot": (0.6638094371, (0.3843608161, 0.5124435014, 0.4096142991, 0.5401321511),
                        (1.5997194721, -0.2355685527, 6.6464813725, 11.8187276871)),
}
GEMSTONES_WIDTH_DEPTH = {kind: _gemstones_width_depth_fit(kind, *released, GEMSTONES_WIDTH_DEPTH_OBJECTIVE[kind])
                         for kind, released in GEMSTONES_WIDTH_DEPTH_RELEASED.items()}


def gemstones_width_depth_released(kind: str) -> dict:
    """The authors' released optimum for table ``kind`` as the law's parameters (E, Aw, aw, Ad,
    ad, A, alpha, B, beta)."""
    lnE, (aw, ad, alpha, beta), (lnAw, lnAd, lnA, lnB) = GEMSTONES_WIDTH_DEPTH_RELEASED[kind]
    return dict(E=math.exp(lnE), Aw=math.exp(lnAw), aw=aw, Ad=math.exp(lnAd), ad=ad, A=math.exp(lnA),
                alpha=alpha, B=math.exp(lnB), beta=beta)


def _isoflops(name: str, folder: str, what: str, paper: str, rows: int, reader=isoflop_table,
              **more) -> PublishedTable:
    return PublishedTable(
        name, f"{what} (isoFLOP sweeps as compiled by Open-Athena/scaling-law-analysis)", paper,
        f"https://github.com/{OPEN_ATHENA[0]} (data/isoflops/extract/{folder}/isoflops.csv, commit "
        f"{OPEN_ATHENA[1]})", OPEN_ATHENA_LICENSE, False, reader, rows=rows,
        files=(SourceFile(*OPEN_ATHENA, f"data/isoflops/extract/{folder}/isoflops.csv"),),
        flop_convention="the sweep's nominal budget C (≈ 6·N·D), as compiled", **more)


CHINCHILLA_SHAPES_FILE = SourceFile("liuyz0/DepthScaling", "07360e3decddf64d0e6b6322f5f82b79d0dd4596",
                                    "Scaling/get_fitting_data_chinchilla.csv")
#: What the file is, measured on it (tests/analysis/table/test_published_downloads.py checks the
#: counts): the points are Epoch's, row for row, with a shape per row.
CHINCHILLA_SHAPES_NOTES = (
    "the 245 rows are epoch_chinchilla's points in the same order (N, FLOP and loss equal to "
    "double precision); each run's width and depth are from Hoffmann et al.'s Table A9: 12 widths "
    "(640 to 2560) at 3 depths each, plus 7 single shapes (576×9 and 3072×36 to 5120×47)",
    "losses were read from the figure's colour scale: 99 distinct values among the 245 rows, "
    "consecutive distinct values 0.011 nats apart at the median (10%–90%: 0.0075–0.028), so "
    "differences below about 0.01 nats are not resolved; lines 65 and 90 of the file (19Lx1536) have the same "
    "loss and tokens 0.007% apart, probably one point read twice (both kept, as in Epoch's file)",
    "N (model_size) is Table A9's count: 41 of the 43 shapes follow N = 13·D·W² + 32,000·W to "
    "within 0.15% (13W² per block: attention's 4W², a 4W FFN's 8W² and one W² more, as a "
    "relative-position projection would give; 32,000·W: one vocabulary matrix); 4352×47 and 4608×47 do not (−2.2% and "
    "−4.2%): their counts fit 46 and 45 layers, so the file's depth or Table A9's count is off for them",
    f"by default Epoch's {EPOCH_EXCLUDED} highest losses are left out of fits, as for epoch_chinchilla",
)

TABLES = {t.name: t for t in (
    PublishedTable(
        "depth_delusion", "The Depth Delusion paper's 30 runs (Appendix C), as printed",
        "The Depth Delusion: Why Transformers Should Be Wider, Not Deeper (arXiv 2601.20994, 2026)",
        "the paper's Appendix C (reference/PROVENANCE.md)",
        "numbers transcribed from the paper (facts; its printed inconsistencies are in PROVENANCE.md)",
        True, _depth_delusion, file="depth_delusion_runs.csv", rows=30,
        notes=(f"The paper's own fit (κ = {PAPER_KAPPA} [2.09, 2.77], R² 0.922) is not reproduced by a "
               "refit of its printed table: analysis/paper_refit/ compares them.",)),
    PublishedTable(
        "epoch_chinchilla", "Epoch AI's reconstruction of the Chinchilla data (245 points, 240 fitted)",
        "Besiroglu, Erdil, Barnett, You: Chinchilla Scaling: A replication attempt (arXiv 2404.10102, 2024)",
        "https://github.com/epoch-research/analyzing-chinchilla (data/svg_extracted_data.csv, "
        "commit 92258837425e1b5f2851d624287f0120583a3d0e)",
        "none stated (no LICENSE file in any commit of the repository; so not redistributed here)",
        False, epoch_chinchilla, rows=245,
        files=(SourceFile("epoch-research/analyzing-chinchilla", "92258837425e1b5f2851d624287f0120583a3d0e",
                          "data/svg_extracted_data.csv"),),
        flop_convention="Training FLOP as digitised from Hoffmann et al.'s Figure 4 (their C ≈ 6·N·D); tokens = C / (6 N)",
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
        GEMSTONES_SOURCE, GEMSTONES_LICENSE, True, gemstones, rows=220,
        files=(_gemstones_file("hot"),), embeddings=GEMSTONES_EMBEDDINGS,
        fit=PublishedFit("chinchilla", "huber",
                         {"E": (2.1431, 0.002), "alpha": (0.29287, 0.002), "beta": (0.71287, 0.002)},
                         "the authors' released optimum (parameters_delta-3/approach_3_parameters_"
                         "grid_search_0_hot.json: E = e^0.76226, A = e^5.36134, α 0.29287, B = "
                         "e^15.41599, β 0.71287; Huber objective 0.0019816): Huber (δ = 1e-3) of "
                         "log-loss residuals, L-BFGS-B from a 5·5·6·6·5 grid, on all 220 rows",
                         interval="no interval is released: ± the optimiser's tolerance"),
        notes=("N is params_active_precise (embeddings included); the authors' width-depth law (their "
               "depth_width.py) is the law gemstones_width_depth, its released optimum registered "
               "with gemstones_cooldown and gemstones_lr_half (Huber δ = 1e-3).",)),
    _gemstones_variant("gemstones_lr_half", "lr_ablation_hot",
                       "the 'cooler_' runs: the same shapes at half the learning rate, no cool-down", 200,
                       GEMSTONES_WIDTH_DEPTH["lr_ablation_hot"]),
    _gemstones_variant("gemstones_cooldown", "cool_end", "each checkpoint after a learning-rate cool-down", 199,
                       GEMSTONES_WIDTH_DEPTH["cool_end"]),
    _gemstones_variant("gemstones_100b_plus", "hot_100b+", "the hot runs read to 350B tokens: 22 shapes × "
                       "35 checkpoints, 10B–350B (gemstones' 220 rows and 550 later ones)", 770,
                       notes=GEMSTONES_LATER_NOTES),
    _gemstones_variant("gemstones_120b_only", "hot_120b+_only", "the hot runs' later checkpoints only: 22 "
                       "shapes × 24 checkpoints, 120B–350B", 528, notes=GEMSTONES_LATER_NOTES),
    PublishedTable(
        "chinchilla_shapes", "Chinchilla's runs with their shapes: Epoch's 245 points (240 fitted), "
        "43 width × depth shapes from Table A9",
        "Hoffmann, Borgeaud, Mensch, et al.: Training Compute-Optimal Large Language Models (arXiv "
        "2203.15556, 2022), points digitised by Besiroglu, Erdil, Barnett, You (arXiv 2404.10102, "
        "2024), shapes joined from its Table A9 by Liu et al. (Inverse Depth Scaling, ICML 2026)",
        f"https://github.com/{CHINCHILLA_SHAPES_FILE.repo} ({CHINCHILLA_SHAPES_FILE.path}, commit "
        f"{CHINCHILLA_SHAPES_FILE.commit})",
        "none stated (no LICENSE file in the repository; so not redistributed here)",
        False, chinchilla_shapes_runs, rows=245, files=(CHINCHILLA_SHAPES_FILE,),
        embeddings=CHINCHILLA_EMBEDDINGS,
        flop_convention="FLOP as digitised from Hoffmann et al.'s Figure 4 (their C ≈ 6·N·D); "
                        "tokens = FLOP / (6 N), as the file gives them",
        notes=CHINCHILLA_SHAPES_NOTES),
    PublishedTable(
        "gadre2024", "Gadre et al.'s over-trained runs: 104 runs, 3 training sets (groups), several validation losses",
        "Gadre, Smyrnis, Shankar, Gururangan, Wortsman, Shao, Mercat, Fang, Li, Keh, et al.: Language models "
        "scale reliably with over-training and on downstream tasks (arXiv 2403.08540, 2024)",
        "https://github.com/mlfoundations/scaling (exp_data/models/*.json, commit "
        "a003c4913793ac2ae7ef87b28ecb562955d026d5)", "MIT (the repository's LICENSE.txt)", True, gadre_runs,
        rows=104, files=files_under("mlfoundations/scaling", "a003c4913793ac2ae7ef87b28ecb562955d026d5", "exp_data/models"),
        embeddings=GADRE_EMBEDDINGS,
        notes=("loss is the C4 validation loss (c4_val); the other validation sets are loss_<set> "
               "columns; params and params_non_embedding as the files give them (params_no_embed: "
               "one vocabulary matrix removed); open_lm_1b/7b have no width, so --params "
               "nonembedding needs their rows left out",)),
    PublishedTable(
        "olmo_ladder", "The OLMo model ladder: 5 sizes (190M-3B) x 5 token multiples (0.5-10x Chinchilla)",
        "Bhagia, Liu, Wettig, Heineman, Tafjord, Jha, Soldaini, Smith, Groeneveld, Koh, Dodge, "
        "Hajishirzi: Establishing Task Scaling Laws via Compute-Efficient Model Ladders (arXiv "
        "2412.04403, 2024)",
        "https://github.com/allenai/OLMo-ladder (src/scripts/paper/data/ladder-runs/, commit "
        "67a3f440f787d020da35e3ca8eeae475fae754f5)", "Apache-2.0 (the repository's LICENSE)", True,
        olmo_ladder_runs, rows=25,
        files=files_under("allenai/OLMo-ladder", "67a3f440f787d020da35e3ca8eeae475fae754f5",
                          "src/scripts/paper/data/ladder-runs"),
        notes=("N is the nominal size in each file's name, not an exact count; D = multiple x 20 x N; "
               "the 1xC '-rerun' files (the same runs again, ending at the same step) are not read",)),
    _isoflops("isoflop_chinchilla", "epochai_chinchilla", "Chinchilla's isoFLOP runs (Epoch AI's digitisation)",
              "Hoffmann et al.: Training Compute-Optimal Large Language Models (arXiv 2203.15556, 2022); "
              "digitised by Besiroglu et al. (arXiv 2404.10102, 2024)", 123,
              exponents=(PublishedExponents(
                  "Approach 2 (isoFLOP profiles), Hoffmann et al. 2022 Table 2", (0.49, (0.462, 0.534)),
                  (0.51, (0.483, 0.529)), "10th and 90th percentiles of a bootstrap (80% of the data, 100 times)",
                  "the points are digitised from the paper's figure, so agreement within the interval is "
                  "expected, not to the digit"),)),
    _isoflops("isoflop_llama3", "llama_3", "Llama 3's isoFLOP runs (digitised from its Figure 2)",
              "Llama Team, AI @ Meta: The Llama 3 Herd of Models (arXiv 2407.21783, 2024)", 266,
              reader=functools.partial(isoflop_table, fitted_condition="raw_loss"),
              notes=(f"Open-Athena's Approach 2 fit of these points: N* ∝ C^{LLAMA3_APPROACH2_A} "
                     "(no interval given)",)),
    _isoflops("isoflop_marin", "marin_202603", "Marin's 2026-03 isoFLOP ladders on three datasets (groups)",
              "the Marin project's isoFLOP scaling ladders (W&B exports isoflop-comma/dclm/nemotron, 2026-03)", 258),
    _isoflops("isoflop_misfitting", "misfitting", "the isoFLOP sweeps of (Mis)Fitting Scaling Laws",
              "Li, Kudugunta, Zettlemoyer: (Mis)Fitting Scaling Laws (ICLR 2025)", 176),
)}


def load_table(name: str, path=None, *, all_rows: bool = False, allow_modified: bool = False) -> Runs:
    """The published table ``name`` (:data:`TABLES`) as :class:`.runs.Runs`, read from ``path``
    (a local copy of its source file, or of its folder for a table of many files) or else from
    the package or the download cache (downloaded first when missing). A local copy is checked
    against the registered sha256: one that differs is refused (ValueError) unless
    ``allow_modified``, and then said in the runs' notes. Rows the source's own analysis leaves
    out (status ``excluded``, e.g. Epoch's 5 highest losses) are left out unless ``all_rows``."""
    table = table_entry(name)
    modified = None
    if path is None and not table.shipped:
        paths = fetch(table.files, table.announcement())
        # a table of several files is read from their folder (as from a clone's)
        path = paths[0] if len(paths) == 1 else Path(os.path.commonpath(paths))
    runs = table.read(path)  # first: a file in another format is said as such, by line
    if path is not None and table.files:
        modified = local_copy_differences(table, rundir.as_path(path))
        if modified and not allow_modified:
            raise ValueError(f"--table {name}={path}: not the registered source ({modified}): an "
                             "altered copy would be read as the published table; give "
                             "--allow-modified to read it anyway (said in the output), or "
                             f"--table {name} for the verified download")
    runs.embeddings = table.embeddings
    if modified:  # in the notes every fit and report prints, and now for the commands that print none
        runs.notes.insert(0, f"MODIFIED COPY of {name}: {path} is not the registered source "
                             f"({modified}); read as asked (--allow-modified)")
        print(f"warning: {runs.notes[0]}", file=sys.stderr)
    status = runs.extra.get("status")
    if status is None or all_rows:
        return runs
    return runs.subset(status == "finished")


def local_copy_differences(table: PublishedTable, path: Path) -> str:
    """How a local copy of ``table``'s source differs from the registered files ("" when it
    does not): a file is compared with the table's one file; a folder holds one file per
    registered name (a table of many files), and any other file of theirs it holds is counted,
    since the reader would read it too."""
    if not path.exists():
        return ""  # the reader says the path is missing
    if path.is_file():
        (file,) = table.files[:1] if len(table.files) == 1 else (None,)
        if file is None:
            return f"a file, where {table.name} is a folder of {len(table.files)} files"
        got = sha256_of(path)
        return "" if got == file.sha256 else f"sha256 {got[:12]}…, registered {file.sha256[:12]}… for {file.key}"
    names = {PurePosixPath(f.path).name: f for f in table.files}
    differ = [n for n, f in names.items() if not (path / n).is_file() or sha256_of(path / n) != f.sha256]
    suffixes = {PurePosixPath(n).suffix for n in names}
    extra = [p.name for p in path.iterdir() if p.suffix in suffixes and p.name not in names]
    parts = ([f"{len(differ)} of its {len(names)} files missing or with another sha256, e.g. {differ[0]}"]
             if differ else []) + ([f"{len(extra)} unregistered file(s), e.g. {extra[0]}"] if extra else [])
    return "; ".join(parts)


def table_entry(name: str) -> PublishedTable:
    if name not in TABLES:
        raise ValueError(f"unknown published table {name!r}; known: {', '.join(TABLES)}")
    return TABLES[name]


def parse_table_arg(text: str) -> tuple[str, str | None]:
    """``NAME`` or ``NAME=PATH`` (the --table option) -> (name, path)."""
    name, sep, path = text.partition("=")
    if sep and not path:
        raise ValueError(f"--table {text!r}: expected NAME or NAME=PATH")
    return name.strip(), (path.strip() or None)


def pool(ours, table: str, path=None, *, allow_modified: bool = False) -> Runs:
    """Our runs (anything :func:`.load.load_runs` takes) and the published table ``table`` as
    one Runs whose ``group`` is the source: ``ours`` or the table's name. The loss units must
    agree (checked as for any table)."""
    mine = load_runs(ours)
    theirs = load_table(table, path, allow_modified=allow_modified)
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
