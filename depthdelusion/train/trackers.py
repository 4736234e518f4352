"""Experiment trackers: where a run's scalars go besides metrics.jsonl.

``train.trackers`` names them: ``jsonl`` (metrics.jsonl, always on: the record the analysis
reads), ``tensorboard``, ``wandb``, ``mlflow``. Each gets the same scalars (a logged step's
record flattened: per-layer norms as ``per_layer_grad_norm/layer_00``, 00 = the bottom block),
the run's metadata once at the start (the resolved config, the code version, the hardware) and
the summary at the end. The interface follows Levanter's (``log_hyperparameters``, ``log``,
``log_summary``, ``finish``). Only process 0 opens trackers (the Recorder decides).

A tracker is never allowed to end a run: :class:`Trackers` catches a tracker's exception, prints
it once and turns that tracker off for the rest of the run. W&B runs offline (files under the
run directory, ``wandb sync`` uploads them later) unless an API key is configured or
``WANDB_MODE`` says otherwise, and waits ``WANDB_INIT_TIMEOUT`` seconds (30) for a service
that does not answer; MLflow logs to ``MLFLOW_TRACKING_URI`` (MLflow's own default
otherwise) with short HTTP timeouts, so an unreachable server costs seconds, not the run.
"""
from __future__ import annotations

import hashlib
import netrc
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from etils import epath

from depthdelusion import rundir
from depthdelusion.config import check_trackers

#: W&B project and MLflow experiment when the environment names none.
DEFAULT_PROJECT = "depthdelusion"


def flatten(record: dict[str, Any]) -> dict[str, float]:
    """A logged record as flat scalars: lists become ``name/layer_XX``, dicts ``name/key``;
    ``step`` and missing values (None) are left out."""
    out: dict[str, float] = {}
    for name, value in record.items():
        if name == "step" or value is None or isinstance(value, bool):
            continue
        if isinstance(value, list):
            out.update({f"{name}/layer_{layer:02d}": float(v) for layer, v in enumerate(value)})
        elif isinstance(value, dict):
            out.update({f"{name}/{k}": float(v) for k, v in value.items()
                        if isinstance(v, (int, float)) and not isinstance(v, bool)})
        elif isinstance(value, (int, float)):
            out[name] = float(value)
    return out


