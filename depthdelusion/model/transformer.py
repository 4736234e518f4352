"""Decoder-only Pre-LN transformer in Flax NNX, with all blocks stacked and scanned.

Shapes: B batch, S sequence, W width, H heads, K head_dim (H*K = W), F FFN hidden, V vocab,
D depth. Every block parameter carries a leading `layers` axis of size D and the forward pass
is one `lax.scan` over it, so compile time does not grow with depth and per-layer statistics
are reductions over the non-layer axes.

Instrumentation: `Transformer.forward(tokens, Taps(...))` is the one public way to observe or change
the pass through the blocks (the residual stream at the embeddings and after every block, the
head's input, per-block gradient probes, a perturbation added to the stream, a block inserted
after every block); `__call__` is the same pass with the trainer's taps. Studies use these, never
this module's private helpers.

Parameters carry metadata set where they are created: `logical_axes`, which
`depthdelusion.parallel.rules` maps to mesh axes (no mesh axis name appears here); `group`, the
parameterization group whose rules (model/parametrization.py) scale its init, lr and eps; and
`weight_decay`, whether the optimizer decays it.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import math
from typing import Any, Callable, Iterator, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from depthdelusion.config import ModelConfig
from depthdelusion.model import parametrization as pz
from depthdelusion.parallel.rules import active_mesh, constrain, partition_spec

_REMAT_POLICIES = {
    "full": None,  # save nothing inside a block: recompute it all in the backward pass
    "save_dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


def compute_dtype(cfg: ModelConfig) -> jnp.dtype:
    if cfg.compute_dtype == "auto":
        return jnp.float32 if jax.default_backend() == "cpu" else jnp.bfloat16
    return jnp.dtype(cfg.compute_dtype)


def residual_dtype(cfg: ModelConfig) -> jnp.dtype:
    """The scan carry's dtype: float32, or the compute dtype (``model.residual_dtype``)."""
    return jnp.dtype(jnp.float32) if cfg.residual_dtype == "float32" else jnp.dtype(compute_dtype(cfg))


def attention_implementation(cfg: ModelConfig) -> str:
    """"xla", "cudnn" or "splash". Auto picks cuDNN's fused (flash) kernel for
    `jax.nn.dot_product_attention` only where it applies: GPU, bf16/fp16 compute, head_dim <= 128
    and a multiple of 8. Splash (TPU) is used only when asked for."""
    if cfg.attention != "auto":
        return cfg.attention
    fusable = (jax.default_backend() == "gpu" and compute_dtype(cfg) in (jnp.bfloat16, jnp.float16)
               and cfg.head_dim <= 128 and cfg.head_dim % 8 == 0)
    return "cudnn" if fusable else "xla"


_splash_interpret = contextvars.ContextVar("splash_interpret", default=False)


@contextlib.contextmanager
def splash_interpret_mode() -> Iterator[None]:
    """While tracing under this context, the splash kernel runs in the Pallas interpreter: on
    any backend, slowly. For checking the kernel's numbers on a CPU."""
    token = _splash_interpret.set(True)
    try:
        yield
    finally:
        _splash_interpret.reset(token)


def splash_interpreted() -> bool:
    """Whether tracing now runs the splash kernel in the interpreter (:func:`splash_interpret_mode`)."""
    return _splash_interpret.get()


def check_splash(cfg: ModelConfig, platform: str) -> None:
    """model.attention=splash needs a TPU (or the interpreter) and whole 128-token blocks."""
    if platform != "tpu" and not _splash_interpret.get():
        raise ValueError(f"model.attention=splash: the splash-attention kernel runs on TPU only, "
                         f"these devices are {platform}: use model.attention=auto (or xla, cudnn)")
    if cfg.seq_len % 128:
        raise ValueError(f"model.attention=splash needs model.seq_len to be a multiple of 128 (the "
                         f"kernel's block), got {cfg.seq_len}: use e.g. {max(128, cfg.seq_len // 128 * 128)}")


