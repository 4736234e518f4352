"""A sweep's report judges its runs by their own vocabulary and says what they show first."""
import json

import numpy as np

from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.analysis.report.build import build_report
from depthdelusion.analysis.report.options import ReportOptions


def _byte_run(root, depth, width, loss, rate, steps=range(0, 301, 10)):
    run = root / f"d{depth}_w{width}"
    run.mkdir(parents=True)
    V = 257
    n = depth * (12 * width ** 2 + 13 * width) + 2 * V * width + V + 2 * width  # the trainer's count
    (run / "summary.json").write_text(json.dumps({
        "status": "finished", "final_loss": loss, "final_loss_se": 0.01, "params": n, "tokens": 153600,
        "steps": 300, "model": {"depth": depth, "width": width, "vocab_size": V}}))
    rng = np.random.default_rng(depth * width)
    dist = depth - 1 - np.arange(depth)
    with open(run / "metrics.jsonl", "w") as fh:
        for s in steps:
            g = np.exp(-rate * dist) * np.exp(0.02 * rng.standard_normal(depth))
            fh.write(json.dumps({"step": s, "loss": loss, "per_layer_grad_norm": g.tolist()}) + "\n")


def test_byte_level_runs_are_audited_with_their_vocabulary_and_the_report_opens_with_findings(tmp_path):
    root = tmp_path / "runs"
    for d in (2, 4, 8):
        for w, rate in ((16, -0.05), (32, -0.03), (64, 0.02)):
            _byte_run(root, d, w, 2.4 - 0.1 * np.log(w) - 0.01 * d, rate)
    report, md, _ = build_report(str(root), ReportOptions(fit=FitOptions(bootstrap=0), laws=("kaplan",)))
    lines = md.splitlines()
    assert lines[2].startswith("In short: 9 runs") and "8L×64" in lines[2]
    assert "grow towards it" in lines[2]
    audit = md[md.index("## Consistency audit"):]
    assert "V = 257" in audit and "9/9" in audit  # every row within 1% of the trainer's count
    assert "0.0M" not in md
    # the runs end at step 300: the window is placed at the end of training, and the report says so
    assert "steps 240–300" in md and "growth" in md
