"""gs:// end to end: a sweep, its rerun and its report, with the grid file, the data, every run
record, the checkpoints, runs.csv and the report on a real GCS server (tests/gcs_emulator.py),
reached through etils.epath/gcsfs and orbax/tensorstore as on a pod. A local-only call (open(),
pathlib, .absolute()) on a gs:// path fails here.
"""
import json

import pytest
import yaml
from etils import epath

from depthdelusion import rundir
from depthdelusion.sweep import load_grid, run_sweep
from depthdelusion.rundir import MetricsWriter, read_metrics
from fake_gcs import serve_gs_from
from gcs_emulator import bucket, gcs_server  # noqa: F401 (fixtures)

GRID = {
    "name": "gcs", "name_format": "d{depth}_w{width}",
    "fixed": {
        "model": {"head_dim": 8, "seq_len": 32, "width": 16},
        "train": {"steps": 6, "batch_size": 8, "warmup_steps": 2, "log_every": 1, "layer_stats_every": 3,
                  "eval_batches": 0, "checkpoint_every": 3},
    },
    "runs": [{"model.depth": 1}],
}


def test_sweep_rerun_and_report_on_gs(bucket):
    for shard in range(8):
        epath.Path(f"{bucket}/data/part-{shard}.jsonl").write_text("".join(
            json.dumps({"text": f"document {shard}.{i}: " + "the quick brown fox jumps. " * (3 + i % 5)}) + "\n"
            for i in range(40)))
    grid_dict = {**GRID, "fixed": {**GRID["fixed"], "data": {"path": f"{bucket}/data"}}}
    epath.Path(f"{bucket}/exp/grid.yaml").write_text(yaml.safe_dump(grid_dict))
    grid = load_grid(f"{bucket}/exp/grid.yaml")
    out = f"{bucket}/sweep"
    rows = run_sweep(grid, out, bootstrap=0, log=lambda _: None)
    assert [r["status"] for r in rows] == ["finished"], rows
    logs = []
    rows = run_sweep(grid, out, bootstrap=0, log=logs.append)  # nothing left to train
    assert [r["status"] for r in rows] == ["finished"] and not any("resuming" in line for line in logs), logs
    sweep = epath.Path(out)
    for name in ("d1_w16",):
        assert [r["step"] for r in read_metrics(sweep / name)] == [1, 2, 3, 4, 5, 6]
        summary = json.loads((sweep / name / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["steps"] == 6
        assert summary["data"]["dataset"].startswith(f"{bucket}/data")
        assert (sweep / name / "config.yaml").exists() and list((sweep / name / "tensorboard").iterdir())
        assert (sweep / name / "checkpoints" / "6" / "commit_success.txt").exists()  # orbax, through tensorstore
    table = (sweep / "runs.csv").read_text().splitlines()
    assert table[0].startswith("name,status") and [line.split(",")[1] for line in table[1:]] == ["finished"]
    assert (sweep / "report" / "report.md").read_text().startswith("# Scaling-law analysis report")


@pytest.fixture()
def gcs(tmp_path, monkeypatch):
    """fake_gcs's gs://, which counts the objects opened for writing: what the test below
    measures is when MetricsWriter uploads, not GCS."""
    monkeypatch.chdir(tmp_path)
    with serve_gs_from(tmp_path / "bucket") as fs:
        yield fs
    assert not (tmp_path / "gs:").exists()


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
