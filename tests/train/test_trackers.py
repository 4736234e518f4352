"""Experiment trackers (depthdelusion/train/trackers.py) with the real libraries: one tiny run
logs to TensorBoard, W&B (offline: no key is configured) and a real `mlflow server` on
127.0.0.1 started and stopped here; each is read back and compared with metrics.jsonl. The run
table (depthdelusion/analysis/table/run_table.py) is exported from all three sources."""
import contextlib
import csv
import importlib.util
import io
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from depthdelusion.analysis.table import run_table
from depthdelusion.analysis.table.load import load_runs
from depthdelusion.config import load_config
from depthdelusion.rundir import read_metrics, read_summary
from depthdelusion.train import trackers

wandb = pytest.importorskip("wandb")  # in the test extra
# mlflow is only in the `trackers` extra (`mlflow server` needs full mlflow, a big install)
HAVE_MLFLOW = importlib.util.find_spec("mlflow") is not None
needs_mlflow = pytest.mark.skipif(not HAVE_MLFLOW, reason="mlflow is not installed (the trackers extra)")


def test_ci_runs_the_mlflow_tests():
    """.ci/run installs the trackers extra: a skip there would leave the MLflow tracker untested."""
    if os.environ.get("CI") != "true":
        pytest.skip("outside CI the MLflow tests run where the trackers extra is installed")
    assert HAVE_MLFLOW, "CI=true but mlflow is not installed: .ci/run must install the trackers extra"

