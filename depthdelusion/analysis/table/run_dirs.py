"""Runs read from the trainer's run directories (``summary.json``, ``metrics.jsonl``, config.yaml;
local or gs://, through :mod:`depthdelusion.rundir`), with each run's per-layer gradient norms
and, where an expansion probe wrote one, its insertion signal.
"""
from __future__ import annotations

import numpy as np

from depthdelusion import rundir

from .runs import GradientProfile


def read_run_dirs(root) -> tuple[list[dict], list, list[str]]:
    """Every run directory (one holding ``summary.json``) at or below ``root``, local or remote
    (gs://): (one record per finished run — name, group, depth, width, params, tokens, loss ±
    s.e., the tokenizer (``data.tokenizer``) and vocabulary (``model.vocab_size``) it records —,
    its per-layer gradient profile or None, the runs skipped as unfinished). The files are read by
    :mod:`depthdelusion.rundir`; :func:`.load.load_runs` makes the table."""
    root = rundir.as_path(root)
    run_dirs = rundir.find_runs(root)
    if not run_dirs:
        raise FileNotFoundError(f"{root}: no {rundir.SUMMARY} found in it or below it")
    records, profiles, skipped = [], [], []
    for run_dir in run_dirs:
        summary = rundir.read_summary(run_dir)
        where = str(run_dir / rundir.SUMMARY)
        status = summary.get("status")
        if status != "finished":
            skipped.append(f"{run_dir.name} (status {status!r})")
            continue
        model = summary.get("model")
        if not isinstance(model, dict):
            raise ValueError(f"{where}: field 'model' is missing or not an object")
        data = summary.get("data") if isinstance(summary.get("data"), dict) else {}
        tokenizer, vocab = data.get("tokenizer"), model.get("vocab_size")
        if tokenizer is None:  # a summary written before runs recorded it: the resolved config has it
            tokenizer, vocab = _units_from_config(run_dir, vocab)
        records.append({
            "name": summary.get("name") or run_dir.name,
            "group": summary.get("group") or "all",
            "depth": _field(model, "depth", where + " model"),
            "width": _field(model, "width", where + " model"),
            "params": _field(summary, "params", where),
            "tokens": summary.get("tokens"),
            "loss": _field(summary, "final_loss", where),
            "loss_se": summary.get("final_loss_se"),
            "tokenizer": tokenizer,
            "vocab_size": vocab,
        })
        profile = read_gradient_profile(run_dir, int(model["depth"]))
        if profile is not None:
            profile.insertion_signal = read_insertion_signal(
                run_dir / INSERTION_PROBE / "probe.json", int(model["depth"]))
        profiles.append(profile)
    if not records:
        raise ValueError(f"{root}: no finished runs ({len(skipped)} skipped: {', '.join(skipped)})")
    return records, profiles, skipped


def _units_from_config(run_dir, vocab):
    """(data.tokenizer, model.vocab_size) from a run's config.yaml; (None, vocab) if it is
    absent or unreadable."""
    try:
        config = rundir.read_config_dict(run_dir)
    except (OSError, ValueError):
        return None, vocab
    if config is None:
        return None, vocab
    data, model = config.get("data"), config.get("model")
    tokenizer = data.get("tokenizer") if isinstance(data, dict) else None
    if vocab is None and isinstance(model, dict):
        vocab = model.get("vocab_size")
    return tokenizer, vocab


def _field(obj: dict, key: str, where: str):
    if key not in obj:
        raise ValueError(f"{where}: field {key!r} is missing")
    return obj[key]


INSERTION_PROBE = "expansion_probe"  # where `depthdelusion expand RUN --probe` writes by default


def read_insertion_signal(path, depth: int) -> np.ndarray | None:
    """The training-batch first-order signal after each block (length depth, NaN where not
    probed) from an expansion probe's ``probe.json``; None when the file is absent."""
    path = rundir.as_path(path)
    if not path.exists():
        return None
    probe = rundir.read_json_object(path)
    signal = np.full(depth, np.nan)
    for row in probe.get("signal", []):
        after = int(_field(row, "after", f"{path}: 'signal' row"))
        if not 0 <= after < depth:
            raise ValueError(f"{path}: signal after block {after}, but the run has {depth} blocks")
        signal[after] = float(_field(row, "signal_train", f"{path}: 'signal' row"))
    return signal


def read_gradient_profile(run_dir, depth: int) -> GradientProfile | None:
    """Per-layer gradient norms from a run directory's ``metrics.jsonl`` (None if it has none)."""
    run_dir = rundir.as_path(run_dir)
    profile = GradientProfile()
    for entry in rundir.read_metrics(run_dir):
        for key, table in (("per_layer_grad_norm", profile.weight),
                           ("per_layer_act_grad_norm", profile.activation)):
            if key not in entry:
                continue
            where = f"{run_dir / rundir.METRICS} step {entry.get('step')}"
            norms = np.asarray(entry[key], dtype=float)
            if norms.shape != (depth,):
                raise ValueError(f"{where}: {key!r} has {norms.size} values, expected depth = {depth}")
            if "step" not in entry:
                raise ValueError(f"{where}: field 'step' is missing")
            table[int(entry["step"])] = norms
    return profile if (profile.weight or profile.activation) else None
