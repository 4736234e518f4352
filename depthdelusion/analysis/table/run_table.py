"""The run table: one row per training run in one versioned schema (docs/run_table.md), written
by ``depthdelusion runs export`` from run directories (a sweep is a directory of them), an
MLflow experiment or W&B runs, and read back by :func:`.load.load_runs` with no column flags.

Every source gives the same two things per run, the resolved config (sections model, data,
train) and the summary (summary.json's fields), and :func:`row` turns them into the row. The
MLflow and W&B readers undo what ``train/trackers.py`` logs: config as ``section.field``
parameters (MLflow) or the ``config`` entry of the run's config (W&B), summary as ``summary.*``
metrics plus tags (MLflow) or the run summary (W&B).
"""
from __future__ import annotations

import json
import os
import struct
import sys
from typing import Any

import yaml

from depthdelusion import rundir

from ..formats.table_text import csv_text
from .runs import loss_unit_of

SCHEMA_VERSION = 1
#: Columns in order, with what each holds (docs/run_table.md lists the same words; a test checks it).
COLUMNS = {
    "schema_version": "version of this schema (1)",
    "name": "run name (the run directory's name)",
    "group": "free label (the summary's group, else 'all')",
    "status": "finished, preempted or failed (only finished runs are fitted)",
    "depth": "transformer blocks",
    "width": "model (residual) dimension",
    "heads": "attention heads (width / head_dim)",
    "head_dim": "dimension per head",
    "ffn": "FFN hidden dimension",
    "ffn_kind": "gelu or swiglu",
    "vocab_size": "vocabulary size of the model",
    "seq_len": "training sequence length",
    "params": "parameters, by params_convention",
    "params_non_embedding": "blocks and the final norm (Kaplan's N)",
    "params_convention": "how params counts",
    "tokens": "tokens trained",
    "flops": "model FLOPs trained: 3 x forward matmul FLOPs per token x tokens (docs/param_counts.md)",
    "lr": "peak learning rate",
    "schedule": "learning-rate schedule",
    "batch_size": "global batch (sequences)",
    "steps": "optimizer steps taken",
    "parametrization": "sp, mup, completep, ... (docs/parametrization.md)",
    "seed": "parameter-init seed (train.seed)",
    "data_seed": "data-order seed (data.seed)",
    "dataset": "training data",
    "tokenizer": "tokenizer name; with loss_unit, the loss's unit",
    "loss_unit": "nats/token or nats/byte",
    "loss": "final training loss: mean over the last 10% of steps (nats)",
    "loss_se": "its standard error: std / sqrt(n) over those logged steps (nats)",
    "eval_loss": "last validation loss (nats); blank if none",
    "eval_loss_se": "its standard error (nats); blank when the source does not give it",
    "wall_time_s": "wall time of the run's last session (s)",
    "hardware": "devices x device kind",
    "code_version": "git:SHA[+dirty] or depthdelusion==VERSION; blank if not recorded",
    "profile": "where the per-layer gradient norms are: metrics.jsonl path, mlflow run, W&B file",
    "source": "where this row was read from; a run found in several sources: each, joined by ' + '",
}
PARAMS_CONVENTION = ("every parameter the model creates: blocks, final norm, input embedding, "
                     "untied LM head with its bias, learned positions if any")
SCHEDULE = "linear warmup {warmup_steps} steps, cosine to {lr_min_ratio:g} x lr"


