"""Ahead-of-time TPU memory plans: compile the real train step for a TPU slice on a CPU host.

`jax.experimental.topologies` (with libtpu installed: the `tpu` extra) describes a slice's
devices without owning one; the trainer's step (depthdelusion/train/step.py, unchanged) is
jitted over a mesh of those devices, lowered with abstract state and batch, and compiled by the
TPU compiler. `memory_analysis()` then gives per-chip bytes of arguments, outputs and
temporaries, `cost_analysis()` XLA's FLOP count. A configuration fits when its peak per-chip
bytes stay below `margin` x the chip's HBM.

Mesh: by default fsdp over every chip (data=1, tensor=1): parameters and optimizer state are
split over all chips, the batch is split over data x fsdp either way, so no other layout of
these axes uses less memory (data parallelism only saves communication). Remat: the first of
none -> save_dots -> full that fits (or the one asked for is checked); if none fits, gradient
accumulation with the last of them: 2, 4, 8, ... microbatches (train.grad_accum_steps), while
the batch still splits into whole microbatches over the data-parallel chips.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import time
from typing import Any, NamedTuple

from depthdelusion import model_size as size
from depthdelusion.training_options import PlanOptions
from depthdelusion.config import Config, MeshConfig
from depthdelusion.train.hardware import TPU_GENERATIONS, Chip, GiB

REMAT_ORDER = ("none", "save_dots", "full")

# Chips -> physical topology (x, y[, z]) of the standard slice shapes.
_SHAPES_3D = {4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4", 128: "4x4x8",
              256: "4x8x8", 512: "8x8x8", 1024: "8x8x16", 2048: "8x16x16"}
_SHAPES_2D = {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16",
              256: "16x16"}


class Topology(NamedTuple):
    name: str  # as users write it: v4-32
    xla_name: str  # as libtpu wants it: v4:2x2x4
    chip: Chip
    chips: int


def resolve_topology(name: str) -> Topology:
    """`v4-32`, `v5e-16`, `v6e-64`, `v5p-128` (Cloud accelerator types) or `v4:2x2x4` style."""
    generations = "|".join(TPU_GENERATIONS)
    match = re.fullmatch(rf"({generations})-(\d+)", name)
    if match:
        gen, count = match.group(1), int(match.group(2))
        chip = TPU_GENERATIONS[gen]
        chips = count // 2 if chip.cores_in_name else count
        shapes = _SHAPES_3D if chip.cores_in_name else _SHAPES_2D
        if chips not in shapes or (chip.cores_in_name and count % 2):
            valid = ", ".join(f"{gen}-{c * 2 if chip.cores_in_name else c}" for c in shapes)
            raise ValueError(f"--topology {name}: not a standard {gen} slice; valid: {valid}")
        return Topology(name, f"{gen}:{shapes[chips]}", chip, chips)
    match = re.fullmatch(rf"({generations}):(\d+(?:x\d+)+)", name)
    if match:
        gen = match.group(1)
        chips = math.prod(int(d) for d in match.group(2).split("x"))
        return Topology(name, name, TPU_GENERATIONS[gen], chips)
    raise ValueError(f"--topology {name!r}: expected e.g. v4-32, v5e-16, v6e-64, v5p-128 or v4:2x2x4")


def topology_devices(topology: Topology) -> list:
    """The slice's (abstract) devices, one per chip, from libtpu; no TPU needed."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # Compiling needs no TPU, so two planners (or a planner and a test) may share libtpu.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    try:
        import libtpu  # noqa: F401
    except ImportError:
        raise ValueError("planning for a TPU needs libtpu: pip install -e '.[tpu]'") from None
    from jax.experimental import topologies

    kwargs: dict[str, Any] = {"chip_config_name": "megacore"} if topology.chip.cores_in_name else {}
    dims = [int(d) for d in topology.xla_name.split(":")[1].split("x")]
    if len(dims) == 2 and (dims[0] < 2 or dims[1] < 2):  # smaller than one 2x2 host (v5e-1)
        kwargs["chips_per_host_bounds"] = (dims[0], dims[1], 1)
    desc = topologies.get_topology_desc(topology_name=topology.xla_name, platform="tpu", **kwargs)
    devices = list(desc.devices)
    if len(devices) != topology.chips:
        raise ValueError(f"--topology {topology.name}: libtpu gave {len(devices)} devices, "
                         f"expected {topology.chips} chips")
    return devices


@dataclasses.dataclass
class Attempt:
    mesh: tuple[int, int, int]
    remat: str
    grad_accum: int = 1
    argument_bytes: int = 0
    output_bytes: int = 0
    alias_bytes: int = 0
    temp_bytes: int = 0
    code_bytes: int = 0
    xla_flops: float | None = None  # per chip, as cost_analysis() counts (scan body once)
    compile_s: float = 0.0
    fits: bool = False
    error: str = ""

    @property
    def peak_bytes(self) -> int:
        """Arguments + outputs not aliased to (donated) arguments + temporaries + code."""
        return self.argument_bytes + self.output_bytes - self.alias_bytes + self.temp_bytes + self.code_bytes


