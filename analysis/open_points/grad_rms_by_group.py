"""Open point: should AdamW eps scale in every group or only inside the residual blocks?
eps only matters relative to sqrt(v) ~ |gradient|, so it should follow each group's gradient
RMS. This measures the per-group gradient RMS at initialisation under CompleteP across widths
and depths (built-in corpus, batch 8 x 64 bytes), normalised by the base shape's value, next to
the eps multiplier the rules table gives.
    PYTHONPATH=. python analysis/open_points/grad_rms_by_group.py > analysis/open_points/grad_rms_by_group.md
"""
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from depthdelusion.config import DataConfig, ModelConfig
from depthdelusion.data.pipeline import Batches
from depthdelusion.model import parametrization as pz
from depthdelusion.model.transformer import Transformer
from depthdelusion.train.optimizer import param_groups

BASE_W, BASE_D, SEQ = 32, 2, 64


def group_grad_rms(width: int, depth: int, data: DataConfig = DataConfig()) -> tuple[dict[str, float], ModelConfig]:
    batches = Batches(data, SEQ, 8)
    tokens = jnp.asarray(next(batches))
    mc = ModelConfig(depth=depth, width=width, head_dim=16, seq_len=SEQ, vocab_size=batches.tokenizer.vocab_size,
                     parametrization="completep", base_width=BASE_W, base_depth=BASE_D)
    graphdef, params = nnx.split(Transformer(mc, rngs=nnx.Rngs(0)), nnx.Param)

    def loss_fn(p):
        logits = nnx.merge(graphdef, p)(tokens[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

    grads = nnx.to_pure_dict(jax.jit(jax.grad(loss_fn))(params))
    groups = nnx.to_pure_dict(param_groups(params))
    sq, n = {}, {}
    for g, label in zip(jax.tree.leaves(grads), jax.tree.leaves(groups)):
        if label in ("head_bias", "final_norm"):  # not matrices/blocks: reported with head
            label = "head" if label == "head_bias" else label
        sq[label] = sq.get(label, 0.0) + float(jnp.sum(jnp.square(g)))
        n[label] = n.get(label, 0) + g.size
    return {k: float(np.sqrt(sq[k] / n[k])) for k in sq}, mc


if __name__ == "__main__":
    shapes = [(32, 2), (128, 2), (32, 8), (128, 8)]
    results = {s: group_grad_rms(*s) for s in shapes}
    base, _ = results[(BASE_W, BASE_D)]
    groups = list(base)
    print("| W × D | m_N | m_L | " + " | ".join(f"{g}: measured / table eps" for g in groups) + " |")
    print("|---|---|---|" + "---|" * len(groups))
    for (w, d), (rms, mc) in results.items():
        cells = [f"{rms[g] / base[g]:.3f} / {pz.group_rule(mc, g).eps:.3f}" for g in groups]
        print(f"| {w} × {d} | {w / BASE_W:g} | {d / BASE_D:g} | " + " | ".join(cells) + " |")
