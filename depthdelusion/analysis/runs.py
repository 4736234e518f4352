"""The runs table: one row per training run (depth, width, parameters, tokens, final loss).

Runs come from the trainer's run directories (``summary.json`` + ``metrics.jsonl``), from a
CSV, from a pandas DataFrame, or from the bundled reference data (:mod:`.reference`).
Columns are plain numpy arrays; pandas is optional.
"""
from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

CSV_REQUIRED = ("depth", "width", "loss")
CSV_PARAM_COLUMNS = ("params", "params_millions")
CSV_OPTIONAL = ("tokens", "loss_se", "group", "name")


@dataclass
class GradientProfile:
    """Per-layer gradient norms of one run, by logged step.

    ``weight[step]`` / ``activation[step]`` are arrays of length depth; index 0 is the bottom
    block (nearest the input), index depth-1 the top block.
    """

    weight: dict[int, np.ndarray] = field(default_factory=dict)
    activation: dict[int, np.ndarray] = field(default_factory=dict)

    def steps(self, kind: str = "weight") -> list[int]:
        return sorted(self._by_kind(kind))

    def nearest(self, step: int, kind: str = "weight") -> tuple[int, np.ndarray]:
        """The logged (step, norms) nearest to ``step``; ties go to the earlier step."""
        table = self._by_kind(kind)
        if not table:
            raise ValueError(f"no per-layer {kind} gradient norms were logged")
        used = min(sorted(table), key=lambda s: abs(s - step))
        return used, table[used]

    def _by_kind(self, kind: str) -> dict[int, np.ndarray]:
        if kind == "weight":
            return self.weight
        if kind == "activation":
            return self.activation
        raise ValueError(f"gradient kind must be 'weight' or 'activation', got {kind!r}")


@dataclass
class Runs:
    """A table of training runs. All columns have one entry per run.

    depth: layers; width: model dimension; params: total parameters N (as given by the source);
    tokens: tokens trained (NaN when unknown); loss: final loss in nats; loss_se: its standard
    error in nats (NaN when unknown); group: free label (e.g. ``baseline``); name: run name;
    profiles: per-layer gradient norms (None when the source has none).
    """

    depth: np.ndarray
    width: np.ndarray
    params: np.ndarray
    loss: np.ndarray
    tokens: np.ndarray
    loss_se: np.ndarray
    group: np.ndarray
    name: np.ndarray
    profiles: list = field(default_factory=list)
    source: str = ""
    notes: list = field(default_factory=list)

    def __post_init__(self):
        n = len(self.depth)
        self.depth = np.asarray(self.depth, dtype=np.int64)
        self.width = np.asarray(self.width, dtype=np.int64)
        for col in ("params", "loss", "tokens", "loss_se"):
            setattr(self, col, np.asarray(getattr(self, col), dtype=float))
        self.group = np.asarray(self.group, dtype=object)
        self.name = np.asarray(self.name, dtype=object)
        if not self.profiles:
            self.profiles = [None] * n
        for col in ("width", "params", "loss", "tokens", "loss_se", "group", "name", "profiles"):
            if len(getattr(self, col)) != n:
                raise ValueError(f"column {col!r} has {len(getattr(self, col))} entries, expected {n}")

    def __len__(self) -> int:
        return len(self.depth)

    def subset(self, mask) -> "Runs":
        """The runs selected by a boolean mask or an index array."""
        idx = np.arange(len(self))[np.asarray(mask)]
        return Runs(self.depth[idx], self.width[idx], self.params[idx], self.loss[idx],
                    self.tokens[idx], self.loss_se[idx], self.group[idx], self.name[idx],
                    [self.profiles[i] for i in idx], self.source, list(self.notes))

    def where_group(self, group: str) -> "Runs":
        if group not in set(self.group):
            raise ValueError(f"no runs in group {group!r}; groups present: {sorted(set(self.group))}")
        return self.subset(self.group == group)

    @property
    def groups(self) -> list[str]:
        return sorted(set(self.group))

    @property
    def tokens_vary(self) -> bool:
        """True when every run has a token count and they are not all equal (within 1%)."""
        t = self.tokens
        return bool(np.all(np.isfinite(t)) and np.all(t > 0) and t.max() > 1.01 * t.min())

    def rows(self) -> list[dict]:
        return [
            {"name": self.name[i], "group": self.group[i], "depth": int(self.depth[i]),
             "width": int(self.width[i]), "params": float(self.params[i]),
             "tokens": float(self.tokens[i]), "loss": float(self.loss[i]),
             "loss_se": float(self.loss_se[i])}
            for i in range(len(self))
        ]

    def to_dataframe(self):
        import pandas as pd  # optional dependency, only when asked for

        return pd.DataFrame(self.rows())


def load_runs(source, *, group: str | None = None) -> Runs:
    """Load runs from a Runs, a DataFrame, a CSV path, a run directory tree, or ``"paper"``.

    A directory is searched recursively for ``summary.json``; runs whose status is not
    ``finished`` are skipped and counted in ``Runs.notes``.
    """
    if isinstance(source, Runs):
        runs = source
    elif _is_dataframe(source):
        runs = runs_from_dataframe(source)
    elif isinstance(source, (str, os.PathLike)):
        text = str(source)
        if text in ("paper", "depth_delusion"):
            from .reference import load_reference

            runs = load_reference("depth_delusion")
        else:
            path = Path(text)
            if not path.exists():
                raise FileNotFoundError(f"{path}: no such file or directory (expected a CSV, a "
                                        "directory of run directories, or 'paper')")
            runs = load_run_dirs(path) if path.is_dir() else load_csv(path)
    else:
        raise ValueError(f"cannot load runs from {type(source).__name__}; give a path, a "
                         "pandas DataFrame, a Runs table or 'paper'")
    return runs.where_group(group) if group else runs


