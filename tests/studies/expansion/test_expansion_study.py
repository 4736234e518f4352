"""The study's bookkeeping: growth comparison at equal tokens (FLOPs, paired differences over
seeds) and the per-layer signal beside g_l, on run directories written as the trainer writes them."""
import dataclasses
import json
import math

import numpy as np
import pytest

from depthdelusion.config import Config, ModelConfig, TrainConfig
from depthdelusion.rundir import write_config
from depthdelusion import model_size as size
from depthdelusion.studies.expansion import study as expansion_study


def write_run(path, depth, steps, evals, losses, wall=1.0):
    path.mkdir(parents=True)
    cfg = Config(model=ModelConfig(depth=depth, width=32, head_dim=16, seq_len=16, vocab_size=257),
                 train=TrainConfig(steps=steps, batch_size=4))
    write_config(path, cfg)
    lines = [{"step": s, "loss": losses[s], **({"eval_loss": evals[s]} if s in evals else {})} for s in sorted(losses)]
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (path / "summary.json").write_text(json.dumps({"final_loss": losses[max(losses)], "wall_time_s": wall,
                                                   "eval_loss": evals.get(steps)}))
    return cfg


def test_growth_tables_compare_at_equal_tokens(tmp_path):
    growth = tmp_path / "depth_expansion_growth"
    pairs = []
    grown_final, scratch_final = {0: 2.0, 1: 2.2}, {0: 2.1, 1: 2.25}
    for seed in (0, 1):
        parent, scratch, grown = f"d2_w32_steps10_seed{seed}", f"d4_w32_steps20_seed{seed}", f"grown{seed}"
        pcfg = write_run(growth / parent, 2, 10, {10: 3.0}, {s: 3.0 for s in (5, 10)})
        write_run(growth / scratch, 4, 20, {10: 2.9, 20: scratch_final[seed]}, {s: 2.5 for s in (5, 10, 15, 20)})
        write_run(growth / grown, 4, 20, {20: grown_final[seed]}, {s: 2.4 for s in (15, 20)})
        pairs.append({"seed": seed, "parent": parent, "grown": grown, "scratch": scratch})
    per_seed, curves, summary = expansion_study.growth_tables(tmp_path, pairs)
    assert [r["grown_eval"] for r in per_seed] == [2.0, 2.2]
    model2 = dataclasses.replace(pcfg.model, depth=2)
    model4 = dataclasses.replace(pcfg.model, depth=4)
    expected_ratio = (size.flops_per_token(model2) * 10 + size.flops_per_token(model4) * 10) / (size.flops_per_token(model4) * 20)
    assert summary["flops_ratio"] == pytest.approx(expected_ratio)
    assert summary["flops_ratio"] < 1
    diffs = np.array([-0.1, -0.05])
    half = 12.706 * diffs.std(ddof=1) / math.sqrt(2)  # t_{0.975, 1}
    assert summary["paired_diff_mean"] == pytest.approx(-0.075)
    assert summary["paired_diff_ci95"] == pytest.approx([-0.075 - half, -0.075 + half], rel=1e-3)
    # the grown curve is the parent's up to the switch, then the grown run's
    seed0 = {c["step"]: c for c in curves if c["seed"] == 0}
    assert seed0[10]["grown_loss"] == 3.0 and seed0[15]["grown_loss"] == 2.4 and seed0[10]["scratch_eval"] == 2.9