@dataclasses.dataclass
class Plan:
    name: str
    topology: Topology
    depth: int
    width: int
    params: int
    batch_size: int
    seq_len: int
    margin: float
    attempts: list[Attempt]
    flops_per_chip: float  # ours, model FLOPs of one step per chip (all layers)
    flops_scan_once_per_chip: float  # ours counted as XLA does: the layers' part once

    @property
    def chosen(self) -> Attempt | None:
        return next((a for a in self.attempts if a.fits), None)

    @property
    def best(self) -> Attempt:
        return self.chosen or self.attempts[-1]

    @property
    def fits(self) -> bool:
        return self.chosen is not None

    def describe(self) -> str:
        a, hbm = self.best, self.topology.chip.hbm_bytes
        lines = [f"{self.name}: {self.depth}L x {self.width}W, {self.params / 1e6:,.1f}M params, "
                 f"batch {self.batch_size} x {self.seq_len} on {self.topology.name} "
                 f"({self.topology.chips} chips, {hbm / GiB:.0f} GiB HBM each)"]
        for t in self.attempts:
            lines.append(
                f"  mesh data={t.mesh[0]} fsdp={t.mesh[1]} tensor={t.mesh[2]} remat={t.remat}"
                + (f" grad_accum={t.grad_accum}" if t.grad_accum > 1 else "") + ": "
                + (f"does not fit (compiler): {t.error}" if t.error else
                   f"args {t.argument_bytes / GiB:.2f} + out {(t.output_bytes - t.alias_bytes) / GiB:.2f} "
                   f"+ temp {t.temp_bytes / GiB:.2f} + code {t.code_bytes / GiB:.2f} = "
                   f"{t.peak_bytes / GiB:.2f} GiB per chip ({100 * t.peak_bytes / hbm:.0f}% of HBM) "
                   f"-> {'fits' if t.fits else 'does not fit'}; compiled in {t.compile_s:.0f} s"))
        if a.xla_flops:
            lines.append(f"  FLOPs per chip per step: XLA {a.xla_flops:.3e} (scanned layers counted once); "
                         f"ours {self.flops_scan_once_per_chip:.3e} counted the same way "
                         f"(ratio {a.xla_flops / self.flops_scan_once_per_chip:.2f}), "
                         f"ours with all {self.depth} layers {self.flops_per_chip:.3e}")
        lines.append(f"  => {'fits' if self.fits else 'does not fit'}"
                     + (f" with mesh {a.mesh} (data, fsdp, tensor), remat {a.remat}"
                        + (f", train.grad_accum_steps={a.grad_accum}" if a.grad_accum > 1 else "") if self.fits else
                        f": smallest peak {min(t.peak_bytes for t in self.attempts if not t.error) / GiB:.1f} GiB"
                        if any(not t.error for t in self.attempts) else ""))
        return "\n".join(lines)

    def row(self) -> dict[str, Any]:
        a = self.best
        return {
            "run": self.name, "D": self.depth, "W": self.width, "params (M)": f"{self.params / 1e6:,.1f}",
            "topology": self.topology.name, "mesh (d,f,t)": ",".join(map(str, a.mesh)), "remat": a.remat,
            "grad accum": a.grad_accum,
            "args GiB": f"{a.argument_bytes / GiB:.2f}", "temp GiB": f"{a.temp_bytes / GiB:.2f}",
            "peak GiB/chip": f"{a.peak_bytes / GiB:.2f}",
            "HBM %": f"{100 * a.peak_bytes / self.topology.chip.hbm_bytes:.0f}",
            "fits": "yes" if self.fits else "NO",
            "XLA/ours FLOPs": f"{a.xla_flops / self.flops_scan_once_per_chip:.2f}" if a.xla_flops else "",
            "tried": " ".join(f"{t.remat}{f'/k{t.grad_accum}' if t.grad_accum > 1 else ''}:{'ok' if t.fits else 'x'}"
                              for t in self.attempts),
        }


