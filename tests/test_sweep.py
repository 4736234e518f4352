"""Experiment grids and the sweep runner: expansion, budgets, idempotence, failures, runs.csv."""
import csv
import json
import math
import re
from pathlib import Path

import pytest

from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.model_size import count_params
from depthdelusion.rundir import ConfigChanged
from depthdelusion.sweep import load_grid, run_sweep, select, steps_for_budget
from depthdelusion.train.loop import train

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
PAPER = ROOT / "depthdelusion" / "analysis" / "reference" / "depth_delusion_runs.csv"


def paper_shapes(group):
    with open(PAPER) as fh:
        return {(int(r["depth"]), int(r["width"])) for r in csv.DictReader(fh) if r["group"] == group}


def test_smoke_grid_has_enough_runs_for_every_default_law_and_three_widths_for_persistence():
    from depthdelusion.analysis.laws import get_law
    from depthdelusion.analysis.report.build import DEFAULT_LAWS

    grid = load_grid(EXPERIMENTS / "smoke.yaml")
    k_max = max(len(get_law(name).param_names) - len(get_law(name).token_params) for name in DEFAULT_LAWS)
    assert len(grid.runs) > k_max + 1  # the fitter's minimum: more than k + 1 runs
    deep = {cfg.model.width for _, cfg in grid.runs if cfg.model.depth >= 4}
    assert len(deep) >= 3  # ℓ needs depth >= 3; ℓ(W) needs several widths
    for _, cfg in grid.runs:
        assert cfg.data.path is None and cfg.data.tokenizer == "bytes"
        # the persistence window at the end of training holds several logged steps
        assert cfg.train.steps // cfg.train.layer_stats_every >= 10


def test_smoke_yaml_says_what_the_report_concludes_of_its_kink_laws():
    """Every default kink law is fitted to the 9 runs, but each has too many parameters for a
    penalty test on 9 (verdict.MIN_RESIDUAL_DF), so the report calls it uninformative: the
    YAML's own description says so rather than promising a test."""
    from depthdelusion.analysis.laws import get_law
    from depthdelusion.analysis.report.build import DEFAULT_LAWS
    from depthdelusion.analysis.report.verdict import MIN_RESIDUAL_DF

    n = len(load_grid(EXPERIMENTS / "smoke.yaml").runs)
    kinks = [get_law(name) for name in DEFAULT_LAWS if get_law(name).penalty]
    big_k = [len(law.param_names) - len(law.token_params) + 1 for law in kinks]
    assert kinks and all(n - k - 1 <= MIN_RESIDUAL_DF for k in big_k)
    said = " ".join(line.lstrip("# ") for line in (EXPERIMENTS / "smoke.yaml").read_text().splitlines()
                    if line.startswith("#"))
    assert "every kink law's test uninformative" in said
    assert f"at least {min(big_k) + MIN_RESIDUAL_DF + 2} runs" in said


def test_tiny_grid_is_six_tiny_shapes_on_builtin_data():
    grid = load_grid(EXPERIMENTS / "tiny.yaml")
    names = [n for n, _ in grid.runs]
    assert names == ["d1_w32", "d1_w64", "d2_w32", "d2_w64", "d4_w32", "d4_w64"]
    for _, cfg in grid.runs:
        assert cfg.data.path is None and cfg.model.seq_len == 128 and cfg.train.batch_size == 8
        assert cfg.train.steps == 307200 // (8 * 128)


def test_paper_baseline_grid_is_the_papers_18_runs_with_its_recipe():
    grid = load_grid(EXPERIMENTS / "paper_baseline.yaml")
    shapes = {(c.model.depth, c.model.width) for _, c in grid.runs}
    assert len(grid.runs) == 18 and shapes == paper_shapes("baseline")
    for name, cfg in grid.runs:
        assert name == f"d{cfg.model.depth}_w{cfg.model.width}"
        assert (cfg.train.batch_size, cfg.model.seq_len, cfg.model.vocab_size) == (256, 1024, 50257)
        assert (cfg.train.lr, cfg.train.warmup_steps, cfg.train.weight_decay, cfg.train.grad_clip) == (3e-4, 2000, 0.1, 1.0)
        assert cfg.train.steps == math.ceil(6.4e9 / (256 * 1024))
    assert grid.topology == "v4-32"