def test_signal_beside_grad_norms_reads_last_layer_stats(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(
        json.dumps({"step": 1, "loss": 3.0, "per_layer_grad_norm": [9.0, 9.0]}) + "\n"
        + json.dumps({"step": 5, "loss": 2.0, "per_layer_grad_norm": [1.0, 2.0]}) + "\n")
    probe = {"depth": 2, "signal": [{"after": 0, "signal_train": 0.1, "signal_test": 0.2},
                                    {"after": 1, "signal_train": 0.3, "signal_test": 0.4}]}
    rows = expansion_study.signal_beside_grad_norms(tmp_path, probe)
    assert [(r["layer"], r["grad_norm"], r["signal_train"], r["step"]) for r in rows] == [(0, 1.0, 0.1, 5), (1, 2.0, 0.3, 5)]
    # the signal in the model's own gradient units: signal after l / g_l
    assert [r["signal_over_grad"] for r in rows] == pytest.approx([0.1, 0.15])


def test_a_probe_cached_by_an_older_version_is_refused_not_reused(tmp_path):
    """A cache without today's inserted block (or intervals) is about another model than the one
    `expand --after k` builds: the tables are not rebuilt from it."""
    import shutil
    from pathlib import Path

    committed = Path(__file__).resolve().parents[3] / "analysis" / "depth_expansion"
    out = tmp_path / "depth_expansion"
    shutil.copytree(committed, out)
    stale = out / "probes" / "d4_w64.json"
    result = json.loads(stale.read_text())
    del result["inserted"]
    stale.write_text(json.dumps(result))
    with pytest.raises(ValueError, match="d4_w64.json: a probe made by an older version"):
        expansion_study.rerender_probe_tables(out)


def test_the_committed_tables_rerender_from_the_cached_probes_unchanged(tmp_path):
    """`rerender_probe_tables` rebuilds signal.csv, runs.csv, signal_beside_grad.csv (its
    signal_over_grad column) and results.md from the committed probe caches and tables alone: on
    the committed study it must reproduce the committed files. (The
    tables round to 3-4 digits from cached numbers, so no machine-dependent arithmetic reaches
    them.)"""
    import shutil
    from pathlib import Path

    committed = Path(__file__).resolve().parents[3] / "analysis" / "depth_expansion"
    out = tmp_path / "depth_expansion"
    shutil.copytree(committed, out)
    expansion_study.rerender_probe_tables(out)
    for name in ("signal.csv", "runs.csv", "signal_beside_grad.csv", "results.md"):
        assert (out / name).read_text() == (committed / name).read_text(), name
    assert (out / "signal_over_grad.png").stat().st_size > 0


def test_measure_gives_frozen_results_and_the_report_renders_from_them_alone(tmp_path):
    """measure() with nothing to train, on two committed probes (OUT/probes) and run directories
    holding their committed summaries and last layer stats, gives the committed runs.csv rows; the results are frozen, and sections()
    renders the committed report's rows for those runs with the run directories gone."""
    import shutil
    from pathlib import Path

    committed = Path(__file__).resolve().parents[3] / "analysis" / "depth_expansion"
    names = ("d2_w32", "d4_w32")
    probes = {n: json.loads((committed / "probes" / f"{n}.json").read_text()) for n in names}
    runs_csv = {r["run"]: r for r in expansion_study._read_csv(committed / "runs.csv")}
    beside = expansion_study._read_csv(committed / "signal_beside_grad.csv")
    for n in names:
        run = tmp_path / "depth_expansion" / n
        run.mkdir(parents=True)
        (run / "summary.json").write_text(json.dumps({"eval_loss": runs_csv[n]["eval_loss"],
                                                      "wall_time_s": runs_csv[n]["train_wall_s"]}))
        layers = sorted((b for b in beside if b["run"] == n), key=lambda b: b["layer"])
        (run / "metrics.jsonl").write_text(json.dumps({"step": layers[0]["step"], "loss": 1.0, "per_layer_grad_norm":
                                                       [b["grad_norm"] for b in layers]}) + "\n")
    out = tmp_path / "out"
    shutil.copytree(committed / "probes", out / "probes", ignore=lambda _, files: [
        f for f in files if f.removesuffix(".json") not in names])
    spec = expansion_study.ExpansionSpec(runs=str(tmp_path), train="none")
    results = expansion_study.measure(spec, out, log=print)  # the cached probes: nothing trained or probed
    assert results.probes == probes
    with pytest.raises(dataclasses.FrozenInstanceError):
        results.growth = None
    assert [r["run"] for r in results.tables["runs.csv"]] == list(names)
    row = results.tables["runs.csv"][1]
    assert row["max_signal_train"] == pytest.approx(runs_csv["d4_w32"]["max_signal_train"], rel=1e-5)
    shutil.rmtree(tmp_path / "depth_expansion")
    text = expansion_study.results_markdown(results)
    report = (committed / "results.md").read_text().splitlines()
    for n in names:
        assert next(line for line in report if line.startswith(f"| {n} |")) in text.splitlines()
    assert "## Progressive growth" not in text


def test_the_flags_build_a_frozen_spec_and_a_bad_one_is_one_line_naming_its_flag(tmp_path, capsys):
    """expansion-study's flags are a frozen ExpansionSpec; a bad flag of it or of its sibling
    commands (expansion-growth, expansion-prediction) is one line naming the flag, exit 2,
    before anything is trained or written."""
    from depthdelusion.cli import main
    from depthdelusion.studies.expansion import trials

    (tmp_path / "depth_expansion").mkdir()
    spec = expansion_study.spec_from_flags(runs=str(tmp_path), probe_batches=3, train="none")
    assert spec == expansion_study.ExpansionSpec(runs=str(tmp_path), probe_batches=3, train="none")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.train = "all"
    assert trials.growth_spec_from_flags(runs=str(tmp_path), test_seeds="3, 4,5").test_seeds == [3, 4, 5]
    for flags, starts in (({"probe_batches": 0}, "--probe-batches=0: must be a positive integer"),
                          ({"train": "some"}, "--train='some': valid values are all, growth, none"),
                          ({"runs": str(tmp_path / "elsewhere"), "train": "none"}, "--runs="),
                          ({"growth_grid": str(tmp_path / "no.yaml"), "train": "growth"}, "--growth-grid=")):
        with pytest.raises(ValueError) as err:
            expansion_study.spec_from_flags(**flags)
        assert str(err.value).startswith(starts) and "\n" not in str(err.value), str(err.value)
    missing = tmp_path / "missing"  # expansion-study's --train all (the default) trains the depth grid first
    for argv, starts in ((["expansion-study", "--depth-grid", f"{missing}.yaml"], f"--depth-grid='{missing}.yaml'"),
                         (["expansion-growth", "--runs", str(tmp_path), "--test-seeds", "3,x"],
                          "--test-seeds[1]='x': must be an integer"),
                         (["expansion-growth", "--runs", str(missing)], f"--runs='{missing}': no such directory"),
                         (["expansion-prediction", "--runs", str(missing)], f"--runs='{missing}': no such directory")):
        assert main([*argv, "--out", str(tmp_path / "out")]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"depthdelusion {argv[0]}: error: {starts}"), line
    assert not (tmp_path / "out").exists()