def splash_attention(q_BxSxHxK: jax.Array, k_BxSxHxK: jax.Array, v_BxSxHxK: jax.Array, *,
                     interpret: bool = False) -> jax.Array:
    """Causal multi-head attention by the Pallas splash-attention kernel (TPU), softmax scale
    1/sqrt(K) as in `jax.nn.dot_product_attention`. Same shapes in and out: [B, S, H, K]."""
    from jax.experimental.pallas.ops.tpu import splash_attention as sa

    _, S, H, K = q_BxSxHxK.shape
    block = next(b for b in (512, 256, 128) if S % b == 0)  # 512: MaxText's default tile
    sizes = sa.BlockSizes(block_q=block, block_kv=block, block_kv_compute=block,
                          block_q_dkv=block, block_kv_dkv=block, block_kv_dkv_compute=block,
                          block_q_dq=block, block_kv_dq=block)
    kernel = sa.make_splash_mha(sa.MultiHeadMask([sa.CausalMask((S, S))] * H), block_sizes=sizes,
                                head_shards=1, q_seq_shards=1, interpret=interpret)
    # The kernel does not scale the logits: scale q, as the XLA path's softmax(q·k / sqrt(K)).
    q_BxSxHxK = (q_BxSxHxK * (1.0 / math.sqrt(K))).astype(q_BxSxHxK.dtype)
    to_heads = lambda x_BxSxHxK: jnp.swapaxes(x_BxSxHxK, 1, 2)  # the kernel's [H, S, K] per sequence
    out_BxHxSxK = jax.vmap(kernel)(to_heads(q_BxSxHxK), to_heads(k_BxSxHxK), to_heads(v_BxSxHxK))
    return jnp.swapaxes(out_BxHxSxK, 1, 2)


def attention(q_BxSxHxK: jax.Array, k_BxSxHxK: jax.Array, v_BxSxHxK: jax.Array,
              cfg: ModelConfig) -> jax.Array:
    """Causal softmax attention by the configured implementation. Splash is a Pallas kernel,
    which XLA cannot partition: under a mesh it runs per device on its batch rows and heads."""
    implementation = attention_implementation(cfg)
    if implementation != "splash":
        return jax.nn.dot_product_attention(q_BxSxHxK, k_BxSxHxK, v_BxSxHxK, is_causal=True,
                                            implementation=implementation)
    mesh = active_mesh()
    check_splash(cfg, mesh.devices.flat[0].platform if mesh is not None else jax.default_backend())
    local = functools.partial(splash_attention, interpret=_splash_interpret.get())
    if mesh is None:
        return local(q_BxSxHxK, k_BxSxHxK, v_BxSxHxK)
    spec = partition_spec(("batch", None, "heads", None), q_BxSxHxK.shape, mesh)
    return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec), out_specs=spec,
                         check_vma=False)(q_BxSxHxK, k_BxSxHxK, v_BxSxHxK)


@jax.custom_vjp
def grad_probe(x: jax.Array, probe: jax.Array) -> jax.Array:
    """Identity on `x`; the gradient w.r.t. the scalar `probe` is ‖∂L/∂x‖².

    Free in the forward pass; in the backward pass one reduction of the cotangent passing
    through. Gives per-layer activation-gradient norms without a second backward pass.
    """
    del probe
    return x


def _grad_probe_fwd(x, probe):
    del probe
    return x, None


def _grad_probe_bwd(_, g):
    return g, jnp.sum(jnp.square(g.astype(jnp.float32)))


grad_probe.defvjp(_grad_probe_fwd, _grad_probe_bwd)


def _norm(x_BxSxW: jax.Array, p: dict, name: str, kind: str) -> jax.Array:
    """LayerNorm or RMSNorm, computed in float32."""
    x = x_BxSxW.astype(jnp.float32)
    if kind == "layernorm":
        x = x - x.mean(-1, keepdims=True)
    x = x * jax.lax.rsqrt(jnp.mean(jnp.square(x), -1, keepdims=True) + 1e-6)
    x = x * p[f"{name}_scale"]
    if kind == "layernorm":
        x = x + p[f"{name}_bias"]
    return x.astype(x_BxSxW.dtype)


