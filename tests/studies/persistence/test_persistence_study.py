"""The study's tables from synthetic run directories in the trainer's format (JAX-free)."""
import json

import numpy as np
import yaml

from depthdelusion.studies.persistence.study import PersistenceSpec, build


def _spec(*roots, grids=()) -> PersistenceSpec:
    return PersistenceSpec(runs=[str(r) for r in roots], grids=[str(g) for g in grids])


def _grid(path, depths, width=16):
    """A grid file of sp runs at ``depths`` × ``width``, seed 42 (named as the study's grids name them)."""
    path.write_text(yaml.safe_dump({
        "name": path.stem, "fixed": {"model": {"width": width, "head_dim": 16, "seq_len": 16}},
        "grid": {"model.parametrization": ["sp"], "model.depth": depths},
        "name_format": "{parametrization}_d{depth}_w{width}_s{train_seed}"}))
    return str(path)


def _run(root, name, pz, depth, width, seed, *, ell, loss, steps=range(0, 1001, 25), bottom=1.0, lr=3e-3,
         early_ell=None):
    run = root / name
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({
        "status": "finished", "final_loss": loss, "final_loss_se": 0.01, "params": 1000 * depth * width,
        "steps": 1000, "wall_time_s": 12.0, "eval_loss": loss,
        "model": {"depth": depth, "width": width, "parametrization": pz}}))
    (run / "config.yaml").write_text(yaml.safe_dump({"train": {"seed": seed, "lr": lr}, "data": {"seed": seed}}))
    rng = np.random.default_rng(seed + depth + width)
    dist = depth - 1 - np.arange(depth)
    with open(run / "metrics.jsonl", "w") as fh:
        for s in steps:
            length = early_ell if early_ell is not None and s <= 100 else ell  # early training differs
            g = np.exp(-dist / length) * np.exp(0.02 * rng.standard_normal(depth))
            g[0] *= bottom  # the bottom block's step (the embedding stream under pre-LN)
            fh.write(json.dumps({"step": s, "loss": loss, "per_layer_grad_norm": g.tolist(),
                                 "per_layer_act_grad_norm": g.tolist()}) + "\n")


