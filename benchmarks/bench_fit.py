"""Time the fitting engine alone on the paper data: every law that fits it, with 1000
bootstrap refits (cold-started), leave-one-out and profile-likelihood intervals.

    PYTHONPATH=. python benchmarks/bench_fit.py [--bootstrap 1000] [--group-offsets]

Prints wall and CPU seconds per law and the load average, since a shared machine's load
inflates wall time (CPU time much less).
"""
import argparse
import os
import time

from depthdelusion.analysis import fit, load_runs

LAWS = ("depth_delusion", "depth_delusion_relative", "depth_delusion_power", "kaplan", "chinchilla")

parser = argparse.ArgumentParser()
parser.add_argument("--bootstrap", type=int, default=1000)
parser.add_argument("--group-offsets", action="store_true")
args = parser.parse_args()
runs = load_runs("paper")
print(f"load average at start: {os.getloadavg()[0]:.1f}")
total_wall = total_cpu = 0.0
for law in LAWS:
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        fit(runs, law, bootstrap=args.bootstrap, group_offsets=args.group_offsets)
    except ValueError as err:  # chinchilla: the paper's token counts do not vary
        print(f"{law}: not fitted ({err})")
        continue
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    total_wall, total_cpu = total_wall + wall, total_cpu + cpu
    print(f"{law}: {wall:.1f} s wall, {cpu:.1f} s CPU")
print(f"all fits, {args.bootstrap} bootstrap refits each: {total_wall:.1f} s wall, {total_cpu:.1f} s CPU; "
      f"load average at end: {os.getloadavg()[0]:.1f}")
