"""Runs on gs:// against a real GCS server (tests/helpers/gcs_emulator.py): checkpoints through orbax and
tensorstore, records through etils.epath and gcsfs, as on a pod. A kill during a save, then a
resume; server errors during a save: a 503 is retried (by gcsfs and by tensorstore, each with its
own backoff), a refusal or a 503 on every try ends the run with a clear error and the previous
checkpoint restorable."""
import json
import signal
import subprocess
import time
import urllib.parse

import pytest
import yaml
from etils import epath

from depthdelusion.config import load_config
from depthdelusion.rundir import read_metrics
from depthdelusion.train.loop import train
from gcs_emulator import PYTHON, bucket, cli_env, fault_proxy, gcs_server  # noqa: F401 (fixtures)

TINY = {
    "model": {"depth": 2, "width": 32, "head_dim": 16, "seq_len": 32},
    "data": {"builtin_documents": 400},
    "train": {"steps": 12, "batch_size": 8, "lr": 3.0e-3, "warmup_steps": 2, "checkpoint_every": 4,
              "checkpoint_minutes": 0, "layer_stats_every": 4, "log_every": 1, "eval_batches": 0},
}
LOSS_RTOL = 1e-6  # same config, devices and data: the same float32 arithmetic on CPU


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


@pytest.fixture(scope="module")
def prepared_on_gs(gcs_server, tmp_path_factory):
    """prepare-data's builtin shards, written once to a bucket of their own for the two tests that
    check them and train from them; run in an empty directory, where a gs:// path written as a local
    one would land (as the `bucket` fixture checks)."""
    cwd = tmp_path_factory.mktemp("prepare")
    prepared = epath.Path(f"gs://{gcs_server.new_bucket()}/prepared")
    done = subprocess.run([PYTHON, "-m", "depthdelusion", "prepare-data", "builtin", "--out", str(prepared),
                           "--tokenizer", "bytes", "--seq-len", "32", "--max-train-tokens", "20000"],
                          env=cli_env(gcs_server), cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (cwd / "gs:").exists(), "a gs:// path was written as a local path"
    return prepared


def cli(*args):
    return [PYTHON, "-m", "depthdelusion", "train", *map(str, args)]


def writes_under(prefix: str):
    return lambda method, url: method != "GET" and prefix in url


def wait_for(condition, proc, what: str, timeout: float = 500) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def steps_on_gs(run: epath.Path) -> list[str]:
    return sorted(p.name for p in (run / "checkpoints").iterdir())


def test_sigkill_during_a_save_on_gs_then_resume_gives_the_uninterrupted_losses(gcs_server, bucket, config_file):
    run = epath.Path(f"{bucket}/run")
    held = []

    def hold_step_8(method, url):  # the step-8 save never completes: killed in the middle of it
        if method != "GET" and "/checkpoints/8/" in url:
            held.append(url)
            return "hold"
        return None

    with fault_proxy(gcs_server, hold_step_8) as proxy:
        proc = subprocess.Popen(cli(config_file, "--out", run), env=cli_env(gcs_server, proxy.url),
                                stderr=subprocess.PIPE, text=True)
        wait_for(lambda: held, proc, "the step-8 save")
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert not (run / "summary.json").exists()
    assert (run / "checkpoints" / "4" / "commit_success.txt").exists()  # orbax's mark of a whole save on GCS
    first = {r["step"]: r["loss"] for r in read_metrics(run)}
    assert sorted(first) == list(range(1, 9))  # flushed at the step-8 save

    done = subprocess.run(cli("--out", run), env=cli_env(gcs_server), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming {run} from the checkpoint at step 4" in done.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["steps"] == 12
    records = read_metrics(run)
    assert [r["step"] for r in records] == list(range(1, 13))
    for r in records[:8]:  # steps 5-8 again from the step-4 checkpoint: the same losses
        assert r["loss"] == pytest.approx(first[r["step"]], rel=LOSS_RTOL), r["step"]
    assert {"4", "8", "12"} <= set(steps_on_gs(run))
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["steps"] == 12
    assert list((run / "tensorboard").iterdir())


def test_503s_during_a_save_are_retried_and_the_checkpoint_restores(gcs_server, bucket, config_file):
    """The first write of every object of the step-8 save gets a 503 (Service Unavailable), as
    GCS answers under load: gcsfs (orbax's metadata files) and tensorstore (the arrays) each retry
    with backoff (tensorstore's gcs_request_retries: 32 tries, 1 s doubling to 32 s), so the run
    finishes and the step-8 checkpoint is whole: resuming from it gives the same losses."""
    run = epath.Path(f"{bucket}/run")
    refused = set()

    def first_write_of_each_object(method, url):
        if method == "GET" or "/checkpoints/8/" not in url or "upload_id=" in url:
            return None
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        name = query.get("name", [urllib.parse.urlsplit(url).path])[0]
        if name in refused:
            return None
        refused.add(name)
        return 503

    with fault_proxy(gcs_server, first_write_of_each_object) as proxy:
        done = subprocess.run(cli(config_file, "--out", run), env=cli_env(gcs_server, proxy.url),
                              capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    kinds = {"uploadType=media" in url for _, url, code in proxy.injected if code == 503}
    assert kinds == {True, False}, proxy.injected  # tensorstore's uploads and gcsfs's were both refused
    assert json.loads((run / "summary.json").read_text())["status"] == "finished"
    first = {r["step"]: r["loss"] for r in read_metrics(run)}

    (run / "summary.json").unlink()
    (run / "checkpoints" / "12").rmtree()
    done = subprocess.run(cli("--out", run), env=cli_env(gcs_server), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming {run} from the checkpoint at step 8" in done.stderr
    records = read_metrics(run)
    assert [r["step"] for r in records] == list(range(1, 13))
    for r in records:
        assert r["loss"] == pytest.approx(first[r["step"]], rel=LOSS_RTOL), r["step"]


def test_a_save_the_server_refuses_ends_the_run_and_the_previous_checkpoint_restores(
        gcs_server, bucket, config_file):
    run = epath.Path(f"{bucket}/run")
    with fault_proxy(gcs_server, lambda method, url: 403 if writes_under("/checkpoints/8/")(method, url) else None) as proxy:
        done = subprocess.run(cli(config_file, "--out", run), env=cli_env(gcs_server, proxy.url),
                              capture_output=True, text=True, timeout=400)
    assert done.returncode != 0 and proxy.injected
    summary = json.loads((run / "summary.json").read_text())
    # The error names the object the server refused, and what it said.
    assert summary["status"] == "failed" and "Forbidden" in summary["error"], summary
    assert "checkpoints%2F8%2F" in summary["error"] and "injected by the test proxy" in summary["error"]
    assert summary["error"].startswith(f"CheckpointSaveError: saving the checkpoint at step 8 to {run}/checkpoints")
    assert "Forbidden" in done.stderr, done.stderr[-3000:]
    assert "4" in steps_on_gs(run)
    first = {r["step"]: r["loss"] for r in read_metrics(run)}

    done = subprocess.run(cli("--out", run), env=cli_env(gcs_server), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming {run} from the checkpoint at step 4" in done.stderr
    records = read_metrics(run)
    assert [r["step"] for r in records] == list(range(1, 13))
    for r in records:  # the steps the failed run recorded after step 4 come out the same again
        if r["step"] in first:
            assert r["loss"] == pytest.approx(first[r["step"]], rel=LOSS_RTOL), r["step"]


def test_a_save_answered_503_on_every_try_ends_the_run_with_a_clear_error(
        gcs_server, bucket, config_file):
    """GCS answering 503 to everything about the step-8 save for the rest of the run (reads
    too: orbax checks and lists the step directory): the clients' retries give up (gcsfs's first,
    after about 30 s of backoff), and the run ends with an error naming the step, the directory
    and what the server said, and where a re-run resumes; it resumes there once the server
    recovers."""
    run = epath.Path(f"{bucket}/run")
    with fault_proxy(gcs_server, lambda method, url: 503 if "/checkpoints/8" in url else None) as proxy:
        done = subprocess.run(cli(config_file, "--out", run), env=cli_env(gcs_server, proxy.url),
                              capture_output=True, text=True, timeout=400)
    assert done.returncode != 0 and proxy.injected
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed", summary
    for text in (summary["error"], done.stderr):
        assert f"saving the checkpoint at step 8 to {run}/checkpoints failed" in text, text[-3000:]
        assert "503" in text and "the checkpoint at step 4 is untouched" in text, text[-3000:]
    assert steps_on_gs(run)[0] == "4" and "8" not in steps_on_gs(run)
    first = {r["step"]: r["loss"] for r in read_metrics(run)}

    done = subprocess.run(cli("--out", run), env=cli_env(gcs_server), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming {run} from the checkpoint at step 4" in done.stderr
    records = read_metrics(run)
    assert [r["step"] for r in records] == list(range(1, 13))
    for r in records:
        if r["step"] in first:
            assert r["loss"] == pytest.approx(first[r["step"]], rel=LOSS_RTOL), r["step"]


def test_checkpointer_saves_to_the_bucket_and_restores_from_it(bucket):
    """In-process and small: the Checkpointer's own directory handling on gs:// (a local-only
    call such as .absolute() would put the checkpoints under ./gs:/...)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from depthdelusion.train.checkpoints import Checkpointer

    import grain

    def data():
        return iter(grain.MapDataset.range(100).to_iter_dataset())

    state = {"w": jnp.arange(6.0).reshape(2, 3), "step": jnp.asarray(3)}
    position = data()
    seen = [next(position) for _ in range(7)]
    checkpointer = Checkpointer(f"{bucket}/run/checkpoints", every_steps=1)
    assert str(checkpointer.directory) == f"{bucket}/run/checkpoints"
    checkpointer.save(3, state, position.get_state())
    checkpointer.close()
    assert (epath.Path(bucket) / "run" / "checkpoints" / "3" / "commit_success.txt").exists()

    sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    again, resumed = Checkpointer(f"{bucket}/run/checkpoints"), data()
    step, restored = again.restore_latest(jax.eval_shape(lambda: state), jax.tree.map(lambda _: sharding, state),
                                          resumed)
    again.close()
    assert step == 3 and np.array_equal(restored["w"], state["w"])
    assert seen == list(range(7)) and next(resumed) == 7  # the data position came back too


def test_tensorboard_on_gs_uploads_its_events_and_leaves_no_local_folder(bucket):
    """Object stores cannot append, so the events are staged in a local folder and copied up;
    once the run ends they are all on gs://, and the folder is gone (a machine that runs many
    sweeps would otherwise fill its /tmp)."""
    import os

    from depthdelusion.train.trackers import TensorBoardTracker

    tracker = TensorBoardTracker(f"{bucket}/run/tensorboard")
    staging = tracker.staging
    assert os.path.isdir(staging)
    tracker.log({"loss": 2.0}, 1)
    tracker.flush()  # a checkpoint step: the first file goes up, a new one is opened
    tracker.log({"loss": 1.5}, 2)
    tracker.finish("finished")
    uploaded = sorted(p.name for p in (epath.Path(bucket) / "run" / "tensorboard").iterdir())
    assert len(uploaded) == 2 and all(".tfevents." in name for name in uploaded), uploaded
    assert not os.path.exists(staging)
    tracker.close()  # closing again (the loop's finally after finish) is harmless


def test_prepare_data_writes_its_dataset_to_gs(prepared_on_gs):
    """prepare-data's shards (ArrayRecord, whose writer is local-only) reach the bucket whole,
    under their final names, with the TFDS description beside them."""
    from depthdelusion.data.tfds_format import windows_metadata

    prepared = prepared_on_gs
    builder = prepared / "depthdelusion_windows" / "bytes_seq32" / "1.0.0"
    names = sorted(p.name for p in builder.iterdir())
    assert "depthdelusion_windows-train.array_record-00000-of-00001" in names and "metadata.json" in names, names
    assert not [n for n in names if n.endswith(".tmp")], names
    meta = windows_metadata(str(builder))
    assert meta["train_windows"] == 20000 // 33 and meta["tokenizer"] == "bytes"
    shard = (builder / "depthdelusion_windows-train.array_record-00000-of-00001").read_bytes()
    assert len(shard) > meta["train_windows"] * 33  # every window's bytes are in the uploaded shard


def test_a_run_trains_from_data_prepared_on_gs_as_from_the_same_data_on_disk(gcs_server, bucket, prepared_on_gs,
                                                                             tmp_path):
    """Prepared shards on gs:// are read by array_record's own GCS client (google-cloud-cpp, not
    gcsfs): the run reads every batch and the validation split from the bucket, and its losses are
    those of the same shards copied to a local directory."""
    prepared = prepared_on_gs
    local = tmp_path / "prepared"
    for path in prepared.glob("*/*/*/*"):  # depthdelusion_windows/bytes_seq32/1.0.0/<file>
        target = local / str(path)[len(str(prepared)) + 1:]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    assert any("validation.array_record" in p.name for p in local.rglob("*"))

    config = tmp_path / "short.yaml"
    config.write_text(yaml.safe_dump({**TINY, "train": {**TINY["train"], "steps": 4, "eval_batches": 2}}))
    losses = {}
    for where, data in (("gs", prepared), ("local", local)):
        run = epath.Path(f"{bucket}/run_{where}")
        if where == "gs":  # a read that never returns (array_record's client asking Google, not the server) fails here
            done = subprocess.run(cli(config, "--out", run, "--set", f"data.path={data}"), env=cli_env(gcs_server),
                                  capture_output=True, text=True, timeout=240)
            assert done.returncode == 0, done.stderr[-3000:]
        else:  # the reference, in this process (a process more would only import JAX again)
            train(load_config(config, [f"data.path={data}"]), run)
        summary = json.loads((run / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["eval_loss"] is not None, summary
        assert str(data) in summary["data"]["dataset"], summary["data"]
        losses[where] = [r["loss"] for r in read_metrics(run)]
    assert len(losses["gs"]) == 4
    assert losses["gs"] == pytest.approx(losses["local"], rel=LOSS_RTOL)


def test_the_spectrum_study_reads_a_run_on_gs_and_writes_beside_it(gcs_server, bucket, tmp_path):
    """`depthdelusion spectrum` on a run trained to gs://: the checkpoint restored through
    tensorstore, the outputs (CSV and markdown writers, matplotlib) copied to RUN/spectrum."""
    config = tmp_path / "short.yaml"
    config.write_text(yaml.safe_dump({**TINY, "train": {**TINY["train"], "steps": 4}, "data": {**TINY["data"]}}))
    run = epath.Path(f"{bucket}/run")
    train(load_config(config), run)  # in this process: the command checked here is `spectrum`
    done = subprocess.run([PYTHON, "-m", "depthdelusion", "spectrum", str(run), "--tokens", "512", "--rows", "4"],
                          env=cli_env(gcs_server), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    written = {p.name for p in (run / "spectrum").iterdir()}
    assert {"spectrum.csv", "tail.csv", "tail.md"} <= written, written
    rows = (run / "spectrum" / "spectrum.csv").read_text().splitlines()
    assert rows[0] == "layer,rank,eigenvalue" and {r.split(",")[0] for r in rows[1:]} == {"0", "1", "2"}
