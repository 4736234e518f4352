"""`depthdelusion persistence-probe`: per-layer gradient profiles at initialisation and over the
first K AdamW steps, for a grid of widths × depths, and the persistence rate 1/ℓ of each.

The gradients come from the trainer's own layer-stats step (`train/step.py`: weight-gradient
norms per block and ‖∂L/∂h_l‖ from `grad_probe`), so the probe measures exactly what a training
run logs. Row t of a profile is the gradient at the parameters after t updates (t = 0: init).
OUT may be local or gs:// (written to a local directory, then copied up).

The study's shape: its spec (`ProbeSpec`, from the command's flags by `spec.from_flags`),
`measure` to a frozen `ProbeResults` (the profiles, their persistence fits and ℓ(W)), `sections`
to report.md; the CSVs and figures from the same results.
"""
from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Literal

import jax
import numpy as np

from depthdelusion import rundir
from depthdelusion.analysis.formats.table_text import markdown_table, write_csv
from depthdelusion.analysis.report import plots
from depthdelusion.analysis.science.persistence import persistence_length, persistence_scaling
from depthdelusion.config import Config, DataConfig, ModelConfig, Parametrization, TrainConfig, bounded
from depthdelusion.data.pipeline import Batches
from depthdelusion.model_size import count_params
from depthdelusion.parallel.mesh import make_mesh
from depthdelusion.studies.common.spec import comma_separated, from_flags, spec_error
from depthdelusion.studies.persistence.options import COMPUTE_DTYPES, DEFAULT_DEPTHS, DEFAULT_WIDTHS, ProbeOptions
from depthdelusion.train.step import build_trainer

KINDS = ("weight", "activation")


@dataclasses.dataclass(frozen=True)
class ProbeSetup:
    """Everything but the shape. Small batch and sequence so W = 1024 stays cheap on a CPU."""

    steps: int = ProbeOptions.steps  # K: AdamW updates after initialisation
    batch_size: int = ProbeOptions.batch_size
    seq_len: int = ProbeOptions.seq_len
    head_dim: int = ProbeOptions.head_dim
    lr: float = ProbeOptions.lr
    warmup_steps: int = 0
    parametrization: str = ProbeOptions.parametrization
    base_width: int = 256
    base_depth: int = 2
    compute_dtype: str = ProbeOptions.compute_dtype
    seed: int = ProbeOptions.seed
    max_params: float = ProbeOptions.max_params  # shapes above are skipped (and listed)


LISTS = ("widths", "depths")  # comma-separated flags


@dataclasses.dataclass(frozen=True)
class ProbeSpec:
    """What the probe trains: every width × depth of the grid (shapes over ``max_params`` skipped)
    with the rest of `ProbeSetup` from the command's flags (`spec.from_flags`; ``--field-name``)."""

    widths: list[int] = dataclasses.field(default_factory=lambda: list(DEFAULT_WIDTHS))
    depths: list[int] = dataclasses.field(default_factory=lambda: list(DEFAULT_DEPTHS))
    steps: int = bounded(ProbeSetup.steps, ge=0)
    batch_size: int = bounded(ProbeSetup.batch_size, ge=1)
    seq_len: int = bounded(ProbeSetup.seq_len, ge=1)
    head_dim: int = bounded(ProbeSetup.head_dim, ge=1)
    lr: float = bounded(ProbeSetup.lr, gt=0)
    parametrization: Parametrization = ProbeSetup.parametrization
    compute_dtype: Literal[COMPUTE_DTYPES] = ProbeSetup.compute_dtype
    seed: int = bounded(ProbeSetup.seed, ge=0)
    max_params: float = bounded(ProbeSetup.max_params, gt=0)

    def validate(self) -> None:
        for name in LISTS:
            values = getattr(self, name)
            if not values or min(values) < 1:
                raise spec_error(name, values, "expected positive integers, e.g. 64,256")
        bad = [w for w in self.widths if w % self.head_dim]
        if bad:
            raise spec_error("widths", bad, f"not multiples of --head-dim {self.head_dim}")

    def setup(self) -> ProbeSetup:
        """Everything but the shape, as the report records it."""
        return ProbeSetup(**{f.name: getattr(self, f.name) for f in dataclasses.fields(ProbeSetup)
                             if hasattr(self, f.name)})


