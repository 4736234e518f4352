"""Coverage of the fitting engine's 95% profile-likelihood intervals on simulated tables with a
known truth (issue 59 item 2): how often each identified parameter's interval holds the true
value, how wide it is, and how often the parameter is called "n.i." — for the profile finder
under test (``fit(profile="full")``, the grid walk, or ``"fast"``, root-finding).

    PYTHONPATH=. python benchmarks/interval_coverage.py --kinds chinchilla30,kink \
        --methods full,fast --tables 500 [--workers 2] [--out records.jsonl]
    PYTHONPATH=. python benchmarks/interval_coverage.py --kinds chinchilla100k \
        --methods rows,blocks --bootstrap 1000 --tables 500

A method is a profile finder (``full``, ``fast``) or, for the bootstrap of a large table, how its
one-step resamples are drawn: ``rows`` (row by row, whatever the size) or ``blocks`` (the
engine's default: from ``resampling.BLOCK_SUMS_FROM_ROWS`` rows, random blocks of rows drawn
whole); those two fit no profile.

Table kinds (:data:`KINDS`), each drawn from its own seed, so a table is the same whatever
the number of workers or the order of the methods:

- ``chinchilla30`` / ``chinchilla240`` / ``chinchilla3000``: Epoch AI's Chinchilla fit
  (``synth_tables.EPOCH``) on a grid of model sizes N (70M–16B, Chinchilla's range) crossed with
  token counts T (5B–500B); 6×5, 16×15 and 60×50 rows. Noise N(0, σ²) on the loss with
  σ = 0.04 nats, about 0.015 in log-loss at these losses (2.1–3.3 nats): Chinchilla-like, and
  additive so that the least-squares fit the engine makes by default is the model the data come
  from (a coverage shortfall is then the interval's, not a misspecified noise model's).
- ``chinchilla100k``: the same law and noise on 100,000 rows, N and T log-uniform over those
  ranges: a table past ``BLOCK_SUMS_FROM_ROWS``, for the one-step bootstrap's two draws.
- ``clustered``: a Gemstones-like suite: 20 runs (N 50M–2B), each a series of 12 checkpoints
  (T 2B–350B), the loss carrying a shared run effect u ~ N(0, 0.02²) besides row noise
  N(0, 0.01²). Fitted with ``clusters=`` (a label per run), which the bootstrap resamples when
  ``bootstrap`` > 0; the profile assumes independent rows and so is expected to cover less here
  (both finders alike).
- ``kink``: depth_delusion on the paper's 30 (D, W, N) rows with a small depth penalty
  (λ = 0.01, κ = 5, γ = 0.2): D_crit = κ·ln W lies inside the depths, and the 7 rows beyond it
  carry penalties of 1–6 σ (σ = 0.02): a kink near what the data can detect.

A parameter counts toward coverage when :func:`parameter_status` calls it ``ok``; "n.i." is
``not_identified``; ``at_bound`` is counted apart. ``shrink`` scales every interval about the
estimate (0.5: half as wide), a deliberately broken method for the CI test to reject.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from synth_tables import EPOCH  # noqa: E402

from depthdelusion.analysis import fit, load_runs  # noqa: E402
from depthdelusion.analysis.fitting import resampling  # noqa: E402
from depthdelusion.analysis.fitting.result import NOT_IDENTIFIED, OK, parameter_status  # noqa: E402

LEVEL = 0.95
CHINCHILLA_NOISE = 0.04  # nats: ≈ 0.015 in log-loss at losses of 2.1–3.3
KINK_TRUTH = dict(A=28.35, alpha=0.118, lam=0.01, kappa=5.0, gamma=0.2, E=0.41)
KINK_NOISE = 0.02
DRAWS = ("rows", "blocks")  # the one-step bootstrap's two ways to draw a large table's resamples
CLUSTER_BOOTSTRAP = 200  # cluster resamples per clustered table: the study's and the CI test's


@dataclass(frozen=True)
class Kind:
    """A family of simulated tables: ``law`` fitted, ``truth`` its parameters, ``draw(seed)``
    the rows (a list of dicts) and the cluster label per row (or None)."""

    name: str
    law: str
    truth: dict
    draw: object


def _chinchilla_loss(N, T):
    return EPOCH["E"] + EPOCH["A"] * N ** -EPOCH["alpha"] + EPOCH["B"] * T ** -EPOCH["beta"]


def _chinchilla_grid(sizes: int, tokens: int):
    def draw(seed: int):
        N, T = np.meshgrid(np.geomspace(7e7, 1.6e10, sizes), np.geomspace(5e9, 5e11, tokens))
        N, T = N.ravel(), T.ravel()
        loss = _chinchilla_loss(N, T) + np.random.default_rng(seed).normal(0, CHINCHILLA_NOISE, N.size)
        return _rows(params=N, tokens=T, loss=loss), None
    return draw


def _chinchilla_random(rows: int):
    def draw(seed: int):
        rng = np.random.default_rng(seed)
        N, T = np.exp(rng.uniform(np.log(7e7), np.log(1.6e10), rows)), np.exp(rng.uniform(np.log(5e9), np.log(5e11), rows))
        loss = _chinchilla_loss(N, T) + rng.normal(0, CHINCHILLA_NOISE, rows)
        return _rows(params=N, tokens=T, loss=loss), None
    return draw


def _clustered(seed: int):
    rng = np.random.default_rng(seed)
    runs, checkpoints = 20, 12
    N = np.repeat(np.geomspace(5e7, 2e9, runs), checkpoints)
    T = np.tile(np.geomspace(2e9, 3.5e11, checkpoints), runs)
    run = np.repeat(np.arange(runs), checkpoints)
    loss = _chinchilla_loss(N, T) + rng.normal(0, 0.02, runs)[run] + rng.normal(0, 0.01, N.size)
    return _rows(params=N, tokens=T, loss=loss), [f"run{r}" for r in run]


def _paper_design():
    paper = load_runs("paper")
    return np.asarray(paper.depth, float), np.asarray(paper.width, float), np.asarray(paper.params, float)


def _kink(seed: int):
    D, W, N = _paper_design()
    p = KINK_TRUTH
    loss = (p["A"] * N ** -p["alpha"] + p["lam"] * np.maximum(0.0, D - p["kappa"] * np.log(W)) * W ** -p["gamma"]
            + p["E"] + np.random.default_rng(seed).normal(0, KINK_NOISE, N.size))
    return _rows(depth=D, width=W, params=N, loss=loss), None


def _rows(**columns) -> list[dict]:
    names = list(columns)
    return [dict(zip(names, map(float, values))) for values in zip(*columns.values())]


KINDS = {k.name: k for k in (
    Kind("chinchilla30", "chinchilla", dict(EPOCH), _chinchilla_grid(6, 5)),
    Kind("chinchilla240", "chinchilla", dict(EPOCH), _chinchilla_grid(16, 15)),
    Kind("chinchilla3000", "chinchilla", dict(EPOCH), _chinchilla_grid(60, 50)),
    Kind("chinchilla100k", "chinchilla", dict(EPOCH), _chinchilla_random(100_000)),
    Kind("clustered", "chinchilla", dict(EPOCH), _clustered),
    Kind("kink", "depth_delusion", dict(KINK_TRUTH), _kink),
)}


def fit_one(kind: str, seed: int, method: str, shrink: float = 1.0, bootstrap: int = 0) -> list[dict]:
    """One record per true parameter of table ``seed`` of ``kind`` fitted with profile finder
    ``method``: its status, estimate, 95% profile interval (scaled by ``shrink`` about the
    estimate), whether that holds the truth, and the fit's CPU seconds. With ``bootstrap`` > 0
    (cluster-resampled where the kind has runs) each record also has the bootstrap interval."""
    spec = KINDS[kind]
    rows, clusters = spec.draw(seed)
    cpu = time.process_time()
    threshold = resampling.BLOCK_SUMS_FROM_ROWS
    if method == "rows":
        resampling.BLOCK_SUMS_FROM_ROWS = math.inf
    try:
        result = fit(rows, spec.law, bootstrap=bootstrap, leave_one_out=False, diagnostics=False,
                     profile="none" if method in DRAWS else method, clusters=clusters,
                     cluster_name="run" if clusters else None)
    finally:
        resampling.BLOCK_SUMS_FROM_ROWS = threshold
    cpu = time.process_time() - cpu
    records = []
    for name, truth in spec.truth.items():
        status = parameter_status(result, name)
        value = result.params[name]
        record = dict(kind=kind, seed=seed, method=method, shrink=shrink, param=name, truth=truth,
                      status=status, value=value, cpu_s=cpu)
        if result.ci_profile:
            record.update(_interval("profile", result.ci_profile[name], value, truth, shrink))
        if bootstrap:
            record.update(_interval("bootstrap", result.ci_bootstrap[name], value, truth, shrink))
        records.append(record)
    return records


def _interval(label: str, interval, value: float, truth: float, shrink: float) -> dict:
    lo, hi = (value - shrink * (value - interval[0]), value + shrink * (interval[1] - value))
    return {f"{label}_lo": lo, f"{label}_hi": hi, f"{label}_covers": bool(lo <= truth <= hi),
            f"{label}_width": hi - lo}


def run(kind: str, method: str, tables: int, first_seed: int = 0, shrink: float = 1.0,
        bootstrap: int = 0, workers: int = 1) -> list[dict]:
    """The records of tables ``first_seed`` … ``first_seed + tables − 1``, in seed order
    whatever ``workers``."""
    seeds = range(first_seed, first_seed + tables)
    args = [(kind, s, method, shrink, bootstrap) for s in seeds]
    if workers <= 1:
        return [r for a in args for r in fit_one(*a)]
    with ProcessPoolExecutor(workers) as pool:
        return [r for records in pool.map(fit_one, *zip(*args)) for r in records]


def summarise(records: list[dict], interval: str = "profile") -> list[dict]:
    """Per (kind, method, parameter): tables, identified count, coverage of the identified with
    its Monte Carlo standard error √(p(1−p)/n), median width, n.i. and at-bound rates."""
    out = []
    keys = dict.fromkeys((r["kind"], r["method"], r["param"]) for r in records)
    for kind, method, param in keys:
        mine = [r for r in records if (r["kind"], r["method"], r["param"]) == (kind, method, param)]
        ok = [r for r in mine if r["status"] == OK]
        covered = sum(r[f"{interval}_covers"] for r in ok)
        p = covered / len(ok) if ok else math.nan
        out.append(dict(kind=kind, method=method, param=param, tables=len(mine), identified=len(ok),
                        covered=covered, coverage=p,
                        mcse=math.sqrt(p * (1 - p) / len(ok)) if ok else math.nan,
                        median_width=float(np.median([r[f"{interval}_width"] for r in ok])) if ok else math.nan,
                        ni_rate=sum(r["status"] == NOT_IDENTIFIED for r in mine) / len(mine),
                        at_bound_rate=sum(r["status"] == "at_bound" for r in mine) / len(mine),
                        cpu_s_per_fit=float(np.mean([r["cpu_s"] for r in mine]))))
    return out


def matched(records: list[dict]) -> list[dict]:
    """The records of the tables that every method present fitted (a run stopped early may have
    fitted a chunk with one method only), so that methods are compared on the same tables."""
    methods = {r["method"] for r in records}
    fitted = {}
    for r in records:
        fitted.setdefault((r["kind"], r["seed"]), set()).add(r["method"])
    return [r for r in records if fitted[(r["kind"], r["seed"])] == methods]


def side_by_side(summary: list[dict], interval: str = "profile", old: str = "full", new: str = "fast") -> str:
    """The summary as one row per (kind, parameter), the old method's figures beside the new's
    (``old`` and ``new``: profile finders; ``interval``: the interval scored)."""
    by = {(s["kind"], s["param"], s["method"]): s for s in summary}
    lines = [f"| kind | parameter | tables | identified {old} / {new} | {interval} coverage {old} | {interval} coverage {new} "
             f"| median width {old} / {new} | n.i. {old} / {new} | at bound {old} / {new} | CPU s a fit {old} / {new} |",
             "|" + "---|" * 10]
    for kind, param in dict.fromkeys((s["kind"], s["param"]) for s in summary):
        a, b = by.get((kind, param, old)), by.get((kind, param, new))
        if not (a and b):
            continue
        lines.append(f"| {kind} | {param} | {a['tables']} | {a['identified']} / {b['identified']} "
                     f"| {a['coverage']:.3f} ± {a['mcse']:.3f} | {b['coverage']:.3f} ± {b['mcse']:.3f} "
                     f"| {a['median_width']:.4g} / {b['median_width']:.4g} | {a['ni_rate']:.3f} / {b['ni_rate']:.3f} "
                     f"| {a['at_bound_rate']:.3f} / {b['at_bound_rate']:.3f} "
                     f"| {a['cpu_s_per_fit']:.2f} / {b['cpu_s_per_fit']:.2f} |")
    return "\n".join(lines)


def paired(records: list[dict], old: str = "full", new: str = "fast", interval: str = "profile") -> list[dict]:
    """Per (kind, parameter), the two methods on the same tables: tables fitted by both, those
    where only one covers (of those both identify), only one calls the parameter n.i., and the
    median ratio of the new width to the old (both identified)."""
    by = {(r["kind"], r["seed"], r["param"], r["method"]): r for r in records}
    out = []
    for kind, param in dict.fromkeys((r["kind"], r["param"]) for r in records):
        pairs = [(by[k], by[(k[0], k[1], k[2], new)]) for k in by
                 if k[0] == kind and k[2] == param and k[3] == old and (k[0], k[1], k[2], new) in by]
        both = [(a, b) for a, b in pairs if a["status"] == OK and b["status"] == OK]
        ratios = [b[f"{interval}_width"] / a[f"{interval}_width"] for a, b in both if a[f"{interval}_width"] > 0]
        out.append(dict(kind=kind, param=param, tables=len(pairs), both_identified=len(both),
                        old_only_covers=sum(a[f"{interval}_covers"] and not b[f"{interval}_covers"] for a, b in both),
                        new_only_covers=sum(b[f"{interval}_covers"] and not a[f"{interval}_covers"] for a, b in both),
                        old_only_ni=sum(a["status"] == NOT_IDENTIFIED != b["status"] for a, b in pairs),
                        new_only_ni=sum(b["status"] == NOT_IDENTIFIED != a["status"] for a, b in pairs),
                        status_differs=sum(a["status"] != b["status"] for a, b in pairs),
                        width_ratio=float(np.median(ratios)) if ratios else math.nan))
    return out


def paired_markdown(rows: list[dict], old: str = "full", new: str = "fast") -> str:
    lines = [f"| kind | parameter | tables | both identified | only {old} covers | only {new} covers "
             f"| only {old} n.i. | only {new} n.i. | status differs | median width {new}/{old} |",
             "|" + "---|" * 10]
    for p in rows:
        lines.append(f"| {p['kind']} | {p['param']} | {p['tables']} | {p['both_identified']} "
                     f"| {p['old_only_covers']} | {p['new_only_covers']} | {p['old_only_ni']} "
                     f"| {p['new_only_ni']} | {p['status_differs']} | {p['width_ratio']:.4f} |")
    return "\n".join(lines)


def markdown(summary: list[dict], interval: str = "profile") -> str:
    lines = [f"| kind | method | parameter | tables | identified | coverage ({interval}) ± MC s.e. "
             "| median width | n.i. | at bound | CPU s/fit |", "|" + "---|" * 10]
    for s in summary:
        lines.append(f"| {s['kind']} | {s['method']} | {s['param']} | {s['tables']} | {s['identified']} "
                     f"| {s['coverage']:.3f} ± {s['mcse']:.3f} | {s['median_width']:.4g} "
                     f"| {s['ni_rate']:.3f} | {s['at_bound_rate']:.3f} | {s['cpu_s_per_fit']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--methods", default="full,fast")
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--chunk", type=int, default=25,
                        help="tables per method in turn, each chunk's records written as it ends, so "
                             "that a run stopped early holds the same tables for every method")
    parser.add_argument("--bootstrap", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", default=None, help="append every record here (JSON lines)")
    parser.add_argument("--summarise", default=None, metavar="JSONL",
                        help="print the tables of records written before, and run nothing")
    args = parser.parse_args(argv)
    if args.summarise:
        with open(args.summarise) as f:
            records = matched([json.loads(line) for line in f])
    else:
        records = _run_chunks(args)
    methods = list(dict.fromkeys(r["method"] for r in records))
    old_new = dict(old=methods[0], new=methods[1]) if len(methods) == 2 else None

    def show(summary, interval):
        return side_by_side(summary, interval, **old_new) if old_new else markdown(summary, interval)
    if any("profile_covers" in r for r in records):
        print(show(summarise([r for r in records if "profile_covers" in r], "profile"), "profile"))
        if old_new:
            print(paired_markdown(paired(records, **old_new), **old_new))
    if any("bootstrap_covers" in r for r in records):
        boot = [r for r in records if "bootstrap_covers" in r]
        print(show(summarise(boot, "bootstrap"), "bootstrap"))
        if old_new:
            print(paired_markdown(paired(boot, interval="bootstrap", **old_new), **old_new))


def _run_chunks(args) -> list[dict]:
    records = []
    for kind in args.kinds.split(","):
        for start in range(args.first_seed, args.first_seed + args.tables, args.chunk):
            count = min(args.chunk, args.first_seed + args.tables - start)
            for method in args.methods.split(","):
                wall = time.perf_counter()
                mine = run(kind, method, count, start, bootstrap=args.bootstrap, workers=args.workers)
                print(f"{kind} {method}: tables {start}-{start + count - 1}, "
                      f"{time.perf_counter() - wall:.0f} s wall, load average {os.getloadavg()[0]:.1f}",
                      flush=True)
                if args.out:
                    with open(args.out, "a") as f:
                        f.writelines(json.dumps(r) + "\n" for r in mine)
                records += mine
    return records


if __name__ == "__main__":
    main()
