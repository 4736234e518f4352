"""Cost of the row diagnostics (analysis/fitting/diagnostics.py) against the fit they follow.

The table: Epoch AI's Chinchilla fit (E 1.82, A 482, α 0.3478, B 2085, β 0.3658) with N(0, 0.02²)
noise, N log-uniform in [1e7, 1e10], tokens in [1e8, 1e11], a three-valued text column, at 240
rows (and 10× and 100× that, to show the cost is linear in rows). The time inside
``row_diagnostics`` (leverage, Cook's distance, the refit without outliers) and
``pooled_groups`` is measured by wrapping them where the fitting engine calls them.

Run: python3 benchmarks/bench_diagnostics.py [--bootstrap 1000]
"""
import argparse
import platform
import time

import numpy as np

from depthdelusion.analysis import Runs
from depthdelusion.analysis.fitting import engine

spent = {}


def timed(name, fn):
    def wrapper(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
    return wrapper


engine.row_diagnostics = timed("row_diagnostics", engine.row_diagnostics)
engine.pooled_groups = timed("pooled_groups", engine.pooled_groups)


def table(n, seed=0):
    rng = np.random.default_rng(seed)
    N = np.exp(rng.uniform(np.log(1e7), np.log(1e10), n))
    T = np.exp(rng.uniform(np.log(1e8), np.log(1e11), n))
    loss = 1.82 + 482 * N ** -0.3478 + 2085 * T ** -0.3658 + rng.normal(0, 0.02, n)
    loss[:3] += 0.3  # three outliers, so the refit without them runs
    return Runs(params=N, tokens=T, loss=loss,
                extra={"dataset": np.array(["a", "b", "c"])[rng.integers(0, 3, n)]})


def one(n, **options):
    spent.clear()
    t = time.perf_counter()
    r = engine.fit(table(n), "chinchilla", diagnostics=True, **options)
    total = time.perf_counter() - t
    diag = spent.get("row_diagnostics", 0.0) + spent.get("pooled_groups", 0.0)
    print(f"n={n:>6} {options}: fit {total:8.3f} s, diagnostics {diag:.4f} s "
          f"({100 * diag / total:.1f}% of the fit; {1e6 * diag / n:.1f} µs/row), outliers {len(r.diagnostics.outliers)}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args()
    print(platform.processor() or platform.machine(), platform.python_version(), time.strftime("%Y-%m-%d"))
    one(240, bootstrap=args.bootstrap)  # the CLI default
    for n in (240, 2400, 24000):
        one(n, bootstrap=0, profile=False, leave_one_out=False)  # the bare fit + diagnostics
