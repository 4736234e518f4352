"""`depthdelusion spectrum RUN`: covariance spectra of a trained model's residual stream.

The newest checkpoint's parameters are restored onto one device, and the model's own forward pass
(`Transformer.forward` with `Taps(stream_fn=...)`, emitted by the scan over blocks) reduces the residual stream at the token
embeddings and after every block to per-batch moments: the batch mean and the centred outer
product Σ (x − x̄)(x − x̄)ᵀ, in float32 at full matmul precision. Batches are combined on the host
in float64 (Chan's pairwise update), so the mean never cancels against the second moment in
float32. Memory: (D + 1) · W² floats per token group; one eigendecomposition per layer and group
at the end.

Tokens: the first windows of the run's validation split, in order (the loop's eval set is a
prefix of them), split into G contiguous groups of sequences. The two halves (first G/2 groups,
last G/2) give the stability check; the delete-one-group spectra give the tail index's jackknife
interval (depthdelusion/analysis/science/spectra.py owns the fit, its range rule and tail.csv).

Outputs in OUT (default RUN/spectrum): spectrum.csv (layer, rank, eigenvalue), tail.csv,
tail.md and spectrum.png (log-log, one line per layer).
"""
from __future__ import annotations

import dataclasses
import math
import shlex
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from etils import epath
from flax import nnx

from depthdelusion import rundir
from depthdelusion.analysis.formats.table_text import markdown_table
from depthdelusion.analysis.report import plots
from depthdelusion.analysis.science import spectra
from depthdelusion.data.pipeline import validation_batches
from depthdelusion.model.transformer import Taps, Transformer
from depthdelusion.train.checkpoints import absolute

GROUPS = 8  # contiguous token groups: halves = 4 + 4, jackknife over 8


@dataclasses.dataclass
class Moments:
    """Count, mean (L, W) and centred second moment M2 (L, W, W) of L streams, float64."""

    n: int
    mean_LxW: np.ndarray
    m2_LxWxW: np.ndarray

    def __add__(self, other: "Moments") -> "Moments":
        if self.n == 0:
            return other
        if other.n == 0:
            return self
        n = self.n + other.n
        delta_LxW = other.mean_LxW - self.mean_LxW
        mean_LxW = self.mean_LxW + delta_LxW * (other.n / n)
        m2 = self.m2_LxWxW + other.m2_LxWxW + np.einsum("li,lj->lij", delta_LxW, delta_LxW) * (
            self.n * other.n / n)
        return Moments(n, mean_LxW, m2)

    def covariance(self) -> np.ndarray:
        """Unbiased covariance (L, W, W)."""
        return self.m2_LxWxW / (self.n - 1)


def empty_moments() -> Moments:
    return Moments(0, np.zeros(0), np.zeros(0))


def eigenvalues(moments: Moments) -> np.ndarray:
    """(L, W) eigenvalues of each layer's covariance, from the largest (one eigh per layer)."""
    return np.stack([np.linalg.eigvalsh(c)[::-1] for c in moments.covariance()])


def batch_moments(x_BxSxW):
    """(mean_W, M2_WxW) of one batch of one stream, float32, full-precision matmul."""
    x_NxW = x_BxSxW.reshape(-1, x_BxSxW.shape[-1]).astype(jnp.float32)
    mean_W = x_NxW.mean(axis=0)
    xc_NxW = x_NxW - mean_W
    return mean_W, jnp.einsum("ni,nj->ij", xc_NxW, xc_NxW, precision=jax.lax.Precision.HIGHEST)


