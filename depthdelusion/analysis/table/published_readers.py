"""Readers of published tables' own file formats into :class:`.runs.Runs` (analysis/table/published.py
registers them): one function per format, each naming the file, line and field of bad input."""
from __future__ import annotations

import csv
import io
import json
import math
import re

import numpy as np

from depthdelusion import rundir

from .param_count import EmbeddingCount
from .runs import Runs

#: Epoch AI's selection of the Chinchilla points: the 5 runs with the highest loss are left out
#: (245 -> 240 points); every reader of those points applies it (:func:`highest_losses_excluded`).
EPOCH_EXCLUDED = 5


def highest_losses_excluded(loss, count: int = EPOCH_EXCLUDED) -> np.ndarray:
    """Each row's status under Epoch AI's selection: ``excluded`` for the ``count`` highest
    losses, ``finished`` for the others."""
    loss = np.asarray(loss, float)
    keep = loss < np.sort(loss)[-count] if len(loss) >= count else np.zeros(len(loss), bool)
    return np.where(keep, "finished", "excluded")


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


#: The run table's columns (:class:`.runs.Runs`) a source's columns may be renamed to, and which of
#: them hold text (the others are numbers).
RENAMABLE = ("depth", "width", "params", "tokens", "loss", "loss_se", "compute", "params_non_embedding",
             "vocab_size", "group", "name", "tokenizer")
TEXT_COLUMNS = ("group", "name", "tokenizer")


def renamed_columns(path, columns: dict[str, str], what: str) -> Runs:
    """A CSV source whose columns are run-table columns under other names, read with no reader of
    its own: ``columns`` maps each run-table column (:data:`RENAMABLE`) to the source's name for
    it (e.g. ``{"params": "Model Size", "loss": "loss"}``); the source's other columns are not
    read. A missing column, or a cell that is not a number, is named by the file and its line."""
    unknown = sorted(set(columns) - set(RENAMABLE))
    if unknown:
        raise ValueError(f"{what}: {', '.join(unknown)} is not a run-table column; the columns "
                         f"a source may be renamed to: {', '.join(RENAMABLE)}")
    rows = read_csv_records(path, tuple(columns.values()), what)
    values = {ours: np.array([r[theirs] for r in rows]) if ours in TEXT_COLUMNS else numbers(rows, theirs, path)
              for ours, theirs in columns.items()}
    return Runs(**values, source=str(rundir.as_path(path)))


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


#: open_lm's padded GPT-NeoX vocabulary, the V of Gadre et al.'s models (their open_lm configs).
GADRE_VOCAB = 50432
GADRE_EMBEDDINGS = EmbeddingCount(
    GADRE_VOCAB, 2, False,
    "N is the files' params as published; for each of the 4 named shapes it is the open_lm blocks "
    "(4·W² attention and a SwiGLU of 3·W·h, h = ⌊8W/3⌋ rounded up to a multiple of 256, two gain-only "
    "norms per layer and a final one) plus 2·50,432·W exactly, and params − params_no_embed = "
    "50,432·W exactly: an untied input embedding and LM head, as the shapes' configs say "
    "(scaling/open_lm_configs/d=W_l=L_h=H.json at the pinned commit: vocab_size 50432, "
    "weight_tying false). The files' params_no_embed (column params_non_embedding) is N − V·W, "
    "the LM head still in, not Kaplan's")

#: Gadre et al.'s model names: d=WIDTH_l=LAYERS_h=HEADS (the open_lm_1b/7b configs are not spelled out).
_GADRE_SHAPE = re.compile(r"d=(\d+)_l=(\d+)_h=(\d+)")
#: The validation set whose loss is ``loss`` (Gadre et al. fit C4 eval loss); the others are extra columns.
GADRE_LOSS = "c4_val"


