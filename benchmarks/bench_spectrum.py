"""Time and memory of `depthdelusion spectrum` at a given shape (default 4 layers x W 1024).

    PYTHONPATH=. python benchmarks/bench_spectrum.py [--depth 4] [--width 1024] [--seq-len 1024]
        [--tokens 262144] [--rows 16] [--moments-only]

Default: a randomly initialised model of that shape is saved as a run (config.yaml + a step-0
checkpoint, built-in corpus) and the command's `measure` runs on it end to end: restore, forward
passes over held-out tokens with the per-layer moments, eigendecompositions and tail fits.
--moments-only skips the model: random streams [D+1, rows, seq, W] go through the same per-batch
moments (jit), host float64 combination and eigendecompositions, i.e. the spectrum's own cost
without the forward pass. Peak memory is the process's max RSS (host) and, on an accelerator,
the device's peak bytes in use.
"""
import argparse
import dataclasses
import os
import resource
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from depthdelusion.analysis.science import spectra
from depthdelusion.studies.common import spectrum
parser = argparse.ArgumentParser()
parser.add_argument("--depth", type=int, default=4)
parser.add_argument("--width", type=int, default=1024)
parser.add_argument("--seq-len", type=int, default=1024)
parser.add_argument("--tokens", type=int, default=spectrum.DEFAULT_TOKENS)
parser.add_argument("--rows", type=int, default=spectrum.DEFAULT_ROWS)
parser.add_argument("--moments-only", action="store_true")
args = parser.parse_args()
D, W = args.depth, args.width


def peak() -> str:
    load = os.getloadavg()[0]
    host = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    stats = jax.devices()[0].memory_stats() or {}
    dev = f", device peak {stats['peak_bytes_in_use'] / 2**30:.2f} GiB" if "peak_bytes_in_use" in stats else ""
    return (f"host max RSS {host:.2f} GiB{dev}; process CPU time {time.process_time():.1f} s "
            f"(all threads, whole script), load average {load:.1f} on {os.cpu_count()} cores")


def moments_only() -> None:
    n_batches = max(2, args.tokens // (args.rows * args.seq_len))
    moments = jax.jit(lambda x: jax.vmap(spectrum.batch_moments)(x))
    key = jax.random.key(0)
    scale_W = np.arange(1, W + 1, dtype=np.float32) ** -0.5  # a power-law spectrum, β = 1
    start, cpu = time.perf_counter(), time.process_time()
    groups = [spectrum.empty_moments() for _ in range(spectrum.GROUPS)]
    for b in range(n_batches):
        x = jax.random.normal(jax.random.fold_in(key, b), (D + 1, args.rows, args.seq_len, W)) * scale_W
        mean_LxW, m2_LxWxW = jax.device_get(moments(x))
        g = b * spectrum.GROUPS // n_batches
        groups[g] = groups[g] + spectrum.Moments(args.rows * args.seq_len, mean_LxW.astype(np.float64),
                                                 m2_LxWxW.astype(np.float64))
    t_moments, c_moments = time.perf_counter() - start, time.process_time() - cpu
    start, cpu = time.perf_counter(), time.process_time()
    full = spectrum.eigenvalues(spectrum.total_moments(groups))
    half = [spectrum.eigenvalues(spectrum.total_moments(groups[:4])), spectrum.eigenvalues(spectrum.total_moments(groups[4:]))]
    jack = [spectrum.eigenvalues(spectrum.total_moments(groups[:g] + groups[g + 1:])) for g in range(len(groups))]
    fits = [spectra.tail_fit(layer, full[layer], (half[0][layer], half[1][layer]),
                             [j[layer] for j in jack], n_batches * args.rows * args.seq_len)
            for layer in range(D + 1)]
    t_eig, c_eig = time.perf_counter() - start, time.process_time() - cpu
    print(f"moments only: {D + 1} streams x W {W}, {n_batches} batches of {args.rows} x {args.seq_len} "
          f"= {n_batches * args.rows * args.seq_len:,} tokens (random streams, no model) on "
          f"{jax.devices()[0].device_kind}")
    print(f"per-batch moments (incl. generating the streams and one compile) + host float64 "
          f"combination: {t_moments:.1f} s wall, {c_moments:.1f} s CPU; {11 * (D + 1)} eigendecompositions "
          f"(full, 2 halves, 8 jackknife per stream) + fits: {t_eig:.1f} s wall, {c_eig:.1f} s CPU; "
          f"{peak()}")
    print(f"beta of the random streams (population 1.0): {[round(f.beta, 3) for f in fits]}")


def end_to_end() -> None:
    from depthdelusion import rundir
    from depthdelusion.config import Config, MeshConfig
    from depthdelusion.parallel.mesh import make_mesh
    from depthdelusion.train.checkpoints import Checkpointer
    from depthdelusion.train.step import build_trainer

    cfg = Config()
    mc = dataclasses.replace(cfg.model, depth=D, width=W, seq_len=args.seq_len)
    cfg = dataclasses.replace(cfg, model=mc, mesh=MeshConfig(data=1)).validate()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        rundir.write_config(run, cfg)
        trainer = build_trainer(cfg, make_mesh(cfg.mesh, jax.devices()[:1]), reuse=False)  # freed below
        ckpt = Checkpointer(run / "checkpoints")
        ckpt.save(0, trainer.init(), {})
        ckpt.close()
        del trainer
        start = time.perf_counter()
        full, fits, info = spectrum.measure(run, args.tokens, args.rows)
        elapsed = time.perf_counter() - start
    print(f"end to end, random-init {D}L x W {W} (seq {args.seq_len}) on {jax.devices()[0].device_kind}: "
          f"{info['tokens']:,} tokens in {info['batches']} batches of {args.rows}; restore + forward + "
          f"moments {info['forward_s']} s, total {elapsed:.1f} s (eigendecompositions and fits "
          f"{info['total_s'] - info['forward_s']:.1f} s); {peak()}")
    print("half-split max rel. diff over the top k:", [round(f.half_max_rel_diff, 4) for f in fits],
          "k =", fits[0].top_k, "; fit ranges:", [f.rank_range for f in fits])


moments_only() if args.moments_only else end_to_end()
