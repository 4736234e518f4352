"""Our Chinchilla fit side by side with the fitting tools researchers use: lmfit (one start,
scipy's trust-region least squares with a Huber loss) and the chinchilla package (BFGS from a
grid of starts), on the same tables, in one process, interleaved, median of repeats; then the
CLI default (`depthdelusion fit`, with its intervals) as a fresh process, with peak memory.

    pip install '.[bench]'    # lmfit, chinchilla (benchmark-only extra)
    PYTHONPATH=. python benchmarks/fit_peers.py [--epoch svg_extracted_data.csv] [--sizes 3000,100000]

Tables: Epoch AI's 240 Chinchilla points (github.com/epoch-research/analyzing-chinchilla,
data/svg_extracted_data.csv; not shipped: give its path) and rows drawn from Epoch's fit
(benchmarks/synth_tables.py). Every tool fits the same objective, Huber (threshold 1e-3) on
log-loss residuals, and each optimum's objective is evaluated here by one formula, so that a
faster tool cannot win by stopping early. Times are CPU seconds of this process
(`time.process_time`), which a loaded machine inflates less than wall time; the load average
is printed with them.
"""
import argparse
import functools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from synth_tables import chinchilla_rows, write_csv  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DELTA = 1e-3  # Huber threshold on ln L residuals (Hoffmann et al. 2022; Besiroglu et al. 2024)
START = dict(E=1.5, A=316.2, alpha=0.325, B=316.2, beta=0.3)  # the centre of our start ranges


def huber_objective(N, T, L, E, A, alpha, B, beta) -> float:
    r = np.log(E + A * N ** -alpha + B * T ** -beta) - np.log(L)
    a = np.abs(r)
    return float(np.sum(np.where(a <= DELTA, 0.5 * r * r, DELTA * (a - 0.5 * DELTA))))


def ours(runs):
    from depthdelusion.analysis import fit

    r = fit(runs, "chinchilla", "huber", bootstrap=0, profile=False, leave_one_out=False)
    return r.params


def lmfit_one_start(N, T, L):
    import lmfit

    p = lmfit.Parameters()
    p.add("E", START["E"], min=0)
    p.add("lnA", np.log(START["A"]))
    p.add("alpha", START["alpha"], min=0)
    p.add("lnB", np.log(START["B"]))
    p.add("beta", START["beta"], min=0)
    lnL = np.log(L)

    def residual(p):
        v = p.valuesdict()
        return np.log(v["E"] + np.exp(v["lnA"]) * N ** -v["alpha"] + np.exp(v["lnB"]) * T ** -v["beta"]) - lnL

    v = lmfit.minimize(residual, p, method="least_squares", loss="huber", f_scale=DELTA).params.valuesdict()
    return dict(E=v["E"], A=np.exp(v["lnA"]), alpha=v["alpha"], B=np.exp(v["lnB"]), beta=v["beta"])


def chinchilla_package(N, T, L, grid: int, workdir: Path):
    """The chinchilla package's fit (BFGS from every point of a grid^5 grid of starts, one
    process), with the Huber loss on ln L in place of its default asymmetric MAE."""
    import logging

    import pandas as pd
    from chinchilla import Chinchilla
    from chinchilla._metrics import log_huber

    logging.disable(logging.WARNING)
    workdir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"C": 6 * N * T, "N": N, "D": T, "loss": L}).to_csv(workdir / "df.csv", index=False)
    param_grid = dict(E=np.linspace(1, 2.5, grid), a=np.linspace(np.log(10), np.log(1e4), grid),
                      b=np.linspace(np.log(10), np.log(1e4), grid), alpha=np.linspace(0.05, 0.6, grid),
                      beta=np.linspace(0.1, 0.5, grid))
    cc = Chinchilla(str(workdir), param_grid=param_grid, loss_fn=functools.partial(log_huber, delta=DELTA),
                    log_level=50)
    cc.fit(parallel=False)
    return dict(E=float(cc.E), A=float(cc.A), alpha=float(cc.alpha), B=float(cc.B), beta=float(cc.beta))


