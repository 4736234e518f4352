"""`depthdelusion prepare-data`: tokenize and pack a corpus once into ArrayRecord shards.

DIR/metadata.json     tokenizer, window (= seq_len + 1), dtype, counts, source, skipped records
DIR/train/windows-00000-of-000NN.array_record       one record per packed window of token ids
DIR/validation/windows-00000-of-00001.array_record  (from the source's validation split, if any)

Training from DIR reads windows by random access (a global seeded shuffle, exact and free to
resume) and spends no CPU on tokenization.
"""
from __future__ import annotations

import json
from typing import Iterable

import numpy as np
from array_record.python.array_record_module import ArrayRecordWriter
from etils import epath

from depthdelusion.config import DataConfig
from depthdelusion.data.pipeline import _streaming, resolve_dataset, skipped_counts
from depthdelusion.data.tokenizers import get_tokenizer

WINDOWS_PER_SHARD = 65_536


def _write_split(windows: Iterable[np.ndarray], out: epath.Path, dtype: str, max_windows: int | None) -> int:
    """Write windows into shards of WINDOWS_PER_SHARD records; returns the number written."""
    out.mkdir(parents=True, exist_ok=True)
    shards: list[epath.Path] = []
    writer, n = None, 0
    for window in windows:
        if max_windows is not None and n >= max_windows:
            break
        if n % WINDOWS_PER_SHARD == 0:
            if writer is not None:
                writer.close()
            shards.append(out / f"windows-{len(shards):05d}.tmp")
            writer = ArrayRecordWriter(str(shards[-1]), "group_size:1")
        writer.write(window.astype(dtype).tobytes())
        n += 1
    if writer is not None:
        writer.close()
    for k, shard in enumerate(shards):  # final names carry the shard count
        shard.rename(out / f"windows-{k:05d}-of-{len(shards):05d}.array_record")
    return n


def prepare(source: str | None, out: str, tokenizer: str = "gpt2", seq_len: int = 1024,
            max_train_tokens: int | None = None, data_format: str = "auto", seed: int = 42,
            builtin_documents: int = 30_000) -> dict:
    """Tokenize `source` (None = the built-in corpus) into packed windows under `out`."""
    cfg = DataConfig(path=source, format=data_format, tokenizer=tokenizer, seed=seed,
                     builtin_documents=builtin_documents)
    found = resolve_dataset(cfg)
    if found.format == "arrayrecord":
        raise ValueError(f"{source} is already a prepared dataset")
    root = epath.Path(out)
    if (root / "metadata.json").exists():
        raise ValueError(f"{out} already holds a prepared dataset: choose a new --out")
    window = seq_len + 1
    kind = "text" if found.format == "text" else "jsonl"
    dtype = "uint16" if get_tokenizer(tokenizer).vocab_size <= 2**16 else "int32"
    meta = {"tokenizer": tokenizer, "window": window, "seq_len": seq_len, "dtype": dtype,
            "source": source or "builtin", "source_format": found.format}
    max_windows = None if max_train_tokens is None else max_train_tokens // window
    for split, files in (("train", found.train), ("validation", found.validation)):
        if not files:
            meta[f"{split}_windows"] = 0
            continue
        it = iter(_streaming(files, kind, tokenizer, window))
        n = _write_split(it, root / split, dtype, max_windows if split == "train" else None)
        meta[f"{split}_windows"] = n
        meta[f"{split}_tokens"] = n * window
        meta[f"{split}_skipped"] = skipped_counts(it.get_state())
    (root / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")  # written last: marks it complete
    return meta