def spec_from_flags(**flags) -> ProbeSpec:
    """The spec from the command's flags (keyed by field); a list flag is comma-separated, each
    item a YAML scalar as `--set` reads it. An error is a ValueError naming the flag."""
    raw = {k: comma_separated(x) if k in LISTS else x for k, x in flags.items()}
    return from_flags(ProbeSpec, raw)


def probe_config(width: int, depth: int, setup: ProbeSetup):
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


def fit_rows(shapes) -> list:
    """One PersistenceFit per shape, kind and step (0 = init, then every update)."""
    fits = []
    for s in shapes:
        for kind in KINDS:
            for t, norms in enumerate(s[kind]):
                fits.append(persistence_length(norms, name=f"d{s['depth']}_w{s['width']}",
                                               width=s["width"], kind=kind, step=t))
    return fits


def reported_steps(spec: ProbeSpec) -> list[int]:
    """The steps the report's tables and ℓ(W) fits show: initialisation and the last update."""
    return sorted({0, spec.steps})


@dataclasses.dataclass(frozen=True)
class ProbeResults:
    """What the probe measured; rendered by `sections`, written by `write_outputs`."""

    spec: ProbeSpec
    shapes: tuple  # per trained shape: width, depth, params, seconds and the weight, activation, loss profiles
    skipped: tuple  # the shapes over max_params: width, depth, params
    fits: tuple  # PersistenceFit per shape, kind and step
    scalings: tuple  # (kind, step, ℓ(W) fit or None, why it was not fitted) per reported step
    command: str


def results_of(spec: ProbeSpec, trained: dict, command: str = "") -> ProbeResults:
    """The results of trained profiles (`run`'s shapes and skipped): each profile's persistence
    fit and ℓ(W) at the reported steps."""
    fits = fit_rows(trained["shapes"])
    scalings = []
    for kind in KINDS:
        for t in reported_steps(spec):
            try:
                scalings.append((kind, t, persistence_scaling([f for f in fits if f.kind == kind and f.step == t]), ""))
            except ValueError as err:
                scalings.append((kind, t, None, str(err)))
    return ProbeResults(spec, tuple(trained["shapes"]), tuple(trained["skipped"]), tuple(fits), tuple(scalings),
                        command)


def measure(spec: ProbeSpec, *, command: str = "", log=print) -> ProbeResults:
    """Train every shape of the grid (`run`) and fit what the report states; ``command`` is the
    one quoted in report.md."""
    return results_of(spec, run(spec.widths, spec.depths, spec.setup(), log), command)


def _fit_of(r: ProbeResults, shape: dict, kind: str, step: int):
    return next(f for f in r.fits if f.kind == kind and f.step == step
                and f.name == f"d{shape['depth']}_w{shape['width']}")


def _kind_section(r: ProbeResults, kind: str) -> list[str]:
    """One kind's table (every shape at init and the last step) and its ℓ(W) fits."""
    table = []
    for s in r.shapes:
        for t in reported_steps(r.spec):
            f, g = _fit_of(r, s, kind, t), s[kind][t]
            table.append([s["depth"], s["width"], f"{s['params'] / 1e6:.2f}M", f"{s['seconds']:.0f}", t, f.status,
                          f"{f.rate:+.3f} [{f.rate_ci[0]:+.3f}, {f.rate_ci[1]:+.3f}]",
                          "—" if f.length is None else f"{f.length:+.3g}", f"{g[0] / g[-1]:.3g}"])
    lines = [f"## {kind} gradients", "",
             markdown_table(["D", "W", "params", "s", "step", "status", "rate 1/ℓ [95% CI]", "ℓ", "g_0/g_D"], table),
             ""]
    for _, t, scaling, why in (x for x in r.scalings if x[0] == kind):
        lines += ([f"ℓ(W) at step {t}:", "```", scaling.summary(), "```", ""] if scaling is not None
                  else [f"ℓ(W) at step {t} not fitted: {why}", ""])
    return lines


