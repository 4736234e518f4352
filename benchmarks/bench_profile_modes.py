"""The profile stage's three modes (`fit --profile none|fast|full`) side by side: CPU seconds of
the fit and whether each fast interval prints as the full one (`interval_text`, 4 digits).

    PYTHONPATH=. python benchmarks/bench_profile_modes.py [--table paper] [--laws a,b] \
        [--columns NAME=COLUMN,...] [--bootstrap 0]

Every fit is the same but for ``profile`` (bootstrap 0 and no leave-one-out by default, so the
profile stage is most of the cost, as in issue 63's `--bootstrap 0` fits). CPU time is the
figure to compare on a shared machine; wall time and the load average are printed beside it.
"""
import argparse
import os
import time

from depthdelusion.analysis import fit, load_runs
from depthdelusion.analysis.formats.interval_text import interval_text

MODES = ("none", "fast", "full")

parser = argparse.ArgumentParser()
parser.add_argument("--table", default="paper")
parser.add_argument("--laws", default="kaplan,depth_delusion,depth_delusion_power,shape_quadratic,depth_softplus")
parser.add_argument("--columns", default=None, help="NAME=COLUMN,... as `fit --columns`")
parser.add_argument("--bootstrap", type=int, default=0)
args = parser.parse_args()
columns = dict(item.split("=") for item in args.columns.split(",")) if args.columns else None
runs = load_runs(args.table, columns=columns)
print(f"{args.table}: {len(runs)} rows; load average at start: {os.getloadavg()[0]:.1f}")
totals = {m: 0.0 for m in MODES}
moved = []
for law in args.laws.split(","):
    results, line = {}, []
    for mode in MODES:
        wall, cpu = time.perf_counter(), time.process_time()
        results[mode] = fit(runs, law, bootstrap=args.bootstrap, leave_one_out=False, diagnostics=False,
                            profile=mode)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        totals[mode] += cpu
        line.append(f"{mode} {cpu:.2f} s CPU ({wall:.1f} s wall)")
    print(f"{law}: " + ", ".join(line))
    for name, full in results["full"].ci_profile.items():
        fast = results["fast"].ci_profile[name]
        if interval_text(fast) != interval_text(full):
            moved.append(f"  {law} {name}: full {interval_text(full)}, fast {interval_text(fast)}")
print("all laws: " + ", ".join(f"{m} {totals[m]:.1f} s CPU" for m in MODES)
      + f"; load average at end: {os.getloadavg()[0]:.1f}")
print(f"profile intervals that print differently, fast against full ({len(moved)}):")
print("\n".join(moved) or "  none")