def timed(fn, *args):
    t0 = time.process_time()
    out = fn(*args)
    return time.process_time() - t0, out


def side_by_side(label, runs, repeats: int, grid: int, tmp: Path):
    N, T, L = runs.params, runs.tokens, runs.loss
    times = {"ours": [], "lmfit": []}
    objective = {}
    for _ in range(repeats):  # interleaved, so that a change of load hits both alike
        for name, fn, args in (("ours", ours, (runs,)), ("lmfit", lmfit_one_start, (N, T, L))):
            t, params = timed(fn, *args)
            times[name].append(t)
            objective[name] = huber_objective(N, T, L, **params)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{label}: ours {med['ours']:.3f} s, lmfit {med['lmfit']:.3f} s, ratio "
          f"{med['ours'] / med['lmfit']:.2f} (median of {repeats}); Huber objective ours "
          f"{objective['ours']:.12g}, lmfit {objective['lmfit']:.12g}; load {os.getloadavg()[0]:.1f}",
          flush=True)
    if grid:
        try:
            t, params = timed(chinchilla_package, N, T, L, grid, tmp / f"cc_{label.split()[0]}")
            print(f"{label}: chinchilla package, {grid ** 5} BFGS starts: {t:.1f} s, Huber objective "
                  f"{huber_objective(N, T, L, **params):.12g}", flush=True)
        except Exception as err:  # a peer's failure is a finding, not a crash of the benchmark
            print(f"{label}: chinchilla package failed: {type(err).__name__}: {err}", flush=True)


def cli_default(label, args):
    """`depthdelusion fit` as a user runs it: a fresh process, imports and CSV reading included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "depthdelusion", "fit", *args], capture_output=True,
                         text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        raise SystemExit(f"fit {' '.join(args)} failed:\n{out.stderr[-2000:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    scheme = next((ln for ln in out.stdout.splitlines() if ln.startswith("Jacobian CI:")), "")
    print(f"{label}: CLI default {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS "
          f"{after.ru_maxrss / 1024:.0f} MB (largest child so far), load {os.getloadavg()[0]:.1f} | "
          f"{scheme[scheme.find('Bootstrap:'):][:110]}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epoch", default=os.environ.get("DEPTHDELUSION_EPOCH_CSV"),
                    help="Epoch AI's svg_extracted_data.csv (the 240-point table)")
    ap.add_argument("--sizes", default="3000,100000", help="synthetic table sizes")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--chinchilla-grid", type=int, default=3,
                    help="starts per parameter of the chinchilla package (grid^5 in all; 0 skips it); "
                         "it runs only up to 3000 rows")
    ap.add_argument("--no-cli", action="store_true")
    args = ap.parse_args()
    from depthdelusion.analysis import load_runs
    from depthdelusion.analysis.table.published import load_table

    print(f"load average at start: {os.getloadavg()[0]:.1f}; {os.cpu_count()} CPUs", flush=True)
    tmp = Path(tempfile.mkdtemp())
    cases = []
    if args.epoch:
        cases.append(("240 rows (Epoch AI)", load_table("epoch_chinchilla", path=args.epoch),
                      ["--table", f"epoch_chinchilla={args.epoch}"]))
    for n in (int(s) for s in args.sizes.split(",") if s):
        path = tmp / f"n{n}.csv"
        write_csv(chinchilla_rows(n), path)
        cases.append((f"{n} rows (synthetic)", load_runs(str(path)), [str(path), "--law", "chinchilla"]))
    for label, runs, _ in cases:
        side_by_side(label, runs, args.repeats, args.chinchilla_grid if len(runs) <= 3000 else 0, tmp)
    if not args.no_cli:
        for label, _, cli_args in sorted(cases, key=lambda c: -len(c[1])):  # largest first: ru_maxrss
            cli_default(label, cli_args)


if __name__ == "__main__":
    main()