def rope(x_BxSxHxK: jax.Array, base: float) -> jax.Array:
    """Rotary position embedding (rotate-half form), angles computed in float32."""
    S, K = x_BxSxHxK.shape[1], x_BxSxHxK.shape[3]
    inv_freq_K2 = base ** (-jnp.arange(0, K, 2, dtype=jnp.float32) / K)
    angle_SxK2 = jnp.arange(S, dtype=jnp.float32)[:, None] * inv_freq_K2[None, :]
    sin, cos = jnp.sin(angle_SxK2)[None, :, None, :], jnp.cos(angle_SxK2)[None, :, None, :]
    x1, x2 = jnp.split(x_BxSxHxK.astype(jnp.float32), 2, axis=-1)
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.astype(x_BxSxHxK.dtype)


def _dense(spec: str, x: jax.Array, p: dict, name: str, dtype) -> jax.Array:
    """einsum(spec, x, p[name_kernel]) plus p[name_b] where the model has biases, in `dtype`."""
    y = jnp.einsum(spec, x, p[f"{name}_kernel"].astype(dtype))
    bias = p.get(f"{name}_b")
    return y if bias is None else y + bias.astype(dtype)


def attention_branch(x_BxSxW: jax.Array, p: dict, cfg: ModelConfig) -> jax.Array:
    """Attn(LN x) in the compute dtype, [B, S, W]; `p` holds one layer's slices."""
    dtype = compute_dtype(cfg)
    h_BxSxW = _norm(x_BxSxW, p, "attn_norm", cfg.norm).astype(dtype)
    qkv_BxSx3xHxK = _dense("bsw,wthk->bsthk", h_BxSxW, p, "qkv", dtype)
    q_BxSxHxK, k_BxSxHxK, v_BxSxHxK = (qkv_BxSx3xHxK[:, :, i] for i in range(3))
    if cfg.positions == "rope":
        q_BxSxHxK, k_BxSxHxK = rope(q_BxSxHxK, cfg.rope_base), rope(k_BxSxHxK, cfg.rope_base)
    att_BxSxHxK = attention(q_BxSxHxK, k_BxSxHxK, v_BxSxHxK, cfg)
    return _dense("bshk,hkw->bsw", att_BxSxHxK, p, "out", dtype)


def mlp_branch(x_BxSxW: jax.Array, p: dict, cfg: ModelConfig) -> jax.Array:
    """FFN(LN x) in the compute dtype, [B, S, W]: GELU, or SwiGLU silu(gate) · up."""
    dtype = compute_dtype(cfg)
    h_BxSxW = _norm(x_BxSxW, p, "mlp_norm", cfg.norm).astype(dtype)
    up_BxSxF = _dense("bsw,wf->bsf", h_BxSxW, p, "up", dtype)
    if cfg.ffn == "gelu":
        act_BxSxF = jax.nn.gelu(up_BxSxF)
    else:
        act_BxSxF = jax.nn.silu(_dense("bsw,wf->bsf", h_BxSxW, p, "gate", dtype)) * up_BxSxF
    return _dense("bsf,fw->bsw", act_BxSxF, p, "down", dtype)


def block(x_BxSxW: jax.Array, p: dict, cfg: ModelConfig, r: float | None = None) -> jax.Array:
    """One Pre-LN block: x + r·Attn(LN x), then x + r·FFN(LN x), r = m_L^-α (1 under SP, µP).
    Matrices and biases enter the branches in the compute dtype, norm parameters as stored (the
    norms compute in float32); each branch's output is added to the residual stream in its own
    dtype (``residual_dtype``). `r`: the branch multiplier, default the model's (an inserted
    block passes the expanded model's)."""
    r = pz.residual_multiplier(cfg) if r is None else r
    for branch in (attention_branch, mlp_branch):
        out_BxSxW = branch(x_BxSxW, p, cfg)
        if r != 1.0:  # skipped, not multiplied by 1, so SP is the unchanged graph
            out_BxSxW = out_BxSxW * r
        x_BxSxW = constrain(x_BxSxW + out_BxSxW.astype(x_BxSxW.dtype), ("batch", None, "embed"))
    return x_BxSxW


