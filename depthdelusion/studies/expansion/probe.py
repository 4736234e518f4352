"""The first-order descent signal of an inserted block, the jumpboard step, and the
activation-gradient covariance (docs/depth_expansion.md).

Signal. Insert a block after block k with zero output projections (surgery.py). At that
point its gradient w.r.t. the zero projections is g_k = r·Σ_tokens φ_k(h) ⊗ ∂L/∂h_k: the
correlation of the block's residual features φ (attention values before `out_kernel`, FFN
activations before `down_kernel`) with the activation gradient at the insertion point, r the
branch multiplier of the model one block deeper. ‖g_k‖ is the first-order rate of loss decrease
available through the block.

All D insertion points are measured with one backward pass of the model's own forward
(`Transformer.forward` with `Taps(inserted=...)`): the parent's blocks as they are, and after
each one the block `expand --after k --seed s` would insert (`surgery.inserted_blocks`, the
same code path), with the expanded model's branch multiplier. Every inserted block is the
identity in both passes (its Jacobian w.r.t. its input is I while its output projections are
zero), so the gradient at each equals the single-insertion gradient.

Statistics over batches use the Gram matrix G[i, j] = <g_i, g_j> of the per-batch gradients
(train batches first, then held-out): ‖mean‖ (what a full-batch gradient would show), the
unbiased ‖μ‖² (mean over pairs i ≠ j, so batch noise does not look like signal) with its
leave-one-batch-out jackknife standard error, the train/held-out cosine of the mean directions,
and basic (reverse-percentile) bootstrap intervals over batches, computed on a scale that respects
each quantity's bounds and mapped back: Fisher z = atanh for the cosine (so its interval stays in
[-1, 1]), log for the norms (so theirs stays positive). Each set needs at least MIN_BATCHES
batches (the jackknife of a pairwise mean leaves one out of at least three).
"""
from __future__ import annotations

# The module's note: JAX, flax, orbax, grain and the model, trainer and data modules are imported
# inside the functions that run them, because the expansion study's tables read run configs and
# probe caches through this module without them (JAX with flax: about 13 s of import, measured).
import dataclasses
import math
import time
from typing import Any, Sequence

import numpy as np

from depthdelusion.analysis.fitting.options import SEED
from depthdelusion.analysis.formats.table_text import markdown_table
from depthdelusion.config import ModelConfig
from depthdelusion.studies.expansion import surgery

PROBED = surgery.ZERO_PROJECTIONS
MIN_BATCHES = 3
BOUNDED_INTERVAL = "basic bootstrap (log scale for norms, Fisher z for the cosine)"
# Which block a probe inserted after k: older probes drew it otherwise, so their numbers are
# about another model than the one `expand --after k` builds (`is_current` refuses them).
INSERTED = "the block expand --after k --seed s inserts (surgery.inserted_blocks)"


def is_current(result: dict) -> bool:
    """A cached probe made the way `probe_run` makes one today (intervals, inserted block)."""
    return result.get("interval") == BOUNDED_INTERVAL and result.get("inserted") == INSERTED


def _graphdef(model_cfg: ModelConfig):
    from flax import nnx  # JAX: see the module's note

    from depthdelusion.model.transformer import Transformer

    return nnx.graphdef(nnx.eval_shape(lambda: Transformer(model_cfg, rngs=nnx.Rngs(0))))


def _loss(graphdef, params, tokens_BxS1):
    from flax import nnx  # JAX: see the module's note

    from depthdelusion.train.step import cross_entropy

    logits_BxSxV = nnx.merge(graphdef, params)(tokens_BxS1[:, :-1])
    return cross_entropy(logits_BxSxV, tokens_BxS1[:, 1:])


