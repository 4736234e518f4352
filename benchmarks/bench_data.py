"""Input-pipeline throughput: tokens/s of (a) streaming SlimPajama-format jsonl.zst + GPT-2 BPE,
(b) a TFDS text dataset (array_record shards, `data.path=tfds:NAME:CONFIG`) streamed through
the same BPE, and (c) packed windows prepared with `depthdelusion prepare-data` (a TFDS
ArrayRecord dataset), with 0..N grain workers, against what the trainer consumes for the
paper's 16L x 512W at 50% MFU on one H100 (from our FLOP count).

    python benchmarks/bench_data.py [--workers 0,2] [--batches 200] [--documents 20000]

Data: the built-in corpus written in SlimPajama's layout (made-up English-like words, so BPE
produces more tokens per byte than real web text: ~0.4 vs ~0.25 tokens per byte); the TFDS
text dataset holds the same documents (built here by a TFDS builder, 16 shards).
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
from depthdelusion.data.sources import DocumentsIterDataset, find_dataset
from depthdelusion.model_size import flops_per_token
from depthdelusion.train.hardware import chip_of

H100_PEAK = chip_of("NVIDIA H100 80GB HBM3").peak_flops


def measure(cfg: DataConfig, seq_len: int, batch: int, n_batches: int) -> float:
    batches = Batches(cfg, seq_len, batch)
    next(batches)  # start-up (worker processes, first file) is not throughput
    start = time.perf_counter()
    for _ in range(n_batches):
        next(batches)
    elapsed = time.perf_counter() - start
    batches.close()
    return n_batches * batch * (seq_len + 1) / elapsed


def write_tfds_text(slimpajama_root: str, data_dir: str, shards: int) -> str:
    """The corpus' training documents as the TFDS dataset builtin_text/en (array_record)."""
    import grain
    import tensorflow_datasets as tfds

    files = find_dataset(slimpajama_root).train

    class BuiltinText(tfds.core.GeneratorBasedBuilder, skip_registration=True):
        VERSION = tfds.core.Version("1.0.0")
        BUILDER_CONFIGS = [tfds.core.BuilderConfig(name="en")]

        def _info(self):
            return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
                "text": tfds.features.Text(), "url": tfds.features.Text()}))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            docs = DocumentsIterDataset(grain.MapDataset.source(files).to_iter_dataset(), "jsonl")
            for i, text in enumerate(docs):
                yield i, {"text": text, "url": f"doc/{i}"}

    BuiltinText(data_dir=data_dir, file_format="array_record").download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            compute_stats=tfds.download.ComputeStatsMode.SKIP, num_shards=shards))
    return "tfds:builtin_text:en"


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
    print(f"machine: {platform.node()} {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
          f"load average {os.getloadavg()[0]:.1f} at start")
    print(f"trainer demand, 16Lx512W at 50% MFU on one H100: {need:,.0f} tokens/s")
    with tempfile.TemporaryDirectory() as tmp:
        raw, prepared, tfds_dir = f"{tmp}/slimpajama", f"{tmp}/prepared", f"{tmp}/tensorflow_datasets"
        write_slimpajama(raw, args.documents, seed=0, shards=16)
        tfds_text = write_tfds_text(raw, tfds_dir, shards=16)
        prepare(raw, prepared, tokenizer="gpt2", seq_len=seq_len)
        paths = (("streaming jsonl.zst + GPT-2 BPE", raw), ("TFDS text (array_record) + GPT-2 BPE", tfds_text),
                 ("prepared windows (TFDS ArrayRecord)", prepared))
        for workers in [int(w) for w in args.workers.split(",")]:
            for name, path in paths:
                cfg = DataConfig(path=path, tokenizer="gpt2", workers=workers, prefetch=0 if workers else 4,
                                 tfds_dir=tfds_dir)
                rate = measure(cfg, seq_len, batch, args.batches)
                print(f"{name:38s} workers={workers}: {rate:12,.0f} tokens/s  ({rate / need:5.2f}x demand)"
                      f"  load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