def load_run(run) -> tuple:
    """(config, step, graphdef, params) of a run directory's newest checkpoint, parameters only,
    on one device. The forward runs in float32 whatever the run's compute dtype, so the spectrum's
    tail is not bf16 rounding noise."""
    run = epath.Path(run)
    cfg = rundir.read_config(run)
    if cfg is None:
        raise FileNotFoundError(f"{run / rundir.CONFIG}: not found; RUN must be a run directory written by "
                                "`depthdelusion train`")
    cfg.validate()
    if cfg.model.vocab_size is None:
        raise ValueError(f"{run / rundir.CONFIG}: model.vocab_size is null; a trained run records it")
    mc = dataclasses.replace(cfg.model, compute_dtype="float32",
                             attention="auto" if cfg.model.attention == "cudnn" else cfg.model.attention)
    cfg = dataclasses.replace(cfg, model=mc)
    directory = run / "checkpoints"
    manager = ocp.CheckpointManager(absolute(directory), options=ocp.CheckpointManagerOptions(
        create=False, read_only=True, save_interval_steps=0)) if directory.exists() else None
    steps = sorted(manager.all_steps()) if manager else []
    if not steps:
        raise FileNotFoundError(f"{directory}: no checkpoint (train the run first, with "
                                "train.checkpoint_every > 0 or to its end)")
    abstract = nnx.eval_shape(lambda: Transformer(mc, rngs=nnx.Rngs(0)))
    graphdef, abstract_params = nnx.split(abstract, nnx.Param)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(abstract_params)
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    # The checkpoint holds the whole TrainState (flattened by train.checkpoints.flatten_state);
    # only `.params...` is read.
    target = {".params" + jax.tree_util.keystr(p): jax.ShapeDtypeStruct(l.shape, l.dtype, sharding=device)
              for p, l in leaves}
    restored = manager.restore(steps[-1], args=ocp.args.Composite(state=ocp.args.PyTreeRestore(
        item=target, restore_args=ocp.checkpoint_utils.construct_restore_args(target),
        partial_restore=True)))["state"]
    manager.close()
    params = jax.tree_util.tree_unflatten(treedef, [restored[k] for k in target])
    return cfg, steps[-1], graphdef, params


def validation_tokens(cfg, tokens: int, rows: int) -> list[np.ndarray]:
    """Batches [rows, seq_len + 1] of the validation split's first windows, ⌈tokens / (rows ·
    seq_len)⌉ of them (fewer if the split is shorter)."""
    n_batches = max(1, math.ceil(tokens / (rows * cfg.model.seq_len)))
    batches = validation_batches(cfg.data, cfg.model.seq_len, rows, n_batches)
    if batches is None:
        raise ValueError(f"the run's data ({cfg.data.path or 'built-in corpus'}) has no validation "
                         "split: give it one (data.holdout_files for jsonl/text) to measure spectra "
                         "on held-out tokens")
    return batches


def forward_fn(graphdef, stream_fn):
    """jit(params, tokens [B, S+1]) -> stream_fn of every stream, stacked (D + 1 first)."""
    @jax.jit
    def run(params, tokens_BxS1):
        return nnx.merge(graphdef, params).forward(tokens_BxS1[:, :-1], Taps(stream_fn=stream_fn)).streams

    return run


def group_moments(graphdef, params, batches: list[np.ndarray], groups: int) -> list[Moments]:
    """Moments per contiguous group of batches (batch b goes to group ⌊b·G/n⌋)."""
    forward = forward_fn(graphdef, batch_moments)
    out = [empty_moments() for _ in range(groups)]
    for b, tokens in enumerate(batches):
        mean_LxW, m2_LxWxW = jax.device_get(forward(params, tokens))
        n = tokens.shape[0] * (tokens.shape[1] - 1)
        g = b * groups // len(batches)
        out[g] = out[g] + Moments(n, mean_LxW.astype(np.float64), m2_LxWxW.astype(np.float64))
    return out


def total_moments(moments: list[Moments]) -> Moments:
    """The moments of the union of the parts."""
    total = empty_moments()
    for m in moments:
        total = total + m
    return total


