"""The fit at real size, on tables synthesised from Epoch AI's Chinchilla fit
(benchmarks/synth_tables.py): each case runs `depthdelusion fit` on a CSV in a fresh process
under the default options, and prints wall and CPU seconds, peak RSS (getrusage of the child)
and the load average.

    PYTHONPATH=. python benchmarks/bench_fit_scale.py [--cases big,groups,scaling]

big:     100,000 rows, chinchilla, default options (1000 bootstraps).
groups:  300 runs, 11 groups, chinchilla with one offset per group, 1000 bootstraps.
scaling: time against rows n (kaplan/chinchilla) and groups K (300 runs, 200 bootstraps).
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from synth_tables import chinchilla_rows, grouped_runs, write_csv  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GROUPED = """
import sys
from depthdelusion.analysis import fit, load_runs
r = fit(load_runs(sys.argv[1]), "chinchilla", bootstrap=int(sys.argv[2]), group_offsets=True)
print(r.k, r.n_bootstrap, round(r.rmse, 4), r.bootstrap_scheme)
"""


def timed(cmd) -> tuple[float, float, float, str]:
    """(wall s, child CPU s, child peak RSS MB, last line of stdout) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed:\n{out.stderr[-2000:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: run the big case first
    return wall, cpu, after.ru_maxrss / 1024, out.stdout.strip().splitlines()[-1]


def report(label, wall, cpu, rss, last):
    print(f"{label}: {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss:.0f} MB, load "
          f"{os.getloadavg()[0]:.1f} | {last[:120]}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="big,groups,scaling")
    cases = ap.parse_args().cases.split(",")
    tmp = Path(tempfile.mkdtemp())
    fit_cli = [sys.executable, "-m", "depthdelusion", "fit"]
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    if "big" in cases:
        write_csv(chinchilla_rows(100_000), tmp / "big.csv")
        report("100,000 rows, chinchilla, defaults", *timed(fit_cli + [str(tmp / "big.csv"), "--law", "chinchilla"]))
    if "groups" in cases:
        write_csv(grouped_runs(300, 11), tmp / "g11.csv")
        report("300 runs, 11 group offsets, 1000 bootstraps",
               *timed([sys.executable, "-c", GROUPED, str(tmp / "g11.csv"), "1000"]))
    if "scaling" in cases:
        for n in (1_000, 10_000, 100_000):
            write_csv(chinchilla_rows(n), tmp / f"n{n}.csv")
            report(f"n = {n}, chinchilla, defaults", *timed(fit_cli + [str(tmp / f"n{n}.csv"), "--law", "chinchilla"]))
        for k in (1, 4, 11, 22):
            write_csv(grouped_runs(300, k), tmp / f"k{k}.csv")
            report(f"300 runs, K = {k} group offsets, 200 bootstraps",
                   *timed([sys.executable, "-c", GROUPED, str(tmp / f"k{k}.csv"), "200"]))


if __name__ == "__main__":
    main()
