import argparse
import json
from pathlib import Path

import pytest

from depthdelusion.analysis import commands
from depthdelusion.analysis.report import write_report

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "analysis" / "paper_refit"


def _bootstrap_count_of_committed_report() -> int:
    first = (COMMITTED / "report.md").read_text().split("--bootstrap ")[1]
    return int(first.split()[0])


def test_committed_paper_report_is_up_to_date(tmp_path):
    # Regenerates the text outputs (not the PNGs, whose bytes vary) and compares them byte for byte.
    bootstrap = _bootstrap_count_of_committed_report()
    write_report("paper", tmp_path, bootstrap=bootstrap, seed=0, figures=False, runs_label="paper")
    texts = sorted(p.name for p in COMMITTED.iterdir() if p.suffix in (".md", ".tex", ".csv"))
    assert texts == sorted(p.name for p in tmp_path.iterdir())
    for name in texts:
        assert (tmp_path / name).read_text() == (COMMITTED / name).read_text(), (
            f"{name} is stale: regenerate with the command in analysis/README.md")


def _parser():
    parser = argparse.ArgumentParser(prog="depthdelusion")
    commands.register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_fit_command_prints_json(capsys):
    args = _parser().parse_args(["fit", "paper", "--law", "kaplan", "--bootstrap", "20", "--json"])
    assert args.func(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["law"] == "kaplan" and data["n"] == 30 and data["n_bootstrap"] == 20


def test_fit_command_summary_and_errors(capsys, tmp_path):
    args = _parser().parse_args(["fit", "paper", "--law", "depth_delusion", "--bootstrap", "10",
                                 "--method", "huber", "--group", "baseline"])
    assert args.func(args) == 0
    assert "Huber" in capsys.readouterr().out
    args = _parser().parse_args(["fit", "paper", "--law", "nope"])
    with pytest.raises(ValueError, match="known laws"):
        args.func(args)
    bad = tmp_path / "bad.csv"
    bad.write_text("depth,width\n1,2\n")
    args = _parser().parse_args(["fit", str(bad)])
    with pytest.raises(ValueError, match=r"bad\.csv: no loss column"):
        args.func(args)


def test_report_on_run_directories_includes_persistence(run_factory, tmp_path, capsys):
    import numpy as np

    rng = np.random.default_rng(0)
    for i, (d, w) in enumerate([(d, w) for w in (128, 256, 512) for d in (4, 8, 16, 32)]):
        n = d * 12 * w * w + 2 * 50257 * w
        loss = 1.8 + 30 * n ** -0.15 + 0.05 * max(0.0, d - 2.5 * np.log(w)) + 0.01 * rng.standard_normal()
        run_factory(f"d{d}w{w}", d, w, float(loss), ell=0.6 * w ** 0.44, seed=i)
    out = tmp_path / "rep"
    args = _parser().parse_args(["report", str(tmp_path / "runs"), "--out", str(out), "--bootstrap", "20"])
    assert args.func(args) == 0
    md = (out / "report.md").read_text()
    assert "## Gradient persistence length" in md and "power law" in md
    for name in ("gradient_profiles.png", "persistence_scaling.png", "loss_vs_depth.png", "report.tex",
                 "persistence.csv", "law_comparison.csv"):
        assert (out / name).stat().st_size > 0, name
    assert r"\toprule" in (out / "report.tex").read_text()
    args = _parser().parse_args(["persistence", str(tmp_path / "runs"), "--step", "1000"])
    assert args.func(args) == 0
    assert "ℓ(W)" in capsys.readouterr().out


def test_audit_command(capsys):
    args = _parser().parse_args(["audit", "paper"])
    assert args.func(args) == 0
    assert "56Lx2176" in capsys.readouterr().out