def test_study_reports_growth_all_runs_in_the_fit_seeds_and_partial(tmp_path):
    root = tmp_path / "runs"
    for w, ell in ((16, -20.0), (32, -30.0), (64, 50.0)):  # growth at two widths, decay at one
        for d in (4, 8, 16):
            _run(root, f"sp_d{d}_w{w}_s42", "sp", d, w, 42, ell=ell, loss=2.0 - 0.01 * d)
    for seed in (1, 2):
        _run(root, f"sp_d16_w16_s{seed}", "sp", 16, 16, seed, ell=-20.0, loss=1.84 + 0.01 * seed)
    (root / "sp_d32_w64_s42").mkdir()  # started, not finished
    build(_spec(root, grids=[_grid(tmp_path / "a.yaml", [32], 64), _grid(tmp_path / "b.yaml", [4])]), tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "PARTIAL" in md and "missing: sp_d32_w64_s42" in md
    assert "growth" in md and "decay" in md
    assert "of all 11 runs" in md and "none excluded" in md  # no selection on decay
    assert "(3 seeds)" in md and "## Per cell: the rate over seeds" in md
    assert "best D" in md and "| sp | 16 |" in md
    for name in ("gradient_profiles_sp.png", "persistence_scaling_sp.png", "loss_vs_depth.png",
                 "persistence.csv"):
        assert (tmp_path / "out" / name).stat().st_size > 0


def test_cells_with_three_seeds_carry_the_verdict_and_a_bottom_block_trend_is_withdrawn(tmp_path):
    """Inside the stack every run decays (ℓ = 40); the bottom block carries 6× its neighbour's
    gradient, which the all-block fit spreads over D − 1 layers: a growth that fades with depth.
    The primary fit (blocks 1 … D−1) has no depth trend; the all-block trend is withdrawn."""
    import csv

    from scipy import stats

    root, other = tmp_path / "persistence_study", tmp_path / "depth_confound"
    for d in (4, 8, 16):
        for seed in (1, 2, 3):
            _run(root, f"sp_d{d}_w64_s{seed}", "sp", d, 64, seed, ell=40.0, loss=1.5, bottom=6.0)
    _run(root, "sp_d8_w16_s1", "sp", 8, 16, 1, ell=-30.0, loss=1.9)
    _run(other, "sp_d8_w16_s1", "sp", 8, 16, 1, ell=-30.0, loss=1.9, lr=1e-2)  # same name, other root
    build(_spec(root, other), tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Run roots (studies): depth_confound, persistence_study; 11 finished runs." in md
    assert "| depth_confound | depth_confound/sp_d8_w16_s1 |" in md  # a name met again is prefixed
    with open(tmp_path / "out" / "cells.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 5 and {r["study"] for r in rows} == {"persistence_study", "depth_confound"}
    cell = next(r for r in rows if r["depth"] == "16" and r["width"] == "64")
    assert cell["seeds"] == "3" and cell["status"] == "decay" and cell["all_blocks_status"] == "growth"
    with open(tmp_path / "out" / "persistence.csv") as fh:
        runs = [r for r in csv.DictReader(fh) if r["kind"] == "weight" and r["name"].startswith("sp_d16_w64")]
    rates = np.array([float(r["rate"]) for r in runs])
    half = stats.t.ppf(0.975, 2) * rates.std(ddof=1) / np.sqrt(3)
    assert abs(float(cell["half_width"]) - half) < 2e-5 and abs(float(cell["rate_sd"]) - rates.std(ddof=1)) < 2e-5
    assert ("decay towards the input in every cell (3 decay, 0 flat, 0 growth of 3 cell(s) with ≥ 3 seeds)"
            in md)
    assert "Control, all blocks (the bottom block left in): no decay" in md and "**changes the verdict**" in md
    assert "| persistence_study | sp | 64 | none | rises | withdrawn (set by the bottom block) | 3 |" in md
    assert "< 3 seeds" in md  # the single-seed W = 16 cells are labelled
    assert "W = 64: paper ℓ = 4.39, 2.19, 1.46 layers" in md and "**not consistent** (3 cell(s) with ≥ 3 seeds)" in md
    assert "W = 16: paper ℓ = 2.93" in md and "rests on single runs" in md
    assert (tmp_path / "out" / "bottom_block.png").stat().st_size > 0


def test_the_width_grid_has_three_seeds_per_cell_over_a_decade_and_the_studys_recipe():
    from pathlib import Path

    from depthdelusion.sweep import load_grid

    experiments = Path(__file__).resolve().parents[3] / "experiments"
    width = yaml.safe_load((experiments / "persistence_width.yaml").read_text())
    study = yaml.safe_load((experiments / "persistence_study.yaml").read_text())
    assert width["fixed"] == study["fixed"] and width["name_format"] == study["name_format"]
    runs = load_grid(experiments / "persistence_width.yaml").runs
    cells: dict = {}
    for name, cfg in runs:
        m = cfg.model
        assert cfg.train.seed == cfg.data.seed
        cells.setdefault((m.parametrization, m.width, m.depth), set()).add(cfg.train.seed)
    assert set(cells) == {(pz, w, d) for pz in ("sp", "completep") for w in (16, 32, 64, 128, 256) for d in (8, 16)}
    assert all(seeds == {42, 1, 2} for seeds in cells.values())
    shared = {n for n, _ in runs} & {n for n, _ in load_grid(experiments / "persistence_study.yaml").runs}
    assert len(shared) == 20  # sweeping into the study's directory skips these


def test_two_sweeps_runs_directories_stay_two_studies(tmp_path):
    """`analysis/persistence_study/runs` and `analysis/depth_confound/runs` share a directory
    name, not a recipe: their cells must not be pooled."""
    from depthdelusion.studies.persistence.study import load_study_runs

    a, b = tmp_path / "persistence_study" / "runs", tmp_path / "depth_confound" / "runs"
    _run(a, "sp_d8_w16_s42", "sp", 8, 16, 42, ell=-20.0, loss=1.9)
    _run(b, "sp_d8_w16_s42", "sp", 8, 16, 42, ell=30.0, loss=1.8, lr=1e-2)
    runs, _ = load_study_runs([a, b])
    assert [(r["study"], r["name"]) for r in runs] == [
        ("persistence_study/runs", "sp_d8_w16_s42"), ("depth_confound/runs", "depth_confound/runs/sp_d8_w16_s42")]
    build(_spec(a, b), tmp_path / "out")
    assert "Run roots (studies): depth_confound/runs, persistence_study/runs;" in (tmp_path / "out" / "report.md").read_text()
    # cells that differ only by lr are told apart in the table
    _run(b, "sp_d8_w16_lr0.02_s42", "sp", 8, 16, 42, ell=30.0, loss=1.8, lr=2e-2)
    build(_spec(a, b), tmp_path / "out2")
    md = (tmp_path / "out2" / "report.md").read_text()
    assert "| study | param. | D | W | lr | seeds |" in md and "| depth_confound/runs | sp | 8 | 16 | 0.02 | 1 |" in md


def test_two_grids_that_share_runs_count_each_run_once(tmp_path):
    """The width grid repeats cells of the depth grid (same run names): the PARTIAL line counts a
    shared run once, as the sweep trains it once."""
    from depthdelusion.studies.persistence.options import PersistenceOptions
    from depthdelusion.studies.persistence.study import run_command

    root = tmp_path / "runs"
    for d in (4, 8):
        _run(root, f"sp_d{d}_w16_s42", "sp", d, 16, 42, ell=-20.0, loss=2.0 - 0.01 * d)
    run_command(runs=str(root), out=str(tmp_path / "out"), options=PersistenceOptions(
        grid=[_grid(tmp_path / "depth.yaml", [4, 8]), _grid(tmp_path / "width.yaml", [8, 16])]))
    md = (tmp_path / "out" / "report.md").read_text()
    assert "2 of 3 runs of the grid finished; missing: sp_d16_w16_s42." in md


def test_the_bottom_to_top_ratio_says_whether_a_critical_depth_is_reached_and_warmup_is_beside_the_end(tmp_path):
    """16L × 64 decays with ℓ = 3 layers at the end (g_0/g_15 = e^−5 ≈ 0.007 ≤ 0.1: reached) and
    grows early (ℓ = −30); 16L × 16 decays gently (ℓ = 40: g_0/g_15 ≈ 0.69, not reached)."""
    root = tmp_path / "runs"
    for seed in (1, 2, 3):
        _run(root, f"sp_d16_w64_s{seed}", "sp", 16, 64, seed, ell=3.0, loss=1.5, early_ell=-30.0)
        _run(root, f"sp_d16_w16_s{seed}", "sp", 16, 16, seed, ell=40.0, loss=1.8)
    build(_spec(root), tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    head = md[md.index("## Is a critical depth reached?"):md.index("## Early against late")]
    assert "**6 runs, g_0/g_{D−1} from 0.0066 to 0.69" in head and "3 runs at or below 0.1" in head
    assert "1 of 2 cells reach ε" in head
    row64 = next(line for line in head.splitlines() if line.startswith("| sp 16L×64 |"))
    lo, hi = (float(x) for x in row64.split("[")[1].split("]")[0].split(","))
    assert lo < 0.0067 < hi < 0.1
    early = md[md.index("## Early against late"):md.index("## Per run")]
    assert "| sp 16L×64 | 3 |" in early and "growth | 0 of 3 |" in early and "decay | 3 of 3 |" in early
    assert "- Steps 25–75: decay in some cells only (1 decay, 0 flat, 1 growth" in early
    assert "- Steps 800–1200: decay towards the input in every cell (2 decay" in early


def test_the_results_are_frozen_and_the_report_is_rendered_from_them_alone(tmp_path):
    """measure() computes the numbers once; sections() only formats them: with every run's
    gradient profile taken away it renders the same report that build() wrote."""
    import dataclasses

    import pytest

    from depthdelusion.studies.persistence.sections import sections
    from depthdelusion.studies.persistence.study import measure

    root = tmp_path / "runs"
    for d in (4, 8):
        for seed in (1, 2, 3):
            _run(root, f"sp_d{d}_w16_s{seed}", "sp", d, 16, seed, ell=30.0, loss=2.0 - 0.01 * d)
    results = measure(_spec(root))
    with pytest.raises(dataclasses.FrozenInstanceError):
        results.verdict = "no decay"
    build(_spec(root), tmp_path / "out", command="depthdelusion persistence-study runs")
    bare = dataclasses.replace(results, runs=tuple({**r, "profile": None} for r in results.runs))
    text = "\n".join(sections(bare, "depthdelusion persistence-study runs")) + "\n"
    assert text == (tmp_path / "out" / "report.md").read_text()
    assert "decay towards the input in every cell (2 decay, 0 flat, 0 growth of 2 cell(s) with ≥ 3 seeds)" in text


def test_the_flags_build_a_frozen_spec_and_a_bad_one_is_one_line_naming_its_flag(capsys):
    """An infinite window was an OverflowError traceback; every bad flag is now one line, exit 2,
    before any run is read."""
    import dataclasses
    import re

    import pytest

    from depthdelusion.cli import main
    from depthdelusion.studies.persistence.study import FLAGS
    from depthdelusion.studies.common.spec import from_flags

    spec = from_flags(PersistenceSpec, {"runs": ["runs"], "grids": ["g.yaml"], "step": 500, "window": 0.1}, FLAGS)
    assert spec == PersistenceSpec(runs=["runs"], grids=["g.yaml"], step=500, window=0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.step = 1000
    for values, error in (({"window": 0}, "--window=0.0: must be > 0 (0.2 at step 1000: steps 800-1200)"),
                          ({"step": -1}, "--step=-1: must be >= 0"), ({"runs": []}, "RUNS=[]: need at least one")):
        with pytest.raises(ValueError, match="^" + re.escape(error)):
            from_flags(PersistenceSpec, {"runs": ["runs"], **values}, FLAGS)
    assert main(["persistence-study", "nowhere", "--out", "out", "--window", "inf"]) == 2
    assert capsys.readouterr().err == ("depthdelusion persistence-study: error: --window=inf: must be a finite "
                                       "number > 0, e.g. 0.2\n")


def _rewrite_profile(run, depth, ell_at, steps=range(0, 1001, 25)):
    """Replace a synthetic run's gradient profile by g_l = exp(−(D − 1 − l)/ell_at(step))."""
    dist = depth - 1 - np.arange(depth)
    with open(run / "metrics.jsonl", "w") as fh:
        for s in steps:
            g = np.exp(-dist / ell_at(s)) * np.exp(0.01 * np.sin(np.arange(depth) + s))
            fh.write(json.dumps({"step": s, "loss": 2.0, "per_layer_grad_norm": g.tolist(),
                                 "per_layer_act_grad_norm": g.tolist()}) + "\n")


def test_the_warmup_steps_are_shown_one_by_one_and_the_ratio_at_every_logged_step(tmp_path):
    """Steps 25 and 50 grow, step 75 decays: the window's mean hides it, the per-step table shows
    it. Step 500 alone reaches g_0/g_{D−1} ≤ 0.1 (ℓ = 1 layer): 40 of 41 logged steps have no run
    there. The exponential fits are near exact (R² 0.99), so no parametrization is called low."""
    root = tmp_path / "runs"
    ell_at = {25: -20.0, 50: -20.0, 75: 5.0, 500: 1.0}
    for seed in (1, 2, 3):
        _run(root, f"sp_d8_w16_s{seed}", "sp", 8, 16, seed, ell=30.0, loss=2.0)
        _rewrite_profile(root / f"sp_d8_w16_s{seed}", 8, lambda s: ell_at.get(s, 30.0))
    build(_spec(root), tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    steps = md[md.index("## Step by step"):md.index("## How exponential")]
    assert "is 0.00, 0.00, 1.00 at steps 25, 50, 75" in steps
    assert "| 75 | 3 of 3 | 1.00 | decay towards the input in every cell (1 decay" in steps
    assert "in no run at 40 of 41 logged steps (0–1000)" in steps
    assert "| 500 | 3 | 0.00 | 0.00 | 3 |" in steps and "| 1000 | 3 | 0.79 | 0.79 | 0 |" in steps
    r2 = md[md.index("## How exponential"):md.index("## Per run")]
    assert "Every parametrization has median R² ≥ 0.5." in r2 and "| sp | 3 | 0.99 |" in r2


def test_the_committed_study_regenerates_from_its_runs(tmp_path):
    """analysis/persistence_study: report.md, persistence.csv and cells.csv are what the study's
    command writes from the committed runs (numbers rounded, bootstraps seeded by run name: the
    same on any machine); the figures' bytes are not compared."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    committed = root / "analysis" / "persistence_study"
    command = committed.joinpath("report.md").read_text().splitlines()[2]
    command = command.removeprefix("Generated by `").removesuffix("`.")
    spec = PersistenceSpec(runs=[str(committed / "runs")],
                           grids=[str(root / "experiments" / g) for g in ("persistence_study.yaml", "persistence_width.yaml")])
    build(spec, tmp_path, command=command)
    for name in ("report.md", "persistence.csv", "cells.csv"):
        assert (tmp_path / name).read_text() == (committed / name).read_text(), f"{name} is stale"
