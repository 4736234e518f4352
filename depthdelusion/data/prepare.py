"""`depthdelusion prepare-data`: tokenize and pack a corpus once into a TFDS ArrayRecord dataset.

OUT/depthdelusion_windows/{tokenizer}_seq{seq_len}/1.0.0/
    dataset_info.json, features.json    the TFDS description: feature `tokens`, splits, shards
    metadata.json                       reader kind (packed_windows), tokenizer, window (= seq_len + 1),
                                        dtype, counts, source, skipped records (TFDS's `info.metadata`)
    depthdelusion_windows-train.array_record-0000K-of-0000N       one record per packed window
    depthdelusion_windows-validation.array_record-00000-of-00001  (the source's validation split)

Training from OUT reads windows by random access (a global seeded shuffle, exact and free to
resume) and spends no CPU on tokenization; any TFDS reader opens it without TensorFlow
(`tfds.data_source("depthdelusion_windows/gpt2_seq1024", data_dir=OUT)`). A directory in the
layout written before (metadata.json beside train/*.array_record of raw windows) is converted
by giving it as the source: its windows are rewritten as they are, not re-tokenized.
"""
from __future__ import annotations

import json
from typing import Iterator

import grain
import numpy as np
from etils import epath

from depthdelusion.config import DataConfig
from depthdelusion.data.pipeline import resolve_dataset
from depthdelusion.data.streaming import document_kind, packed_windows, skipped_counts
from depthdelusion.data.tfds_format import (PACKED_WINDOWS, READER_KEY, WINDOWS_NAME, WindowsWriter,
                                            windows_config)
from depthdelusion.data.tokenizers import get_tokenizer
from depthdelusion.training_options import PrepareOptions


def _legacy_windows(files: list[str], dtype: str) -> Iterator[np.ndarray]:
    if files:
        source = grain.sources.ArrayRecordDataSource(files)
        for i in range(len(source)):
            yield np.frombuffer(source[i], dtype)


def _convert_legacy(root: str, out: str) -> dict:
    """Rewrite a pre-TFDS prepared directory's windows, in order, as the TFDS dataset."""
    meta = json.loads((epath.Path(root) / "metadata.json").read_text())
    found = resolve_dataset(DataConfig(path=root))
    writer = WindowsWriter(out, meta["tokenizer"], meta["window"] - 1, meta["dtype"])
    for split, files in (("train", found.train), ("validation", found.validation)):
        meta[f"{split}_windows"] = writer.write_split(split, _legacy_windows(files, meta["dtype"]))
    meta["converted_from"] = root
    meta["seq_len"] = meta["window"] - 1
    return _finish(writer, meta)


def _finish(writer: WindowsWriter, meta: dict) -> dict:
    meta[READER_KEY] = PACKED_WINDOWS
    meta["tfds_name"] = f"{WINDOWS_NAME}/{windows_config(meta['tokenizer'], meta['seq_len'])}"
    meta["tfds_builder_dir"] = writer.finish(meta, description=(
        f"Documents of {meta['source']} tokenized with {meta['tokenizer']}, separated by EOS and "
        f"packed end to end into windows of {meta['window']} tokens (no padding), by "
        "`depthdelusion prepare-data`."))
    return meta


# The defaults are `prepare-data`'s command-line ones, declared once (training_options.PrepareOptions).
def prepare(source: str | None, out: str, tokenizer: str = PrepareOptions.tokenizer,
            seq_len: int = PrepareOptions.seq_len, max_train_tokens: int | None = None,
            data_format: str = PrepareOptions.format, seed: int = PrepareOptions.seed,
            builtin_documents: int = 30_000, tfds_dir: str | None = None,
            tfds_text_feature: str = PrepareOptions.tfds_text_feature) -> dict:
    """Tokenize `source` (None = the built-in corpus) into packed windows: the TFDS dataset
    `depthdelusion_windows/{tokenizer}_seq{seq_len}` under `out`. Returns its metadata."""
    cfg = DataConfig(path=source, format=data_format, tokenizer=tokenizer, seed=seed,
                     builtin_documents=builtin_documents, tfds_dir=tfds_dir,
                     tfds_text_feature=tfds_text_feature)
    found = resolve_dataset(cfg)
    if found.format == "legacy_windows":
        return _convert_legacy(found.root, out)
    if found.format == "arrayrecord":
        raise ValueError(f"{source} is already a prepared dataset")
    window = seq_len + 1
    dtype = "uint16" if get_tokenizer(tokenizer).vocab_size <= 2**16 else "int32"
    writer = WindowsWriter(out, tokenizer, seq_len, dtype)
    meta = {"tokenizer": tokenizer, "window": window, "seq_len": seq_len, "dtype": dtype,
            "source": source or "builtin", "source_format": found.format}
    max_windows = None if max_train_tokens is None else max_train_tokens // window
    for split, files in (("train", found.train), ("validation", found.validation)):
        if not files:
            meta[f"{split}_windows"] = 0
            continue
        it = iter(packed_windows(files, document_kind(found), tokenizer, window))
        n = writer.write_split(split, it, max_windows if split == "train" else None)
        meta[f"{split}_windows"] = n
        meta[f"{split}_tokens"] = n * window
        meta[f"{split}_skipped"] = skipped_counts(it.get_state())
    return _finish(writer, meta)
