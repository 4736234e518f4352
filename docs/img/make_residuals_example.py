"""Regenerate residuals_example.png (docs/fitting.md, "Checking a fit"): a synthetic 120-row table drawn
from Epoch AI's Chinchilla fit with N(0, 0.02²) noise, three rows pushed up by 0.6 nats and one
dataset 0.12 nats higher. Run: python3 docs/img/make_residuals_example.py"""
from pathlib import Path

import numpy as np

from depthdelusion.analysis import Runs, fit
from depthdelusion.analysis.report.residual_files import write_rows

rng = np.random.default_rng(1)
n = 120
N = np.exp(rng.uniform(np.log(1e7), np.log(1e10), n))
T = np.exp(rng.uniform(np.log(1e8), np.log(1e11), n))
dataset = np.array(["web", "code", "books"])[rng.integers(0, 3, n)]
loss = 1.82 + 482 * N ** -0.3478 + 2085 * T ** -0.3658 + rng.normal(0, 0.02, n)
loss += np.where(dataset == "code", 0.12, 0.0)
loss[:3] += 0.6
runs = Runs(params=N, tokens=T, loss=loss, extra={"dataset": dataset}, source="synthetic")
result = fit(runs, "chinchilla", bootstrap=0, profile=False, leave_one_out=False, diagnostics=True)
here = Path(__file__).parent
csv_path, png = write_rows(here / "_residuals_example", runs, result)
png.replace(here / "residuals_example.png")
csv_path.unlink()
(here / "_residuals_example").rmdir()
print(result.summary())
