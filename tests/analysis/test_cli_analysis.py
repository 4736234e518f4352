"""The analysis CLI without the training stack, and `fit` / `laws` on anyone's table."""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from depthdelusion.cli import COMMANDS, main

from .conftest import params_of

ROOT = Path(__file__).resolve().parents[2]
#: Packages the analysis must not need: the training stack, and pandas (optional).
TRAINING_STACK = ("jax", "jaxlib", "flax", "optax", "orbax", "grain", "etils", "tensorboardX",
                  "tiktoken", "array_record", "pandas")

# A fresh interpreter whose import system refuses the blocked packages, then runs the CLI
# (or, with a module name, `python -m MODULE ARGS`) and prints which of them got imported.
RUNNER = """
import runpy, sys
BLOCKED = set(sys.argv[1].split(","))

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"blocked for this test: {name}", name=name)

sys.meta_path.insert(0, Refuse())
module, sys.argv = sys.argv[2], ["depthdelusion", *sys.argv[3:]]
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    code = 0
except SystemExit as exit:
    code = exit.code
print("IMPORTED:", ",".join(sorted(m for m in BLOCKED | {"matplotlib"} if m in sys.modules)))
sys.exit(code)
"""


def run_blocked(args, blocked=TRAINING_STACK, module="depthdelusion"):
    cmd = [sys.executable, "-c", RUNNER, ",".join(blocked), module, *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"})


def shape_table(path: Path, tokens_vary=False) -> Path:
    """16 runs over 4 depths x 4 widths with a planted depth penalty, in nats."""
    rows = []
    rng = np.random.default_rng(0)
    for i, (d, w) in enumerate((d, w) for d in (2, 4, 8, 16) for w in (64, 128, 256, 512)):
        n = params_of(d, w)
        t = 1e9 * (1 + i % 3) if tokens_vary else 1e9
        loss = 1.6 + 40 * n ** -0.2 + 0.05 * max(0.0, d - 1.5 * np.log(w)) + 0.005 * rng.standard_normal()
        rows.append(f"{d},{w},{n},{t:.0f},{loss:.5f}\n")
    path.write_text("depth,width,params,tokens,loss\n" + "".join(rows))
    return path


def test_help_lists_every_command_without_importing_any_command_module_or_scipy():
    out = run_blocked(["--help"], blocked=TRAINING_STACK + ("scipy", "matplotlib"))
    assert out.returncode == 0, out.stderr
    listed = re.findall(r"^    (\S+)", out.stdout, re.M)
    assert listed == [c[0] for c in COMMANDS]
    assert out.stdout.strip().endswith("IMPORTED:")
    # A command's own help imports nothing either (its parser is in depthdelusion.cli).
    out = run_blocked(["fit", "--help"], blocked=TRAINING_STACK + ("scipy", "matplotlib"))
    assert out.returncode == 0, out.stderr
    assert "--grid-points K" in out.stdout and out.stdout.strip().endswith("IMPORTED:")


@pytest.mark.slow  # whole fits and a report in a subprocess
def test_fit_and_report_run_without_the_training_stack_and_report_skips_matplotlib(tmp_path):
    csv = shape_table(tmp_path / "runs.csv")
    out = run_blocked(["fit", str(csv), "--law", "kaplan", "--bootstrap", "20", "--json"])
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout[:out.stdout.rindex("IMPORTED:")])
    assert result["law"] == "kaplan" and result["n_bootstrap"] == 20 and result["r2"] > 0.5
    assert out.stdout.strip().endswith("IMPORTED:")

    # no profile intervals: checked here are the modules a report loads, and the profile's are
    # imported with the fit's own (fitting/uncertainty.py), whether or not a profile is computed
    out = run_blocked(["report", str(csv), "--out", str(tmp_path / "rep"), "--bootstrap", "5",
                       "--profile", "none", "--no-figures"], blocked=TRAINING_STACK + ("matplotlib",))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "rep" / "report.md").exists() and not list((tmp_path / "rep").glob("*.png"))
    assert out.stdout.strip().endswith("IMPORTED:")

    out = run_blocked(["report", "--help"], blocked=TRAINING_STACK + ("matplotlib",))
    assert out.returncode == 0, out.stderr
    assert "--no-figures" in out.stdout and out.stdout.strip().endswith("IMPORTED:")


