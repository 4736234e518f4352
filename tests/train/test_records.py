"""Run records: final loss, TensorBoard events copied up to object stores (the run
directory's own files: tests/test_rundir.py)."""
import pytest

from depthdelusion import rundir
from depthdelusion.train.trackers import TensorBoardTracker
from depthdelusion.train.records import final_loss


def test_final_loss_is_the_mean_over_the_last_ten_percent_of_steps():
    steps = list(range(1, 101))
    losses = [float(s) for s in steps]
    mean, se, n = final_loss(steps, losses, 100)
    assert (mean, n) == (95.5, 10) and se == pytest.approx(0.9574, rel=1e-3)
    assert final_loss([1], [2.0], 100) == (2.0, None, 1)  # one value: no standard error


def test_tensorboard_events_reach_remote_run_directories(tmp_path, monkeypatch):
    monkeypatch.setattr(rundir, "is_local", lambda path: False)
    logdir = tmp_path / "tensorboard"
    board = TensorBoardTracker(logdir)
    board.write({"step": 1, "loss": 3.0, "per_layer_grad_norm": [1.0, 2.0]})
    board.flush()
    (events,) = logdir.glob("events.out.tfevents.*")
    assert b"per_layer_grad_norm/layer_01" in events.read_bytes()
    board.write({"step": 2, "loss": 2.5})
    board.close()
    assert len(list(logdir.glob("events.out.tfevents.*"))) == 2 and board.staging != str(logdir)