def projection_shapes(params: Any) -> dict[str, tuple]:
    """{name: one layer's shape} of the probed projections."""
    import jax  # JAX: see the module's note

    shapes = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        key = jax.tree_util.keystr(path)
        if "['blocks']" in key and surgery.leaf_name(key) in PROBED:
            shapes[surgery.leaf_name(key)] = tuple(leaf.shape[1:])
    return {n: shapes[n] for n in PROBED}


def with_projections(params: Any, positions, projections: dict) -> Any:
    """`params` with the probed projections of the blocks at `positions` set to `projections`
    ({name: [len(positions), ...]} or one layer's value)."""
    import jax  # JAX: see the module's note

    def one(path, leaf):
        key = jax.tree_util.keystr(path)
        if "['blocks']" in key and surgery.leaf_name(key) in projections:
            return leaf.at[positions].set(projections[surgery.leaf_name(key)].astype(leaf.dtype))
        return leaf

    return jax.tree_util.tree_map_with_path(one, params)


class SignalProbe:
    """Per-batch gradients w.r.t. the zero projections of a block inserted after each layer."""

    def __init__(self, model: ModelConfig, params: Any, seed: int = SEED):
        import jax  # JAX: see the module's note
        import jax.numpy as jnp
        from flax import nnx

        from depthdelusion.model.transformer import Taps
        from depthdelusion.train.step import cross_entropy

        self.model, self.params = model, params
        D = model.depth
        # block k: the one `expand --after k --seed seed` inserts
        self.inserted = surgery.inserted_blocks(model, range(D), seed)
        graphdef = _graphdef(model)
        fixed = {n: jnp.asarray(v) for n, v in self.inserted.items() if n not in PROBED}

        def grads(params, tokens_BxS1):
            def loss_of(projections):
                taps = Taps(inserted={**fixed, **projections})
                logits = nnx.merge(graphdef, params).forward(tokens_BxS1[:, :-1], taps).logits
                return cross_entropy(logits, tokens_BxS1[:, 1:])

            zeros = {n: jnp.zeros(self.inserted[n].shape, jnp.float32) for n in PROBED}
            g = jax.grad(loss_of)(zeros)
            return jnp.concatenate([g[n].reshape(D, -1) for n in PROBED], axis=1)  # [D, P]

        self._grads = jax.jit(grads)

    def block(self, k: int) -> dict[str, np.ndarray]:
        """The values of the block inserted after k ({name: [1, ...]}), for `jumpboard`."""
        return {n: v[k:k + 1] for n, v in self.inserted.items()}

    def gradients(self, tokens_BxS1) -> np.ndarray:
        """[D, P]: for each insertion point k, ∂L/∂(out_kernel, down_kernel) of the new block,
        flattened, on one batch."""
        return np.asarray(self._grads(self.params, tokens_BxS1), np.float64)


@dataclasses.dataclass
class GramStats:
    """Per-layer statistics of per-batch gradients, from Gram matrices."""

    gram_DxNxN: np.ndarray  # N = n_train + n_test batches, train first
    n_train: int
    mean_train_DxP: np.ndarray  # the mean training gradient (the jumpboard direction's source)
    mean_test_DxP: np.ndarray


def check_batches(n_train: int, n_test: int) -> None:
    """A clear error where the estimators would divide by zero."""
    for what, n in (("training", n_train), ("held-out", n_test)):
        if n < MIN_BATCHES:
            raise ValueError(f"--batches: the probe needs at least {MIN_BATCHES} {what} batches (the "
                             f"jackknife of the unbiased squared norm leaves one of >= 3 out), got {n}")


def gram_stats(probe: SignalProbe, train_batches: Sequence, test_batches: Sequence) -> GramStats:
    check_batches(len(train_batches), len(test_batches))
    grads = [probe.gradients(b) for b in list(train_batches) + list(test_batches)]
    G_NxDxP = np.stack(grads)
    gram = np.einsum("idp,jdp->dij", G_NxDxP, G_NxDxP)
    n = len(train_batches)
    return GramStats(gram, n, G_NxDxP[:n].mean(0), G_NxDxP[n:].mean(0))