def row(config: dict | None, summary: dict, *, source: str, profile: str = "") -> dict[str, Any]:
    """One run's row from its config sections and summary; a field neither has is blank."""
    config = config or {}
    model = {**(config.get("model") or {}), **(summary.get("model") or {})}
    train = config.get("train") or {}
    data = {**(config.get("data") or {}), **(summary.get("data") or {})}
    width, head_dim = model.get("width"), model.get("head_dim")
    devices, kind = summary.get("devices"), summary.get("device_kind")
    schedule = (SCHEDULE.format(warmup_steps=train["warmup_steps"], lr_min_ratio=float(train["lr_min_ratio"]))
                if "warmup_steps" in train and "lr_min_ratio" in train else "")
    status = summary.get("status", "")
    loss = summary.get("final_loss")
    return _whole_numbers({
        "schema_version": SCHEMA_VERSION, "name": summary.get("name", ""),
        "group": summary.get("group") or "all", "status": status,
        "depth": model.get("depth"), "width": width,
        "heads": width // head_dim if width and head_dim else None, "head_dim": head_dim,
        "ffn": _ffn_dim(model), "ffn_kind": model.get("ffn"), "vocab_size": model.get("vocab_size"),
        "seq_len": model.get("seq_len"),
        "params": summary.get("params"), "params_non_embedding": summary.get("params_non_embedding"),
        "params_convention": PARAMS_CONVENTION if summary.get("params") is not None else "",
        "tokens": summary.get("tokens"), "flops": summary.get("flops"),
        "lr": train.get("lr"), "schedule": schedule, "batch_size": train.get("batch_size"),
        "steps": summary.get("steps"), "parametrization": model.get("parametrization"),
        "seed": train.get("seed"), "data_seed": data.get("seed"), "dataset": data.get("dataset") or data.get("path"),
        "tokenizer": data.get("tokenizer"),
        "loss_unit": loss_unit_of(data.get("tokenizer") or ""),
        "loss": loss, "loss_se": summary.get("final_loss_se"),
        "eval_loss": summary.get("eval_loss"), "eval_loss_se": summary.get("eval_loss_se"),
        "wall_time_s": summary.get("wall_time_s"),
        "hardware": f"{devices}x {kind}" if devices and kind else (kind or ""),
        "code_version": summary.get("code_version", ""), "profile": profile, "source": source,
    })


#: Columns that hold counts (MLflow returns every metric as a float).
_COUNTS = ("depth", "width", "heads", "head_dim", "ffn", "vocab_size", "seq_len", "params",
           "params_non_embedding", "tokens", "batch_size", "steps", "seed", "data_seed")


def _whole_numbers(r: dict[str, Any]) -> dict[str, Any]:
    for key in _COUNTS:
        if isinstance(r[key], float) and r[key].is_integer():
            r[key] = int(r[key])
    return r


def _ffn_dim(model: dict) -> int | None:
    """The FFN hidden size by the ModelConfig rule (config.ModelConfig.ffn_dim)."""
    from depthdelusion.config import ModelConfig

    if model.get("width") is None:
        return None
    known = {k: model[k] for k in ("width", "ffn", "ffn_hidden") if model.get(k) is not None}
    return ModelConfig(**known).ffn_dim


# --- sources ----------------------------------------------------------------------------------

def from_run_dirs(root) -> list[dict]:
    """Rows of every run directory at or below ``root`` (a run, a sweep), every status."""
    root = rundir.as_path(root)
    rows = []
    for run_dir in rundir.find_runs(root):
        summary = rundir.read_summary(run_dir)
        summary.setdefault("name", run_dir.name)
        metrics = run_dir / rundir.METRICS
        rows.append(row(rundir.read_config_dict(run_dir), summary, source=str(run_dir),
                        profile=str(metrics) if metrics.exists() else ""))
    if not rows:
        raise FileNotFoundError(f"{root}: no {rundir.SUMMARY} found in it or below it")
    return rows


def _parse_value(text: str):
    """An MLflow parameter back to its YAML value ('4' -> 4, 'None' -> None, '[a, b]' -> list)."""
    if text == "None":
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def from_mlflow(experiment: str, tracking_uri: str | None = None) -> list[dict]:
    """Rows of the runs of an MLflow experiment (by name) as the mlflow tracker logged them."""
    try:
        from mlflow import MlflowClient
    except ImportError:
        raise ValueError("reading an MLflow experiment needs mlflow: pip install "
                         "'depthdelusion[trackers]'") from None
    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        names = [e.name for e in client.search_experiments()]
        raise ValueError(f"MLflow at {client.tracking_uri}: no experiment {experiment!r}; "
                         f"experiments: {', '.join(names) or 'none'}")
    rows = []
    for run in client.search_runs([found.experiment_id], max_results=50_000):
        data = run.data
        config = _unflatten({k: _parse_value(v) for k, v in data.params.items()})
        tags = _unflatten(data.tags)
        summary = _unflatten({k[len("summary."):]: v for k, v in (*data.metrics.items(), *data.tags.items())
                              if k.startswith("summary.")})
        summary.update(name=run.info.run_name, status=data.tags.get("status", _MLFLOW_STATUS.get(
            run.info.status, run.info.status.lower())), code_version=data.tags.get("code_version", ""))
        hardware = tags.get("hardware") or {}
        summary.update({k: _parse_value(v) for k, v in hardware.items() if k in ("device_kind", "devices")})
        where = f"mlflow:{client.tracking_uri}#{run.info.run_id}"
        rows.append(row(config, summary, source=where, profile=where + "/per_layer_grad_norm"))
    if not rows:
        raise ValueError(f"MLflow experiment {experiment!r} has no runs")
    return rows