def test_commands_of_a_missing_stack_or_figures_without_matplotlib_are_clear_errors(tmp_path):
    out = run_blocked(["train", "--out", str(tmp_path / "run")])
    assert out.returncode == 2
    assert "depthdelusion train: error: needs the Python package 'etils', which is not installed; " \
           "install depthdelusion with its dependencies" in out.stderr
    out = run_blocked(["report", "paper", "--out", str(tmp_path / "rep")],
                      blocked=TRAINING_STACK + ("matplotlib",))
    assert out.returncode == 2 and not (tmp_path / "rep").exists()
    assert "the report's figures need matplotlib, which is not installed: pip install matplotlib, " \
           "or pass --no-figures" in out.stderr


def test_fit_without_law_picks_from_the_columns_never_a_depth_law_on_shapeless_data(tmp_path, capsys):
    rng = np.random.default_rng(1)
    N = np.geomspace(1e7, 1e9, 12)
    T = np.geomspace(1e9, 1e11, 12)[rng.permutation(12)]
    loss = 1.7 + 400 * N ** -0.34 + 400 * T ** -0.28 + 0.002 * rng.standard_normal(12)
    path = tmp_path / "nt.csv"
    path.write_text("n_params,n_tokens,val\n" + "".join(f"{a},{b},{c}\n" for a, b, c in zip(N, T, loss)))
    assert main(["fit", str(path), "--columns", "loss=val", "--bootstrap", "0", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["law"] == "chinchilla"
    assert "law: chinchilla (picked from the columns params, tokens, loss: the first of " \
           "depth_delusion, chinchilla, kaplan the table has the columns for; depth_delusion needs " \
           "depth, width; a choice of what to fit, not a verdict that it fits best: compare laws " \
           "with `depthdelusion report`; other laws this table can fit: kaplan, size_kink; choose with --law)" in err

    loss = 1.7 + 400 * N ** -0.34 + 0.002 * rng.standard_normal(12)
    path.write_text("N,loss\n" + "".join(f"{a},{c}\n" for a, c in zip(N, loss)))
    assert main(["fit", str(path), "--bootstrap", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["law"] == "kaplan"

    assert main(["fit", str(path), "--law", "depth_delusion", "--bootstrap", "0"]) == 2
    err = capsys.readouterr().err
    assert "law 'depth_delusion' needs depth (read from: depth, n_layers" in err
    assert "Laws this table can fit: kaplan" in err

    assert main(["fit", str(shape_table(tmp_path / "dw.csv")), "--bootstrap", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["law"] == "depth_delusion"


def nt_table(path, n=20, seed=1):
    rng = np.random.default_rng(seed)
    N = np.geomspace(1e7, 1e9, n)
    T = np.geomspace(1e9, 1e11, n)[rng.permutation(n)]
    loss = 1.7 + 400 * N ** -0.34 + 400 * T ** -0.28 + 0.002 * rng.standard_normal(n)
    path.write_text("params,tokens,loss\n" + "".join(f"{a},{b},{c}\n" for a, b, c in zip(N, T, loss)))
    return path


def test_fit_json_stays_pure_json_and_its_stages_are_plain_lines_on_a_log(tmp_path, capsys):
    """stderr here is a capture, not a terminal: one line per stage of the fit (none per
    bootstrap draw, no bar redraws), and stdout is the JSON alone."""
    assert main(["fit", str(nt_table(tmp_path / "nt.csv")), "--law", "chinchilla",
                 "--bootstrap", "20", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["law"] == "chinchilla"
    lines = [re.sub(r" \(at \d+ s\)$", "", line) for line in err.splitlines() if line.startswith("fit: ")]
    assert lines[0] == "fit: [1/5] chinchilla, 20 rows: search"
    assert [line.split(": ", 2)[-1] for line in lines[1:-1]] == [
        "profile intervals", "bootstrap (20 resamples)", "leave-one-out (refit)", "row diagnostics"]
    assert re.fullmatch(r"fit: done in \d+ s", lines[-1]) and "\r" not in err


def test_report_logs_one_line_per_stage(tmp_path, capsys):
    assert main(["report", str(nt_table(tmp_path / "nt.csv")), "--out", str(tmp_path / "rep"),
                 "--bootstrap", "0", "--no-figures"]) == 0
    out, err = capsys.readouterr()
    lines = [re.sub(r" \(at \d+ s\)$", "", line) for line in err.splitlines() if line.startswith("report: ")]
    assert lines[:2] == ["report: [1/5] fitting kaplan (0 bootstraps)",
                         "report: [2/5] fitting chinchilla (0 bootstraps)"]
    assert lines[2:-1] == ["report: [3/5] penalty and critical-depth tests", "report: [4/5] extrapolation",
                           "report: [5/5] optimal shape, persistence"]
    assert re.fullmatch(r"report: done in \d+ s", lines[-1]) and "report:" not in out


def test_fit_start_options_reach_the_fitter(tmp_path, capsys):
    csv = shape_table(tmp_path / "runs.csv")
    assert main(["fit", str(csv), "--law", "kaplan", "--bootstrap", "0", "--json",
                 "--grid-points", "2", "--starts", "5"]) == 0
    assert json.loads(capsys.readouterr().out)["starts"]["n_starts"] == 5  # 2^3 grid, 5 kept
    assert main(["fit", str(csv), "--law", "kaplan", "--bootstrap", "0", "--json",
                 "--grid-points", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["starts"]["n_starts"] == 8
    with pytest.raises(SystemExit) as exit:
        main(["fit", str(csv), "--law", "kaplan", "--starts", "0"])
    assert exit.value.code == 2
    assert "argument --starts: 0: must be an integer >= 1" in capsys.readouterr().err
    assert main(["fit", str(csv), "--columns", "loss"]) == 2
    assert "'loss' is not NAME=COLUMN" in capsys.readouterr().err


def test_laws_lists_formulas_and_required_columns(capsys):
    assert main(["laws", "--columns"]) == 0
    out = capsys.readouterr().out
    assert "kaplan\n  L = E + A·N^−α\n  parameters: E, A, alpha\n  columns: params,loss\n" in out
    assert "chinchilla\n" in out and "columns: params,tokens,loss\n" in out
    assert "columns: depth,width,params,loss  (+ tokens when they vary" in out
    assert "params     parameter count N" in out and "D          tokens when C ≈ 6·N·D" in out
    assert "compute    training compute in FLOPs (about 6·N·tokens); aliases: C, flops, FLOPs, budget_flops" in out


# ---- nothing lost: where a command writes is checked first, and never over its input ----------

def exit_code(argv, capsys) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the CLI in this process; argparse's exit included."""
    try:
        code = main(argv)
    except SystemExit as exit:
        code = exit.code
    out = capsys.readouterr()
    return code, out.out, out.err


def a_file(tmp_path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("not a directory\n")
    return path


@pytest.mark.parametrize("command", [["fit"], ["report", "--no-figures"], ["isoflop"]])
@pytest.mark.parametrize("kind", ["under a file", "a file"])
def test_an_out_that_cannot_be_a_directory_is_refused_before_any_work(tmp_path, capsys, command, kind):
    table = shape_table(tmp_path / "runs.csv", tokens_vary=True)
    out = str(a_file(tmp_path) / "sub") if kind == "under a file" else str(a_file(tmp_path))
    code, stdout, stderr = exit_code([command[0], str(table), "--out", out, *command[1:]], capsys)
    assert code == 2 and stdout == ""
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "--out" in stderr and out in stderr and "is a file, not a directory" in stderr
    assert "law:" not in stderr  # refused before the law was even picked


def test_an_empty_out_is_refused_before_any_work(tmp_path, capsys):
    table = shape_table(tmp_path / "runs.csv")
    code, _, stderr = exit_code(["fit", str(table), "--out", ""], capsys)
    assert code == 2 and "--out" in stderr and "an empty path" in stderr


@pytest.mark.skipif(not Path("/proc/sys").is_dir(), reason="needs /proc/sys (Linux), where no file can be made")
@pytest.mark.parametrize("out", ["/proc/sys/depthdelusion_fit", "/proc/depthdelusion_fit"])
def test_an_out_under_a_read_only_directory_is_refused(tmp_path, capsys, out):
    """Refused at parse time, before the fit, for root as well (whom os.access lets write
    anywhere): making a file there is tried."""
    table = shape_table(tmp_path / "runs.csv")
    code, stdout, stderr = exit_code(["fit", str(table), "--out", out], capsys)
    assert code == 2 and stdout == "" and len(stderr.strip().splitlines()) == 1
    assert f"--out: cannot create {out}: {Path(out).parent} is not writable" in stderr


@pytest.mark.slow  # a report in a subprocess, interrupted
def test_ctrl_c_during_a_report_is_one_line_exit_130_and_leaves_no_folder(tmp_path):
    """A real SIGINT to `report` while it fits: exit 130, one line and no traceback on stderr,
    and neither the output folder nor a partial one is left."""
    import os
    import signal
    import time

    table = shape_table(tmp_path / "runs.csv", tokens_vary=True)
    out = tmp_path / "new" / "report"
    proc = subprocess.Popen([sys.executable, "-m", "depthdelusion", "report", str(table), "--out", str(out),
                             "--no-figures", "--bootstrap", "50"], cwd=ROOT, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            # a suite started in the background inherits SIGINT ignored, and Python
                            # then installs no KeyboardInterrupt: give the child a terminal's default
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    for line in proc.stderr:  # the fits have started: interrupt them
        lines.append(line)
        if "fitting" in line:
            break
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 130, "".join(lines) + rest
    said = [line for line in rest.splitlines() if line.strip() and not line.startswith("report: [")]
    assert said == ["depthdelusion report: interrupted (Ctrl-C)"], rest  # beside any stage's line
    assert list(tmp_path.iterdir()) == [table]  # no report folder, no partial one, no new/


def test_runs_export_refuses_a_csv_path_under_a_file(tmp_path, capsys):
    target = str(a_file(tmp_path) / "runs.csv")
    code, _, stderr = exit_code(["runs", "export", str(tmp_path), "--csv", target], capsys)
    assert code == 2 and "--csv" in stderr and target in stderr
    assert "is a file, not a directory" in stderr


def test_fit_refuses_to_write_its_rows_over_its_own_input(tmp_path, capsys):
    table = shape_table(tmp_path / "rows.csv")
    before = table.read_text()
    code, _, stderr = exit_code(["fit", str(table), "--out", str(tmp_path), "--bootstrap", "0"], capsys)
    assert code == 2
    assert "--out" in stderr and "would overwrite the input" in stderr and str(table) in stderr
    assert table.read_text() == before


@pytest.mark.parametrize("flag", ["--table", "--pool"])
def test_fit_refuses_to_write_over_a_local_copy_named_by_table_or_pool(tmp_path, capsys, flag):
    copy = tmp_path / "rows.csv"  # a local copy of a published table, where --out writes rows.csv
    copy.write_text("kept\n")
    args = [str(shape_table(tmp_path / "ours.csv"))] if flag == "--pool" else []
    code, _, stderr = exit_code(["fit", *args, flag, f"gemstones={copy}", "--out", str(tmp_path)], capsys)
    assert code == 2 and "would overwrite the input" in stderr and str(copy) in stderr
    assert copy.read_text() == "kept\n"


def test_report_refuses_only_the_files_it_writes_and_the_list_names_every_table(tmp_path, capsys):
    from depthdelusion import analysis
    from depthdelusion.analysis.commands import REPORT_TABLES

    made = set(re.findall(r'Table\("([a-z_]+)"', "".join(
        p.read_text() for p in Path(analysis.__file__).parent.rglob("*.py"))))
    assert made == set(REPORT_TABLES)
    clash = shape_table(tmp_path / "parameters.csv")  # a table the report writes under that name
    code, _, stderr = exit_code(["report", str(clash), "--out", str(tmp_path), "--bootstrap", "0",
                                 "--no-figures"], capsys)
    assert code == 2 and "would overwrite the input" in stderr
    (tmp_path / "sweep" / "a" / "b").mkdir(parents=True)
    deep = shape_table(tmp_path / "sweep" / "a" / "b" / "report.md")  # not where the report writes
    kept = shape_table(tmp_path / "sweep" / "runs.csv")  # in --out, but no file of the report's
    from depthdelusion.outputs import refuse_own_inputs
    from depthdelusion.analysis.commands import REPORT_FILES

    refuse_own_inputs("--out", str(tmp_path / "sweep"), REPORT_FILES, [str(deep), str(kept)])


def test_runs_export_refuses_to_write_over_its_source(tmp_path, capsys):
    table = shape_table(tmp_path / "runs.csv")
    code, _, stderr = exit_code(["runs", "export", str(table), "--csv", str(table)], capsys)
    assert code == 2 and "--csv" in stderr and "is the input" in stderr


def test_rollout_without_out_is_printed_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    table = shape_table(tmp_path / "runs.csv", tokens_vary=True)
    here = tmp_path / "cwd"
    here.mkdir()
    (here / "rollout.csv").write_text("mine\n")
    monkeypatch.chdir(here)
    code, stdout, _ = exit_code(["fit", str(table), "--law", "chinchilla", "--bootstrap", "0",
                                 "--validate", "rollout"], capsys)
    assert code == 0 and "Rollout validation" in stdout
    assert sorted(p.name for p in here.iterdir()) == ["rollout.csv"]
    assert (here / "rollout.csv").read_text() == "mine\n"


def test_rollout_with_json_is_inside_the_json_with_its_errors_and_summary(tmp_path, capsys):
    table = shape_table(tmp_path / "runs.csv", tokens_vary=True)
    code, stdout, stderr = exit_code(["fit", str(table), "--law", "chinchilla", "--bootstrap", "0",
                                      "--validate", "rollout", "--json"], capsys)
    assert code == 0
    doc = json.loads(stdout)  # stdout is pure JSON
    rollout = doc["rollout"]
    assert "Rollout validation" not in stderr
    fitted = [s for s in rollout["steps"] if s["errors"]]
    assert fitted, rollout
    for step in fitted:
        assert len(step["errors"]) == step["runs_predicted"]
        assert step["max_abs_error"] == pytest.approx(max(abs(e) for e in step["errors"]), rel=1e-3)
    every = [e for s in fitted for e in s["errors"]]
    assert rollout["summary"]["runs_predicted"] == len(every)
    assert rollout["summary"]["rmse"] == pytest.approx(np.sqrt(np.mean(np.square(every))), rel=1e-3)


# ---- errors name the flag and what is valid ------------------------------------------------------

@pytest.mark.parametrize("argv, flag, valid", [
    (["fit", "--bootstrap", "-5"], "--bootstrap", "an integer >= 0"),
    (["fit", "--seed", "-1"], "--seed", "an integer >= 0"),
    (["fit", "--starts", "0"], "--starts", "an integer >= 1"),
    (["fit", "--grid-points", "0"], "--grid-points", "an integer >= 1"),
    (["fit", "--outlier-threshold", "0"], "--outlier-threshold", "a number > 0"),
    (["fit", "--loss", "asymmetric", "--overestimate-weight", "-1"], "--overestimate-weight", "a number > 0"),
    (["fit", "--bootstrap", "many"], "--bootstrap", "an integer >= 0"),
    (["report", "--out", "OUT", "--bootstrap", "-1"], "--bootstrap", "an integer >= 0"),
    (["report", "--out", "OUT", "--step", "-1"], "--step", "an integer >= 0"),
    (["isoflop", "--replicates", "0"], "--replicates", "an integer >= 1"),
    (["isoflop", "--tolerance", "-0.1"], "--tolerance", "a number >= 0"),
    (["isoflop", "--seed", "-3"], "--seed", "an integer >= 0"),
])
def test_a_bad_number_is_refused_naming_the_flag_and_its_range(tmp_path, capsys, argv, flag, valid):
    table = shape_table(tmp_path / "runs.csv")
    argv = [a.replace("OUT", str(tmp_path / "out")) for a in argv]
    code, stdout, stderr = exit_code([argv[0], str(table), *argv[1:]], capsys)
    assert code == 2 and stdout == ""
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert f"argument {flag}:" in stderr and valid in stderr


def test_by_an_unknown_column_names_by_and_lists_the_columns(tmp_path, capsys):
    table = shape_table(tmp_path / "runs.csv")
    code, _, stderr = exit_code(["fit", str(table), "--bootstrap", "0", "--by", "nosuch"], capsys)
    assert code == 2
    assert "--by: no column 'nosuch'" in stderr and "--where" not in stderr
    assert "depth, width, params, tokens, loss" in stderr


@pytest.mark.parametrize("name", ["fit", "report", "isoflop"])
def test_every_analysis_command_names_its_objective_loss(name):
    """One name for the fit's objective: --loss in fit, report and isoflop (default ls)."""
    from depthdelusion.cli import command

    args = ["--out", "o"] if name == "report" else []
    assert command([name, "paper", *args])[1].keywords["options"].loss == "ls"
    assert command([name, "paper", *args, "--loss", "huber"])[1].keywords["options"].loss == "huber"


@pytest.mark.parametrize("name", ["fit", "report"])
def test_the_older_method_spelling_is_the_loss_and_says_so(name, capsys):
    from depthdelusion.cli import command

    args = ["--out", "o"] if name == "report" else []
    run = command([name, "paper", *args, "--method", "lm"])[1]
    assert run.keywords["options"].loss == "ls" and "method" not in run.keywords
    assert "--method lm is deprecated; it is --loss ls" in capsys.readouterr().err
    assert command([name, "paper", *args, "--method", "huber"])[1].keywords["options"].loss == "huber"
    with pytest.raises(SystemExit):  # one or the other
        command([name, "paper", *args, "--method", "lm", "--loss", "huber"])


def test_a_fit_command_gets_its_options_whole_and_each_default_once():
    """fit, report and isoflop each get one FitOptions and one RowOptions built from the command
    line; an option left out keeps the one default in depthdelusion.analysis.fitting.options."""
    from depthdelusion.analysis.fitting.options import BOOTSTRAP, FitOptions, RowOptions
    from depthdelusion.cli import command

    run = command(["fit", "paper", "--bootstrap", "7", "--where", "N >= 1e8", "--by", "group"])[1]
    assert run.keywords["options"] == FitOptions(bootstrap=7)
    assert run.keywords["rows"] == RowOptions(where="N >= 1e8", by="group")
    report = command(["report", "paper", "--out", "o", "--loss", "huber", "--seed", "3"])[1]
    assert report.keywords["options"] == FitOptions(loss="huber", seed=3, bootstrap=BOOTSTRAP)
    assert not {"bootstrap", "seed", "loss", "where", "by", "group"} & set(report.keywords)
