"""Time the whole paper-data report: four laws (depth_delusion, its two variants, kaplan),
1000 bootstrap refits each, plus extrapolation, audits, optimal shape and figures.

    PYTHONPATH=. python benchmarks/bench_report.py [--bootstrap 1000]
"""
import argparse
import tempfile
import time

from depthdelusion.analysis.report import write_report

parser = argparse.ArgumentParser()
parser.add_argument("--bootstrap", type=int, default=1000)
args = parser.parse_args()
with tempfile.TemporaryDirectory() as out:
    start = time.perf_counter()
    write_report("paper", out, bootstrap=args.bootstrap, runs_label="paper")
    elapsed = time.perf_counter() - start
print(f"paper report, {args.bootstrap} bootstrap refits per law: {elapsed:.1f} s")
