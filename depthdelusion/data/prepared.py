"""The prepared reader: packed token windows written by `depthdelusion prepare-data`, read by
random access.

The dataset (a TFDS ArrayRecord dataset, see tfds_format.py) names this reader in its
metadata.json (`tfds_format.READER_KEY`). Training reads a global, seeded permutation of the
windows (reshuffled each epoch); global batch t is windows [tB, (t+1)B) of it, and a process
takes its rows of each. No tokenizing at training time, and random access makes resuming free.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator

import grain
import numpy as np

from depthdelusion.config import DataConfig
from depthdelusion.data.grain_workers import prefetch_in_workers
from depthdelusion.data.sources import DatasetFiles, legacy_windows_error
from depthdelusion.data.tfds_format import decode_window, windows_metadata


@dataclasses.dataclass
class _DecodeWindow(grain.transforms.Map):
    dtype: str

    def map(self, record: bytes) -> np.ndarray:
        return decode_window(record, self.dtype)


@dataclasses.dataclass
class _ProcessRows(grain.transforms.Map):
    """Local row i -> global window (i // b)·B + p·b + i mod b: this process's rows of each
    global batch of a random-access dataset, decoded to int32."""

    windows: grain.MapDataset
    dtype: str
    local_batch: int
    global_batch: int
    first_row: int

    def map(self, i: int) -> np.ndarray:
        index = (i // self.local_batch) * self.global_batch + self.first_row + i % self.local_batch
        return decode_window(self.windows[index], self.dtype)


def checked_metadata(found: DatasetFiles, cfg: DataConfig, window: int) -> dict:
    """The dataset's metadata.json, after checking it was prepared for this tokenizer and window."""
    if found.format == "legacy_windows":
        raise legacy_windows_error(found.root)
    meta = windows_metadata(found.root)
    if meta["window"] != window or meta["tokenizer"] != cfg.tokenizer:
        raise ValueError(
            f"data.path={found.root} was prepared with tokenizer={meta['tokenizer']} and windows of "
            f"{meta['window']} tokens (seq_len {meta['window'] - 1}); this run has "
            f"tokenizer={cfg.tokenizer}, seq_len {window - 1}: set them to match or prepare it again"
        )
    return meta


def train_batches(found: DatasetFiles, cfg: DataConfig, window: int, local_batch: int,
                  global_batch: int, first_row: int, name: str) -> grain.IterDataset:
    """Rows [first_row, first_row + local_batch) of every global batch, [local_batch, window];
    `name` is the dataset's name for errors."""
    meta = checked_metadata(found, cfg, window)
    source = grain.sources.ArrayRecordDataSource(found.train)
    windows = grain.MapDataset.source(source).shuffle(seed=cfg.seed).repeat(cfg.epochs)
    n_rows = len(windows) // global_batch * local_batch
    rows = _ProcessRows(windows, meta["dtype"], local_batch, global_batch, first_row)
    ds = grain.MapDataset.range(n_rows).map(rows).to_iter_dataset()
    if cfg.workers > 0:  # rows come back in order from the workers: batches do not change
        ds = prefetch_in_workers(ds, cfg.workers)
    ds = ds.batch(local_batch, drop_remainder=True)
    if cfg.prefetch > 0 and cfg.workers == 0:
        ds = grain.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=cfg.prefetch)
    return ds


def validation_windows(found: DatasetFiles, cfg: DataConfig, window: int) -> Iterator[np.ndarray]:
    """The validation split's windows in stored order."""
    meta = checked_metadata(found, cfg, window)
    source = grain.sources.ArrayRecordDataSource(found.validation)
    return iter(grain.MapDataset.source(source).map(_DecodeWindow(meta["dtype"])))