def gadre_runs(path) -> Runs:
    """Gadre et al. 2024's runs (mlfoundations/scaling ``exp_data/models/*.json``, one file per
    run; ``path`` is that folder): width, depth and heads from the model name, tokens, lr,
    params and params_no_embed from ``hyperparameters``, the C4 validation loss as ``loss`` and
    every other validation set's loss as a ``loss_<set>`` column; the group is the training set."""
    folder = rundir.as_path(path)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise ValueError(f"{folder}: expected the folder of Gadre et al.'s run files (exp_data/models/*.json)")
    records = [_gadre_record(f) for f in files]
    keys = sorted({k for r in records for k in r if k.startswith("loss_")})
    col = {k: np.array([r.get(k, math.nan) for r in records], dtype=float)
           for k in ("depth", "width", "params", "params_non_embedding", "tokens", "loss")}
    extra = {"lr": [r["lr"] for r in records], "heads": [r["heads"] for r in records]}
    extra.update({k: [r.get(k, "") for r in records] for k in keys})
    runs = Runs(**col, group=[r["group"] for r in records], name=[r["name"] for r in records],
                source=str(folder), extra=extra)
    runs.notes.append(f"Gadre et al.: {len(records)} runs, loss = the {GADRE_LOSS} validation loss; "
                      "width and depth of open_lm_1b/7b are not in the files (left blank)")
    return runs


