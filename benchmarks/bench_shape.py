"""``depthdelusion shape`` (issue 58): interval coverage on the synthetic three-suite table of
tests/analysis/fitting/test_shape_answer.py (known bowl, per-suite terms, a run effect), and
the command's time on Gemstones (and Chinchilla's shapes when given).

    PYTHONPATH=. python benchmarks/bench_shape.py coverage --draws 100 --resamples 60 [--first-seed 100]
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


def run_coverage(draws: int, resamples: int, first_seed: int) -> None:
    """One line per draw (seed, then 1/0 per covered quantity), flushed, so that a run cut short
    still counts; the summary line last."""
    from test_shape_answer import COVERED, coverage

    start, hits = time.time(), []
    for seed in range(first_seed, first_seed + draws):
        cover = coverage(draws=1, resamples=resamples, first_seed=seed)
        hits.append([cover[k] for k in COVERED])
        print(seed, *(int(v) for v in hits[-1]), flush=True)
    rate = [sum(h[i] for h in hits) / len(hits) for i in range(len(COVERED))]
    print(f"{draws} draws (seeds {first_seed}–{first_seed + draws - 1}), {resamples} cluster-bootstrap "
          "resamples each, 95% intervals: coverage " + ", ".join(f"{k} {v:.3f}" for k, v in zip(COVERED, rate))
          + f"; {time.time() - start:.0f} s wall")


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
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--gemstones")
    parser.add_argument("--chinchilla-csv")
    args = parser.parse_args()
    if args.what == "coverage":
        run_coverage(args.draws, args.resamples, args.first_seed)
    else:
        run_speed(args.gemstones, args.chinchilla_csv)