def flatten_params(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested metadata as ``section.field: value`` (for trackers whose parameters are flat)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flatten_params(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


class Tracker:
    """One destination of a run's scalars. Every method may raise: :class:`Trackers` isolates it."""

    name = "tracker"

    def log_hyperparameters(self, metadata: dict[str, Any]) -> None:
        """Once at the start: {"config": ..., "code_version": ..., "hardware": ...}."""

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Flat scalars of one logged step."""

    def log_summary(self, summary: dict[str, Any]) -> None:
        """At the end: the run's summary (summary.json's fields)."""

    def flush(self) -> None:
        """Before a checkpoint: what was logged reaches its destination."""

    def finish(self, status: str) -> None:
        """The run ended with ``status`` (finished, preempted, failed)."""


class TensorBoardTracker(Tracker):
    """The same scalars as metrics.jsonl as TensorBoard events (no TensorFlow needed). For gs://
    run directories the events are written to a local folder and copied up whole (object stores
    cannot append) at every `flush()` — the loop's checkpoint steps — and at close."""

    name = "tensorboard"

    def __init__(self, logdir: epath.PathLike):
        self.logdir = epath.Path(logdir)
        self.staging = None if rundir.is_local(self.logdir) else tempfile.mkdtemp(prefix="depthdelusion-tb-")
        self.files, self.uploaded = 0, set()
        self.writer = self._open()

    def _open(self):
        from tensorboardX import SummaryWriter

        self.files += 1  # a distinct name even within one second (names carry the time in s)
        return SummaryWriter(self.staging or str(self.logdir), flush_secs=30, filename_suffix=f".{self.files}")

    def log_hyperparameters(self, metadata: dict[str, Any]) -> None:
        import yaml

        self.writer.add_text("run_metadata", "```\n" + yaml.safe_dump(metadata, sort_keys=False) + "```", 0)

    def write(self, record: dict[str, Any]) -> None:
        self.log(flatten(record), record["step"])

    def log(self, metrics: dict[str, float], step: int) -> None:
        for name, value in metrics.items():
            self.writer.add_scalar(name, value, step)

    def flush(self) -> None:
        if self.staging is None:
            self.writer.flush()
            return
        self.writer.close()  # only a closed writer is sure to have written every event
        self._upload()
        self.writer = self._open()  # the next events go to a new file; TensorBoard reads all

    def _upload(self) -> None:
        """Copies the files closed since the last upload (a closed event file never changes)."""
        self.logdir.mkdir(parents=True, exist_ok=True)
        for event_file in sorted(Path(self.staging).iterdir()):
            if event_file.name not in self.uploaded:
                (self.logdir / event_file.name).write_bytes(event_file.read_bytes())
                self.uploaded.add(event_file.name)

    def close(self) -> None:
        self.writer.close()
        if self.staging is not None and os.path.isdir(self.staging):
            self._upload()
            shutil.rmtree(self.staging)  # uploaded: a run leaves no folder in the machine's /tmp

    def finish(self, status: str) -> None:
        self.close()


def _wandb_key_configured() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:  # `wandb login` stores the key in ~/.netrc
        host = re.sub(r"^https?://", "", os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai"))
        return netrc.netrc().authenticators(host.rstrip("/")) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def run_id(out: epath.Path) -> str:
    """A stable id for the run directory: a resumed run continues the same tracker run."""
    digest = hashlib.sha256(str(out).encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9_-]", "-", out.name)[:48] + "-" + digest


def _wandb_init_timeout() -> float:
    """Seconds W&B may take to start a run: ``WANDB_INIT_TIMEOUT`` (W&B's own variable), else
    30 — shorter than W&B's 90, so an unreachable service costs the run half a minute."""
    text = os.environ.get("WANDB_INIT_TIMEOUT", "30")
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0:
        raise ValueError(f"WANDB_INIT_TIMEOUT={text!r}: expected a positive number of seconds")
    return seconds


class WandbTracker(Tracker):
    """A W&B run named for the run directory (project: ``WANDB_PROJECT``, default
    ``depthdelusion``). Offline unless an API key is configured (``WANDB_API_KEY`` or ``wandb
    login``) or ``WANDB_MODE`` is set; offline runs are written under ``OUT/wandb/``."""

    name = "wandb"

    def __init__(self, out: epath.Path):
        import wandb

        mode = os.environ.get("WANDB_MODE") or ("online" if _wandb_key_configured() else "offline")
        local = str(out) if rundir.is_local(out) else tempfile.mkdtemp(prefix="depthdelusion-wandb-")
        Path(local).mkdir(parents=True, exist_ok=True)
        self.mode = mode
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", DEFAULT_PROJECT), name=out.name, id=run_id(out),
            resume="allow", dir=local, mode=mode,
            # bounded waits: an unreachable service must not hold the run (the error is caught)
            settings=wandb.Settings(init_timeout=_wandb_init_timeout(), finish_timeout=60,
                                    console="off", silent=True))

    def log_hyperparameters(self, metadata: dict[str, Any]) -> None:
        self.run.config.update(metadata, allow_val_change=True)

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def log_summary(self, summary: dict[str, Any]) -> None:
        self.run.summary.update({k: v for k, v in summary.items() if not isinstance(v, list)})

    def finish(self, status: str) -> None:
        self.run.finish(exit_code=0 if status in ("finished", "preempted") else 1)


# MLflow's HTTP client retries for minutes by default; a tracker must not hold the run that long.
_MLFLOW_HTTP = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
                "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
_MLFLOW_STATUS = {"finished": "FINISHED", "preempted": "KILLED", "failed": "FAILED"}
_MLFLOW_PARAMS_PER_BATCH = 100  # MLflow's limit per log_batch call


class MlflowTracker(Tracker):
    """An MLflow run (experiment: ``MLFLOW_EXPERIMENT_NAME``, default ``depthdelusion``) at
    ``MLFLOW_TRACKING_URI``. The config goes in as parameters (``model.depth``, ...), the code
    version and hardware as tags, the scalars as metrics by step, the summary as metrics
    ``summary.*`` and the tag ``status``."""

    name = "mlflow"

    def __init__(self, out: epath.Path):
        for key, value in _MLFLOW_HTTP.items():
            os.environ.setdefault(key, value)
        from mlflow import MlflowClient

        self.client = MlflowClient()
        experiment_name = os.environ.get("MLFLOW_EXPERIMENT_NAME", DEFAULT_PROJECT)
        experiment = self.client.get_experiment_by_name(experiment_name)
        experiment_id = (experiment.experiment_id if experiment is not None
                         else self.client.create_experiment(experiment_name))
        found = self.client.search_runs([experiment_id], f"tags.depthdelusion_run_id = '{run_id(out)}'",
                                        max_results=1)
        if found:  # a resumed run continues its MLflow run
            self.run_id = found[0].info.run_id
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            self.run_id = self.client.create_run(
                experiment_id, run_name=out.name,
                tags={"depthdelusion_run_id": run_id(out), "run_dir": str(out)}).info.run_id

    def log_hyperparameters(self, metadata: dict[str, Any]) -> None:
        from mlflow.entities import Param, RunTag

        params = [Param(k, str(v)) for k, v in flatten_params(metadata.get("config", {})).items()]
        tags = [RunTag(k, str(v)) for k, v in flatten_params(
            {key: value for key, value in metadata.items() if key != "config"}).items()]
        for i in range(0, max(len(params), 1), _MLFLOW_PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=params[i:i + _MLFLOW_PARAMS_PER_BATCH],
                                  tags=tags if i == 0 else ())

    def log(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step) for k, v in metrics.items()])

    def log_summary(self, summary: dict[str, Any]) -> None:
        from mlflow.entities import Metric, RunTag

        now = int(time.time() * 1000)
        flat = flatten_params(summary)
        numbers = {k: v for k, v in flat.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        texts = {k: v for k, v in flat.items() if k not in numbers and v is not None and k != "status"}
        self.client.log_batch(self.run_id,
                              metrics=[Metric(f"summary.{k}", float(v), now, 0) for k, v in numbers.items()],
                              tags=[RunTag("status", str(summary.get("status", "")))]
                              + [RunTag(f"summary.{k}", str(v)[:5000]) for k, v in texts.items()])

    def finish(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=_MLFLOW_STATUS.get(status, "FAILED"))


class Trackers:
    """The run's trackers behind one interface. A tracker that raises is reported once on
    stderr and left out from then on; the run goes on."""

    def __init__(self, trackers: list[Tracker], stream=None):
        self.trackers, self.stream = list(trackers), stream
        self.errors: dict[str, str] = {}

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.trackers]

    def _each(self, method: str, *args) -> None:
        for tracker in list(self.trackers):
            try:
                getattr(tracker, method)(*args)
            except Exception as err:  # noqa: BLE001 - no tracker error may end a training run
                self.fail(tracker.name, f"{method}: {type(err).__name__}: {err}")
                self.trackers.remove(tracker)

    def fail(self, name: str, why: str) -> None:
        self.errors[name] = why
        stream = self.stream or sys.stderr
        stream.write(f"tracker {name} failed ({why}); it is off for the rest of this run, "
                     "which goes on (metrics.jsonl has every step)\n")
        stream.flush()

    def log_hyperparameters(self, metadata: dict[str, Any]) -> None:
        self._each("log_hyperparameters", metadata)

    def log(self, record: dict[str, Any]) -> None:
        self._each("log", flatten(record), record["step"])

    def log_summary(self, summary: dict[str, Any]) -> None:
        self._each("log_summary", summary)

    def flush(self) -> None:
        self._each("flush")

    def finish(self, status: str) -> None:
        self._each("finish", status)
        self.trackers = []


_OPENERS = {"tensorboard": lambda out: TensorBoardTracker(out / "tensorboard"),
            "wandb": WandbTracker, "mlflow": MlflowTracker}


def open_trackers(names, out: epath.Path, metadata: dict[str, Any], stream=None) -> Trackers:
    """The trackers ``names`` (``jsonl`` is metrics.jsonl, written by the Recorder itself) for
    the run directory ``out``, each given ``metadata``; one that cannot start is reported and
    left out."""
    check_trackers(names)
    trackers = Trackers([], stream)
    for name in dict.fromkeys(names):
        if name == "jsonl":
            continue
        try:
            trackers.trackers.append(_OPENERS[name](out))
        except Exception as err:  # noqa: BLE001 - e.g. a tracking server that does not answer
            trackers.fail(name, f"start: {type(err).__name__}: {err}")
    trackers.log_hyperparameters(metadata)
    return trackers
