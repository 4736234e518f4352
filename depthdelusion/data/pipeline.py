"""The trainer's input: local batches of packed token windows, from whichever reader the dataset needs.

Each JAX process reads only its share of the data and yields [global_batch / process_count,
seq_len + 1] int32 batches; the trainer assembles the global batch with
`jax.make_array_from_process_local_data`. The global batch does not depend on the number of
processes (P): row r of every global batch has a fixed source, and process p serves rows
[p·B/P, (p+1)·B/P). The iterator's state (`get_state` / `set_state`) goes into the run's
checkpoint: restoring it yields exactly the batches an uninterrupted run sees.

The dataset (`resolve_dataset`) names its reader, and this module dispatches on it:
`streaming.py` tokenizes and packs documents, one stream per batch row; `prepared.py` reads the
windows written by `depthdelusion prepare-data` by random access (their metadata.json names
that reader).

Single pass by default: a window is never repeated unless `data.epochs` > 1, and running out is
an OutOfData error naming the dataset and the tokens consumed.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import grain
import numpy as np

from depthdelusion.config import DataConfig
from depthdelusion.data import builtin_corpus, prepared, streaming
from depthdelusion.data.sources import STREAMING, DatasetFiles, find_dataset
from depthdelusion.data.tfds_format import PACKED_WINDOWS
from depthdelusion.data.tokenizers import get_tokenizer

READERS = {STREAMING: streaming, PACKED_WINDOWS: prepared}


class OutOfData(ValueError):
    """The data ran out before train.steps: an input problem, reported as one clear line."""


def builtin_root(cfg: DataConfig) -> Path:
    """The built-in corpus, written once in SlimPajama's layout under the cache directory
    ($DEPTHDELUSION_CACHE or ~/.cache/depthdelusion)."""
    cache = Path(os.environ.get("DEPTHDELUSION_CACHE", Path.home() / ".cache" / "depthdelusion"))
    zipf = cfg.builtin_zipf_exponent
    # the default exponent keeps the name corpora were cached under before the knob existed
    suffix = "" if zipf == builtin_corpus.ZIPF_EXPONENT else f"-zipf{zipf:g}"
    root = cache / f"builtin-v2-seed{cfg.seed}-docs{cfg.builtin_documents}{suffix}"
    if not (root / "train").is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".writing-"))
        builtin_corpus.write_slimpajama(tmp, cfg.builtin_documents, cfg.seed, zipf=zipf)
        try:
            tmp.rename(root)  # atomic: concurrent processes either win or find it written
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return root


def resolve_dataset(cfg: DataConfig) -> DatasetFiles:
    """The dataset a data config names (the built-in corpus when data.path is unset), with
    data.holdout_files of a jsonl / text dataset moved to its validation split."""
    if cfg.path is None:
        return find_dataset(str(builtin_root(cfg)), "slimpajama")
    found = find_dataset(cfg.path, cfg.format, cfg.tfds_dir, cfg.tfds_text_feature)
    if cfg.holdout_files and not found.validation and found.format in ("jsonl", "text"):
        if cfg.holdout_files >= len(found.train):
            raise ValueError(
                f"data.holdout_files={cfg.holdout_files} leaves no training files "
                f"({len(found.train)} found at {cfg.path})"
            )
        found.validation = found.train[-cfg.holdout_files:]
        found.train = found.train[:-cfg.holdout_files]
    return found


def dataset_name(cfg: DataConfig) -> str:
    return "the built-in corpus" if cfg.path is None else cfg.path


def train_dataset(cfg: DataConfig, seq_len: int, global_batch: int, process_index: int = 0,
                  process_count: int = 1) -> grain.IterDataset:
    """This process's training batches, [global_batch / process_count, seq_len + 1] int32."""
    if global_batch % process_count:
        raise ValueError(
            f"train.batch_size={global_batch} is not divisible by the number of processes {process_count}"
        )
    local_batch = global_batch // process_count
    found = resolve_dataset(cfg)
    return READERS[found.reader].train_batches(found, cfg, seq_len + 1, local_batch, global_batch,
                                               process_index * local_batch, dataset_name(cfg))


def validation_batches(cfg: DataConfig, seq_len: int, global_batch: int, n_batches: int,
                       process_index: int = 0, process_count: int = 1) -> list[np.ndarray] | None:
    """The first `n_batches` validation batches (the same every time), this process's rows;
    None when the dataset has no validation split."""
    found = resolve_dataset(cfg)
    if not found.validation or n_batches < 1:
        return None
    local_batch, window = global_batch // process_count, seq_len + 1
    windows = READERS[found.reader].validation_windows(found, cfg, window)
    mine = (w for i, w in enumerate(windows) if i % process_count == process_index)
    rows = [w for _, w in zip(range(n_batches * local_batch), mine)]
    if len(rows) < local_batch:
        raise ValueError(
            f"{dataset_name(cfg)}: the validation split holds fewer than one batch "
            f"({len(rows)} windows of {window} tokens for {local_batch} rows per process)"
        )
    n = len(rows) // local_batch * local_batch
    return list(np.stack(rows[:n]).reshape(-1, local_batch, window))


class Batches:
    """The trainer's view: next local batch, checkpointable state, clear end-of-data error."""

    def __init__(self, cfg: DataConfig, seq_len: int, global_batch: int, process_index: int = 0,
                 process_count: int = 1):
        self.cfg, self.name = cfg, dataset_name(cfg)
        self.tokenizer = get_tokenizer(cfg.tokenizer)
        self.dataset = train_dataset(cfg, seq_len, global_batch, process_index, process_count)
        self.iterator = iter(self.dataset)
        self.tokens = 0  # tokens this process has taken

    def __next__(self) -> np.ndarray:
        try:
            batch = next(self.iterator)
        except StopIteration:
            raise OutOfData(
                f"{self.name}: out of data after {self.tokens:,} tokens on this process "
                f"(data.epochs={self.cfg.epochs}; a single pass never repeats a sequence): train "
                "for fewer steps, point data.path at more data, or raise data.epochs"
            ) from None
        self.tokens += batch.size
        return batch

    def get_state(self) -> dict[str, Any]:
        """The grain iterator's state (JSON-serialisable): where the next batch comes from."""
        return self.iterator.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self.iterator.set_state(state)

    def skipped(self) -> dict[str, int]:
        """Records the document readers skipped (none for prepared windows)."""
        return streaming.skipped_counts(self.iterator.get_state())

    def close(self) -> None:
        close = getattr(self.iterator, "close", None)
        if close is not None:
            close()