TINY = {
    "model": {"depth": 2, "width": 32, "head_dim": 16, "seq_len": 32},
    "data": {"builtin_documents": 400},
    "train": {"steps": 6, "batch_size": 8, "lr": 3.0e-3, "warmup_steps": 2, "checkpoint_every": 0,
              "checkpoint_minutes": 0, "layer_stats_every": 3, "eval_every": 6, "eval_batches": 1,
              "trackers": ["jsonl", "tensorboard", "wandb"] + ["mlflow"] * HAVE_MLFLOW},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def mlflow_server(root: Path):
    """A real MLflow tracking server on 127.0.0.1 (sqlite store), stopped on exit."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
         "--default-artifact-root", str(root / "artifacts")],
        stdout=subprocess.DEVNULL, stderr=open(root / "server.log", "w"))
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600  # a loaded 2-core machine took minutes
        while True:
            assert proc.poll() is None, (root / "server.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(uri + "/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "mlflow server did not start"
            time.sleep(0.5)
        yield uri
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Environment of the run: no W&B key (so offline), MLflow at the test's server."""
    root = tmp_path_factory.mktemp("trackers")
    saved = dict(os.environ)
    for key in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_PROJECT", "MLFLOW_EXPERIMENT_NAME"):
        os.environ.pop(key, None)
    os.environ["HOME"] = str(root)  # no ~/.netrc with a W&B key
    try:
        with mlflow_server(root) if HAVE_MLFLOW else contextlib.nullcontext() as uri:
            if uri:
                os.environ["MLFLOW_TRACKING_URI"] = uri
            yield root, uri
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def run(env):
    from depthdelusion.train.loop import train

    root, uri = env
    path = root / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    out = root / "runs" / "tiny"
    summary = train(load_config(path), out)
    assert summary["status"] == "finished"
    return out, uri


def jsonl_scalars(out) -> dict[str, dict[int, float]]:
    scalars: dict[str, dict[int, float]] = {}
    for record in read_metrics(out):
        for name, value in trackers.flatten(record).items():
            scalars.setdefault(name, {})[record["step"]] = value
    return scalars


def test_tensorboard_and_wandb_get_the_same_scalars_and_metadata(run):
    from tests.train.test_checkpoints import read_events

    out, _ = run
    expected = jsonl_scalars(out)
    assert {"loss", "lr", "per_layer_grad_norm/layer_00", "per_layer_grad_norm/layer_01", "eval_loss"} <= set(expected)
    summary = read_summary(out)
    assert summary["code_version"] and summary["device_kind"]
    board = read_events(out / "tensorboard")
    (wandb_file,) = (out / "wandb").rglob("run-*.wandb")
    assert "offline-run-" in str(wandb_file)  # no key configured: offline
    logged = run_table.read_wandb_file(wandb_file)
    history = {h["_step"]: h for h in logged["history"]}
    for name in SCALARS:
        steps = expected[name]
        assert {s: pytest.approx(v, rel=1e-6) for s, v in steps.items()} == board[name], name
        assert {s: history[s][name] for s in steps} == pytest.approx(steps, rel=1e-12), name
    config = logged["config"]
    assert config["config"]["model"]["depth"] == 2 and config["config"]["train"]["trackers"][2] == "wandb"
    assert config["code_version"] == summary["code_version"]
    assert config["hardware"]["device_kind"] == summary["device_kind"]
    assert logged["summary"]["final_loss"] == pytest.approx(summary["final_loss"])
    assert logged["summary"]["status"] == "finished"


SCALARS = ("loss", "lr", "per_layer_grad_norm/layer_01", "per_layer_act_grad_norm/layer_00", "eval_loss")


@needs_mlflow
def test_mlflow_gets_the_same_scalars_and_metadata(run):
    from mlflow import MlflowClient

    out, uri = run
    expected = jsonl_scalars(out)
    summary = read_summary(out)
    client = MlflowClient(uri)
    (mlflow_run,) = client.search_runs([client.get_experiment_by_name("depthdelusion").experiment_id])
    for name in SCALARS:
        mlflow_values = {m.step: m.value for m in client.get_metric_history(mlflow_run.info.run_id, name)}
        assert mlflow_values == pytest.approx(expected[name], rel=1e-12), name
    data = mlflow_run.data
    assert data.params["model.depth"] == "2" and data.params["train.lr"] == "0.003"
    assert data.tags["code_version"] == summary["code_version"] and data.tags["status"] == "finished"
    assert data.tags["hardware.device_kind"] == summary["device_kind"]
    assert data.metrics["summary.final_loss"] == pytest.approx(summary["final_loss"])
    assert mlflow_run.info.status == "FINISHED"


def test_runs_export_gives_one_table_from_run_dirs_mlflow_and_wandb(run, tmp_path):
    from depthdelusion.cli import main

    out, uri = run
    table = tmp_path / "runs.csv"
    mlflow_args = ["--mlflow-experiment", "depthdelusion", "--tracking-uri", uri] if HAVE_MLFLOW else []
    assert main(["runs", "export", str(out.parent), *mlflow_args, "--wandb-dir", str(out / "wandb"),
                 "--csv", str(table)]) == 0
    rows = list(csv.DictReader(io.StringIO(table.read_text(), newline="")))
    # one run, recorded by its directory, W&B and MLflow: one row, naming every source
    (merged,) = rows
    assert merged["schema_version"] == "1"
    sources = merged["source"].split(" + ")
    assert len(sources) == 2 + HAVE_MLFLOW
    assert sources[0] == str(out) and sources[-1].endswith(".wandb")
    assert not HAVE_MLFLOW or sources[1].startswith("mlflow:")
    summary = read_summary(out)
    assert merged["loss"] == repr(summary["final_loss"]) and merged["depth"] == "2"
    assert merged["profile"].endswith("metrics.jsonl")
    # each source alone gives the same cells (what identifies the run and more)
    same = ("name", "status", "depth", "width", "heads", "ffn", "params", "params_non_embedding",
            "tokens", "flops", "lr", "schedule", "parametrization", "seed", "loss", "eval_loss",
            "hardware", "code_version", "tokenizer", "loss_unit")
    alone = run_table.from_run_dirs(out) + run_table.from_wandb(out / "wandb") + (
        run_table.from_mlflow("depthdelusion", uri) if HAVE_MLFLOW else [])
    assert len(alone) == len(sources)
    for r in csv.DictReader(io.StringIO(run_table.to_csv(alone))):
        assert {k: r[k] for k in same} == {k: merged[k] for k in same}, r["source"]
    # the fitting API reads the table with no column flags; unfinished runs are listed, not fitted
    failed = dict(merged, name="broken", status="failed", loss="")
    table.write_text(run_table.to_csv([merged, failed]))
    runs = load_runs(str(table))
    assert len(runs) == 1 and list(runs.depth) == [2]
    assert runs.has("params") and runs.has("tokens") and runs.has("loss")
    assert any("broken (failed)" in note for note in runs.notes)


@needs_mlflow
def test_a_tracker_that_fails_is_reported_once_and_the_others_go_on(env, tmp_path, capsys):
    from mlflow import MlflowClient

    _, uri = env
    out = tmp_path / "run"
    group = trackers.open_trackers(["jsonl", "tensorboard", "mlflow"], out, {"config": {"model": {"depth": 1}}})
    assert group.names == ["tensorboard", "mlflow"]
    mlflow_run_id = group.trackers[1].run_id
    MlflowClient(uri).delete_run(mlflow_run_id)  # logging to a deleted run is refused by the server
    for step in (1, 2, 3):
        group.log({"step": step, "loss": 1.0 / step})
    group.finish("finished")
    err = capsys.readouterr().err
    assert err.count("tracker mlflow failed") == 1
    assert "which goes on" in err and list((out / "tensorboard").glob("events.out.tfevents.*"))
    from tests.train.test_checkpoints import read_events

    assert read_events(out / "tensorboard")["loss"] == pytest.approx({1: 1.0, 2: 0.5, 3: 1 / 3})


@needs_mlflow
def test_an_unreachable_mlflow_server_costs_seconds_not_the_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")  # nothing listens
    group = trackers.open_trackers(["jsonl", "mlflow"], tmp_path / "run", {"config": {}})
    assert group.names == []
    group.log({"step": 1, "loss": 2.0})
    group.finish("finished")
    assert capsys.readouterr().err.count("tracker mlflow failed (start:") == 1


def test_tracker_config_errors_name_the_field_and_the_extra(monkeypatch):
    assert load_config(overrides=["train.trackers=jsonl,wandb"]).train.trackers == ["jsonl", "wandb"]
    with pytest.raises(ValueError, match="unknown tracker 'comet'; valid: jsonl, tensorboard, wandb, mlflow"):
        load_config(overrides=["train.trackers=[jsonl, comet]"])
    with pytest.raises(ValueError, match="train.trackers=3: must be a list"):
        load_config(overrides=["train.trackers=3"])
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ValueError, match=r"wandb is not installed: pip install 'depthdelusion\[trackers\]'"):
        load_config(overrides=["train.trackers=[jsonl, wandb]"])


def test_an_unreachable_wandb_service_is_reported_and_left_out(tmp_path, capsys, monkeypatch):
    """Online mode (a key is set) against a W&B server that does not answer: bounded by the
    tracker's init timeout (WANDB_INIT_TIMEOUT, 30 s unless set; 3 s here), then off; nothing
    raises."""
    monkeypatch.setenv("WANDB_INIT_TIMEOUT", "3")
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens
    group = trackers.open_trackers(["jsonl", "wandb"], tmp_path / "run", {"config": {}})
    assert group.names == []
    group.log({"step": 1, "loss": 2.0})
    group.finish("finished")
    assert capsys.readouterr().err.count("tracker wandb failed (start:") == 1


def test_a_bad_wandb_init_timeout_is_named_and_wandb_left_out(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_INIT_TIMEOUT", "soon")
    group = trackers.open_trackers(["jsonl", "wandb"], tmp_path / "run", {"config": {}})
    assert group.names == []
    group.finish("finished")
    assert "WANDB_INIT_TIMEOUT='soon': expected a positive number of seconds" in capsys.readouterr().err