def _summaries(gram_NxN: np.ndarray, n_train: int, w_train: np.ndarray, w_test: np.ndarray) -> tuple:
    """(‖mean train‖, ‖mean test‖, cosine) for batch weights (each set's weights sum to 1)."""
    tr, te = slice(0, n_train), slice(n_train, None)
    a = w_train @ gram_NxN[tr, tr] @ w_train
    b = w_test @ gram_NxN[te, te] @ w_test
    ab = w_train @ gram_NxN[tr, te] @ w_test
    return math.sqrt(max(a, 0.0)), math.sqrt(max(b, 0.0)), ab / math.sqrt(a * b) if a > 0 and b > 0 else float("nan")


def unbiased_sq_norm(gram_NxN: np.ndarray) -> float:
    """Σ_{i≠j} <g_i, g_j> / (n(n-1)): unbiased for ‖E g‖² (batch noise averages out)."""
    n = gram_NxN.shape[0]
    return float((gram_NxN.sum() - np.trace(gram_NxN)) / (n * (n - 1)))


def jackknife_se(gram_NxN: np.ndarray) -> float:
    """Leave-one-batch-out jackknife standard error of `unbiased_sq_norm`."""
    n = gram_NxN.shape[0]
    keep = [np.delete(np.arange(n), i) for i in range(n)]
    values = np.array([unbiased_sq_norm(gram_NxN[np.ix_(k, k)]) for k in keep])
    return float(np.sqrt((n - 1) / n * np.sum((values - values.mean()) ** 2)))


def _to_scale(values: np.ndarray) -> np.ndarray:
    """(norm, norm, cosine) -> (log, log, Fisher z): unbounded scales for the bootstrap."""
    with np.errstate(divide="ignore"):
        norms = np.log(values[..., :2])
    cosine = np.arctanh(np.clip(values[..., 2:], -1.0, 1.0))
    return np.concatenate([norms, cosine], axis=-1)


def _from_scale(values: np.ndarray) -> np.ndarray:
    return np.concatenate([np.exp(values[..., :2]), np.tanh(values[..., 2:])], axis=-1)


def signal_table(stats: GramStats, n_boot: int = 1000, seed: int = SEED) -> list[dict]:
    """One row per insertion point k: norms, unbiased squared norms, cosine, 95% basic bootstrap
    intervals (batches resampled with replacement within each set) on the log scale for the
    norms and the Fisher-z scale for the cosine, mapped back (so they respect 0 and ±1)."""
    rng = np.random.default_rng(seed)
    n_tr = stats.n_train
    n_te = stats.gram_DxNxN.shape[1] - n_tr
    check_batches(n_tr, n_te)
    rows = []
    for k, gram in enumerate(stats.gram_DxNxN):
        est = _summaries(gram, n_tr, np.full(n_tr, 1 / n_tr), np.full(n_te, 1 / n_te))
        boot = np.array([
            _summaries(gram, n_tr, np.bincount(rng.integers(0, n_tr, n_tr), minlength=n_tr) / n_tr,
                       np.bincount(rng.integers(0, n_te, n_te), minlength=n_te) / n_te)
            for _ in range(n_boot)])
        # basic (reverse-percentile) bootstrap: a norm of a mean is inflated and a cosine shrunk
        # by resampling noise; reflecting the percentiles about the estimate corrects that bias
        # to first order (a plain percentile interval can miss its own estimate). Reflected on
        # the raw scale it can cross the bounds (a cosine above 1); on log / Fisher-z it cannot.
        boot_z, est_z = _to_scale(boot), _to_scale(np.asarray(est))
        q_lo, q_hi = np.nanpercentile(boot_z, 2.5, axis=0), np.nanpercentile(boot_z, 97.5, axis=0)
        lo, hi = _from_scale(2 * est_z - q_hi), _from_scale(2 * est_z - q_lo)
        rows.append({
            "after": k,
            "signal_train": est[0], "signal_train_lo": lo[0], "signal_train_hi": hi[0],
            "signal_test": est[1], "signal_test_lo": lo[1], "signal_test_hi": hi[1],
            "cosine": est[2], "cosine_lo": lo[2], "cosine_hi": hi[2],
            "unbiased_sq_train": unbiased_sq_norm(gram[:n_tr, :n_tr]),
            "unbiased_sq_train_se": jackknife_se(gram[:n_tr, :n_tr]),
            "unbiased_sq_test": unbiased_sq_norm(gram[n_tr:, n_tr:]),
            "unbiased_sq_test_se": jackknife_se(gram[n_tr:, n_tr:]),
            # what batch noise alone adds to ‖mean‖²: (mean ‖g_i‖² − unbiased) / n
            "noise_sq_train": float((np.trace(gram[:n_tr, :n_tr]) / n_tr - unbiased_sq_norm(gram[:n_tr, :n_tr])) / n_tr),
            # <μ_train, μ_test>: unbiased (independent sets); > 0 means the directions agree
            "cross_inner": float(gram[:n_tr, n_tr:].mean()),
        })
    return rows


