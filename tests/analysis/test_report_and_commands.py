import json
from pathlib import Path

import pytest

from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.analysis.report.build import write_report
from depthdelusion.analysis.report.options import ReportOptions
from depthdelusion.cli import command
from text_compare import text_differences

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "analysis" / "paper_refit"


def _bootstrap_count_of_committed_report() -> int:
    first = (COMMITTED / "report.md").read_text().split("--bootstrap ")[1]
    return int(first.split()[0])


def test_text_comparison_tolerates_last_digits_only():
    assert not text_differences("κ = 2.31 [1.9, 2.8]", "κ = 2.32 [1.9, 2.8]")
    assert not text_differences("E = 1.234e+05", "E = 1.236e+05")
    assert text_differences("κ = 2.31", "κ = 2.41")
    assert text_differences("Yes: κ = 2.31", "No: κ = 2.31")
    assert text_differences("a\nb", "a")
    table = "| law | CI (bootstrap) | CI (profile) |\n|---|---|---|\n| k | [17, 613] | [19.7, 267] |"
    assert not text_differences(table, table.replace("613", "564"))
    assert text_differences(table, table.replace("267", "227"))
    assert not text_differences(table, table.replace("19.7", "18.8"))  # a profile end, within 10%
    cell = "| law | α |\n|---|---|\n| k | 0.1266 [0.0912, 0.322] |"
    assert not text_differences(cell, cell.replace("0.0912", "0.0869"))
    assert text_differences(cell, cell.replace("0.1266", "0.1300"))  # the estimate: 1%
    line = "D* ∝ N^0.06 [0.06, 0.12] (95% intervals over 1000 bootstrap draws)"
    assert not text_differences(line, line.replace("0.12]", "0.14]"))
    assert text_differences(line, line.replace("N^0.06", "N^0.10"))
    assert not text_differences("law,CI (bootstrap)\nk,\"[17, 613]\"", "law,CI (bootstrap)\nk,\"[17, 564]\"",
                                csv_file=True)


@pytest.mark.slow  # the whole paper report with 1000 bootstrap refits per law: minutes of CPU
def test_committed_paper_report_is_up_to_date(tmp_path):
    # Regenerates the text outputs (not the PNGs, whose bytes vary) and compares them with the
    # tolerances above.
    bootstrap = _bootstrap_count_of_committed_report()
    write_report("paper", tmp_path, ReportOptions(fit=FitOptions(bootstrap=bootstrap, seed=0), runs_label="paper"), figures=False)
    texts = sorted(p.name for p in COMMITTED.iterdir() if p.suffix in (".md", ".tex", ".csv"))
    assert texts == sorted(p.name for p in tmp_path.iterdir())
    for name in texts:
        if name == "numerics.md":  # machine-dependent by design (its opening says why): its sections
            headings = [[line for line in (d / name).read_text().splitlines() if line.startswith("#")]
                        for d in (COMMITTED, tmp_path)]
            assert headings[0] == headings[1]
            continue
        diffs = text_differences((COMMITTED / name).read_text(), (tmp_path / name).read_text(),
                                 csv_file=name.endswith(".csv"))
        assert not diffs, (f"{name} is stale (regenerate with the command in its report.md):\n"
                           + "\n".join(diffs[:10]))


def _command(argv):
    """The command's function bound to its parsed arguments (errors raise, not exit 2)."""
    return command(argv)[1]


def test_fit_command_prints_json(capsys):
    run = _command(["fit", "paper", "--law", "kaplan", "--bootstrap", "20", "--json"])
    assert run() == 0
    data = json.loads(capsys.readouterr().out)
    assert data["law"] == "kaplan" and data["n"] == 30 and data["n_bootstrap"] == 20


def test_fit_command_summary_and_errors(capsys, tmp_path):
    # no profile: the summary of a Huber fit of one group is checked here, not its intervals
    run = _command(["fit", "paper", "--law", "depth_delusion", "--bootstrap", "10", "--profile", "none",
                                 "--loss", "huber", "--group", "baseline"])
    assert run() == 0
    assert "Huber" in capsys.readouterr().out
    run = _command(["fit", "paper", "--law", "nope"])
    with pytest.raises(ValueError, match="known laws"):
        run()
    bad = tmp_path / "bad.csv"
    bad.write_text("depth,width\n1,2\n")
    run = _command(["fit", str(bad)])
    with pytest.raises(ValueError, match=r"bad\.csv: no loss column"):
        run()


