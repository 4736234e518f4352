"""``depthdelusion shape`` (issue 58): interval coverage on the synthetic three-suite table of
tests/analysis/fitting/test_shape_answer.py (known bowl, per-suite terms, a run effect), and
the command's time on Gemstones (and Chinchilla's shapes when given).

    PYTHONPATH=. python benchmarks/bench_shape.py coverage --draws 200 --resamples 100
    PYTHONPATH=. python benchmarks/bench_shape.py speed --gemstones PATH [--chinchilla-csv PATH]
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "analysis" / "fitting"))


def run_coverage(draws: int, resamples: int) -> None:
    from test_shape_answer import coverage

    start = time.time()
    cover = coverage(draws=draws, resamples=resamples)
    print(f"{draws} draws, {resamples} cluster-bootstrap resamples each, 95% intervals: coverage "
          + ", ".join(f"{k} {v:.3f}" for k, v in cover.items()) + f"; {time.time() - start:.0f} s wall")


def run_speed(gemstones: str, chinchilla_csv: str | None) -> None:
    from depthdelusion.cli import main

    argv = ["shape", "--compute", "1e21", "--table", f"gemstones={gemstones}"]
    if chinchilla_csv:
        argv += [chinchilla_csv, "--column", "params=model_size", "--column", "tokens=num_tokens",
                 "--column", "width=d_model", "--column", "depth=n_layers", "--column", "compute=FLOP"]
    start, cpu = time.time(), resource.getrusage(resource.RUSAGE_SELF)
    main(argv)
    end = resource.getrusage(resource.RUSAGE_SELF)
    print(f"\n{' '.join(argv)}: {time.time() - start:.1f} s wall, "
          f"{end.ru_utime + end.ru_stime - cpu.ru_utime - cpu.ru_stime:.1f} s CPU", file=sys.stderr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("coverage", "speed"))
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=100)
    parser.add_argument("--gemstones")
    parser.add_argument("--chinchilla-csv")
    args = parser.parse_args()
    if args.what == "coverage":
        run_coverage(args.draws, args.resamples)
    else:
        run_speed(args.gemstones, args.chinchilla_csv)