def sections(r: ProbeResults) -> str:
    """report.md: the command, the setup, each kind's table and ℓ(W), the skipped shapes, the
    training time and the figures (formatting `r`, computing nothing)."""
    last = r.spec.steps
    lines = ["# Persistence probe", "", f"Command: `{r.command}`", "",
             f"Setup: {json.dumps(dataclasses.asdict(r.spec.setup()))}.", "",
             "rate = 1/ℓ per layer from ln g_l = b − rate·(D − l) (one logged step: the 95% CI is the "
             "regression t-interval). rate > 0: the paper's decay towards the input; rate < 0: "
             "growth towards the input. g_0/g_D: bottom block over top block.", ""]
    for kind in KINDS:
        lines += _kind_section(r, kind)
    if r.skipped:
        lines += ["Skipped (over --max-params): " + ", ".join(
            f"{s['depth']}L×{s['width']} ({s['params'] / 1e6:.0f}M)" for s in r.skipped), ""]
    total = sum(s["seconds"] for s in r.shapes)
    lines += [f"Training time of the shapes (compile included): {total:.0f} s.", ""]
    lines += ["![init](gradient_profiles_init.png)", "", f"![step {last}](gradient_profiles_step{last}.png)", ""]
    return "\n".join(lines) + "\n"


def write_outputs(r: ProbeResults, out: Path) -> list[Path]:
    """profiles.csv, persistence.csv, the two figures and report.md (`sections`) in local `out`."""
    out.mkdir(parents=True, exist_ok=True)
    files = [write_csv(out / "profiles.csv", ["width", "depth", "step", "kind", "layer", "norm"], [
        [s["width"], s["depth"], t, kind, layer, f"{g:.6g}"]
        for s in r.shapes for kind in KINDS
        for t, norms in enumerate(s[kind]) for layer, g in enumerate(norms)])]
    rows = []
    for f in r.fits:
        s = next(x for x in r.shapes if f"d{x['depth']}_w{x['width']}" == f.name)
        g = s[f.kind][f.step]
        rows.append([f.width, f.depth, f.step, f.kind, f.status, f"{f.rate:.4g}", f"{f.rate_ci[0]:.4g}",
                     f"{f.rate_ci[1]:.4g}", "" if f.length is None else f"{f.length:.4g}",
                     f"{f.r2:.3f}", f"{g[0] / g[-1]:.4g}"])
    files.append(write_csv(out / "persistence.csv", [
        "width", "depth", "step", "kind", "status", "rate_per_layer", "rate_lo", "rate_hi", "length", "r2",
        "g_bottom_over_g_top"], rows))
    last = r.spec.steps
    by_width = {}
    for s in r.shapes:
        by_width.setdefault(s["width"], []).append((s["depth"], s["weight"][0], s["weight"][last]))
    files.append(plots.gradient_profile_panels(
        {w: [(d, g0) for d, g0, _ in v] for w, v in by_width.items()}, out / "gradient_profiles_init.png",
        title="Weight-gradient profiles at initialisation"))
    files.append(plots.gradient_profile_panels(
        {w: [(d, gk) for d, _, gk in v] for w, v in by_width.items()}, out / f"gradient_profiles_step{last}.png",
        title=f"Weight-gradient profiles after {last} AdamW steps"))
    (out / "report.md").write_text(sections(r))
    files.append(out / "report.md")
    return files


def run_command(*, out: str, options: ProbeOptions = ProbeOptions()) -> int:
    """`depthdelusion persistence-probe` (the parser is `depthdelusion.cli`, from `ProbeOptions`)."""
    spec = spec_from_flags(**dataclasses.asdict(options))
    start = time.perf_counter()
    results = measure(spec, command="depthdelusion " + shlex.join(sys.argv[1:]))
    with rundir.local_dir(out) as where:  # a gs:// OUT: written here, then copied up
        files = write_outputs(results, where)
    print(f"wrote {len(files)} files to {out} in {time.perf_counter() - start:.0f} s")
    return 0


run_command.option_groups = {"options": ProbeOptions}