def measure(run, tokens: int, rows: int, groups: int = GROUPS):
    """Spectra (L, W) and the tail fits of every layer over ``tokens`` held-out tokens, ``rows``
    sequences per forward pass (each study's own defaults); plus what was measured (a dict)."""
    start = time.perf_counter()
    cfg, step, graphdef, params = load_run(run)
    batches = validation_tokens(cfg, tokens, rows)
    groups = min(groups, len(batches)) // 2 * 2
    if groups < 2:
        raise ValueError(f"--tokens {tokens}: gives {len(batches)} batch(es) of {rows} x "
                         f"{cfg.model.seq_len} tokens; the half-split needs at least 2 (raise --tokens)")
    per_group = group_moments(graphdef, params, batches, groups)
    t_forward = time.perf_counter() - start
    full = eigenvalues(total_moments(per_group))
    half_a, half_b = eigenvalues(total_moments(per_group[:groups // 2])), eigenvalues(total_moments(per_group[groups // 2:]))
    jack = [eigenvalues(total_moments(per_group[:g] + per_group[g + 1:])) for g in range(groups)]
    n_tokens = sum(m.n for m in per_group)
    fits = [spectra.tail_fit(layer, full[layer], (half_a[layer], half_b[layer]),
                             [j[layer] for j in jack], n_tokens) for layer in range(len(full))]
    info = {"run": str(run), "step": step, "tokens": n_tokens, "requested_tokens": tokens,
            "rows": rows, "seq_len": cfg.model.seq_len, "batches": len(batches), "groups": groups,
            "depth": cfg.model.depth, "width": cfg.model.width,
            "forward_s": round(t_forward, 2), "total_s": round(time.perf_counter() - start, 2)}
    return full, fits, info


def write_outputs(full: np.ndarray, fits: list, info: dict, out, command: str) -> list:
    """Writes OUT's files; a remote OUT (gs://) gets them copied from a local staging directory,
    since the CSV writers and matplotlib write local files only."""
    if rundir.is_local(out):
        return _write_local(full, fits, info, Path(out), command)
    out = epath.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        paths = _write_local(full, fits, info, Path(tmp), command)
        for path in paths:
            (out / path.name).write_bytes(path.read_bytes())
    return [out / path.name for path in paths]


def _write_local(full: np.ndarray, fits: list, info: dict, out: Path, command: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "spectrum.csv", "w") as fh:
        fh.write("layer,rank,eigenvalue\n")
        for layer, eig in enumerate(full):
            fh.writelines(f"{layer},{i + 1},{v:.6g}\n" for i, v in enumerate(eig))
    paths = [out / "spectrum.csv", spectra.write_tail_csv(fits, out / "tail.csv")]
    (out / "tail.md").write_text(tail_markdown(fits, info, command))
    paths += [out / "tail.md", plot_spectra(full, fits, out / "spectrum.png")]
    return paths


def tail_markdown(fits: list, info: dict, command: str) -> str:
    """tail.md: what was measured, how β and its interval are read, and the tail fit of every layer
    (formatting `fits` and `info`, computing nothing); `command` is the one that regenerates it."""
    lines = [f"# Residual-stream spectra of {info['run']}", "",
             f"Checkpoint step {info['step']}; D = {info['depth']}, W = {info['width']}; "
             f"{info['tokens']:,} held-out tokens (validation split, first {info['batches']} batches "
             f"of {info['rows']} x {info['seq_len']}) in {info['groups']} contiguous groups; "
             f"forward + moments {info['forward_s']} s, total {info['total_s']} s.",
             f"Regenerate with `{command}`."]
    if info["tokens"] < info["requested_tokens"]:
        lines.append(f"The validation split held fewer tokens than the {info['requested_tokens']:,} "
                     "requested: all of it was used.")
    lines += ["",
              "Layer 0: token embeddings; layer l: the residual stream after block l. β: least "
              "squares of log λ_i on log i over the ranks shown (rule: from max(2, ⌈W/64⌉) to the "
              f"last rank ≤ W/2 up to which the two halves' eigenvalues agree within "
              f"{spectra.HALF_TOLERANCE:.0%}; at least {spectra.MIN_RANKS} ranks). Interval: delete-"
              "one-group jackknife over the token groups, t quantile. Halves: first and last half "
              "of the groups; 'max rel. diff' is max |λ_a − λ_b| / λ over the top k eigenvalues. The "
              "interval is for the stated ranks: a spectrum that is not an exact power law gives "
              "another β over another range, which the interval does not cover.", "",
              markdown_table(["layer", "β", "95% CI", "β (half a / b)", "ranks", "top k", "max rel. diff (top k)"],
                             [[f.layer, f"{f.beta:.3f}", f"[{f.ci[0]:.3f}, {f.ci[1]:.3f}]",
                               f"{f.beta_halves[0]:.3f} / {f.beta_halves[1]:.3f}",
                               f"{f.rank_range[0]}–{f.rank_range[1]}" if f.rank_range else "no stable range",
                               f.top_k, f"{f.half_max_rel_diff:.3g}"] for f in fits])]
    return "\n".join(lines) + "\n"


def plot_spectra(full: np.ndarray, fits: list, path: Path) -> Path:
    plt = plots.plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for layer, (eig, color) in enumerate(zip(full, plots.colors(len(full)))):
        ranks = np.arange(1, len(eig) + 1)
        keep = eig > 0
        label = "embeddings" if layer == 0 else f"after block {layer}"
        if math.isfinite(fits[layer].beta):
            label += f" (β = {fits[layer].beta:.2f})"
        ax.loglog(ranks[keep], eig[keep], color=color, label=label)
    ax.set_xlabel("rank i")
    ax.set_ylabel("eigenvalue λ_i of the covariance")
    ax.legend(fontsize=7, ncol=2 if len(full) > 8 else 1)
    return plots.save_figure(fig, path)
