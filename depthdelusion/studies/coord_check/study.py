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
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from depthdelusion import rundir
from depthdelusion.analysis.formats.table_text import markdown_table, write_csv
from depthdelusion.config import (
    PARAMETRIZATIONS,
    DataConfig,
    ModelConfig,
    Parametrization,
    TrainConfig,
    bounded,
)
from depthdelusion.data.pipeline import Batches
from depthdelusion.model.transformer import Transformer
from depthdelusion.studies.common import spec as study_spec
from depthdelusion.studies.common.spec import spec_error
from depthdelusion.studies.coord_check.options import DEFAULT_DEPTHS, DEFAULT_WIDTHS, CoordCheckOptions
from depthdelusion.train.optimizer import make_optimizer

LISTS = ("widths", "depths", "parametrizations")  # the grid; every shape shares the rest (SETUP)
SETUP = ("steps", "lr", "batch_size", "seq_len", "head_dim", "base_width", "base_depth", "seed")
FLAGS = {"parametrizations": "--parametrization"}  # field -> the command's flag, where it is not --field-name


@dataclasses.dataclass(frozen=True)
class CoordCheckSpec:
    """What the check trains: every width × depth under each parameterization, the rest (`SETUP`)
    fixed. lr is the base (m_N = m_L = 1) lr, constant (no warmup, no decay); batch and seq are
    tiny so the 512 × 16 corner stays cheap. Built from the command's options by `from_options`
    (the defaults are theirs: `options.CoordCheckOptions`)."""

    widths: list[int] = dataclasses.field(default_factory=lambda: list(DEFAULT_WIDTHS))
    depths: list[int] = dataclasses.field(default_factory=lambda: list(DEFAULT_DEPTHS))
    parametrizations: list[Parametrization] = dataclasses.field(default_factory=lambda: list(PARAMETRIZATIONS))
    steps: int = bounded(CoordCheckOptions.steps, ge=1)
    lr: float = bounded(CoordCheckOptions.lr, gt=0)
    batch_size: int = bounded(CoordCheckOptions.batch_size, ge=1)
    seq_len: int = bounded(CoordCheckOptions.seq_len, ge=1)
    head_dim: int = bounded(CoordCheckOptions.head_dim, ge=1)
    base_width: int = bounded(CoordCheckOptions.base_width, ge=1)
    base_depth: int = bounded(CoordCheckOptions.base_depth, ge=1)
    seed: int = bounded(0, ge=0)

    def validate(self) -> None:
        for name in ("widths", "depths"):
            values = getattr(self, name)
            if not values or any(v < 1 for v in values):
                raise spec_error(name, values, "need positive integers, e.g. 64,128")
        if not self.parametrizations:
            raise spec_error("parametrizations", self.parametrizations,
                             f"need at least one of {', '.join(PARAMETRIZATIONS)}")
        bad = [w for w in self.widths if w % self.head_dim]
        if bad:
            raise spec_error("widths", bad, f"not multiples of head_dim={self.head_dim} (--head-dim)")

    def setup(self) -> dict:
        """The hyperparameters every shape shares, as the report and the JSON record them."""
        return {name: getattr(self, name) for name in SETUP}


def from_options(options: CoordCheckOptions) -> CoordCheckSpec:
    """The spec from the command's options, through the field checks of every study spec
    (`spec.from_flags`). A list is comma-separated, each item a YAML scalar as `--set` reads it.
    An error is a ValueError naming the flag and what is valid."""
    flags = dataclasses.asdict(options)
    flags["parametrizations"] = flags.pop("parametrization")
    raw = {k: study_spec.comma_separated(x) if k in LISTS else x for k, x in flags.items()}
    return study_spec.from_flags(CoordCheckSpec, raw, FLAGS)


def shape_trace(parametrization: str, width: int, depth: int, setup: CoordCheckSpec) -> dict:
    """Train one shape for setup.steps updates (its width and depth; the rest from `setup`).
    Returns block_rms [steps+1, depth] and logits_rms [steps+1]; row t is the forward pass on
    batch t with the parameters after t updates."""
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


class TraceRow(NamedTuple):
    """One shape under one parameterization at one step: the RMS of every block's output and of
    the logits on that step's batch."""

    parametrization: str
    width: int
    depth: int
    step: int
    last_block_rms: float
    logits_rms: float
    block_rms: tuple[float, ...]


def run(spec: CoordCheckSpec, log=print) -> list[TraceRow]:
    """Train every shape of the spec under each parameterization: one row per step."""
    rows = []
    for name in spec.parametrizations:
        for depth in spec.depths:
            for width in spec.widths:
                trace = shape_trace(name, width, depth, spec)
                for t in range(spec.steps + 1):
                    rows.append(TraceRow(name, width, depth, t, float(trace["block_rms"][t, -1]),
                                         float(trace["logits_rms"][t]), tuple(float(v) for v in trace["block_rms"][t])))
                final = rows[-1]
                log(f"{name:>10} W={width:<4} D={depth:<3} step {spec.steps}: last block RMS "
                    f"{final.last_block_rms:.4g}, logits RMS {final.logits_rms:.4g}")
    return rows


@dataclasses.dataclass(frozen=True)
class Spread:
    """Step-`step` last-block RMS over the grid for one parameterization."""

    parametrization: str
    step: int
    spread: float  # max / min over every width × depth
    width_growth: float  # max over depths of RMS(widest) / RMS(narrowest)
    depth_growth: float  # max over widths of max/min across depths