# remat and margin default to `plan`'s command-line defaults, declared once (training_options.PlanOptions).
def plan_config(cfg: Config, topology: str | Topology, *, name: str = "config",
                mesh: tuple[int, int, int] | None = None, remat: str = PlanOptions.remat,
                margin: float = PlanOptions.margin, devices: list | None = None) -> Plan:
    """Compile cfg's train step for `topology` and find (or check) a mesh and remat that fit.

    remat: "auto" tries none -> save_dots -> full, a policy name only that one; then, with the
    last policy, 2x, 4x, ... the config's train.grad_accum_steps, while batch_size splits into
    that many microbatches over the data-parallel chips. The first that fits is chosen.
    mesh: (data, fsdp, tensor); None = fsdp over every chip.
    Compute dtype "auto" becomes bfloat16 (the target is a TPU); a null vocab_size the tokenizer's.
    """
    topology = resolve_topology(topology) if isinstance(topology, str) else topology
    devices = devices if devices is not None else topology_devices(topology)
    cfg = cfg.validate(reads_data=False)  # compiled, never fed data: any vocabulary set is kept
    model = cfg.model
    if model.compute_dtype == "auto":
        model = dataclasses.replace(model, compute_dtype="bfloat16")
    mesh = mesh or (1, topology.chips, 1)
    if math.prod(mesh) != topology.chips:
        raise ValueError(f"--mesh {mesh}: data*fsdp*tensor must equal the {topology.chips} chips of {topology.name}")
    if remat == "auto":
        policies = REMAT_ORDER
    elif remat in REMAT_ORDER:
        policies = (remat,)
    else:
        raise ValueError(f"--remat {remat!r}: valid values are auto, {', '.join(REMAT_ORDER)}")

    tokens = cfg.train.batch_size * model.seq_len
    flops = size.flops_per_token(model) * tokens / topology.chips
    once = size.flops_per_token(dataclasses.replace(model, depth=1)) * tokens / topology.chips
    result = Plan(name, topology, model.depth, model.width, size.count_params(model),
                  cfg.train.batch_size, model.seq_len, margin, [], flops, once)
    trials = [(policy, cfg.train.grad_accum_steps) for policy in policies]
    k, n_data = 2 * cfg.train.grad_accum_steps, mesh[0] * mesh[1]
    while cfg.train.batch_size % (k * n_data) == 0:
        trials.append((policies[-1], k))
        k *= 2
    for policy, k in trials:
        trial = dataclasses.replace(cfg, model=dataclasses.replace(model, remat=policy),
                                    train=dataclasses.replace(cfg.train, grad_accum_steps=k),
                                    mesh=MeshConfig(*mesh))
        attempt = compile_step(trial, devices, margin * topology.chip.hbm_bytes)
        result.attempts.append(attempt)
        if attempt.fits:
            break
    return result


def compile_step(cfg: Config, devices: list, budget_bytes: float) -> Attempt:
    """Lower + compile the trainer's plain step with abstract state and batch; read its memory."""
    import jax
    import jax.numpy as jnp

    from depthdelusion.parallel.mesh import make_mesh
    from depthdelusion.train.step import build_trainer

    attempt = Attempt((cfg.mesh.data, cfg.mesh.fsdp, cfg.mesh.tensor), cfg.model.remat, cfg.train.grad_accum_steps)
    start = time.perf_counter()
    try:
        trainer = build_trainer(cfg, make_mesh(cfg.mesh, devices), reuse=False)  # its compile is timed
        state = trainer.abstract_state  # shapes and dtypes; the step's in_shardings place them
        tokens = jax.ShapeDtypeStruct((cfg.train.batch_size, cfg.model.seq_len + 1), jnp.int32,
                                      sharding=trainer.batch_sharding)
        compiled = trainer.step.lower(state, tokens).compile()
    except Exception as err:  # noqa: BLE001 - e.g. the compiler refusing a program too big for HBM
        text = str(err).splitlines()[0]
        attempt.error = f"{type(err).__name__}: {text[:300]}"
        # "... memory required for HLO temporaries (93.66G) exceeds available HBM (31.25G)"
        need = re.search(r"temporaries \(([\d.]+)([KMGT])\)", text)
        if need:
            attempt.temp_bytes = int(float(need.group(1)) * 1024 ** "KMGT".index(need.group(2)) * 1024)
        attempt.compile_s = time.perf_counter() - start
        return attempt
    attempt.compile_s = time.perf_counter() - start
    mem = compiled.memory_analysis()
    attempt.argument_bytes = int(mem.argument_size_in_bytes)
    attempt.output_bytes = int(mem.output_size_in_bytes)
    attempt.alias_bytes = int(mem.alias_size_in_bytes)
    attempt.temp_bytes = int(mem.temp_size_in_bytes)
    attempt.code_bytes = int(mem.generated_code_size_in_bytes)
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    attempt.xla_flops = float(cost["flops"]) if cost and "flops" in cost else None
    attempt.fits = attempt.peak_bytes <= budget_bytes
    return attempt


def markdown_table(plans: list[Plan]) -> str:
    from depthdelusion.analysis.formats.table_text import markdown_table as render

    rows = [p.row() for p in plans]
    return render(list(rows[0]), [list(r.values()) for r in rows]) + "\n"
