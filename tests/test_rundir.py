"""The run directory's rules (depthdelusion/rundir.py): a line cut by a crash, a configuration
that changes the numbers, remote run directories read by the analysis."""
import json
import shutil

import pytest
import yaml
from etils import epath
from gcs_emulator import bucket, gcs_server  # noqa: F401 (fixtures)

from depthdelusion import rundir
from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.analysis.table.load import load_runs
from depthdelusion.cli import main
from depthdelusion.config import load_config
from depthdelusion.rundir import ConfigChanged, MetricsWriter, read_metrics
from depthdelusion.train.loop import train

TINY = {
    "model": {"depth": 2, "width": 32, "head_dim": 16, "seq_len": 32},
    "data": {"builtin_documents": 400},
    "train": {"steps": 12, "batch_size": 8, "lr": 3.0e-3, "warmup_steps": 2, "checkpoint_every": 4,
              "checkpoint_minutes": 0, "layer_stats_every": 4, "eval_every": 12, "eval_batches": 1},
}


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


@pytest.fixture(scope="module")
def finished(config_file, tmp_path_factory):
    """A finished 12-step run and its losses by step."""
    out = tmp_path_factory.mktemp("runs") / "tiny"
    train(load_config(config_file), out)
    return out, {r["step"]: r["loss"] for r in read_metrics(out)}


def test_a_cut_last_line_is_skipped_by_readers_and_removed_by_the_writer(tmp_path):
    writer = MetricsWriter(tmp_path)
    writer.write({"step": 1, "loss": 2.0})
    writer.close()
    with open(tmp_path / rundir.METRICS, "a") as f:
        f.write('{"step": 2, "lo')  # killed in the middle of a line
    assert [r["step"] for r in read_metrics(tmp_path)] == [1]
    writer = MetricsWriter(tmp_path)
    writer.write({"step": 2, "loss": 1.5})
    writer.close()
    text = (tmp_path / rundir.METRICS).read_text()
    assert [json.loads(line)["step"] for line in text.splitlines()] == [1, 2]  # valid JSON Lines


def test_a_bad_line_that_is_not_the_last_is_an_error_naming_it(tmp_path):
    (tmp_path / rundir.METRICS).write_text('{"step": 1}\n{"step": 2, "lo\n{"step": 3}\n')
    with pytest.raises(ValueError, match=r"metrics\.jsonl line 2: not valid JSON"):
        read_metrics(tmp_path)


def test_remote_run_directories_get_the_metrics_copied_at_flush(tmp_path, monkeypatch):
    """gs:// cannot append: the writer appends to a local copy and copies it up at flush (here
    exercised on a local path with the remote code path forced; tests/tpu/test_tpu_gcs.py on gs://)."""
    monkeypatch.setattr(rundir, "is_local", lambda path: False)
    (tmp_path / rundir.METRICS).write_text(json.dumps({"step": 1, "loss": 3.0}) + "\n")
    writer = MetricsWriter(tmp_path)
    writer.write({"step": 2, "loss": 2.5})
    assert [r["step"] for r in read_metrics(tmp_path)] == [1]  # not flushed yet
    writer.flush()  # the loop does this before every checkpoint
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2]
    writer.write({"step": 3, "loss": 2.0})
    writer.close()
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 3]


