"""Time the analysis CLI as a user runs it: `depthdelusion fit` and `depthdelusion report` on a
synthetic 250-run table, and the start-up (import) time of `depthdelusion fit --help`.

    PYTHONPATH=. python benchmarks/bench_analysis_cli.py [--bootstrap 200] [--repeats 3]

The table: 10 depths (2..64) x 25 widths (128..4096), N = 12·D·W² + 2·50257·W, tokens varying
(20 N up to 80 N), loss from depth_delusion with a token term plus 0.01 nats of noise (seed 0).
Each figure is the wall time of a fresh process (imports included), best of ``--repeats``
(default 3);
the load average is printed because the machine may be shared.
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from depthdelusion.analysis.report.consistency import blocks_plus_embeddings


def table(path: Path) -> Path:
    rng = np.random.default_rng(0)
    D, W = np.meshgrid(np.unique(np.geomspace(2, 64, 10).round()), np.geomspace(128, 4096, 25).round())
    D, W = D.ravel(), W.ravel()
    N = blocks_plus_embeddings(D, W)
    T = N * rng.uniform(20, 80, len(N))
    loss = (1.7 + 400 * N ** -0.34 + 410 * T ** -0.28 + 0.1 * np.maximum(0, D - 2.5 * np.log(W)) * W ** -0.3
            + 0.01 * rng.standard_normal(len(N)))
    rows = "".join(f"{int(d)},{int(w)},{int(n)},{int(t)},{l:.5f}\n" for d, w, n, t, l in zip(D, W, N, T, loss))
    path.write_text("depth,width,params,tokens,loss\n" + rows)
    return path


def best_of(cmd: list[str], repeats: int) -> str:
    """Best wall time of ``repeats`` fresh processes, and that run's CPU time (user + sys):
    on a shared machine the CPU time is the steadier figure (the work is single-threaded)."""
    runs = []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        runs.append((wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime))
    wall, cpu = min(runs)
    return f"{wall:.2f} s wall, {cpu:.2f} s CPU"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cli = [sys.executable, "-m", "depthdelusion"]
    with tempfile.TemporaryDirectory() as tmp:
        csv = table(Path(tmp) / "runs250.csv")
        b = str(args.bootstrap)
        print(f"load average before: {os.getloadavg()[0]:.1f}")
        print(f"depthdelusion fit --help: {best_of(cli + ['fit', '--help'], args.repeats)}")
        print(f"(each figure: best of {args.repeats})")
        print(f"depthdelusion fit (250 runs, law picked: depth_delusion with its token term, "
              f"{b} bootstraps): {best_of(cli + ['fit', str(csv), '--bootstrap', b], args.repeats)}")
        for law in ("kaplan", "chinchilla"):
            print(f"depthdelusion fit --law {law} ({b} bootstraps): "
                  f"{best_of(cli + ['fit', str(csv), '--law', law, '--bootstrap', b], args.repeats)}")
        out = str(Path(tmp) / "report")
        print(f"depthdelusion report --no-figures ({b} bootstraps per law): "
              f"{best_of(cli + ['report', str(csv), '--out', out, '--bootstrap', b, '--no-figures'], args.repeats)}")
        print(f"depthdelusion report with figures ({b} bootstraps per law): "
              f"{best_of(cli + ['report', str(csv), '--out', out, '--bootstrap', b], args.repeats)}")
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
