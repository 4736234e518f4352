"""Speed plumbing: attention implementation choice, the bench command, and a step loop that reads
device values only at logging points. No timings are asserted (they live in benchmarks/RESULTS.md)."""
from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest
from flax import nnx

from depthdelusion.cli import main
from depthdelusion.config import Config, DataConfig, ModelConfig, TrainConfig
from depthdelusion.model.transformer import Transformer, attention_implementation
from depthdelusion.train import bench, loop
from dispatch_counter import count_dispatches

TINY = ModelConfig(depth=2, width=64, head_dim=16, seq_len=32, vocab_size=97)


def _logits(cfg: ModelConfig) -> np.ndarray:
    model = Transformer(cfg, rngs=nnx.Rngs(params=0))
    tokens_BxS = jax.random.randint(jax.random.key(1), (2, cfg.seq_len), 0, cfg.vocab_size)
    return np.asarray(model(tokens_BxS))


def test_auto_attention_is_xla_on_cpu_and_gives_the_default_logits():
    assert jax.default_backend() == "cpu"
    assert attention_implementation(TINY) == "xla"
    assert attention_implementation(dataclasses.replace(TINY, attention="cudnn")) == "cudnn"
    xla = _logits(dataclasses.replace(TINY, attention="xla"))
    np.testing.assert_array_equal(_logits(TINY), xla)


def test_xla_attention_equals_jax_default_implementation():
    q, k, v = (jax.random.normal(jax.random.key(i), (2, 16, 4, 8)) for i in range(3))
    default = jax.nn.dot_product_attention(q, k, v, is_causal=True)
    xla = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")
    np.testing.assert_array_equal(np.asarray(default), np.asarray(xla))


def test_bench_compare_times_both_variants_and_reports_no_mfu_on_cpu():
    cfg = Config(model=TINY, train=TrainConfig(batch_size=8))
    result = bench.bench(cfg, steps=4, warmup=2, layer_stats="compare")
    assert set(result.compile_s) == {"plain", "layer_stats"}
    assert all(s > 0 for s in result.compile_s.values())
    assert result.step["plain"].n == 2 and result.step["layer_stats"].n == 2
    assert result.tokens_per_step == 8 * 32
    assert result.mfu is None  # CPU: no peak in the table
    assert result.flops_per_s == pytest.approx(result.tokens_per_s * result.flops_per_token)
    assert set(result.logging_cost) == {"every_step", "every_100"}
    assert result.peak_memory_source != "n/a" and result.peak_memory_bytes > 0


def test_bench_command_prints_json(capsys):
    code = main(["bench", "--set", "model.depth=1", "--set", "model.width=32", "--set", "model.head_dim=16",
                 "--set", "model.seq_len=16", "--set", "train.batch_size=16", "--set", "train.grad_accum_steps=2",
                 "--steps", "2", "--warmup", "1", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["step"]["plain"]["n"] == 2 and out["step"]["layer_stats"] is None
    assert out["model"].startswith("1L x 32W, V 257") and out["model"].endswith(", 2 microbatches")
    assert out["tokens_per_step"] == 16 * 16  # the whole batch, accumulated


def test_bench_rejects_a_bad_layer_stats_value():
    with pytest.raises(ValueError, match="--layer-stats"):
        bench.bench(Config(model=TINY), steps=1, layer_stats="sometimes")


def test_loop_reads_device_values_only_after_the_next_step_is_dispatched_at_logging_steps(tmp_path, monkeypatch):
    """The loop reads device values with jax.device_get; record how many train steps had been
    dispatched at each read. With logging only at steps 1 and 12 (layer stats at 1 and last),
    reads may happen only once step 2 is dispatched (step 1's metrics) and after step 12 (its
    metrics, the final save). A read by other means (float(), np.asarray on a jax.Array) is not
    seen here; then step 1's metrics are never seen read and the test fails."""
    steps = 12
    cfg = Config(model=dataclasses.replace(TINY, vocab_size=None),
                 data=DataConfig(builtin_documents=200, prefetch=2),
                 train=TrainConfig(steps=steps, batch_size=8, warmup_steps=2, log_every=1000,
                                   layer_stats_every=1000, eval_every=1000, eval_batches=0,
                                   checkpoint_every=0, checkpoint_minutes=0))
    dispatched = count_dispatches(monkeypatch)
    reads: list[int] = []
    device_get = jax.device_get

    def counted_device_get(tree):
        if any(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(tree)):
            reads.append(dispatched[0])
        return device_get(tree)

    monkeypatch.setattr(jax, "device_get", counted_device_get)
    summary = loop.train(cfg, tmp_path / "run")
    monkeypatch.undo()
    assert summary["status"] == "finished" and dispatched[0] == steps
    assert 2 in reads, "step 1's metrics were never read: the instrumentation is not seeing reads"
    assert set(reads) <= {2, steps}, f"device reads while steps {sorted(set(reads) - {2, steps})} were dispatched"
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, steps]
