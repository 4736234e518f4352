"""The coordinate check: RMS of every block's output and of the logits over the first training
steps, for a grid of widths × depths, under each parameterization.

Under a parameterization that transfers (µP family) the curves stay flat in width (and, with a
depth-scaled branch multiplier, in depth); under SP they grow with width as the first updates
push activations up. Same data, same base hyperparameters for every shape. Single device.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Iterable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from depthdelusion import rundir
from depthdelusion.analysis.formats.table_text import markdown_table, write_csv
from depthdelusion.config import DataConfig, ModelConfig, TrainConfig
from depthdelusion.data.pipeline import Batches
from depthdelusion.model.transformer import Transformer
from depthdelusion.train.optimizer import make_optimizer


@dataclasses.dataclass(frozen=True)
class CoordCheckSetup:
    """Everything but the shape and the parameterization. lr is the base (m_N = m_L = 1) lr,
    constant (no warmup, no decay); batch and seq are tiny so the 512 × 16 corner stays cheap."""

    steps: int = 10
    lr: float = 1e-2
    batch_size: int = 4
    seq_len: int = 64
    head_dim: int = 16
    base_width: int = 64
    base_depth: int = 2
    seed: int = 0


def shape_trace(parametrization: str, width: int, depth: int, setup: CoordCheckSetup) -> dict:
    """Train one shape for setup.steps updates. Returns block_rms [steps+1, depth] and logits_rms
    [steps+1]; row t is the forward pass on batch t with the parameters after t updates."""
    batches = Batches(DataConfig(prefetch=0), setup.seq_len, setup.batch_size)
    tokenizer = batches.tokenizer
    mc = ModelConfig(depth=depth, width=width, head_dim=setup.head_dim, seq_len=setup.seq_len,
                     vocab_size=tokenizer.vocab_size, parametrization=parametrization,
                     base_width=setup.base_width, base_depth=setup.base_depth)
    tc = TrainConfig(lr=setup.lr, warmup_steps=0, lr_min_ratio=1.0, steps=setup.steps)
    tx = make_optimizer(tc, mc)
    graphdef, params = nnx.split(Transformer(mc, rngs=nnx.Rngs(params=setup.seed)), nnx.Param)

    def forward(p, tokens_BxS1):
        logits_BxSxV, block_rms_D = nnx.merge(graphdef, p)(tokens_BxS1[:, :-1], with_block_rms=True)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits_BxSxV, tokens_BxS1[:, 1:]).mean()
        logits_rms = jnp.sqrt(jnp.mean(jnp.square(logits_BxSxV)))
        return loss, (block_rms_D, logits_rms)

    @jax.jit
    def step(p, opt_state, tokens_BxS1):
        (_, stats), grads = jax.value_and_grad(forward, has_aux=True)(p, tokens_BxS1)
        updates, opt_state = tx.update(grads, opt_state, p)
        return optax.apply_updates(p, updates), opt_state, stats

    opt_state = tx.init(params)
    block_rms, logits_rms = [], []
    for _ in range(setup.steps + 1):  # the last update is wasted: it saves compiling a forward
        params, opt_state, (rms_D, logit_rms) = step(params, opt_state, jnp.asarray(next(batches)))
        block_rms.append(rms_D)
        logits_rms.append(logit_rms)
    return {"block_rms": np.asarray(jax.device_get(block_rms)),
            "logits_rms": np.asarray(jax.device_get(logits_rms))}


def run(parametrizations: Iterable[str], widths: Iterable[int], depths: Iterable[int],
        setup: CoordCheckSetup, log=print) -> list[dict]:
    """One row per (parametrization, width, depth, step): last_block_rms, logits_rms, block_rms."""
    rows = []
    for name in parametrizations:
        for depth in depths:
            for width in widths:
                trace = shape_trace(name, width, depth, setup)
                for t in range(setup.steps + 1):
                    rows.append({"parametrization": name, "width": width, "depth": depth, "step": t,
                                 "last_block_rms": float(trace["block_rms"][t, -1]),
                                 "logits_rms": float(trace["logits_rms"][t]),
                                 "block_rms": [float(v) for v in trace["block_rms"][t]]})
                final = rows[-1]
                log(f"{name:>10} W={width:<4} D={depth:<3} step {setup.steps}: last block RMS "
                    f"{final['last_block_rms']:.4g}, logits RMS {final['logits_rms']:.4g}")
    return rows


@dataclasses.dataclass(frozen=True)
class Spread:
    """Step-`step` last-block RMS over the grid for one parameterization."""

    parametrization: str
    step: int
    spread: float  # max / min over every width × depth
    width_growth: float  # max over depths of RMS(widest) / RMS(narrowest)
    depth_growth: float  # max over widths of max/min across depths


def spreads(rows: list[dict], step: int) -> list[Spread]:
    out = []
    for name in dict.fromkeys(r["parametrization"] for r in rows):
        at = {(r["width"], r["depth"]): r["last_block_rms"] for r in rows
              if r["parametrization"] == name and r["step"] == step}
        widths = sorted({w for w, _ in at})
        depths = sorted({d for _, d in at})
        values = list(at.values())
        width_growth = max(at[widths[-1], d] / at[widths[0], d] for d in depths)
        depth_growth = max(max(at[w, d] for d in depths) / min(at[w, d] for d in depths) for w in widths)
        out.append(Spread(name, step, max(values) / min(values), width_growth, depth_growth))
    return out


def write_outputs(rows: list[dict], setup: CoordCheckSetup, out: str | Path) -> dict[str, Path]:
    """coord_check.csv (one row per shape and step), coord_check.json (rows + setup),
    coord_check.md (step-final table and spreads), coord_check.png (one panel per parameterization);
    OUT local or gs:// (written to a local directory, then copied up). Returns the paths in OUT."""
    names = {k: f"coord_check.{k}" for k in ("csv", "json", "md", "png")}
    with rundir.local_dir(out) as local_out:
        local_out.mkdir(parents=True, exist_ok=True)
        paths = {k: local_out / name for k, name in names.items()}
        write_csv(paths["csv"], ["parametrization", "width", "depth", "step", "last_block_rms", "logits_rms",
                                 "block_rms"],
                  [[r["parametrization"], r["width"], r["depth"], r["step"], f"{r['last_block_rms']:.6g}",
                    f"{r['logits_rms']:.6g}", " ".join(f"{v:.6g}" for v in r["block_rms"])] for r in rows])
        paths["json"].write_text(json.dumps({"setup": dataclasses.asdict(setup), "rows": rows}))
        paths["md"].write_text(markdown(rows, setup))
        plot(rows, setup, paths["png"])
    return {k: rundir.as_path(out) / name for k, name in names.items()}


