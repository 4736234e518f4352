"""`depthdelusion train` end to end on the built-in data: files, fields, a falling loss."""
import io
import json
import subprocess
import sys

import pytest
import yaml

from depthdelusion.cli import main
from depthdelusion.config import resolve_config_path
from depthdelusion.train.records import Progress

TINY = ["--set", "model.depth=2", "--set", "model.width=64", "--set", "model.head_dim=16",
        "--set", "model.seq_len=64", "--set", "train.batch_size=8", "--set", "train.steps=40",
        "--set", "train.warmup_steps=5", "--set", "train.lr=3e-3", "--set", "train.layer_stats_every=10",
        "--set", "train.eval_every=20", "--set", "train.eval_batches=2"]
PEAK = 1e12  # FLOP/s per device: the CPU has no peak in the table, so the run is given one


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "tiny"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("depthdelusion.train.loop.peak_flops_per_device", lambda: PEAK)
        assert main(["train", *TINY, "--out", str(out)]) == 0
    return out


def test_writes_resolved_config(run_dir):
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert cfg["model"]["depth"] == 2 and cfg["model"]["vocab_size"] == 257  # from the tokenizer
    assert set(cfg) == {"model", "data", "train", "mesh"}


def test_metrics_have_every_step_and_per_layer_vectors(run_dir):
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 41))
    assert all({"loss", "lr", "grad_norm", "tokens"} <= r.keys() for r in records)
    stats = [r for r in records if "per_layer_grad_norm" in r]
    assert [r["step"] for r in stats] == [1, 10, 20, 30, 40]
    for r in stats:
        assert len(r["per_layer_grad_norm"]) == 2 and len(r["per_layer_act_grad_norm"]) == 2
    assert all(r["tokens_per_s"] > 0 and r["flops_per_s"] > 0 for r in stats[1:])
    devices = json.loads((run_dir / "summary.json").read_text())["devices"]
    for r in stats[1:]:  # MFU = model FLOP/s over the peak of every device in the mesh
        assert r["mfu"] == pytest.approx(r["flops_per_s"] / (PEAK * devices))
    assert records[-1]["loss"] < records[0]["loss"] - 1.0


def test_validation_loss_is_logged_every_eval_every_steps_and_at_the_end(run_dir):
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = {r["step"]: r["eval_loss"] for r in records if "eval_loss" in r}
    assert list(evals) == [20, 40] and all(isinstance(v, float) and 0 < v < 6 for v in evals.values())
    assert json.loads((run_dir / "summary.json").read_text())["eval_loss"] == evals[40]


def test_summary_reports_final_loss_over_last_ten_percent(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    tail = [r["loss"] for r in records if r["step"] > 36]
    assert summary["final_loss"] == pytest.approx(sum(tail) / len(tail))
    assert summary["final_loss_steps"] == 4 and summary["final_loss_se"] > 0
    assert summary["tokens"] == 40 * 8 * 64 and summary["status"] == "finished"
    assert summary["params"] > 0 and summary["flops"] > 6 * summary["params_non_embedding"] * summary["tokens"]


def test_the_same_command_on_a_finished_run_changes_nothing(run_dir, capsys):
    before = (run_dir / "metrics.jsonl").read_text()
    assert main(["train", *TINY, "--out", str(run_dir)]) == 0
    assert '"status": "finished"' in capsys.readouterr().out
    assert (run_dir / "metrics.jsonl").read_text() == before


def test_bad_config_is_one_clear_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "depthdelusion.cli", "train", "--set", "model.width=100",
         "--out", str(tmp_path / "x")], capture_output=True, text=True,
    )
    assert proc.returncode == 2
    assert "model.width=100 is not divisible by model.head_dim=32" in proc.stderr  # the quickstart preset
    assert "Traceback" not in proc.stderr


def test_config_paths_keep_their_scheme():
    """`--out gs://…` resumes from gs://…/config.yaml: pathlib would make it gs:/…"""
    assert str(resolve_config_path("gs://bucket/runs/a/config.yaml")) == "gs://bucket/runs/a/config.yaml"
    assert resolve_config_path(None).name == "quickstart.yaml" and resolve_config_path(None).is_file()


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_progress_is_a_bar_on_a_terminal_and_log_lines_otherwise():
    records = [{"step": s, "loss": 5.0 - s, "lr": 1e-3} for s in (1, 2, 3, 4)]
    records[1]["per_layer_grad_norm"] = [1.0]
    records[3]["eval_loss"] = 1.5
    bar, log = _Stream(True), _Stream(False)
    for stream in (bar, log):
        progress = Progress(4, stream=stream)
        for r in records:
            progress.update(r)
    drawn = bar.getvalue()  # tqdm redraws its line after "\r" (at most every 0.1 s)
    assert drawn.startswith("\r") and drawn.endswith("\n")  # the bar's line is closed at the last step
    last = drawn.rstrip("\n").rsplit("\r", 1)[1]
    assert last.startswith("100%|") and "| 4/4 [" in last and "loss 1.0000 lr 1.00e-03 eval 1.5000" in last
    assert "\n" not in drawn.rstrip("\n")  # one line: every redraw overwrites the last
    lines = log.getvalue().splitlines()  # only layer-stats and eval steps, no control characters
    assert [line.split()[1] for line in lines] == ["2/4", "4/4"] and "\r" not in log.getvalue()
    assert "eval 1.5000" in lines[1]


def test_progress_bar_of_a_resumed_run_starts_at_its_step_and_notes_go_above_it():
    bar = _Stream(True)
    progress = Progress(4, stream=bar)
    progress.note("resuming")
    progress.update({"step": 3, "loss": 1.0, "lr": 1e-3})
    progress.note("SIGTERM: saved")
    progress.close()  # the loop's end, finished or not: the bar's line is closed
    drawn = bar.getvalue()
    assert drawn.startswith("resuming\n\r 50%|") and "| 2/4 [" in drawn  # steps 1-2 were done before
    assert "\rSIGTERM: saved\n" in drawn and drawn.endswith("\n")
    assert drawn.rstrip("\n").rsplit("\r", 1)[1].startswith(" 75%|") and "3/4" in drawn.rsplit("\r", 1)[1]


def test_progress_writes_to_the_stderr_of_when_it_is_made(monkeypatch):
    """A runner (pytest, a notebook) may replace sys.stderr after depthdelusion was imported and
    close the old stream; the progress lines go to the current one."""
    log = _Stream(False)
    monkeypatch.setattr("sys.stderr", log)
    progress = Progress(2)
    progress.update({"step": 2, "loss": 1.0, "lr": 1e-3, "eval_loss": 1.5})
    assert "2/2" in log.getvalue()
