"""Input-pipeline throughput: tokens/s of (a) streaming SlimPajama-format jsonl.zst + GPT-2 BPE
and (b) a prepared ArrayRecord dataset, with 1 and N grain workers, against what the trainer
consumes for the paper's 16L x 512W at 50% MFU on one H100 (from our FLOP count).

    python benchmarks/bench_data.py [--workers 0,2] [--batches 200] [--documents 20000]

Data: the built-in corpus written in SlimPajama's layout (made-up English-like words, so BPE
produces more tokens per byte than real web text: ~0.4 vs ~0.25 tokens per byte).
"""
from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time

from depthdelusion.config import DataConfig, ModelConfig
from depthdelusion.data.builtin_corpus import write_slimpajama
from depthdelusion.data.pipeline import Batches
from depthdelusion.data.prepare import prepare
from depthdelusion.model.size import flops_per_token

H100_PEAK = 989e12


def measure(cfg: DataConfig, seq_len: int, batch: int, n_batches: int) -> float:
    batches = Batches(cfg, seq_len, batch)
    next(batches)  # start-up (worker processes, first file) is not throughput
    start = time.perf_counter()
    for _ in range(n_batches):
        next(batches)
    elapsed = time.perf_counter() - start
    batches.close()
    return n_batches * batch * (seq_len + 1) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--documents", type=int, default=20_000)
    args = parser.parse_args()
    from absl import flags

    flags.FLAGS.mark_as_parsed()
    seq_len, batch = 1024, 8
    paper = ModelConfig(depth=16, width=512, vocab_size=50257, seq_len=1024)
    need = 0.5 * H100_PEAK / flops_per_token(paper)
    print(f"machine: {platform.node()} {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}")
    print(f"trainer demand, 16Lx512W at 50% MFU on one H100: {need:,.0f} tokens/s")
    with tempfile.TemporaryDirectory() as tmp:
        raw, prepared = f"{tmp}/slimpajama", f"{tmp}/prepared"
        write_slimpajama(raw, args.documents, seed=0, shards=16)
        prepare(raw, prepared, tokenizer="gpt2", seq_len=seq_len)
        for workers in [int(w) for w in args.workers.split(",")]:
            for name, path in (("streaming jsonl.zst + GPT-2 BPE", raw), ("prepared ArrayRecord", prepared)):
                cfg = DataConfig(path=path, tokenizer="gpt2", workers=workers, prefetch=0 if workers else 4)
                rate = measure(cfg, seq_len, batch, args.batches)
                print(f"{name:34s} workers={workers}: {rate:12,.0f} tokens/s  ({rate / need:5.2f}x demand)")


if __name__ == "__main__":
    main()