def spreads(rows: list[TraceRow], step: int) -> list[Spread]:
    out = []
    for name in dict.fromkeys(r.parametrization for r in rows):
        at = {(r.width, r.depth): r.last_block_rms for r in rows if r.parametrization == name and r.step == step}
        widths = sorted({w for w, _ in at})
        depths = sorted({d for _, d in at})
        values = list(at.values())
        width_growth = max(at[widths[-1], d] / at[widths[0], d] for d in depths)
        depth_growth = max(max(at[w, d] for d in depths) / min(at[w, d] for d in depths) for w in widths)
        out.append(Spread(name, step, max(values) / min(values), width_growth, depth_growth))
    return out


@dataclasses.dataclass(frozen=True)
class CoordCheckResults:
    """What the check measured (rendered by `sections`, written by `write_outputs`)."""

    spec: CoordCheckSpec
    rows: tuple  # TraceRow per parameterization × shape × step
    spreads: tuple  # Spread per parameterization at the last step


def results_of(spec: CoordCheckSpec, rows: list[TraceRow]) -> CoordCheckResults:
    """The results of trained rows: the rows and their spreads at the last step."""
    return CoordCheckResults(spec, tuple(rows), tuple(spreads(rows, spec.steps)))


def measure(spec: CoordCheckSpec, log=print) -> CoordCheckResults:
    """Train the spec's grid (`run`) and measure the spreads."""
    return results_of(spec, run(spec, log))


def write_outputs(r: CoordCheckResults, out: str | Path) -> dict[str, Path]:
    """coord_check.csv (one row per shape and step), coord_check.json (rows + setup),
    coord_check.md (`sections`), coord_check.png (one panel per parameterization);
    OUT local or gs:// (written to a local directory, then copied up). Returns the paths in OUT."""
    names = {k: f"coord_check.{k}" for k in ("csv", "json", "md", "png")}
    with rundir.local_dir(out) as local_out:
        local_out.mkdir(parents=True, exist_ok=True)
        paths = {k: local_out / name for k, name in names.items()}
        write_csv(paths["csv"], list(TraceRow._fields),
                  [[x.parametrization, x.width, x.depth, x.step, f"{x.last_block_rms:.6g}",
                    f"{x.logits_rms:.6g}", " ".join(f"{v:.6g}" for v in x.block_rms)] for x in r.rows])
        paths["json"].write_text(json.dumps({"setup": r.spec.setup(), "rows": [x._asdict() for x in r.rows]}))
        paths["md"].write_text(sections(r))
        plot(r, paths["png"])
    return {k: rundir.as_path(out) / name for k, name in names.items()}


def sections(r: CoordCheckResults) -> str:
    """coord_check.md: the spreads, then the last block's RMS at the last step per shape."""
    step = r.spec.steps
    lines = [f"# Coordinate check: RMS of the last block's output after {step} updates", "",
             f"Setup: {r.spec.setup()}; built-in corpus; constant lr.", ""]
    lines.append(markdown_table(
        ["parametrization", "spread (max/min, all shapes)", "width growth (widest/narrowest)", "depth growth"],
        [[s.parametrization, f"{s.spread:.2f}", f"{s.width_growth:.2f}", f"{s.depth_growth:.2f}"]
         for s in r.spreads]))
    widths = sorted({x.width for x in r.rows})
    final = {(x.parametrization, x.depth, x.width): x for x in r.rows if x.step == step}
    table = []
    for name in dict.fromkeys(x.parametrization for x in r.rows):
        for depth in sorted({x.depth for x in r.rows}):
            cells = [f"{final[name, depth, w].last_block_rms:.3g}" if (name, depth, w) in final
                     else "–" for w in widths]
            if any(c != "–" for c in cells):
                table.append([name, depth, *cells])
    lines += ["", markdown_table(["parametrization", "depth", *(f"W={w}" for w in widths)], table)]
    return "\n".join(lines) + "\n"


def plot(r: CoordCheckResults, path: Path) -> None:
    # here, not at the top: only a run that draws pays matplotlib's import (4 s measured), after Agg is chosen
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, setup = r.rows, r.spec
    names = list(dict.fromkeys(x.parametrization for x in rows))
    depths = sorted({x.depth for x in rows})
    fig, axes = plt.subplots(2, len(names), figsize=(4 * len(names), 7), squeeze=False, sharey="row")
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(depths)))
    for col, name in enumerate(names):
        for depth, color in zip(depths, colors):
            sel = sorted((x for x in rows if x.parametrization == name and x.depth == depth and x.step == setup.steps),
                         key=lambda x: x.width)
            widths = [x.width for x in sel]
            axes[0, col].plot(widths, [x.last_block_rms for x in sel], "o-", color=color, label=f"D={depth}")
            axes[1, col].plot(widths, [x.logits_rms for x in sel], "o-", color=color, label=f"D={depth}")
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


def run_command(*, out: str, options: CoordCheckOptions = CoordCheckOptions()) -> int:
    """`depthdelusion coord-check` (the parser is `depthdelusion.cli`, from `CoordCheckOptions`)."""
    spec = from_options(options)
    paths = write_outputs(measure(spec), out)
    print(paths["md"].read_text())
    print(f"written: {', '.join(str(p) for p in paths.values())}")
    return 0


run_command.option_groups = {"options": CoordCheckOptions}
