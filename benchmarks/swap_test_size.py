"""Size of the prediction verdict's run-swap test (`prediction.swap_p`, issue 62's second review)
on simulated per-run squared-error differences under its null (each run's difference symmetric
about 0, with run-to-run scales spread over a factor of 10): the share of tables with p ≤ 0.05.

    PYTHONPATH=. python benchmarks/swap_test_size.py [--tables 1000]
"""
import argparse

import numpy as np

from depthdelusion.studies.public_shapes.prediction import SWAP_LEVEL, swap_p


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    for runs in (6, 10, 16, 20):
        rejected = 0
        for _ in range(args.tables):
            scale = np.exp(rng.uniform(0, np.log(10), runs))
            rejected += swap_p(scale * rng.standard_normal(runs)) <= SWAP_LEVEL
        rate = rejected / args.tables
        print(f"{runs} runs: {rejected} of {args.tables} tables rejected at {SWAP_LEVEL}: "
              f"{rate:.3f} ± {np.sqrt(rate * (1 - rate) / args.tables):.3f}")


if __name__ == "__main__":
    main()
