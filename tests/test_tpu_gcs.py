"""gs:// end to end: a sweep (its run interrupted after its first checkpoint), its resume and
its report, with the grid file, the data, every run record, runs.csv and the report on a
gs:// path served by tests/fake_gcs.py through the same fsspec "gs"/"gcs" protocol etils.epath
uses. A missing gcsfs, or a local-only call (open(), pathlib) on a gs:// path, fails here.

Not covered: orbax writes a checkpoint's arrays through tensorstore's own GCS client (its `gcs`
kvstore driver), which no fsspec filesystem can serve; the checkpoints of this test therefore go
to a local directory (`LocalCheckpointer` below). On a slice they go to gs:// through tensorstore
and orbax, as in any orbax user.
"""
import json

import pytest
import yaml
from etils import epath

from depthdelusion import rundir
from depthdelusion.sweep import load_grid, run_sweep
from depthdelusion.train import loop
from depthdelusion.train.checkpoints import Checkpointer
from depthdelusion.rundir import MetricsWriter, read_metrics
from fake_gcs import serve_gs_from

GRID = {
    "name": "gcs", "name_format": "d{depth}_w{width}",
    "fixed": {
        "model": {"head_dim": 8, "seq_len": 32, "width": 16},
        "data": {"path": "gs://bkt/data"},  # 8 .jsonl files: one per batch row
        "train": {"steps": 6, "batch_size": 8, "warmup_steps": 2, "log_every": 1, "layer_stats_every": 3,
                  "eval_batches": 0, "checkpoint_every": 3},
    },
    "runs": [{"model.depth": 1}],
}


@pytest.fixture()
def gcs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a local-only write of "gs://..." would land under ./gs:
    with serve_gs_from(tmp_path / "bucket") as fs:
        yield fs
    assert not (tmp_path / "gs:").exists()


def test_sweep_resume_and_report_on_gs(gcs, tmp_path, monkeypatch):
    for shard in range(8):
        epath.Path(f"gs://bkt/data/part-{shard}.jsonl").write_text("".join(
            json.dumps({"text": f"document {shard}.{i}: " + "the quick brown fox jumps. " * (3 + i % 5)}) + "\n"
            for i in range(40)))
    epath.Path("gs://bkt/exp/grid.yaml").write_text(yaml.safe_dump(GRID))
    local_checkpoints = tmp_path / "local-checkpoints"

    class LocalCheckpointer(Checkpointer):  # see the module docstring
        def __init__(self, directory, *args, **kwargs):
            assert str(directory).startswith("gs://bkt/sweep/")
            super().__init__(local_checkpoints / str(directory)[len("gs://"):], *args, **kwargs)

    interrupted = []

    class InterruptedOnce(LocalCheckpointer):  # the first run stops right after its step-3 save
        def save(self, step, *args):
            super().save(step, *args)
            if step == 3 and not interrupted:
                self.wait()
                interrupted.append(step)
                raise OSError("503 Service Unavailable (injected)")

    monkeypatch.setattr(loop, "Checkpointer", InterruptedOnce)
    grid = load_grid("gs://bkt/exp/grid.yaml")
    out = "gs://bkt/sweep"
    rows = run_sweep(grid, out, bootstrap=0, log=lambda _: None)
    assert [r["status"] for r in rows] == ["failed"] and "503" in rows[0]["error"]
    assert [r["step"] for r in read_metrics(f"{out}/d1_w16")] == [1, 2, 3]

    logs = []
    rows = run_sweep(grid, out, bootstrap=0, log=logs.append)
    assert "[1/1] d1_w16: resuming" in logs and [r["status"] for r in rows] == ["finished"]
    bucket = tmp_path / "bucket" / "bkt" / "sweep"
    for name in ("d1_w16",):
        assert [r["step"] for r in read_metrics(bucket / name)] == [1, 2, 3, 4, 5, 6]
        summary = json.loads((bucket / name / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["steps"] == 6
        assert summary["data"]["dataset"].startswith("gs://bkt/data")
        assert (bucket / name / "config.yaml").exists() and list((bucket / name / "tensorboard").iterdir())
        assert not (bucket / name / "checkpoints").exists()
    assert (local_checkpoints / "bkt" / "sweep" / "d1_w16" / "checkpoints" / "6").is_dir()
    table = (bucket / "runs.csv").read_text().splitlines()
    assert table[0].startswith("name,status") and [line.split(",")[1] for line in table[1:]] == ["finished"]
    assert (bucket / "report" / "report.md").read_text().startswith("# Scaling-law analysis report")


def test_metrics_on_gs_are_appended_locally_and_copied_at_checkpoints(gcs, monkeypatch):
    """Uploads happen at flush() (the loop's checkpoints) and close(), never per logged line,
    however much time passes between checkpoints."""
    run, path = epath.Path("gs://bkt/run"), epath.Path("gs://bkt/run/metrics.jsonl")
    path.write_text(json.dumps({"step": 1, "loss": 3.0}) + "\n")  # a run being resumed
    gcs.writes.clear()
    clock = [0.0]
    monkeypatch.setattr("time.monotonic", lambda: clock[0])
    writer = MetricsWriter(run)
    for step in range(2, 200):
        clock[0] += 30.0
        writer.write({"step": step, "loss": 2.0})
    assert gcs.writes == [] and [r["step"] for r in read_metrics(run)] == [1]
    writer.flush()
    writer.flush()  # nothing new: no upload
    assert gcs.writes == ["bkt/run/metrics.jsonl"]
    writer.write({"step": 200, "loss": 1.0})
    writer.close()
    assert len(gcs.writes) == 2 and [r["step"] for r in read_metrics(run)] == list(range(1, 201))
    assert rundir.is_local(epath.Path("/tmp/x")) and not rundir.is_local(path)