def _matrix(rngs: nnx.Rngs, std: float, shape: tuple, axes: tuple, dtype, group: str) -> nnx.Param:
    """A weight matrix (or embedding) drawn from N(0, std²): decoupled weight decay applies."""
    value = std * jax.random.normal(rngs.params(), shape, dtype) if std else jnp.zeros(shape, dtype)
    return nnx.Param(value, logical_axes=axes, group=group, weight_decay=True)


def _bias(shape: tuple, axes: tuple, dtype, group: str) -> nnx.Param:
    """A bias (linear or norm), zeros: never decayed."""
    return nnx.Param(jnp.zeros(shape, dtype), logical_axes=axes, group=group, weight_decay=False)


def _scale(shape: tuple, axes: tuple, dtype, group: str) -> nnx.Param:
    """A norm scale, ones: never decayed."""
    return nnx.Param(jnp.ones(shape, dtype), logical_axes=axes, group=group, weight_decay=False)


class Blocks(nnx.Module):
    """Parameters of all D blocks, stacked on a leading `layers` axis."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        D, W, H, K, F = cfg.depth, cfg.width, cfg.heads, cfg.head_dim, cfg.ffn_dim
        # Hidden matrices: std × m_N^-½ (µP family; 1 under SP).
        std = cfg.init_std * pz.group_rule(cfg, "hidden_matrix").init_std
        dt = jnp.dtype(cfg.param_dtype)
        # GPT-2: projections that write into the residual stream start 1/sqrt(2D) smaller.
        out_std = std / math.sqrt(2 * pz.residual_init_depth(cfg))
        L = "layers"
        # Groups of the parameterization rules (model/parametrization.py).
        matrix, bias, norm_group = "hidden_matrix", "hidden_bias", "block_norm"
        p = {
            "qkv_kernel": _matrix(rngs, std, (D, W, 3, H, K), (L, "embed", None, "heads", None), dt, matrix),
            "out_kernel": _matrix(rngs, out_std, (D, H, K, W), (L, "heads", None, "embed"), dt, matrix),
            "up_kernel": _matrix(rngs, std, (D, W, F), (L, "embed", "mlp"), dt, matrix),
            "down_kernel": _matrix(rngs, out_std, (D, F, W), (L, "mlp", "embed"), dt, matrix),
        }
        if cfg.ffn == "swiglu":
            p["gate_kernel"] = _matrix(rngs, std, (D, W, F), (L, "embed", "mlp"), dt, matrix)
        if cfg.use_bias:
            p["qkv_b"] = _bias((D, 3, H, K), (L, None, "heads", None), dt, bias)
            p["out_b"] = _bias((D, W), (L, "embed"), dt, bias)
            p["up_b"] = _bias((D, F), (L, "mlp"), dt, bias)
            p["down_b"] = _bias((D, W), (L, "embed"), dt, bias)
            if cfg.ffn == "swiglu":
                p["gate_b"] = _bias((D, F), (L, "mlp"), dt, bias)
        for norm in ("attn_norm", "mlp_norm"):
            p[f"{norm}_scale"] = _scale((D, W), (L, "embed"), dt, norm_group)
            if cfg.norm == "layernorm":
                p[f"{norm}_bias"] = _bias((D, W), (L, "embed"), dt, norm_group)
        self.params = nnx.Dict(p)


class Transformer(nnx.Module):
    """tokens [B, S] -> logits [B, S, V] (float32)."""

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs):
        if cfg.vocab_size is None:
            raise ValueError("model.vocab_size is null: validate the Config first (it sets the tokenizer's)")
        cfg.validate()
        self.cfg = cfg
        V, W, S = cfg.vocab_size, cfg.width, cfg.seq_len
        dt = jnp.dtype(cfg.param_dtype)
        self.embed = _matrix(rngs, cfg.init_std, (V, W), ("vocab", "embed"), dt, "embedding")
        if cfg.positions == "learned":
            self.pos_embed = _matrix(rngs, cfg.init_std, (S, W), (None, "embed"), dt, "embedding")
        self.blocks = Blocks(cfg, rngs=rngs)
        self.final_norm_scale = _scale((W,), ("embed",), dt, "final_norm")
        if cfg.norm == "layernorm":
            self.final_norm_bias = _bias((W,), ("embed",), dt, "final_norm")
        self.head_kernel = _matrix(rngs, cfg.init_std, (W, V), ("embed", "vocab"), dt, "head")
        if cfg.use_bias:
            self.head_b = _bias((V,), ("vocab",), dt, "head_bias")

    def __call__(self, tokens_BxS: jax.Array, probes_D: jax.Array | None = None,
                 with_block_rms: bool = False, hidden_fn=None):
        """Logits in float32: `forward` with the trainer's taps. `probes_D` (zeros, float32) makes
        ∂L/∂probes_D[l] = ‖∂L/∂h_l‖², where h_l is the residual stream entering block l (l = 0 is
        the bottom block). `with_block_rms`: return (logits, rms_D), rms_D[l] = RMS of block l's
        output (the coordinate check). `hidden_fn`: also return `Taps.stream_fn`'s stack."""
        out = self.forward(tokens_BxS, Taps(grad_probes_D=probes_D, block_rms=with_block_rms,
                                            stream_fn=hidden_fn))
        extra = ((out.block_rms_D,) if with_block_rms else ()) + ((out.streams,) if hidden_fn else ())
        return (out.logits, *extra) if extra else out.logits

    def embed_tokens(self, tokens_BxS: jax.Array) -> jax.Array:
        """The residual stream entering block 0, [B, S, W], in the residual dtype."""
        cfg = self.cfg
        carry = residual_dtype(cfg)
        x_BxSxW = self.embed[...][tokens_BxS].astype(carry)
        if cfg.positions == "learned":
            x_BxSxW = x_BxSxW + self.pos_embed[...][:tokens_BxS.shape[1]].astype(carry)
        return constrain(x_BxSxW, ("batch", None, "embed"))

    def head_input(self, x_BxSxW: jax.Array) -> jax.Array:
        """The final norm of a residual stream: what the LM head reads (in the stream's dtype)."""
        final = {"final_norm_scale": self.final_norm_scale[...]}
        if self.cfg.norm == "layernorm":
            final["final_norm_bias"] = self.final_norm_bias[...]
        return _norm(x_BxSxW, final, "final_norm", self.cfg.norm)

    def head(self, h_BxSxW: jax.Array) -> jax.Array:
        """Logits [B, S, V] in float32 from the head's input (`head_input`)."""
        cfg = self.cfg
        dtype = compute_dtype(cfg)
        # With a float32 residual the logits accumulate in float32 (bf16 inputs, f32 output).
        logits_BxSxV = jnp.einsum("bsw,wv->bsv", h_BxSxW.astype(dtype), self.head_kernel[...].astype(dtype),
                                  preferred_element_type=residual_dtype(cfg))
        if (logit_mult := pz.logit_multiplier(cfg)) != 1.0:  # µP family: 1/m_N
            logits_BxSxV = logits_BxSxV * logit_mult
        if cfg.use_bias:
            logits_BxSxV = logits_BxSxV + self.head_b[...].astype(dtype)
        return constrain(logits_BxSxV.astype(jnp.float32), ("batch", None, "vocab"))

    def forward(self, tokens_BxS: jax.Array, taps: "Taps | None" = None) -> "Tapped":
        """The model's forward pass with `taps` (see `Taps`): every config field applies as in
        training (residual and compute dtypes, remat, attention kernel, parametrization), and with
        no tap set it is the training graph op for op. Returns a `Tapped`."""
        cfg = self.cfg
        taps = Taps() if taps is None else taps
        stream_fn, ins = taps.stream_fn, taps.inserted
        r_ins = (pz.residual_multiplier(dataclasses.replace(cfg, depth=cfg.depth + 1))
                 if taps.inserted_multiplier is None else taps.inserted_multiplier)
        x_BxSxW = self.embed_tokens(tokens_BxS)

        def scan_body(x, layer):
            p, probe, inserted, perturb = layer
            if probe is not None:
                x = grad_probe(x, probe)
            x = block(x, p, cfg)
            if inserted is not None:
                x = block(x, inserted, cfg, r_ins)
            if perturb is not None:
                x = x + perturb.astype(x.dtype)
            return x, (_rms(x) if taps.block_rms else None, stream_fn(x) if stream_fn else None)

        if cfg.remat != "none":
            scan_body = jax.checkpoint(scan_body, policy=_REMAT_POLICIES[cfg.remat], prevent_cse=False)
        stacked = {name: v[...] for name, v in self.blocks.params.items()}
        embedded = stream_fn(x_BxSxW) if stream_fn else None
        x_BxSxW, (rms_D, streams) = jax.lax.scan(
            scan_body, x_BxSxW, (stacked, taps.grad_probes_D, ins, taps.perturb_DxBxSxW))
        if stream_fn:
            streams = jax.tree.map(lambda e, h: jnp.concatenate([e[None], h]), embedded, streams)
        h_BxSxW = self.head_input(x_BxSxW)
        head_out = taps.head_input_fn(h_BxSxW) if taps.head_input_fn else None
        return Tapped(self.head(h_BxSxW), rms_D, streams, head_out)


