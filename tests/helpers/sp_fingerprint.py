"""Fingerprint of the SP model and optimizer: sha256 of every initial parameter and three
training losses on a fixed batch. `tests/helpers/sp_skeleton.json` holds it as computed by the
skeleton commit 9b0781f (before parameterizations existed):
    PYTHONPATH=<checkout of 9b0781f> python tests/helpers/sp_fingerprint.py > tests/helpers/sp_skeleton.json
"""
import hashlib
import json

import jax
import numpy as np
import optax
from flax import nnx

from depthdelusion.config import ModelConfig, TrainConfig
from depthdelusion.model.transformer import Transformer
from depthdelusion.train.optimizer import make_optimizer

MODEL = dict(depth=3, width=64, head_dim=16, vocab_size=257, seq_len=32, compute_dtype="float32")
TRAIN = dict(lr=3e-3, warmup_steps=1, steps=3)


def fingerprint(model_cfg: ModelConfig, tx) -> dict:
    model = Transformer(model_cfg, rngs=nnx.Rngs(params=0))
    graphdef, params = nnx.split(model, nnx.Param)
    hashes = {
        jax.tree_util.keystr(path): hashlib.sha256(np.asarray(leaf).tobytes()).hexdigest()
        for path, leaf in jax.tree_util.tree_leaves_with_path(nnx.to_pure_dict(params))
    }
    tokens_BxS1 = jax.random.randint(jax.random.key(1), (4, model_cfg.seq_len + 1), 0, 257)

    def loss_fn(p):
        logits = nnx.merge(graphdef, p)(tokens_BxS1[:, :-1])
        return optax.softmax_cross_entropy_with_integer_labels(logits, tokens_BxS1[:, 1:]).mean()

    @jax.jit
    def step(p, opt_state):
        loss, grads = jax.value_and_grad(loss_fn)(p)
        updates, opt_state = tx.update(grads, opt_state, p)
        return optax.apply_updates(p, updates), opt_state, loss

    opt_state, losses = tx.init(params), []
    for _ in range(3):
        params, opt_state, loss = step(params, opt_state)
        losses.append(float(loss))
    return {"param_sha256": hashes, "losses": losses}


if __name__ == "__main__":
    print(json.dumps(fingerprint(ModelConfig(**MODEL), make_optimizer(TrainConfig(**TRAIN))), indent=1))