def markdown(rows: list[dict], setup: CoordCheckSetup) -> str:
    step = setup.steps
    lines = [f"# Coordinate check: RMS of the last block's output after {step} updates", "",
             f"Setup: {dataclasses.asdict(setup)}; built-in corpus; constant lr.", ""]
    lines.append(markdown_table(
        ["parametrization", "spread (max/min, all shapes)", "width growth (widest/narrowest)", "depth growth"],
        [[s.parametrization, f"{s.spread:.2f}", f"{s.width_growth:.2f}", f"{s.depth_growth:.2f}"]
         for s in spreads(rows, step)]))
    widths = sorted({r["width"] for r in rows})
    final = {(r["parametrization"], r["depth"], r["width"]): r for r in rows if r["step"] == step}
    table = []
    for name in dict.fromkeys(r["parametrization"] for r in rows):
        for depth in sorted({r["depth"] for r in rows}):
            cells = [f"{final[name, depth, w]['last_block_rms']:.3g}" if (name, depth, w) in final
                     else "–" for w in widths]
            if any(c != "–" for c in cells):
                table.append([name, depth, *cells])
    lines += ["", markdown_table(["parametrization", "depth", *(f"W={w}" for w in widths)], table)]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], setup: CoordCheckSetup, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["parametrization"] for r in rows))
    depths = sorted({r["depth"] for r in rows})
    fig, axes = plt.subplots(2, len(names), figsize=(4 * len(names), 7), squeeze=False, sharey="row")
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(depths)))
    for col, name in enumerate(names):
        for depth, color in zip(depths, colors):
            sel = sorted((r["width"], r) for r in rows if r["parametrization"] == name
                         and r["depth"] == depth and r["step"] == setup.steps)
            widths = [w for w, _ in sel]
            axes[0, col].plot(widths, [r["last_block_rms"] for _, r in sel], "o-", color=color, label=f"D={depth}")
            axes[1, col].plot(widths, [r["logits_rms"] for _, r in sel], "o-", color=color, label=f"D={depth}")
        axes[0, col].set_title(name)
        for row, what in enumerate(("last block output RMS", "logits RMS")):
            ax = axes[row, col]
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("width")
            if col == 0:
                ax.set_ylabel(f"{what}, step {setup.steps}")
            ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"Coordinate check: base lr {setup.lr:g}, base shape {setup.base_width}×{setup.base_depth}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_ints(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise ValueError(f"{flag}={text!r}: expected comma-separated positive integers, e.g. 64,128")
    return values


def check_shapes(widths: list[int], head_dim: int) -> None:
    bad = [w for w in widths if w % head_dim]
    if bad:
        raise ValueError(f"--widths: {bad} not divisible by --head-dim={head_dim}")


def run_command(*, out: str, widths: str = "64,128,256,512", depths: str = "2,4,8,16",
                steps: int = CoordCheckSetup.steps, parametrization: str = "sp,mup,depth_mup,completep",
                lr: float = CoordCheckSetup.lr, batch_size: int = CoordCheckSetup.batch_size,
                seq_len: int = CoordCheckSetup.seq_len, head_dim: int = CoordCheckSetup.head_dim,
                base_width: int = CoordCheckSetup.base_width,
                base_depth: int = CoordCheckSetup.base_depth) -> int:
    """`depthdelusion coord-check` (the parser is `depthdelusion.cli`)."""
    from depthdelusion.config import PARAMETRIZATIONS

    names = [n.strip() for n in parametrization.split(",") if n.strip()]
    bad = [n for n in names if n not in PARAMETRIZATIONS]
    if bad or not names:
        raise ValueError(f"--parametrization={parametrization!r}: valid values are "
                         f"{', '.join(PARAMETRIZATIONS)} (comma-separated)")
    shape_widths, shape_depths = parse_ints(widths, "--widths"), parse_ints(depths, "--depths")
    check_shapes(shape_widths, head_dim)
    setup = CoordCheckSetup(steps=steps, lr=lr, batch_size=batch_size, seq_len=seq_len,
                            head_dim=head_dim, base_width=base_width, base_depth=base_depth)
    rows = run(names, shape_widths, shape_depths, setup)
    paths = write_outputs(rows, setup, out)
    print(paths["md"].read_text())
    print(f"written: {', '.join(str(p) for p in paths.values())}")
    return 0