@dataclasses.dataclass(frozen=True)
class Taps:
    """What `Transformer.forward` observes or changes; every field optional. Layer l = 0 is the
    bottom block; "the stream after block l" includes what the taps below add at l.

    grad_probes_D: float32 zeros [D]; ∂L/∂grad_probes_D[l] = ‖∂L/∂h_l‖², h_l the stream entering
        block l (one reduction in the backward pass; nothing in the forward).
    inserted: {parameter name: [D, ...]}, one block's values per layer: block l' runs right after
        block l, with branch multiplier `inserted_multiplier` (default: the multiplier of a model
        one block deeper, i.e. what `depthdelusion expand` gives an inserted block). With zero
        output projections every inserted block is the identity in the forward pass and its
        Jacobian is I, so the gradient w.r.t. one block's projections is the single-insertion one.
    perturb_DxBxSxW: added to the stream after block l (cast to the residual dtype); its gradient
        is ∂L/∂ of the stream after block l, per token.
    stream_fn: applied to the stream at the embeddings and after every block; `Tapped.streams`
        stacks the results on a leading axis of D + 1 (the scan emits them, so a reduction never
        holds all D streams at once). Block l's input is entry l, its output entry l + 1.
    head_input_fn: applied to the head's input (the final norm of the last stream).
    block_rms: `Tapped.block_rms_D[l]` = RMS of the stream after block l.
    """

    grad_probes_D: jax.Array | None = None
    inserted: dict | None = None
    inserted_multiplier: float | None = None
    perturb_DxBxSxW: jax.Array | None = None
    stream_fn: Callable[[jax.Array], Any] | None = None
    head_input_fn: Callable[[jax.Array], Any] | None = None
    block_rms: bool = False


class Tapped(NamedTuple):
    """What `forward` returns; the fields a tap did not ask for are None."""

    logits: jax.Array  # [B, S, V], float32
    block_rms_D: jax.Array | None = None
    streams: Any = None
    head_input: Any = None


def _rms(x: jax.Array) -> jax.Array:
    return jnp.sqrt(jnp.mean(jnp.square(x.astype(jnp.float32))))
