"""Run records: final loss, metrics.jsonl append-only locally and copied up to object stores."""
import json

import pytest

from depthdelusion.train import records
from depthdelusion.train.records import MetricsWriter, final_loss, read_metrics


def test_final_loss_is_the_mean_over_the_last_ten_percent_of_steps():
    steps = list(range(1, 101))
    losses = [float(s) for s in steps]
    mean, se, n = final_loss(steps, losses, 100)
    assert (mean, n) == (95.5, 10) and se == pytest.approx(0.9574, rel=1e-3)
    assert final_loss([1], [2.0], 100) == (2.0, None, 1)  # one value: no standard error


def test_metrics_file_is_append_only_and_survives_a_cut_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    writer = MetricsWriter(path)
    writer.write({"step": 1, "loss": 2.0})
    writer.close()
    with open(path, "a") as f:
        f.write('{"step": 2, "lo')  # a crash in the middle of a line
    writer = MetricsWriter(path)
    writer.write({"step": 2, "loss": 1.5})
    writer.close()
    assert [r["step"] for r in read_metrics(path)] == [1, 2]


def test_remote_run_directories_get_the_file_copied_at_flush(tmp_path, monkeypatch):
    """gs:// cannot append: the writer appends to a local copy and copies it up at flush (here
    exercised on a local path with the remote code path forced; tests/test_tpu_gcs.py on gs://)."""
    monkeypatch.setattr(records, "is_local", lambda path: False)
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, "loss": 3.0}) + "\n")
    writer = MetricsWriter(path)
    writer.write({"step": 2, "loss": 2.5})
    assert [r["step"] for r in read_metrics(path)] == [1]  # not flushed yet
    writer.flush()  # the loop does this before every checkpoint
    assert [r["step"] for r in read_metrics(path)] == [1, 2]
    writer.write({"step": 3, "loss": 2.0})
    writer.close()
    assert [r["step"] for r in read_metrics(path)] == [1, 2, 3]


def test_tensorboard_events_reach_remote_run_directories(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "is_local", lambda path: False)
    logdir = tmp_path / "tensorboard"
    board = records.TensorBoardWriter(logdir)
    board.write({"step": 1, "loss": 3.0, "per_layer_grad_norm": [1.0, 2.0]})
    board.flush()
    (events,) = logdir.glob("events.out.tfevents.*")
    assert b"per_layer_grad_norm/layer_01" in events.read_bytes()
    board.write({"step": 2, "loss": 2.5})
    board.close()
    assert len(list(logdir.glob("events.out.tfevents.*"))) == 2 and board.staging != str(logdir)
