"""`depthdelusion persistence-probe`: per-layer gradient profiles at initialisation and over the
first K AdamW steps, for a grid of widths × depths, and the persistence rate 1/ℓ of each.

The gradients come from the trainer's own layer-stats step (`train/step.py`: weight-gradient
norms per block and ‖∂L/∂h_l‖ from `grad_probe`), so the probe measures exactly what a training
run logs. Row t of a profile is the gradient at the parameters after t updates (t = 0: init).
OUT may be local or gs:// (written to a local directory, then copied up).
"""
from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from depthdelusion import rundir
from depthdelusion.analysis.formats.table_text import markdown_table, write_csv

KINDS = ("weight", "activation")


@dataclasses.dataclass(frozen=True)
class ProbeSetup:
    """Everything but the shape. Small batch and sequence so W = 1024 stays cheap on a CPU."""

    steps: int = 3  # K: AdamW updates after initialisation
    batch_size: int = 4
    seq_len: int = 32
    head_dim: int = 16
    lr: float = 3e-4
    warmup_steps: int = 0
    parametrization: str = "sp"
    base_width: int = 256
    base_depth: int = 2
    compute_dtype: str = "auto"
    seed: int = 0
    max_params: float = 1.2e8  # shapes above are skipped (and listed): memory and time on a CPU


def probe_config(width: int, depth: int, setup: ProbeSetup):
    from depthdelusion.config import Config, DataConfig, ModelConfig, TrainConfig

    model = ModelConfig(depth=depth, width=width, head_dim=setup.head_dim, seq_len=setup.seq_len,
                        vocab_size=257, parametrization=setup.parametrization,
                        base_width=setup.base_width, base_depth=setup.base_depth,
                        compute_dtype=setup.compute_dtype)
    train = TrainConfig(steps=max(setup.steps, 1), batch_size=setup.batch_size, lr=setup.lr,
                        warmup_steps=setup.warmup_steps, seed=setup.seed)
    return Config(model=model, data=DataConfig(prefetch=0, builtin_documents=3000), train=train)


def layer_gradient_profiles(cfg, steps: int) -> dict:
    """Train ``cfg`` for ``steps`` updates with the trainer's layer-stats step on one device.

    Returns ``weight`` [steps+1, D] (per-block weight-gradient norms), ``activation``
    [steps+1, D] (‖∂L/∂h_l‖, h_l the residual stream entering block l) and ``loss`` [steps+1];
    index 0 of D is the bottom block. Reusable by other studies (e.g. depth expansion)."""
    import jax

    from depthdelusion.data.pipeline import Batches
    from depthdelusion.parallel.mesh import make_mesh
    from depthdelusion.train.step import build_trainer

    cfg.validate()
    mesh = make_mesh(cfg.mesh, devices=jax.devices()[:1])
    trainer = build_trainer(cfg, mesh)
    batches = Batches(cfg.data, cfg.model.seq_len, cfg.train.batch_size)
    state = trainer.init()
    rows = []
    for _ in range(steps + 1):  # the last update is not needed; it saves a second compile
        tokens = jax.device_put(next(batches), trainer.batch_sharding)
        state, metrics = trainer.step_with_layer_stats(state, tokens)
        rows.append(jax.device_get({k: metrics[k] for k in
                                    ("loss", "per_layer_grad_norm", "per_layer_act_grad_norm")}))
    return {"weight": np.stack([r["per_layer_grad_norm"] for r in rows]).astype(float),
            "activation": np.stack([r["per_layer_act_grad_norm"] for r in rows]).astype(float),
            "loss": np.array([float(r["loss"]) for r in rows])}


def run(widths, depths, setup: ProbeSetup, log=print) -> dict:
    """Profiles of every shape under ``setup.max_params``; ``skipped`` lists the others."""
    from depthdelusion.model_size import count_params

    shapes, skipped = [], []
    for w in widths:
        for d in depths:
            cfg = probe_config(w, d, setup)
            n = count_params(cfg.model)
            if n > setup.max_params:
                skipped.append({"width": w, "depth": d, "params": n})
                log(f"{d}L x {w}: skipped, {n / 1e6:.0f}M parameters > --max-params {setup.max_params:.3g}")
                continue
            start = time.perf_counter()
            prof = layer_gradient_profiles(cfg, setup.steps)
            seconds = time.perf_counter() - start
            log(f"{d}L x {w} ({n / 1e6:.2f}M params): {seconds:.1f} s; loss {prof['loss'][0]:.3f} -> "
                f"{prof['loss'][-1]:.3f}; g_0/g_D at init {prof['weight'][0][0] / prof['weight'][0][-1]:.3g} (weight)")
            shapes.append({"width": w, "depth": d, "params": n, "seconds": seconds, **prof})
    return {"shapes": shapes, "skipped": skipped}


def fit_rows(result: dict, setup: ProbeSetup) -> list:
    """One PersistenceFit per shape, kind and step (0 = init, then every update)."""
    from depthdelusion.analysis.science.persistence import persistence_length

    fits = []
    for s in result["shapes"]:
        for kind in KINDS:
            for t, norms in enumerate(s[kind]):
                fits.append(persistence_length(norms, name=f"d{s['depth']}_w{s['width']}",
                                               width=s["width"], kind=kind, step=t))
    return fits


