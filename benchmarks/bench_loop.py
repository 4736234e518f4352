"""Host-side wall time per step of the real training loop, with and without data prefetch.

Runs `train()` on the built-in corpus and timestamps every `next(batches)` call (one per loop
iteration), so the interval between two calls is one step of the loop as the host sees it,
data loading, dispatch and metric fetches included; the time inside `next()` is the data wait.
Runs alternate between the prefetch settings (A, B, A, B, ...) so machine load hits both alike.

    python benchmarks/bench_loop.py --prefetch 0,4 --repeats 2 --steps 60
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np

from depthdelusion.config import load_config
from depthdelusion.train import loop
from depthdelusion.config import resolve_config_path


class TimedBatches(loop.Batches):
    """The loop's own Batches, with a timestamp and the wait of every `next()` recorded."""

    calls: list[tuple[float, float]] = []

    def __next__(self):
        t0 = time.perf_counter()
        batch = super().__next__()
        TimedBatches.calls.append((t0, time.perf_counter() - t0))
        return batch


def one_run(config: str, overrides: list[str], prefetch: int, steps: int, skip: int) -> dict:
    cfg = load_config(resolve_config_path(config), [
        *overrides, f"data.prefetch={prefetch}", f"train.steps={steps}", "train.layer_stats_every=1000000",
        "train.eval_batches=0", "train.checkpoint_every=0", "train.checkpoint_minutes=0"])
    TimedBatches.calls = []
    loop.Batches = TimedBatches
    with tempfile.TemporaryDirectory() as out:
        loop.train(cfg, out)
    starts = np.array([t for t, _ in TimedBatches.calls])
    waits = np.array([w for _, w in TimedBatches.calls])
    # Steady state: drop the first `skip` iterations (compilation, buffers filling).
    step_s = np.diff(starts)[skip:]
    wait_s = waits[skip + 1:]
    pct = lambda a, q: float(np.percentile(a, q) * 1e3)
    return {"prefetch": prefetch, "steps_timed": len(step_s),
            "step_ms": {q: pct(step_s, q) for q in (10, 50, 90, 99)}, "step_ms_max": float(step_s.max() * 1e3),
            "data_wait_ms": {q: pct(wait_s, q) for q in (50, 90, 99)}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config", nargs="?", default="quickstart")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--prefetch", default="0,4")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--skip", type=int, default=5)
    args = ap.parse_args()
    for _ in range(args.repeats):
        for prefetch in (int(p) for p in args.prefetch.split(",")):
            print(json.dumps(one_run(args.config, args.overrides, prefetch, args.steps, args.skip)), flush=True)


if __name__ == "__main__":
    main()
