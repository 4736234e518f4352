"""`depthdelusion bench`: compile time, step time, tokens/s, MFU and peak memory of the real
train step, built exactly as the training loop builds it.

Step times are wall-clock seconds per step with `jax.block_until_ready` after each step, on
random token batches (the data pipeline is measured separately: benchmarks/bench_data.py).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any

import jax
import numpy as np

from depthdelusion.config import Config
from depthdelusion import model_size as size
from depthdelusion.parallel.mesh import make_mesh
from depthdelusion.train.hardware import peak_flops_per_device
from depthdelusion.train.step import build_trainer
from depthdelusion.training_options import BenchOptions


@dataclasses.dataclass
class StepTimes:
    """Seconds per step of one compiled variant."""

    n: int
    median_s: float
    p10_s: float
    p90_s: float
    mean_s: float

    @classmethod
    def of(cls, seconds: list[float]) -> StepTimes | None:
        if not seconds:
            return None
        s = np.asarray(seconds)
        return cls(len(s), float(np.median(s)), float(np.percentile(s, 10)), float(np.percentile(s, 90)),
                   float(s.mean()))


@dataclasses.dataclass
class BenchResult:
    device_kind: str
    devices: int
    model: str  # e.g. "16L x 512W, V 50257, seq 1024, batch 8"
    params: int
    tokens_per_step: int
    flops_per_token: float  # model matmul FLOPs, forward + backward (size.flops_per_token)
    layer_stats: str  # never | every | N | compare
    lower_s: dict[str, float]  # per variant: trace + lower to StableHLO, seconds
    compile_s: dict[str, float]  # per variant: XLA compile of the lowered step, seconds
    step: dict[str, StepTimes | None]  # per variant ("plain", "layer_stats")
    schedule_median_s: float | None  # median over all timed steps in the run's schedule
    tokens_per_s: float | None
    flops_per_s: float | None
    mfu: float | None  # None where the device has no peak in the table (CPU)
    peak_memory_bytes: int | None
    peak_memory_source: str  # "device peak_bytes_in_use" or "compiled memory_analysis (estimate)"
    logging_cost: dict[str, float] | None  # compare mode: stats/plain ratios

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        lines = [f"{self.model} on {self.devices} x {self.device_kind}; {self.params:,} params",
                 f"layer stats: {self.layer_stats}"]
        for name in self.compile_s:
            lines.append(f"  compile {name}: lower {self.lower_s[name]:.2f} s + compile {self.compile_s[name]:.2f} s")
        for name, t in self.step.items():
            if t is not None:
                lines.append(f"  step {name}: median {1e3 * t.median_s:.2f} ms (p10 {1e3 * t.p10_s:.2f}, "
                             f"p90 {1e3 * t.p90_s:.2f}, n {t.n})")
        if self.tokens_per_s is not None:
            lines.append(f"  {self.tokens_per_s:,.0f} tokens/s, {self.flops_per_s / 1e12:.3f} TFLOP/s (model FLOPs)"
                         + (f", MFU {100 * self.mfu:.1f}%" if self.mfu is not None else ", MFU n/a (no peak for this device)"))
        mem = "n/a" if self.peak_memory_bytes is None else f"{self.peak_memory_bytes / 2**30:.3f} GiB"
        lines.append(f"  peak memory: {mem} ({self.peak_memory_source})")
        if self.logging_cost:
            c = self.logging_cost
            lines.append(f"  logging cost: every step {100 * (c['every_step'] - 1):+.2f}%, "
                         f"every 100 steps {100 * (c['every_100'] - 1):+.3f}%")
        return "\n".join(lines)


def _is_stats_step(i: int, layer_stats: str) -> bool:
    """Which variant timed step i (0-based) runs; compare alternates plain, stats, plain, ..."""
    if layer_stats == "never":
        return False
    if layer_stats == "every":
        return True
    if layer_stats == "compare":
        return i % 2 == 1
    return (i + 1) % int(layer_stats) == 0


def _peak_memory(compiled: list) -> tuple[int | None, str]:
    stats = jax.devices()[0].memory_stats()  # None on CPU
    if stats and "peak_bytes_in_use" in stats:
        return int(stats["peak_bytes_in_use"]), "device peak_bytes_in_use"
    try:
        totals = []
        for c in compiled:
            m = c.memory_analysis()
            totals.append(m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes
                          + m.temp_size_in_bytes)
        return int(max(totals)), "compiled memory_analysis: arguments + outputs - aliased + temporaries (estimate)"
    except Exception:  # not every backend implements memory_analysis
        return None, "n/a"


# The defaults are `bench`'s command-line ones, declared once (training_options.BenchOptions).
def bench(cfg: Config, steps: int = BenchOptions.steps, warmup: int = BenchOptions.warmup,
          layer_stats: str = BenchOptions.layer_stats) -> BenchResult:
    """Compile the train step(s) ahead of time, then time `steps` steps after `warmup` untimed
    ones. `layer_stats`: "never", "every", N (every Nth step), or "compare" (plain and
    layer-stats steps alternate, so both see the same machine load; gives their ratio)."""
    if layer_stats not in ("never", "every", "compare") and not (layer_stats.isdigit() and int(layer_stats) > 0):
        raise ValueError(f"--layer-stats={layer_stats!r}: valid values are never, every, compare or a positive integer")
    cfg = cfg.validate(reads_data=False)  # random token ids, no data: any vocabulary set is kept
    mc, tc = cfg.model, cfg.train
    mesh = make_mesh(cfg.mesh)
    trainer = build_trainer(cfg, mesh, reuse=False)  # its compile is timed
    tokens_spec = jax.ShapeDtypeStruct((tc.batch_size, mc.seq_len + 1), np.int32, sharding=trainer.batch_sharding)

    variants = {"plain": trainer.step, "layer_stats": trainer.step_with_layer_stats}
    used = {"never": ("plain",), "every": ("layer_stats",)}.get(layer_stats, ("plain", "layer_stats"))
    lower_s, compile_s, compiled = {}, {}, {}
    for name in used:
        t0 = time.perf_counter()
        lowered = variants[name].lower(trainer.abstract_state, tokens_spec)  # shapes only: no state yet
        t1 = time.perf_counter()
        compiled[name] = lowered.compile()
        lower_s[name], compile_s[name] = t1 - t0, time.perf_counter() - t1

    state = trainer.init() if steps + warmup > 0 else None
    rng = np.random.default_rng(0)
    # Random tokens, a few distinct batches cycled: [B, S+1] (inputs and shifted targets).
    batches_NxBxS1 = [jax.device_put(rng.integers(0, mc.vocab_size, tokens_spec.shape, np.int32),
                                     trainer.batch_sharding) for _ in range(4 if state is not None else 0)]
    times: dict[str, list[float]] = {"plain": [], "layer_stats": []}
    all_times = []
    for i in range(-warmup, steps):
        if i < 0:  # warmup runs every compiled variant in turn
            name = used[i % len(used)]
        else:
            name = "layer_stats" if _is_stats_step(i, layer_stats) else "plain"
        batch = batches_NxBxS1[i % len(batches_NxBxS1)]
        t0 = time.perf_counter()
        state, metrics = compiled[name](state, batch)
        jax.block_until_ready((state, metrics))
        dt = time.perf_counter() - t0
        if i >= 0:
            times[name].append(dt)
            all_times.append(dt)

    step = {name: StepTimes.of(t) for name, t in times.items()}
    tokens_per_step = tc.batch_size * mc.seq_len
    fpt = size.flops_per_token(mc)
    median = float(np.median(all_times)) if all_times else None
    tokens_per_s = tokens_per_step / median if median else None
    flops_per_s = tokens_per_s * fpt if tokens_per_s else None
    peak = peak_flops_per_device()
    mfu = flops_per_s / (peak * mesh.size) if peak and flops_per_s else None
    memory, memory_source = _peak_memory(list(compiled.values()))
    cost = None
    if step["plain"] and step["layer_stats"]:
        r = step["layer_stats"].median_s / step["plain"].median_s
        cost = {"every_step": r, "every_100": (99 + r) / 100}
    model = (f"{mc.depth}L x {mc.width}W, V {mc.vocab_size}, seq {mc.seq_len}, batch {tc.batch_size}, "
             f"{mc.compute_dtype} compute, remat {mc.remat}, attention {mc.attention}"
             + (f", {tc.grad_accum_steps} microbatches" if tc.grad_accum_steps > 1 else ""))
    return BenchResult(
        device_kind=jax.devices()[0].device_kind, devices=mesh.size, model=model,
        params=size.count_params(mc), tokens_per_step=tokens_per_step, flops_per_token=fpt,
        layer_stats=layer_stats, lower_s=lower_s, compile_s=compile_s, step=step,
        schedule_median_s=median, tokens_per_s=tokens_per_s, flops_per_s=flops_per_s, mfu=mfu,
        peak_memory_bytes=memory, peak_memory_source=memory_source, logging_cost=cost)