def _gadre_record(file) -> dict:
    try:
        doc = json.loads(file.read_text())
        hp, results = doc["hyperparameters"], doc["results"]
        shape = _GADRE_SHAPE.search(hp["model"])
        record = {"name": doc["name"], "group": doc["dataset_name"], "tokens": float(hp["tokens"]),
                  "params": float(hp["params"]), "params_non_embedding": float(hp["params_no_embed"]),
                  "lr": float(hp["lr"]), "depth": math.nan, "width": math.nan, "heads": ""}
        if shape:
            record.update(width=float(shape[1]), depth=float(shape[2]), heads=int(shape[3]))
        for result in results:
            val = result["val_data"][0] if isinstance(result["val_data"], list) else result["val_data"]
            kind = "c4_val" if "c4_val" in val else val.split("/")[-2]
            record["loss" if kind == GADRE_LOSS else f"loss_{kind}"] = float(result["loss"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, IndexError) as err:
        raise ValueError(f"{file}: not one of Gadre et al.'s run files ({type(err).__name__}: {err})") from None
    if "loss" not in record:
        raise ValueError(f"{file}: no {GADRE_LOSS} validation loss in its results")
    return record


#: The OLMo ladder's run files: SIZE-MULTIPLExC.csv (the "-rerun" copies and the peteish
#: evaluations are other files). Chinchilla's 20 tokens per parameter make 1xC.
_OLMO_RUN = re.compile(r"^(\d+(?:\.\d+)?)([MB])-(\d+(?:\.\d+)?)xC\.csv$")
OLMO_TOKENS_PER_PARAM = 20
#: The validation loss used as ``loss`` (the files log a dozen sets; C4 as for Gadre et al.).
OLMO_LOSS = "eval/c4_en-validation/CrossEntropyLoss"


def olmo_ladder_runs(path) -> Runs:
    """The OLMo model ladder (allenai/OLMo-ladder ``src/scripts/paper/data/ladder-runs/``;
    ``path`` is that folder): one run per SIZE-MULTIPLExC.csv, its last logged step (the end of
    training: the files of one size end at steps proportional to MULTIPLE). N is the nominal size
    in the file name, D = MULTIPLE · 20 · N; the loss is the C4 validation cross-entropy there."""
    folder = rundir.as_path(path)
    files = sorted(f for f in (folder.glob("*.csv") if folder.is_dir() else []) if _OLMO_RUN.match(f.name))
    if not files:
        raise ValueError(f"{folder}: expected the OLMo ladder's run files (SIZE-MULTIPLExC.csv, "
                         "e.g. 190M-1xC.csv)")
    names, params, tokens, loss, steps = [], [], [], [], []
    for file in files:
        size, unit, multiple = _OLMO_RUN.match(file.name).groups()
        rows = read_csv_records(file, ("_step", OLMO_LOSS), "an OLMo ladder run file")
        last = rows[-1]
        n = float(size) * (1e6 if unit == "M" else 1e9)
        names.append(file.stem)
        params.append(n)
        tokens.append(float(multiple) * OLMO_TOKENS_PER_PARAM * n)
        loss.append(numbers([last], OLMO_LOSS, file)[0])
        steps.append(int(numbers([last], "_step", file)[0]))
    runs = Runs(params=np.array(params), tokens=np.array(tokens), loss=np.array(loss),
                group=["olmo_ladder"] * len(files), name=names, source=str(folder),
                extra={"step": steps})
    runs.notes.append(f"OLMo ladder: {len(files)} runs, each at its last logged step; N is the "
                      "nominal size in the file name (190M … 3B), D = multiple × 20 × N (the "
                      f"ladder's 'xC', Chinchilla multiples); loss = {OLMO_LOSS}")
    return runs


#: liuyz0/DepthScaling's join of Epoch's Chinchilla points with Hoffmann et al.'s Table A9.
CHINCHILLA_SHAPES_FIELDS = ("model_size", "FLOP", "loss", "num_tokens", "d_model", "n_layers")
#: Chinchilla's vocabulary (Hoffmann et al. 2022, Gopher's SentencePiece size): the V of the
#: one V × W matrix that Table A9's counts hold (measured on the file: N ≈ 13·D·W² + 32,000·W).
CHINCHILLA_VOCAB = 32000
CHINCHILLA_EMBEDDINGS = EmbeddingCount(
    CHINCHILLA_VOCAB, 1, None,
    "N is Table A9's count as published: 41 of the 43 shapes follow N = 13·D·W² + 32,000·W to within "
    "0.15%, one V × W matrix; Hoffmann et al. do not say whether the input embedding and the output "
    "layer are tied (a tied matrix, or a head left out of the count, would both give this)")


def chinchilla_shapes_runs(path) -> Runs:
    """Chinchilla's runs with their shapes (``Scaling/get_fitting_data_chinchilla.csv`` of
    github.com/liuyz0/DepthScaling): Epoch AI's digitised points (``model_size`` N as in
    Hoffmann et al.'s Table A9, ``FLOP``, ``loss``, ``num_tokens`` = FLOP / (6 N)), each joined
    with its width ``d_model`` and depth ``n_layers`` from Table A9. Each row is one training
    run; its shape label (``shape``, e.g. 40Lx3584) is shared by the runs of one shape. Every
    point is kept; Epoch's 5 highest losses have status ``excluded``, as in ``epoch_chinchilla``."""
    rows = read_csv_records(path, CHINCHILLA_SHAPES_FIELDS,
                            "liuyz0/DepthScaling's Scaling/get_fitting_data_chinchilla.csv")
    col = {k: numbers(rows, k, path) for k in CHINCHILLA_SHAPES_FIELDS}
    depth, width = col["n_layers"], col["d_model"]
    for name, value in (("n_layers", depth), ("d_model", width)):
        bad = np.flatnonzero((value != np.round(value)) | (value < 1))
        if len(bad):
            raise ValueError(f"{path}:{bad[0] + 2}: column {name!r} is {value[bad[0]]!r}, not a whole "
                             "number of at least 1")
    shape = [f"{int(d)}Lx{int(w)}" for d, w in zip(depth, width)]
    names = [f"{s}@{t / 1e9:.5g}B" for s, t in zip(shape, col["num_tokens"])]
    status = highest_losses_excluded(col["loss"])
    n_emb = CHINCHILLA_EMBEDDINGS.embedding_params(width)
    runs = Runs(depth=depth, width=width, params=col["model_size"], tokens=col["num_tokens"],
                loss=col["loss"], compute=col["FLOP"], name=names, source=str(path),
                tokenizer=["chinchilla-sentencepiece"] * len(rows),
                vocab_size=np.full(len(rows), CHINCHILLA_VOCAB),
                params_non_embedding=col["model_size"] - n_emb,
                extra={"status": status, "shape": shape})
    kept = int(np.sum(status == "finished"))
    runs.notes.append(f"chinchilla_shapes: {len(rows)} runs of {len(set(shape))} shapes (width × depth); "
                      f"Epoch AI's selection: the {len(rows) - kept} with the highest loss left out "
                      f"({kept} fitted); tokens = FLOP / (6 N); losses read from a colour scale "
                      f"({len(set(col['loss']))} distinct values)")
    return runs
