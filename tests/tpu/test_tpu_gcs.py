"""gs:// end to end: a sweep, its rerun and its report, with the grid file, the data, every run
record, the checkpoints, runs.csv and the report on a real GCS server (tests/helpers/gcs_emulator.py),
reached through etils.epath/gcsfs and orbax/tensorstore as on a pod. A local-only call (open(),
pathlib, .absolute()) on a gs:// path fails here.
"""
import json
import time

import yaml
from etils import epath
from gcs_emulator import bucket, gcs_server, this_process_through_proxy  # noqa: F401 (fixtures)

from depthdelusion import rundir
from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.rundir import MetricsWriter, read_metrics
from depthdelusion.sweep import load_grid, run_sweep

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
    rows = run_sweep(grid, out, fit=FitOptions(bootstrap=0), log=lambda _: None)
    assert [r["status"] for r in rows] == ["finished"], rows
    logs = []
    rows = run_sweep(grid, out, fit=FitOptions(bootstrap=0), log=logs.append)  # nothing left to train
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


def test_metrics_on_gs_are_appended_locally_and_copied_at_checkpoints(gcs_server, bucket, monkeypatch):
    """Uploads happen at flush() (the loop's checkpoints) and close(), never per logged line,
    however much time passes between checkpoints: the proxy in front of the server counts the
    uploads of metrics.jsonl."""
    run, path = epath.Path(f"{bucket}/run"), epath.Path(f"{bucket}/run/metrics.jsonl")
    path.write_text(json.dumps({"step": 1, "loss": 3.0}) + "\n")  # a run being resumed
    with this_process_through_proxy(gcs_server) as proxy:
        def uploads():  # one request starts each upload; a resumable one's chunks name its upload_id
            return [url for method, url in proxy.requests if method == "POST" and url.startswith("/upload/")
                    and "name=run/metrics.jsonl" in url and "upload_id=" not in url]

        writer = MetricsWriter(run)
        with monkeypatch.context() as m:  # the writer's clock only: gcsfs's event loop needs the real one
            clock = [time.monotonic()]
            m.setattr("time.monotonic", lambda: clock[0])
            for step in range(2, 200):
                clock[0] += 30.0
                writer.write({"step": step, "loss": 2.0})
        assert uploads() == [] and [r["step"] for r in read_metrics(run)] == [1]
        writer.flush()
        writer.flush()  # nothing new: no upload
        assert len(uploads()) == 1
        writer.write({"step": 200, "loss": 1.0})
        writer.close()
        assert len(uploads()) == 2 and [r["step"] for r in read_metrics(run)] == list(range(1, 201))
    assert rundir.is_local(epath.Path("/tmp/x")) and not rundir.is_local(path)
