"""The study's tables from synthetic run directories in the trainer's format (JAX-free)."""
import json

import numpy as np
import yaml

from depthdelusion.studies.persistence_study import build


def _run(root, name, pz, depth, width, seed, *, ell, loss, steps=range(0, 1001, 25)):
    run = root / name
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({
        "status": "finished", "final_loss": loss, "final_loss_se": 0.01, "params": 1000 * depth * width,
        "steps": 1000, "wall_time_s": 12.0, "eval_loss": loss,
        "model": {"depth": depth, "width": width, "parametrization": pz}}))
    (run / "config.yaml").write_text(yaml.safe_dump({"train": {"seed": seed}, "data": {"seed": seed}}))
    rng = np.random.default_rng(seed + depth + width)
    dist = depth - 1 - np.arange(depth)
    with open(run / "metrics.jsonl", "w") as fh:
        for s in steps:
            g = np.exp(-dist / ell) * np.exp(0.02 * rng.standard_normal(depth))
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
    build(root, tmp_path / "out", expected=["sp_d32_w64_s42", "sp_d4_w16_s42"])
    md = (tmp_path / "out" / "report.md").read_text()
    assert "PARTIAL" in md and "missing: sp_d32_w64_s42" in md
    assert "growth" in md and "decay" in md
    assert "of all 11 runs" in md and "none excluded" in md  # no selection on decay
    assert "(3 seeds)" in md and "## Seed-to-seed spread" in md
    assert "best D" in md and "| sp | 16 |" in md
    for name in ("gradient_profiles_sp.png", "persistence_scaling_sp.png", "loss_vs_depth.png",
                 "persistence.csv"):
        assert (tmp_path / "out" / name).stat().st_size > 0