def _is_dataframe(obj) -> bool:
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "columns")


def runs_from_records(records: list[dict], *, where: str) -> Runs:
    """Build Runs from dicts with the CSV column names; ``where`` names the source for errors."""
    if not records:
        raise ValueError(f"{where}: no runs found")
    columns = set(records[0])
    missing = [c for c in CSV_REQUIRED if c not in columns]
    if not any(c in columns for c in CSV_PARAM_COLUMNS):
        missing.append("params (or params_millions)")
    if missing:
        raise ValueError(f"{where}: missing column(s) {', '.join(missing)}; required: depth, width, "
                         f"params or params_millions, loss; optional: {', '.join(CSV_OPTIONAL)}")
    cols = {k: [] for k in ("depth", "width", "params", "loss", "tokens", "loss_se", "group", "name")}
    for i, rec in enumerate(records):
        line = f"{where} row {i + 1}"
        depth = _number(rec, "depth", line, integer=True)
        width = _number(rec, "width", line, integer=True)
        if "params" in rec and str(rec["params"]).strip() != "":
            params = _number(rec, "params", line)
        else:
            params = float(round(_number(rec, "params_millions", line) * 1e6))  # counts are whole
        cols["depth"].append(depth)
        cols["width"].append(width)
        cols["params"].append(params)
        cols["loss"].append(_number(rec, "loss", line))
        cols["tokens"].append(_number(rec, "tokens", line, optional=True))
        cols["loss_se"].append(_number(rec, "loss_se", line, optional=True, allow_zero=True))
        cols["group"].append(str(rec.get("group") or "all"))
        cols["name"].append(str(rec.get("name") or f"{depth}Lx{width}"))
    return Runs(**cols, source=where)


def _number(rec: dict, key: str, line: str, *, integer=False, optional=False, allow_zero=False):
    raw = rec.get(key)
    if raw is None or (isinstance(raw, str) and raw.strip() == "") or (
            isinstance(raw, float) and math.isnan(raw)):
        if optional:
            return math.nan
        raise ValueError(f"{line}: field {key!r} is empty; expected a positive number")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{line}: field {key!r} = {raw!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{line}: field {key!r} = {raw!r}; expected a positive finite number")
    if integer:
        if value != int(value):
            raise ValueError(f"{line}: field {key!r} = {raw!r}; expected a whole number")
        return int(value)
    return value


def load_csv(path) -> Runs:
    """Runs from a CSV with columns depth, width, params (or params_millions), loss and
    optionally tokens, loss_se, group, name."""
    path = Path(path)
    with open(path, newline="") as fh:
        records = list(csv.DictReader(fh))
    runs = runs_from_records(records, where=str(path))
    runs.source = str(path)
    return runs


def runs_from_dataframe(frame) -> Runs:
    """Runs from a pandas DataFrame with the CSV column names."""
    return runs_from_records(frame.to_dict(orient="records"), where="DataFrame")


def load_run_dirs(root) -> Runs:
    """Runs from every run directory (one holding ``summary.json``) below ``root``."""
    root = Path(root)
    summaries = sorted(root.rglob("summary.json"))
    if not summaries:
        raise FileNotFoundError(f"{root}: no summary.json found in it or below it")
    records, profiles, skipped = [], [], []
    for path in summaries:
        summary = _read_json(path)
        status = summary.get("status")
        if status != "finished":
            skipped.append(f"{path.parent.name} (status {status!r})")
            continue
        model = summary.get("model")
        if not isinstance(model, dict):
            raise ValueError(f"{path}: field 'model' is missing or not an object")
        where = str(path)
        records.append({
            "name": summary.get("name") or path.parent.name,
            "group": summary.get("group") or "all",
            "depth": _field(model, "depth", where + " model"),
            "width": _field(model, "width", where + " model"),
            "params": _field(summary, "params", where),
            "tokens": summary.get("tokens"),
            "loss": _field(summary, "final_loss", where),
            "loss_se": summary.get("final_loss_se"),
        })
        profiles.append(read_gradient_profile(path.parent / "metrics.jsonl", int(model["depth"])))
    if not records:
        raise ValueError(f"{root}: no finished runs ({len(skipped)} skipped: {', '.join(skipped)})")
    runs = runs_from_records(records, where=str(root))
    runs.profiles = profiles
    runs.source = str(root)
    if skipped:
        runs.notes.append(f"skipped {len(skipped)} run(s) not finished: {', '.join(skipped)}")
    return runs


def _read_json(path: Path) -> dict:
    try:
        with open(path) as fh:
            data = json.load(fh)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


def _field(obj: dict, key: str, where: str):
    if key not in obj:
        raise ValueError(f"{where}: field {key!r} is missing")
    return obj[key]


def read_gradient_profile(path: Path, depth: int) -> GradientProfile | None:
    """Per-layer gradient norms from a ``metrics.jsonl`` (None if the file is absent)."""
    if not path.exists():
        return None
    profile = GradientProfile()
    with open(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path} line {lineno}: not valid JSON ({err})") from None
            for key, table in (("per_layer_grad_norm", profile.weight),
                               ("per_layer_act_grad_norm", profile.activation)):
                if key not in entry:
                    continue
                norms = np.asarray(entry[key], dtype=float)
                if norms.shape != (depth,):
                    raise ValueError(f"{path} line {lineno}: {key!r} has {norms.size} values, "
                                     f"expected depth = {depth}")
                if "step" not in entry:
                    raise ValueError(f"{path} line {lineno}: field 'step' is missing")
                table[int(entry["step"])] = norms
    return profile if (profile.weight or profile.activation) else None