@pytest.mark.parametrize("grid_name", ["paper_baseline", "paper_large"])
def test_paper_grids_use_the_remat_their_committed_tpu_plan_chose(grid_name):
    """docs/tpu_plans_*.md come from compiling each run for the grid's TPU slice; a run whose
    plan needed remat to fit must not be launched without it."""
    table = (ROOT / "docs" / f"tpu_plans_{grid_name.split('_')[1]}.md").read_text()
    planned = dict(re.findall(r"^\| (d\d+_w\d+) \|(?:[^|]*\|){5} (\w+) \|", table, re.M))
    assert "In progress" not in table and "| NO |" not in table
    grid = load_grid(EXPERIMENTS / f"{grid_name}.yaml")
    assert {name: cfg.model.remat for name, cfg in grid.runs} == planned


def test_paper_large_grid_is_the_12_large_runs_with_remat():
    grid = load_grid(EXPERIMENTS / "paper_large.yaml")
    assert {(c.model.depth, c.model.width) for _, c in grid.runs} == paper_shapes("large_scale")
    assert all(c.model.remat == "full" for _, c in grid.runs) and grid.topology == "v6e-64"
    for _, cfg in grid.runs:  # 20 tokens per exact parameter
        assert cfg.train.steps == math.ceil(20 * count_params(cfg.model) / (256 * 1024))