# --- the jumpboard step ----------------------------------------------------------------------


def jumpboard(model: ModelConfig, params: Any, k: int, block: dict[str, np.ndarray],
              direction_P: np.ndarray, etas: Sequence[float], train_batches: Sequence,
              test_batches: Sequence) -> list[dict]:
    """Loss change on train and held-out batches when the block `block` (SignalProbe.block(k))
    inserted after k has projections η·d (d = direction_P normalised), for each η."""
    import jax  # JAX: see the module's note
    import jax.numpy as jnp

    child_model, child_params = surgery.expand_params(params, model, [k], fresh=block)
    graphdef = _graphdef(child_model)
    pos = surgery.layout(model.depth, [k])[1][0]
    shapes = list(projection_shapes(child_params).values())
    sizes = [int(np.prod(s)) for s in shapes]

    @jax.jit
    def losses(projections, batches_NxBxS1):
        p = with_projections(child_params, pos, projections)
        return jax.lax.map(lambda b: _loss(graphdef, p, b), batches_NxBxS1)

    def mean_losses(step_P):
        parts = np.split(step_P, np.cumsum(sizes)[:-1])
        projections = {n: jnp.asarray(part.reshape(s), jnp.float32) for n, part, s in zip(PROBED, parts, shapes)}
        return (float(np.mean(losses(projections, jnp.asarray(np.stack(train_batches))))),
                float(np.mean(losses(projections, jnp.asarray(np.stack(test_batches))))))

    base_train, base_test = mean_losses(np.zeros(sum(sizes)))
    d = direction_P / np.linalg.norm(direction_P)
    rows = []
    for eta in etas:
        train_loss, test_loss = mean_losses(eta * d)
        rows.append({"after": k, "eta": float(eta), "base_train": base_train, "base_test": base_test,
                     "delta_train": train_loss - base_train, "delta_test": test_loss - base_test})
    return rows


# --- activation gradients per token ----------------------------------------------------------


def residual_grads(model_cfg: ModelConfig, params: Any, tokens_BxS1):
    """(h_DxBxSxW, g_DxBxSxW): the residual stream after each block and ∂L/∂ of it per token
    (L the mean next-token loss), both in the residual dtype: the model's forward with a zero
    perturbation after each block (`Taps.perturb_DxBxSxW`) to differentiate against."""
    import jax  # JAX: see the module's note
    import jax.numpy as jnp
    from flax import nnx

    from depthdelusion.model.transformer import Taps, residual_dtype
    from depthdelusion.train.step import cross_entropy

    model = nnx.merge(_graphdef(model_cfg), params)
    tokens_BxS, targets_BxS = tokens_BxS1[:, :-1], tokens_BxS1[:, 1:]
    B, S = tokens_BxS.shape

    def loss(perturb_DxBxSxW):
        out = model.forward(tokens_BxS, Taps(perturb_DxBxSxW=perturb_DxBxSxW, stream_fn=lambda x: x))
        return cross_entropy(out.logits, targets_BxS), out.streams[1:]

    zeros = jnp.zeros((model_cfg.depth, B, S, model_cfg.width), residual_dtype(model_cfg))
    (_, h), g = jax.value_and_grad(loss, has_aux=True)(zeros)
    return h, g