@pytest.mark.slow  # trains runs for a whole report
def test_report_on_run_directories_includes_persistence(run_factory, tmp_path, capsys):
    import numpy as np

    rng = np.random.default_rng(0)
    for i, (d, w) in enumerate([(d, w) for w in (128, 256, 512) for d in (4, 8, 16, 32)]):
        n = d * 12 * w * w + 2 * 50257 * w
        loss = 1.8 + 30 * n ** -0.15 + 0.05 * max(0.0, d - 2.5 * np.log(w)) + 0.01 * rng.standard_normal()
        run_factory(f"d{d}w{w}", d, w, float(loss), ell=0.6 * w ** 0.44, seed=i)
    out = tmp_path / "rep"
    # no profiles: the persistence section and the files are checked, not the laws' intervals
    run = _command(["report", str(tmp_path / "runs"), "--out", str(out), "--bootstrap", "20", "--profile", "none"])
    assert run() == 0
    md = (out / "report.md").read_text()
    assert "## Gradient persistence length" in md and "power law" in md
    for name in ("gradient_profiles.png", "persistence_scaling.png", "loss_vs_depth.png", "report.tex",
                 "persistence.csv", "law_comparison.csv"):
        assert (out / name).stat().st_size > 0, name
    assert r"\toprule" in (out / "report.tex").read_text()
    run = _command(["persistence", str(tmp_path / "runs"), "--step", "1000"])
    assert run() == 0
    assert "ℓ(W)" in capsys.readouterr().out


def test_audit_command(capsys):
    run = _command(["audit", "paper"])
    assert run() == 0
    assert "56Lx2176" in capsys.readouterr().out


def test_report_on_a_table_without_shapes_skips_the_laws_that_need_them(tmp_path):
    # A (params, tokens, loss) table from another codebase: the depth laws need depth and width,
    # so the report skips them, says why, and fits the shape-agnostic laws it can.
    import numpy as np

    rng = np.random.default_rng(0)
    rows = ["params,tokens,loss"]
    for n in np.geomspace(1e6, 1e9, 6):
        for t in np.geomspace(1e8, 1e10, 4):
            loss = 1.7 + 400 * n ** -0.34 + 410 * t ** -0.28 + 0.01 * rng.standard_normal()
            rows.append(f"{n:.0f},{t:.0f},{loss}")
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    report = write_report(tmp_path / "runs.csv", tmp_path / "rep", ReportOptions(fit=FitOptions(bootstrap=0)), figures=True)
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "depth_delusion not fitted: the law needs the column(s) depth, width" in md
    assert set(report.fits) == {"kaplan", "chinchilla"}
    assert "loss_vs_depth" not in md and (tmp_path / "rep" / "residuals.png").exists()


@pytest.mark.slow  # trains runs for a whole report
def test_opening_paragraph_follows_the_title_when_persistence_fits_warn(run_factory, tmp_path):
    """The "In short" paragraph goes right after the fit-invalidating warnings (none here), even
    when the persistence section has warnings of its own (one logged step in the window)."""
    import numpy as np

    from depthdelusion.analysis.report.build import build_report

    rng = np.random.default_rng(0)
    for i, (d, w) in enumerate([(d, w) for w in (128, 256, 512) for d in (4, 8, 16)]):
        n = d * 12 * w * w + 2 * 50257 * w
        loss = 1.8 + 30 * n ** -0.15 + 0.01 * rng.standard_normal()
        run_factory(f"d{d}w{w}", d, w, float(loss), ell=0.6 * w ** 0.44, act_ell=0.5 * w ** 0.44,
                    seed=i, steps=(0, 1000))
    # the report's structure, not its intervals: no profile likelihoods or leave-one-out refits
    _, md, _ = build_report(str(tmp_path / "runs"), ReportOptions(
        fit=FitOptions(bootstrap=5, leave_one_out=False, profile=False), step=1000, design=False))
    lines = md.split("\n")
    assert "warning: only 1 logged step(s)" in md  # the persistence section warns ...
    assert not any(line.startswith("WARNING") for line in lines)  # ... no fit is invalidated
    assert lines[0] == "# Scaling-law analysis report" and lines[1] == ""
    assert lines[2].startswith("In short: 9 runs"), lines[:6]
