"""The trainer's input: local batches of packed token windows, from whichever reader the dataset needs.

Each JAX process reads only its share of the data and yields [global_batch / process_count,
seq_len + 1] int32 batches; the trainer assembles the global batch with
`jax.make_array_from_process_local_data`. The global batch does not depend on the number of
processes (P): row r of every global batch has a fixed source, and process p serves rows
[p·B/P, (p+1)·B/P). The iterator's state (`get_state` / `set_state`) goes into the run's
checkpoint: restoring it yields exactly the batches an uninterrupted run sees.

The dataset (`sources.resolve_dataset`) names its reader, and this module dispatches on it:
`streaming.py` tokenizes and packs documents, one stream per batch row; `prepared.py` reads the
windows written by `depthdelusion prepare-data` by random access (their metadata.json names
that reader).

Single pass by default: a window is never repeated unless `data.epochs` > 1, and running out is
an OutOfData error naming the dataset and the tokens consumed.
"""
from __future__ import annotations

from typing import Any

import grain
import numpy as np

from depthdelusion.config import DataConfig
from depthdelusion.data import prepared, streaming
from depthdelusion.data.sources import STREAMING, dataset_name, resolve_dataset
from depthdelusion.data.tfds_format import PACKED_WINDOWS
from depthdelusion.data.tokenizers import get_tokenizer

READERS = {STREAMING: streaming, PACKED_WINDOWS: prepared}


class OutOfData(ValueError):
    """The data ran out before train.steps: an input problem, reported as one clear line."""


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
                                               process_index * local_batch)


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