def test_a_run_killed_mid_line_then_resumed_is_read_by_the_report(config_file, finished, tmp_path):
    reference_dir, reference = finished
    out = tmp_path / "runs" / "tiny"
    shutil.copytree(reference_dir, out)
    # The state a kill during step 7's metrics line leaves: checkpoint 4 complete, no summary.
    (out / rundir.SUMMARY).unlink()
    for step in (8, 12):
        shutil.rmtree(out / "checkpoints" / str(step))
    lines = (out / rundir.METRICS).read_text().splitlines(keepends=True)
    (out / rundir.METRICS).write_text("".join(lines[:6]) + lines[6][:len(lines[6]) // 2])
    assert rundir.status(out) == "unfinished"

    summary = train(load_config(config_file), out)
    assert summary["status"] == "finished"
    records = read_metrics(out)
    assert [r["step"] for r in records] == list(range(1, 13))
    assert all(r["loss"] == pytest.approx(reference[r["step"]], rel=1e-6) for r in records)
    runs = load_runs(str(tmp_path / "runs"))  # what `depthdelusion report RUNS` reads
    assert list(runs.name) == ["tiny"] and runs.loss[0] == pytest.approx(summary["final_loss"])
    assert runs.profiles[0].steps() == [1, 4, 8, 12]


@pytest.mark.parametrize("change, message", [
    ("train.steps=40", "train.steps: 12 -> 40"),
    ("train.lr=1e-3", "train.lr: 0.003 -> 0.001"),
])
def test_a_config_that_changes_the_numbers_is_refused_finished_or_not(config_file, finished, tmp_path,
                                                                    change, message):
    out, _ = finished
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(ConfigChanged, match=f"{out} holds a finished run .*{message}.*new --out"):
        train(load_config(config_file, [change]), out)
    unfinished = tmp_path / "unfinished"
    shutil.copytree(out, unfinished)
    (unfinished / rundir.SUMMARY).unlink()
    with pytest.raises(ConfigChanged, match=f"{unfinished} holds a started run .*{message}.*new --out"):
        train(load_config(config_file, [change]), unfinished)
    assert sorted(p.name for p in out.iterdir()) == before and rundir.status(unfinished) == "unfinished"


def test_the_command_line_gives_that_error_and_the_same_settings_give_the_summary(finished, capsys):
    out, _ = finished
    metrics = (out / rundir.METRICS).read_text()
    assert main(["train", "--out", str(out), "--set", "train.steps=40"]) == 2
    err = capsys.readouterr().err
    assert "train.steps: 12 -> 40" in err and "new --out" in err
    # Its own settings, or ones that only change how it is watched: the summary, exit 0.
    for extra in ([], ["--set", "train.log_every=3", "--set", "train.checkpoint_every=6"]):
        assert main(["train", "--out", str(out), *extra]) == 0
        assert '"status": "finished"' in capsys.readouterr().out
    assert (out / rundir.METRICS).read_text() == metrics


def test_gs_sweeps_are_analysed_from_their_run_directories(bucket, tmp_path):
    """The sweep's report on gs:// (a real GCS server, tests/helpers/gcs_emulator.py) reads the run
    directories through epath: the gradient profiles, hence the persistence section, are there
    as for a local sweep; the report is written to the bucket."""
    import numpy as np
    from analysis.conftest import write_run

    from depthdelusion.sweep import write_sweep_report

    rng = np.random.default_rng(0)
    sweep = epath.Path(f"{bucket}/sweep")
    rows = []
    for i, (d, w) in enumerate([(d, w) for w in (128, 256, 512) for d in (4, 8, 16, 32)]):
        n = d * 12 * w * w + 2 * 50257 * w
        loss = 1.8 + 30 * n ** -0.15 + 0.05 * max(0.0, d - 2.5 * np.log(w)) + 0.01 * rng.standard_normal()
        run = write_run(tmp_path / "local", f"d{d}w{w}", d, w, float(loss), ell=0.6 * w ** 0.44, seed=i)
        for f in run.iterdir():  # uploaded as a pod's runs are
            (sweep / run.name / f.name).write_bytes(f.read_bytes())
        summary = json.loads((run / rundir.SUMMARY).read_text())
        rows.append({"name": run.name, "status": "finished", "depth": d, "width": w, "params": summary["params"],
                     "tokens": summary["tokens"], "final_loss": summary["final_loss"],
                     "final_loss_se": summary["final_loss_se"]})  # as the sweep's runs.csv rows
    runs = load_runs(str(sweep))
    assert len(runs) == 12 and all(p is not None for p in runs.profiles)
    # no profile intervals: checked here is what the report reads from gs:// and writes there
    bare = FitOptions(bootstrap=0, profile="none")
    verdict = write_sweep_report(sweep, rows, fit=bare, figures=False)
    assert not verdict.startswith("no fit"), verdict
    md = (sweep / "report" / "report.md").read_text()
    assert "## Gradient persistence length" in md and str(sweep) in md
    assert "Windowed protocol" in md and "no per-layer gradient norms" not in md
    assert (sweep / "report" / "persistence.csv").exists()
    # `depthdelusion report` with its --out on the bucket too (the bucket fixture fails the test
    # if anything lands under ./gs:/)
    assert main(["report", str(sweep), "--out", f"{bucket}/cli-report", "--no-figures", "--bootstrap", "0",
                 "--profile", "none"]) == 0
    assert (epath.Path(f"{bucket}/cli-report") / "report.md").read_text().startswith("# Scaling-law analysis report")
