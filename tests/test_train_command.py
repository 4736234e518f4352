"""`depthdelusion train` end to end on the built-in data: files, fields, a falling loss."""
import json
import subprocess
import sys

import pytest
import yaml

from depthdelusion.cli import main

TINY = ["--set", "model.depth=2", "--set", "model.width=64", "--set", "model.head_dim=16",
        "--set", "model.seq_len=64", "--set", "train.batch_size=8", "--set", "train.steps=40",
        "--set", "train.warmup_steps=5", "--set", "train.lr=3e-3", "--set", "train.layer_stats_every=10"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "tiny"
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
    assert stats[-1]["mfu"] is None  # CPU: no peak FLOP/s to divide by
    assert records[-1]["loss"] < records[0]["loss"] - 1.0


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