def write(tmp_path, text, name="grid.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


GRID = """
name: t
tokens_per_param: 2
fixed:
  model: {head_dim: 8, seq_len: 16}
  train: {batch_size: 4}
grid:
  model.depth: [1, 2]
  model.width: [16]
runs:
  - {model: {depth: 3, width: 32}}
overrides:
  d2_w16: {train.lr: 0.01}
"""


def test_grid_axes_explicit_runs_overrides_and_budget(tmp_path):
    grid = load_grid(write(tmp_path, GRID), ["train.seed=7"])
    runs = dict(grid.runs)
    assert list(runs) == ["d1_w16", "d2_w16", "d3_w32"]
    assert runs["d2_w16"].train.lr == 0.01 and runs["d1_w16"].train.lr == 3e-4
    assert all(c.train.seed == 7 for c in runs.values())
    cfg = runs["d3_w32"]
    expected = math.ceil(2 * count_params(type(cfg.model)(**{**cfg.model.__dict__, "vocab_size": 257})) / 64)
    assert cfg.train.steps == expected == steps_for_budget(cfg, None, 2)
    assert [n for n, _ in select(grid.runs, "d*_w16")] == ["d1_w16", "d2_w16"]
    with pytest.raises(ValueError, match="matches no run"):
        select(grid.runs, "d9_*")


@pytest.mark.parametrize("text, message", [
    ("grid: {model.depth: [1]}\nbogus: 1\n", "unknown key.*bogus"),
    ("grid: {model.depth: [1]}\ntokens: 10\ntokens_per_param: 2\n", "either tokens or tokens_per_param"),
    ("grid: {model.depth: [1]}\ntokens: -5\n", "tokens=-5"),
    ("grid: {model.depht: [1]}\n", "unknown config field 'model.depht'"),
    ("grid: {model.width: [100]}\n", "run d16_w100: model.width=100 is not divisible"),
    ("grid: {model.vocab_size: [100]}\n", "run d16_w512: model.vocab_size=100 is smaller than the bytes "
     "tokenizer's vocabulary \\(257\\)"),
    ("grid: {model.depth: [1]}\noverrides: {d7_w1: {train.lr: 1}}\n", "overrides for unknown run.*d7_w1"),
    ("grid: {train.lr: [0.1, 0.2]}\n", "both named 'd16_w512'"),
    ("name: x\n", "no runs"),
])
def test_bad_grids_name_the_file_and_field(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ValueError, match=message) as info:
        load_grid(path)
    assert str(path) in str(info.value)


TINY = """
name: tiny
tokens: 5120  # 20 steps of 8 x 32 tokens
fixed:
  model: {head_dim: 8, seq_len: 32}
  data: {builtin_documents: 200}
  train: {batch_size: 8, warmup_steps: 2, log_every: 1, layer_stats_every: 10, eval_batches: 1}
runs:
  - {model.depth: 1, model.width: 16}
  - {model.depth: 2, model.width: 16}
  - {model.depth: 1, model.width: 8, data.path: /nonexistent/depthdelusion-data}  # train() raises
"""


def test_sweep_trains_records_failures_and_skips_finished_runs(tmp_path):
    grid = load_grid(write(tmp_path, TINY))
    out = tmp_path / "sweep"
    calls = []

    def spy(cfg, run_dir):
        calls.append(str(run_dir))
        return train(cfg, run_dir)

    rows = run_sweep(grid, out, train_fn=spy, fit=FitOptions(bootstrap=0), log=lambda _: None)
    assert [r["status"] for r in rows] == ["finished", "finished", "failed"]
    assert "matches no files" in rows[2]["error"] and (out / "d1_w8" / "error.txt").exists()
    with open(out / "runs.csv") as fh:
        table = list(csv.DictReader(fh))
    assert [r["name"] for r in table] == ["d1_w16", "d2_w16", "d1_w8"]
    for row, name in zip(table[:2], ["d1_w16", "d2_w16"]):
        summary = json.loads((out / name / "summary.json").read_text())
        assert float(row["final_loss"]) == pytest.approx(summary["final_loss"])
        assert int(row["params"]) == summary["params"] and int(row["tokens"]) == 5120
    assert table[2]["status"] == "failed" and "matches no files" in table[2]["error"]
    # Too few finished runs for the laws: the report says so instead of crashing.
    assert "No fit" in (out / "report" / "report.md").read_text()

    # Second pass: the finished runs are skipped; only the failed one is tried again.
    calls.clear()
    mtime = (out / "d1_w16" / "summary.json").stat().st_mtime_ns
    rows = run_sweep(grid, out, train_fn=spy, report=False, log=lambda _: None)
    assert calls == [str(out / "d1_w8")]
    assert (out / "d1_w16" / "summary.json").stat().st_mtime_ns == mtime
    assert [r["status"] for r in rows] == ["finished", "finished", "failed"]

    # The grid changed in a field that changes the numbers: refused before anything is trained.
    calls.clear()
    changed = load_grid(write(tmp_path, TINY), ["train.lr=0.01"])
    with pytest.raises(ConfigChanged, match=r"d1_w16 holds a finished run .*train\.lr: 0\.0003 -> 0\.01.*new --out"):
        run_sweep(changed, out, train_fn=spy, report=False, log=lambda _: None)
    assert calls == []


def test_the_sweep_ends_with_the_reports_in_short_answer_and_its_path(tmp_path, capsys):
    """The smoke grid's 9 shapes, each run directory written as a finished run would be (no
    training: losses and per-layer gradient norms from analysis/conftest.write_run, logged
    every 10 of 300 steps as the smoke grid logs them); the sweep's last two lines are the
    report's "In short" paragraph, as report.md states it, then report.md's path."""
    grid = load_grid(EXPERIMENTS / "smoke.yaml")
    logs = []
    out = tmp_path / "sweep"
    # no intervals: the sweep's last lines and progress are checked here, not what a profile adds
    run_sweep(grid, out, train_fn=_finished_run, fit=FitOptions(bootstrap=0, profile="none"), log=logs.append)
    *_, table_line, answer, where = logs
    assert table_line == f"9 of 9 run(s) finished; table: {out / 'runs.csv'}"
    assert answer.startswith("In short: 9 runs (depth 2–8 × width 16–64)")
    assert "\n" not in answer and answer in (out / "report" / "report.md").read_text()
    assert where == f"report: {out / 'report' / 'report.md'}"
    # the analysis phase's progress: a line per stage on stderr (not a terminal here)
    err = capsys.readouterr().err
    assert re.search(r"^report: \[1/\d+\] fitting depth_delusion \(0 bootstraps\) \(at \d+ s\)$", err, re.M)
    assert re.search(r"^report: done in \d+ s$", err, re.M)


def _finished_run(cfg, run_dir):
    """A smoke-grid run directory as a finished run writes it (no training)."""
    from analysis.conftest import write_run

    d, w = cfg.model.depth, cfg.model.width
    loss = 1.5 + 8.0 / w ** 0.5 + 0.4 / d + 0.01 * (d % 3)
    write_run(run_dir.parent, run_dir.name, d, w, loss, tokens=153600, ell=2.0,
              steps=tuple(range(0, 301, 10)), seed=d * w)
    return json.loads((run_dir / "summary.json").read_text())


@pytest.mark.subprocess
def test_the_closing_report_is_the_same_from_two_worker_processes(tmp_path, monkeypatch):
    from depthdelusion.analysis.report import results

    counts, real = [], results.worker_count

    def counted(*args):
        counts.append(real(*args))
        return counts[-1]

    monkeypatch.setattr(results, "worker_count", counted)
    grid, out, bare = load_grid(EXPERIMENTS / "smoke.yaml"), tmp_path / "sweep", FitOptions(bootstrap=0, profile="none")
    run_sweep(grid, out, train_fn=_finished_run, fit=bare, log=lambda _: None)
    one_process = (out / "report" / "report.md").read_bytes()
    run_sweep(grid, out, train_fn=_finished_run, fit=bare, report_workers=2, log=lambda _: None)
    assert counts == [1, 2]  # from Python one process unless asked; then the units went to two
    assert (out / "report" / "report.md").read_bytes() == one_process


def test_sweep_report_workers_reach_the_sweep(tmp_path, monkeypatch):
    """`sweep --report-workers N` hands N to run_sweep; without it, None: the report's default."""
    import depthdelusion.sweep
    from depthdelusion.cli import main

    seen = []
    monkeypatch.setattr(depthdelusion.sweep, "run_sweep", lambda *a, **kw: seen.append(kw["report_workers"]) or [])
    for extra in (["--report-workers", "2"], []):
        assert main(["sweep", str(EXPERIMENTS / "tiny.yaml"), "--out", str(tmp_path / "s"), *extra]) == 0
    assert seen == [2, None]


def test_unfinished_run_dir_is_handed_back_to_train_for_resuming(tmp_path):
    grid = load_grid(write(tmp_path, TINY))
    out = tmp_path / "sweep"
    (out / "d2_w16").mkdir(parents=True)
    (out / "d2_w16" / "metrics.jsonl").write_text('{"step": 1, "loss": 5.0}\n')
    (out / "d1_w16").mkdir()
    (out / "d1_w16" / "summary.json").write_text(json.dumps({"status": "finished", "final_loss": 3.0}))
    seen = []

    def contract(cfg, run_dir):  # train(cfg, out) resumes a directory that already holds a run
        seen.append((run_dir.name, (run_dir / "metrics.jsonl").exists()))
        return {"status": "finished", "final_loss": 2.5, "params": 1, "tokens": 5120}

    logs = []
    rows = run_sweep(grid, out, only="d1_w16,d2_w16", train_fn=contract, report=False, log=logs.append)
    assert seen == [("d2_w16", True)]
    assert any("d2_w16: resuming" in line for line in logs)
    assert [(r["name"], r["status"], r["final_loss"]) for r in rows] == [
        ("d1_w16", "finished", 3.0), ("d2_w16", "finished", 2.5)]


def test_dry_run_lists_runs_and_touches_nothing(tmp_path):
    grid = load_grid(write(tmp_path, TINY))
    rows = run_sweep(grid, tmp_path / "none", dry_run=True, log=lambda _: None)
    assert [r["status"] for r in rows] == ["planned"] * 3
    assert not (tmp_path / "none").exists()


def test_runs_that_differ_in_seed_lr_warmup_or_length_share_one_compiled_program():
    """A sweep's runs of one shape differ in seed, lr, warmup and length: the compiled init and
    train steps take those as arguments, so their programs are the same (and the compilation
    cache serves every run after the first); another width is another program."""
    import dataclasses

    import jax

    from depthdelusion.config import Config, MeshConfig, ModelConfig, TrainConfig
    from depthdelusion.parallel.mesh import make_mesh
    from depthdelusion.train.step import build_trainer

    mesh = make_mesh(MeshConfig(1, 1, 1), jax.devices()[:1])
    base = Config(model=ModelConfig(depth=2, width=32, head_dim=8, vocab_size=50, seq_len=16,
                                    compute_dtype="float32"),
                  train=TrainConfig(batch_size=2, steps=12, lr=3e-3, warmup_steps=2, seed=0),
                  mesh=MeshConfig(1, 1, 1))

    def programs(cfg):  # built afresh: traced and lowered again, as in another process
        trainer = build_trainer(cfg, mesh, reuse=False)
        tokens = jax.ShapeDtypeStruct((cfg.train.batch_size, cfg.model.seq_len + 1), "int32")
        return (trainer.init.lower().as_text(),
                trainer.step.lower(trainer.abstract_state, tokens).as_text(),
                trainer.step_with_layer_stats.lower(trainer.abstract_state, tokens).as_text())

    first = programs(base)
    other_run = dataclasses.replace(base, train=dataclasses.replace(
        base.train, seed=2**33 + 5, lr=1e-2, warmup_steps=0, steps=300, lr_min_ratio=0.0))
    assert programs(other_run) == first
    # the seed, an argument now, still draws what nnx.Rngs(params=seed) draws (any seed jax takes)
    import numpy as np
    from flax import nnx

    from depthdelusion.model.transformer import Transformer

    drawn = nnx.to_pure_dict(build_trainer(other_run, mesh).init().params)
    eager = nnx.to_pure_dict(nnx.state(Transformer(other_run.model, rngs=nnx.Rngs(params=2**33 + 5)), nnx.Param))
    for a, b in zip(jax.tree.leaves(drawn), jax.tree.leaves(eager)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
    wider = dataclasses.replace(base, model=dataclasses.replace(base.model, width=64))
    assert all(a != b for a, b in zip(programs(wider), first))


def test_a_run_after_another_of_its_shape_reuses_its_programs_bound_to_its_own_numbers(tmp_path):
    """In one process the runs of a shape share one trainer's jitted functions (no tracing or
    compiling after the first run), each bound to its own seed and schedule: a run trained after
    another of its shape records exactly what it records as the process's first run. A setting
    the programs depend on (weight decay) or another mesh is another trainer."""
    import dataclasses

    import jax

    from depthdelusion.config import MeshConfig
    from depthdelusion.model.transformer import splash_interpret_mode
    from depthdelusion.parallel.mesh import make_mesh
    from depthdelusion.rundir import read_metrics
    from depthdelusion.train import step as step_module
    from depthdelusion.train.loop import train
    from tests.studies.expansion.test_expansion import RUN

    def trained(cfg, name):
        train(cfg, tmp_path / name)
        return [(r["step"], r["loss"], r["lr"], r["grad_norm"]) for r in read_metrics(tmp_path / name)]

    first = dataclasses.replace(RUN, train=dataclasses.replace(RUN.train, seed=0, lr=3e-3, warmup_steps=2, steps=4))
    second = dataclasses.replace(RUN, train=dataclasses.replace(
        RUN.train, seed=5, lr=1e-2, warmup_steps=0, steps=3, lr_min_ratio=0.0))
    step_module._trainers.clear()
    alone = trained(second, "alone")
    step_module._trainers.clear()
    trained(first, "first")
    assert trained(second, "after") == alone

    mesh = make_mesh(RUN.mesh)
    a, b = step_module.build_trainer(first, mesh), step_module.build_trainer(second, mesh)
    assert a.step.fn is b.step.fn and a.init.fn is b.init.fn and a.eval_loss is b.eval_loss
    assert a.step.bound != b.step.bound
    decayed = dataclasses.replace(first, train=dataclasses.replace(first.train, weight_decay=0.5))
    assert step_module.build_trainer(decayed, mesh).step.fn is not a.step.fn
    one_device = make_mesh(MeshConfig(1, 1, 1), jax.devices()[:1])
    assert step_module.build_trainer(first, one_device).step.fn is not a.step.fn
    # The splash kernel interpreted (traced in) is another program; outside it, the CPU's error.
    splash = dataclasses.replace(first, model=dataclasses.replace(first.model, attention="splash", seq_len=128))
    with splash_interpret_mode():
        step_module.build_trainer(splash, mesh)
    with pytest.raises(ValueError, match="runs on TPU only"):
        step_module.build_trainer(splash, mesh)


def test_set_train_steps_on_a_grid_with_a_token_budget_is_refused_with_the_reason():
    # The budget sets every run's steps; a --set of them would be overwritten without a word.
    with pytest.raises(ValueError, match=r"--set train\.steps=30: train\.steps is set by the "
                       r"grid's token budget \(tokens: 307200 in .*tiny\.yaml\): change the grid's "
                       r"tokens instead"):
        load_grid(EXPERIMENTS / "tiny.yaml", ["train.steps=30"])


def test_sweep_dry_run_refuses_set_train_steps_under_a_budget(tmp_path, capsys):
    from depthdelusion import cli, exit_codes

    code = cli.main(["sweep", str(EXPERIMENTS / "tiny.yaml"), "--out", str(tmp_path / "s"),
                     "--dry-run", "--set", "train.steps=30"])
    assert code == exit_codes.USAGE
    assert "train.steps is set by the grid's token budget" in capsys.readouterr().err


def test_set_of_a_field_the_grid_sets_is_refused_naming_where(tmp_path):
    grid = tmp_path / "g.yaml"
    grid.write_text("fixed: {model: {head_dim: 16, seq_len: 32}}\ngrid: {model.depth: [1, 2]}\n"
                    "overrides: {d2_w32: {train: {lr: 0.01}}}\nname_format: d{depth}_w32\n"
                    "runs: []\n")
    with pytest.raises(ValueError, match="model.depth is set by its grid axes or runs list"):
        load_grid(grid, ["model.depth=3"])
    with pytest.raises(ValueError, match="train.lr is set by its per-run overrides"):
        load_grid(grid, ["train.lr=0.1"])


def test_set_of_another_train_field_still_applies_under_a_budget():
    grid = load_grid(EXPERIMENTS / "tiny.yaml", ["train.lr=0.001"])
    assert {cfg.train.lr for _, cfg in grid.runs} == {0.001}
    assert {cfg.train.steps for _, cfg in grid.runs} == {300}
