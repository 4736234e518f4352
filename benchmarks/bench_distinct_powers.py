"""A Gemstones fit with its cluster bootstrap, a column's power taken per row (the old path)
against once per distinct value (`LawInputs.power`), alternating in one process: CPU seconds
each, and whether the fitted values and intervals are the same to the bit.

    DEPTHDELUSION_TABLES_URL=... python benchmarks/bench_distinct_powers.py [--bootstrap 100] [--repeats 2]
"""
import argparse
import time

import depthdelusion.analysis.law_types as law_types
from depthdelusion.analysis import fit
from depthdelusion.studies.public_shapes.results import parts_arm

parser = argparse.ArgumentParser()
parser.add_argument("--bootstrap", type=int, default=100)
parser.add_argument("--repeats", type=int, default=2)
args = parser.parse_args()
arm = parts_arm("gemstones", "total", ["chinchilla"], bootstrap=0, seed=0)
split = law_types._distinct_values
found = {}
for _ in range(args.repeats):
    for mode, chooser in (("per row", lambda values: None), ("per distinct value", split)):
        law_types._distinct_values = chooser
        cpu = time.process_time()
        r = fit(arm.runs, "gemstones_width_depth", bootstrap=args.bootstrap, seed=0, profile=False,
                leave_one_out=False, diagnostics=False, clusters=arm.clusters)
        print(f"{mode}: {time.process_time() - cpu:.2f} CPU-s")
        found.setdefault(mode, (r.params, r.ci_bootstrap))
print("same fitted values and intervals:", found["per row"] == found["per distinct value"])