_MLFLOW_STATUS = {"FINISHED": "finished", "FAILED": "failed", "KILLED": "preempted", "RUNNING": "running"}

# W&B's offline run file (run-ID.wandb): a header, then LevelDB-log framed records (32 KiB
# blocks; each chunk: crc32 u32, length u16, type u8: 1 full, 2 first, 3 middle, 4 last) whose
# payloads are wandb's own Record protobufs.
_WANDB_HEADER = struct.Struct("<4sHB")
_WANDB_CHUNK = struct.Struct("<IHB")
_WANDB_BLOCK = 32 * 1024


def read_wandb_file(path) -> dict[str, Any]:
    """A W&B run file as {"config": {...}, "summary": {...}, "history": [{step: ..., ...}]}
    (values decoded from their JSON; nested summary keys joined with '.')."""
    from wandb.proto import wandb_internal_pb2 as pb  # wandb's own record format

    path = rundir.as_path(path)
    data = path.read_bytes()
    ident, magic, _ = _WANDB_HEADER.unpack_from(data) if len(data) >= 7 else (b"", 0, 0)
    if ident != b":W&B" or magic != 0xBEE1:
        raise ValueError(f"{path}: not a W&B run file (no ':W&B' header)")
    payloads, pending, pos = [], b"", _WANDB_HEADER.size
    while pos + _WANDB_CHUNK.size <= len(data):
        left = _WANDB_BLOCK - pos % _WANDB_BLOCK
        if left < _WANDB_CHUNK.size:  # the block's tail is padding
            pos += left
            continue
        _, length, kind = _WANDB_CHUNK.unpack_from(data, pos)
        if kind == 0 and length == 0:  # zero padding up to the block end
            pos += left
            continue
        chunk = data[pos + _WANDB_CHUNK.size:pos + _WANDB_CHUNK.size + length]
        pos += _WANDB_CHUNK.size + length
        if kind == 1:
            payloads.append(chunk)
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            payloads.append(pending + chunk)
    out: dict[str, Any] = {"config": {}, "summary": {}, "history": []}
    for payload in payloads:
        record = pb.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "config":
            for item in record.config.update:
                out["config"][_wandb_key(item)] = json.loads(item.value_json)
        elif kind == "summary":
            for item in record.summary.update:
                out["summary"][_wandb_key(item)] = json.loads(item.value_json)
        elif kind == "history":
            step = {_wandb_key(item): json.loads(item.value_json) for item in record.history.item}
            step.setdefault("_step", record.history.step.num)
            out["history"].append(step)
        elif kind == "run" and record.run.display_name:
            out["name"] = record.run.display_name
    return out


def _wandb_key(item) -> str:
    return item.key or ".".join(item.nested_key)


def from_wandb(root) -> list[dict]:
    """Rows of the W&B run files (``run-*.wandb``, offline or synced) at or below ``root``."""
    root = rundir.as_path(root)
    files = sorted(root.rglob("run-*.wandb")) if root.is_dir() else [root]
    if not files:
        raise FileNotFoundError(f"{root}: no W&B run file (run-*.wandb) in it or below it")
    rows = []
    for path in files:
        run = read_wandb_file(path)
        config, summary = run["config"], _unflatten(run["summary"])
        if "config" not in config:
            raise ValueError(f"{path}: its config has no 'config' entry (not written by the wandb tracker)")
        summary.setdefault("name", run.get("name", path.parent.name))
        summary.setdefault("code_version", config.get("code_version", ""))
        for key in ("device_kind", "devices"):
            summary.setdefault(key, (config.get("hardware") or {}).get(key))
        rows.append(row(config["config"], summary, source=str(path), profile=str(path)))
    return rows