def write(result: dict, setup: ProbeSetup, out: Path, command: str) -> list[Path]:
    from depthdelusion.analysis.report import plots
    from depthdelusion.analysis.science.persistence import persistence_scaling

    out.mkdir(parents=True, exist_ok=True)
    fits = fit_rows(result, setup)
    files = []
    files.append(write_csv(out / "profiles.csv", ["width", "depth", "step", "kind", "layer", "norm"], [
        [s["width"], s["depth"], t, kind, layer, f"{g:.6g}"]
        for s in result["shapes"] for kind in KINDS
        for t, norms in enumerate(s[kind]) for layer, g in enumerate(norms)]))
    rows = []
    for f in fits:
        s = next(x for x in result["shapes"] if f"d{x['depth']}_w{x['width']}" == f.name)
        g = s[f.kind][f.step]
        rows.append([f.width, f.depth, f.step, f.kind, f.status, f"{f.rate:.4g}", f"{f.rate_ci[0]:.4g}",
                     f"{f.rate_ci[1]:.4g}", "" if f.length is None else f"{f.length:.4g}",
                     f"{f.r2:.3f}", f"{g[0] / g[-1]:.4g}"])
    files.append(write_csv(out / "persistence.csv", [
        "width", "depth", "step", "kind", "status", "rate_per_layer", "rate_lo", "rate_hi", "length", "r2",
        "g_bottom_over_g_top"], rows))

    last = setup.steps
    lines = ["# Persistence probe", "", f"Command: `{command}`", "",
             f"Setup: {json.dumps(dataclasses.asdict(setup))}.", "",
             "rate = 1/ℓ per layer from ln g_l = b − rate·(D − l) (one logged step: the 95% CI is the "
             "regression t-interval). rate > 0: the paper's decay towards the input; rate < 0: "
             "growth towards the input. g_0/g_D: bottom block over top block.", ""]
    for kind in KINDS:
        table = []
        for s in result["shapes"]:
            for t in sorted({0, last}):
                f = next(f for f in fits if f.kind == kind and f.step == t and f.name == f"d{s['depth']}_w{s['width']}")
                g = s[kind][t]
                table.append([s["depth"], s["width"], f"{s['params'] / 1e6:.2f}M", f"{s['seconds']:.0f}", t, f.status,
                              f"{f.rate:+.3f} [{f.rate_ci[0]:+.3f}, {f.rate_ci[1]:+.3f}]",
                              "—" if f.length is None else f"{f.length:+.3g}", f"{g[0] / g[-1]:.3g}"])
        lines += [f"## {kind} gradients", "",
                  markdown_table(["D", "W", "params", "s", "step", "status", "rate 1/ℓ [95% CI]", "ℓ",
                                  "g_0/g_D"], table),
                  ""]
        for t in sorted({0, last}):
            at = [f for f in fits if f.kind == kind and f.step == t]
            try:
                lines += [f"ℓ(W) at step {t}:", "```", persistence_scaling(at).summary(), "```", ""]
            except ValueError as err:
                lines += [f"ℓ(W) at step {t} not fitted: {err}", ""]
    if result["skipped"]:
        lines += ["Skipped (over --max-params): " + ", ".join(
            f"{s['depth']}L×{s['width']} ({s['params'] / 1e6:.0f}M)" for s in result["skipped"]), ""]
    total = sum(s["seconds"] for s in result["shapes"])
    lines += [f"Training time of the shapes (compile included): {total:.0f} s.", ""]
    by_width = {}
    for s in result["shapes"]:
        by_width.setdefault(s["width"], []).append((s["depth"], s["weight"][0], s["weight"][last]))
    files.append(plots.gradient_profile_panels(
        {w: [(d, g0) for d, g0, _ in v] for w, v in by_width.items()}, out / "gradient_profiles_init.png",
        title="Weight-gradient profiles at initialisation"))
    files.append(plots.gradient_profile_panels(
        {w: [(d, gk) for d, _, gk in v] for w, v in by_width.items()}, out / f"gradient_profiles_step{last}.png",
        title=f"Weight-gradient profiles after {last} AdamW steps"))
    lines += ["![init](gradient_profiles_init.png)", "", f"![step {last}](gradient_profiles_step{last}.png)", ""]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    files.append(out / "report.md")
    return files


def parse_ints(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{flag}={text!r}: expected comma-separated integers, e.g. 64,256") from None
    if not values or min(values) < 1:
        raise ValueError(f"{flag}={text!r}: expected positive integers")
    return values


def run_command(*, out: str, widths: str = "64,256,1024", depths: str = "8,16,32,64",
                steps: int = ProbeSetup.steps, batch_size: int = ProbeSetup.batch_size,
                seq_len: int = ProbeSetup.seq_len, head_dim: int = ProbeSetup.head_dim,
                lr: float = ProbeSetup.lr, parametrization: str = ProbeSetup.parametrization,
                compute_dtype: str = ProbeSetup.compute_dtype, seed: int = ProbeSetup.seed,
                max_params: float = ProbeSetup.max_params) -> int:
    """`depthdelusion persistence-probe` (the parser is `depthdelusion.cli`)."""
    import shlex
    import sys

    shape_widths, shape_depths = parse_ints(widths, "--widths"), parse_ints(depths, "--depths")
    for w in shape_widths:
        if w % head_dim:
            raise ValueError(f"--widths: {w} is not a multiple of --head-dim {head_dim}")
    if steps < 0:
        raise ValueError(f"--steps={steps}: must be >= 0")
    setup = ProbeSetup(steps=steps, batch_size=batch_size, seq_len=seq_len, head_dim=head_dim, lr=lr,
                       parametrization=parametrization, compute_dtype=compute_dtype, seed=seed,
                       max_params=max_params)
    start = time.perf_counter()
    result = run(shape_widths, shape_depths, setup)
    with rundir.local_dir(out) as where:  # a gs:// OUT: written here, then copied up
        files = write(result, setup, where, "depthdelusion " + shlex.join(sys.argv[1:]))
    print(f"wrote {len(files)} files to {out} in {time.perf_counter() - start:.0f} s")
    return 0