def covariance_energy(g_NxW: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """(off-diagonal energy fraction of C = Σ g gᵀ, the same for a null with each coordinate
    permuted independently over tokens): ‖C − diag C‖²_F / ‖C‖²_F. The null keeps every
    coordinate's distribution and removes cross-coordinate correlation: its fraction is what
    a diagonal covariance shows with this many tokens."""
    def fraction(x):
        C = x.T @ x
        total = float(np.sum(C * C))
        return (total - float(np.sum(np.diag(C) ** 2))) / total

    shuffled = np.stack([rng.permutation(col) for col in g_NxW.T], axis=1)
    return fraction(g_NxW), fraction(shuffled)


# --- a run, end to end -----------------------------------------------------------------------

ETAS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)


def probe_run(run_dir, n_batches: int = 16, etas: Sequence[float] = ETAS, seed: int = SEED,
              covariance_batches: int = 4, n_boot: int = 1000) -> dict:
    """Everything the study reports for one trained run: the signal at every insertion point
    (train = the first `n_batches` batches the run trained on, held-out = the first `n_batches`
    validation batches), the jumpboard step at the strongest insertion point, and the
    off-diagonal energy of the activation-gradient covariance per layer."""
    from depthdelusion.data.pipeline import Batches, validation_batches  # JAX: see the module's note

    check_batches(n_batches, n_batches)  # before restoring anything
    start = time.perf_counter()
    cfg = surgery.read_run_config(run_dir)
    step, _, state, _ = surgery.restore_state(run_dir, cfg)
    params = state.params
    seq, batch = cfg.model.seq_len, cfg.train.batch_size
    batches = Batches(cfg.data, seq, batch)
    try:
        train_batches = [next(batches) for _ in range(n_batches)]
    finally:
        batches.close()
    test_batches = validation_batches(cfg.data, seq, batch, n_batches)
    if test_batches is None:
        raise ValueError(f"{run_dir}: the dataset has no validation split (need held-out batches)")
    if len(test_batches) < MIN_BATCHES:
        raise ValueError(f"{run_dir}: the validation split holds {len(test_batches)} batches of "
                         f"{batch} x {seq}; the probe needs at least {MIN_BATCHES}")

    signal = SignalProbe(cfg.model, params, seed=seed)
    stats = gram_stats(signal, train_batches, test_batches)
    rows = signal_table(stats, n_boot=n_boot, seed=seed)
    best = max(range(cfg.model.depth), key=lambda k: rows[k]["signal_train"])
    jump = jumpboard(cfg.model, params, best, signal.block(best), -stats.mean_train_DxP[best], etas,
                     train_batches, test_batches)
    for row in jump:
        row["first_order_train"] = -row["eta"] * rows[best]["signal_train"]
        d = -stats.mean_train_DxP[best] / np.linalg.norm(stats.mean_train_DxP[best])
        row["first_order_test"] = row["eta"] * float(d @ stats.mean_test_DxP[best])

    import jax  # JAX: see the module's note

    grads_fn = jax.jit(lambda p, t: residual_grads(cfg.model, p, t)[1])
    g_per_layer = [[] for _ in range(cfg.model.depth)]
    for b in train_batches[:covariance_batches]:
        g = np.asarray(grads_fn(params, b), np.float64)
        for layer in range(cfg.model.depth):
            g_per_layer[layer].append(g[layer].reshape(-1, cfg.model.width))
    rng = np.random.default_rng(seed)
    covariance = []
    for layer, parts in enumerate(g_per_layer):
        frac, null = covariance_energy(np.concatenate(parts), rng)
        covariance.append({"layer": layer, "offdiag_fraction": frac, "offdiag_fraction_null": null,
                           "tokens": int(sum(len(p) for p in parts))})
    lowering = [r["eta"] for r in jump if r["delta_test"] < 0]
    return {
        "run": str(run_dir), "interval": BOUNDED_INTERVAL, "inserted": INSERTED, "step": step, "depth": cfg.model.depth, "width": cfg.model.width,
        "parametrization": cfg.model.parametrization, "seed": seed, "batches": n_batches,
        "batch_size": batch, "seq_len": seq, "signal": rows, "jumpboard_after": best, "jumpboard": jump,
        "largest_eta_lowering_test": max(lowering) if lowering else None,
        "covariance": covariance, "wall_time_s": round(time.perf_counter() - start, 1),
    }