def export(sources, *, mlflow_experiment: str | None = None, tracking_uri: str | None = None,
           wandb_dir: str | None = None) -> list[dict]:
    """Rows from run directories / sweeps (``sources``), an MLflow experiment and W&B files."""
    rows = []
    for source in sources or ():
        rows += from_run_dirs(source)
    if mlflow_experiment:
        rows += from_mlflow(mlflow_experiment, tracking_uri)
    if wandb_dir:
        rows += from_wandb(wandb_dir)
    if not rows:
        raise ValueError("runs export: nothing to export; give run directories, --mlflow-experiment "
                         "or --wandb-dir")
    return merge_duplicates(rows)


#: A run is the same run in every source that records it when these cells agree: its name and
#: shape, what it trained on and with which seeds, and its final loss to the last digit.
IDENTITY = ("name", "status", "depth", "width", "params", "tokens", "steps", "lr", "seed",
            "data_seed", "dataset", "loss", "eval_loss", "code_version")


def merge_duplicates(rows: list[dict]) -> list[dict]:
    """One row per run (:data:`IDENTITY`), in first-seen order: a run read from several sources
    (its directory, MLflow, W&B; or one directory reached twice) keeps the first source's row,
    with every source in ``source`` joined by ' + '; each merge is said on stderr."""
    merged: dict[tuple, dict] = {}
    for r in rows:
        key = tuple(_cell(r.get(k)) for k in IDENTITY)
        if key not in merged:
            merged[key] = dict(r)
            continue
        first = merged[key]
        sources = first["source"].split(" + ")
        if r["source"] not in sources:
            first["source"] = " + ".join([*sources, r["source"]])
        first["profile"] = first.get("profile") or r.get("profile", "")
    for r in merged.values():
        if " + " in r["source"]:
            print(f"runs export: {r['name']}: one row from {r['source'].count(' + ') + 1} sources "
                  f"(the same run): {r['source']}", file=sys.stderr)
    return list(merged.values())


def to_csv(rows: list[dict], columns=COLUMNS) -> str:
    """The rows as CSV with ``columns`` (all of the schema's, or the ones a source gives, in order)."""
    return csv_text(columns, [{k: _cell(r.get(k)) for k in columns} for r in rows])


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # shortest exact text: the table round-trips the numbers
    return str(value)


def write(rows: list[dict], out: str | os.PathLike, columns=COLUMNS) -> None:
    """The table as CSV at ``out`` (local or gs://)."""
    path = rundir.as_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_csv(rows, columns))


def check_schema_version(versions, where: str) -> None:
    """Refuse a table whose ``schema_version`` cells (text or numbers, one per row) name a
    schema other than this one: its columns may hold other things under the same names."""
    other = {str(v).strip() for v in versions if not _is_this_version(v)}
    if other:
        raise ValueError(f"{where}: schema_version {', '.join(sorted(map(repr, other)))}; this version "
                         f"reads schema_version {SCHEMA_VERSION} only (docs/run_table.md)")


def _is_this_version(value) -> bool:
    try:
        return float(value) == SCHEMA_VERSION  # "1" from CSV, 1 or 1.0 from parquet
    except (TypeError, ValueError):
        return False


def run_command(*, action: str, sources: list[str], csv_path: str | None = None,
                mlflow_experiment: str | None = None, tracking_uri: str | None = None,
                wandb_dir: str | None = None) -> int:
    """``depthdelusion runs export``: the run table of the sources, to --csv FILE or stdout."""
    from depthdelusion import exit_codes
    from depthdelusion.outputs import refuse_input_as_output

    if action != "export":
        raise ValueError(f"runs {action!r}: the only action is 'export'")
    refuse_input_as_output("--csv", csv_path, sources)
    rows = export(sources, mlflow_experiment=mlflow_experiment, tracking_uri=tracking_uri,
                  wandb_dir=wandb_dir)
    if csv_path is None:
        print(to_csv(rows), end="")
    else:
        write(rows, csv_path)
        print(f"wrote {len(rows)} runs (schema_version {SCHEMA_VERSION}) to {csv_path}")
    return exit_codes.OK
