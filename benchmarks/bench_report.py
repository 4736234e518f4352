"""Time the whole paper-data report: the main fits (four laws, 1000 bootstrap refits each,
profile intervals, leave-one-out), the verdict in every design form under total and
non-embedding N, extrapolation, audits, optimal shape and figures.

    PYTHONPATH=. python benchmarks/bench_report.py [--bootstrap 1000] [--no-figures]

Prints wall time, this process's CPU time and the load average before and after (the machine
may be shared: CPU time is the figure to compare across loads).
"""
import argparse
import os
import tempfile
import time

from depthdelusion.analysis.fitting.options import FitOptions
from depthdelusion.analysis.report.build import write_report
from depthdelusion.analysis.report.options import ReportOptions

parser = argparse.ArgumentParser()
parser.add_argument("--bootstrap", type=int, default=1000)
parser.add_argument("--no-figures", action="store_true")
args = parser.parse_args()
load_before = os.getloadavg()[0]
with tempfile.TemporaryDirectory() as out:
    start, cpu = time.perf_counter(), time.process_time()
    write_report("paper", out, ReportOptions(fit=FitOptions(bootstrap=args.bootstrap), runs_label="paper"), figures=not args.no_figures)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
print(f"paper report, {args.bootstrap} bootstrap refits per law: {elapsed:.1f} s wall, "
      f"{cpu:.1f} s CPU; load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after "
      f"({os.cpu_count()} cores)")