def markdown(result: dict) -> str:
    """A readable account of `probe_run`'s result."""
    lines = [f"# First-order probe of {result['run']} (step {result['step']}, depth {result['depth']}, "
             f"width {result['width']}, {result['parametrization']})", "",
             f"{result['batches']} train and {result['batches']} held-out batches of {result['batch_size']} x "
             f"{result['seq_len']} tokens; fresh-block seed {result['seed']} (the block after k is the one "
             f"`expand --after k --seed {result['seed']}` inserts); intervals: 95% basic bootstrap over "
             "batches, on the log scale for the norms and the Fisher-z scale for the cosine.", "",
             markdown_table(
                 ["after", "‖g‖ train [95%]", "‖g‖ held-out [95%]", "cos(train, held-out) [95%]",
                  "unbiased ‖μ‖² train ± jackknife se", "noise part of ‖g‖² train"],
                 [[r["after"], f"{r['signal_train']:.3g} [{r['signal_train_lo']:.3g}, {r['signal_train_hi']:.3g}]",
                   f"{r['signal_test']:.3g} [{r['signal_test_lo']:.3g}, {r['signal_test_hi']:.3g}]",
                   f"{r['cosine']:.2f} [{r['cosine_lo']:.2f}, {r['cosine_hi']:.2f}]",
                   f"{r['unbiased_sq_train']:.3g} ± {r['unbiased_sq_train_se']:.2g}", f"{r['noise_sq_train']:.3g}"]
                  for r in result["signal"]],
                 align="rlllrr")]
    lines += ["", f"Jumpboard at the strongest insertion point (after block {result['jumpboard_after']}), "
              "along −ḡ_train/‖ḡ_train‖. A check of the code, not a finding: for small η the train "
              "column must equal its first-order column by Taylor's theorem.", "",
              markdown_table(["η", "ΔL train", "first order −η‖g‖", "ΔL held-out",
                              "first order η<d, g_test>"],
                             [[f"{r['eta']:g}", f"{r['delta_train']:.2e}", f"{r['first_order_train']:.2e}",
                               f"{r['delta_test']:.2e}", f"{r['first_order_test']:.2e}"] for r in result["jumpboard"]],
                             align="rrrrr")]
    eta = result["largest_eta_lowering_test"]
    lines += ["", f"Largest η tried that lowers the held-out loss: {eta if eta is not None else 'none'}.", "",
              markdown_table(["layer", "off-diagonal energy of Σ g gᵀ", "same, coordinates shuffled (diagonal null)",
                              "tokens"],
                             [[r["layer"], f"{r['offdiag_fraction']:.3f}", f"{r['offdiag_fraction_null']:.3f}",
                               r["tokens"]]
                              for r in result["covariance"]],
                             align="rrrr")]
    return "\n".join(lines) + "\n"
