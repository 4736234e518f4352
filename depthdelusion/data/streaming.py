"""The streaming reader: document files -> tokens (+ EOS) -> packed windows, one stream per batch row.

For SlimPajama, jsonl, text, TFDS text datasets and the built-in corpus. The training files
(for TFDS, ranges of a shard's records) are shuffled with the seed (a new order each epoch) and
dealt out to the B rows of the global batch (file k of the order feeds row k mod B); each row
packs its own stream, so a process opens only its rows' files. This needs at least B files
(SlimPajama has 59k; otherwise use prepare-data; TFDS shards are cut into ranges until there are
enough). With `data.workers` > 0 each row's files are dealt again to grain worker processes (the
batches then depend on the worker count, not on the number of processes). Documents keep their
order within a file (SlimPajama's files are already shuffled mixtures, as are a TFDS dataset's
shards). Resuming replays at most one file up to the record where the state was taken.
"""
from __future__ import annotations

from typing import Any, Iterator

import grain
import numpy as np

from depthdelusion.config import DataConfig
from depthdelusion.data.grain_workers import prefetch_in_workers
from depthdelusion.data.packing import PackWindowsIterDataset
from depthdelusion.data.sources import SKIP_REASONS, DatasetFiles, DocumentsIterDataset
from depthdelusion.data.tfds_format import subdivide
from depthdelusion.data.tokenizers import get_tokenizer


class Tokenize(grain.transforms.Map):
    """Document text -> its token ids followed by EOS. Builds the tokenizer lazily, once per
    worker process (tiktoken encodings are not shipped between processes)."""

    def __init__(self, tokenizer_name: str):
        self.tokenizer_name = tokenizer_name
        self._tokenizer = None

    def map(self, text: str) -> np.ndarray:
        if self._tokenizer is None:
            self._tokenizer = get_tokenizer(self.tokenizer_name)
        ids = self._tokenizer.encode(text)
        return np.concatenate([ids, np.array([self._tokenizer.eos_id], np.int32)])


def row_files(files: list, seed: int, epochs: int, row: int, rows: int) -> list:
    """The files feeding batch row `row` of `rows`: every epoch a new seeded order, dealt out."""
    order = []
    for epoch in range(epochs):
        perm = np.random.default_rng([seed, epoch]).permutation(len(files))
        order += [files[i] for i in perm[row::rows]]
    return order


def document_kind(found: DatasetFiles) -> str:
    """How `sources` reads a document file of this dataset."""
    return {"text": "text", "tfds_text": "tfds"}.get(found.format, "jsonl")


def packed_windows(files: list, kind: str, tokenizer: str, window: int) -> grain.IterDataset:
    """The documents of `files`, in order, tokenized and packed into windows of `window` tokens."""
    docs = DocumentsIterDataset(grain.MapDataset.source(files).to_iter_dataset(), kind)
    return PackWindowsIterDataset(docs.map(Tokenize(tokenizer)), window)


class RowsIterDataset(grain.IterDataset):
    """Stacks one window from each parent stream into a [rows, window] batch."""

    def __init__(self, parents: list[grain.IterDataset]):
        super().__init__(parents)

    def __iter__(self) -> "RowsIterator":
        return RowsIterator([p.__iter__() for p in self.parents])


class RowsIterator(grain.DatasetIterator):
    def __init__(self, parents: list[grain.DatasetIterator]):
        super().__init__(parents)

    def __next__(self) -> np.ndarray:
        return np.stack([next(p) for p in self._parents])

    def get_state(self) -> dict[str, Any]:
        return {"rows": [p.get_state() for p in self._parents]}

    def set_state(self, state: dict[str, Any]) -> None:
        for parent, s in zip(self._parents, state["rows"], strict=True):
            parent.set_state(s)


def train_batches(found: DatasetFiles, cfg: DataConfig, window: int, local_batch: int,
                  global_batch: int, first_row: int, name: str) -> grain.IterDataset:
    """Rows [first_row, first_row + local_batch) of every global batch, [local_batch, window];
    `name` is the dataset's name for errors."""
    kind, units = document_kind(found), found.train
    if found.format == "tfds_text":
        units = subdivide(units, global_batch * max(1, cfg.workers))
    if len(units) < global_batch * max(1, cfg.workers):
        raise ValueError(
            f"{name} has {len(units)} training files; streaming feeds each of the "
            f"train.batch_size={global_batch} batch rows from its own files (x data.workers="
            f"{cfg.workers}), so it needs at least {global_batch * max(1, cfg.workers)}: split the "
            "files, or tokenize them once with `depthdelusion prepare-data` and train on that"
        )
    ds = RowsIterDataset([
        packed_windows(row_files(units, cfg.seed, cfg.epochs, row, global_batch), kind, cfg.tokenizer, window)
        for row in range(first_row, first_row + local_batch)
    ])
    if cfg.workers > 0:
        return prefetch_in_workers(ds, cfg.workers)
    if cfg.prefetch > 0:  # a background thread tokenizes and packs while the device computes
        return grain.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=cfg.prefetch)
    return ds


def validation_windows(found: DatasetFiles, cfg: DataConfig, window: int) -> Iterator[np.ndarray]:
    """The validation split's windows in file order."""
    return iter(packed_windows(found.validation, document_kind(found), cfg.tokenizer, window))


def skipped_counts(state: Any) -> dict[str, int]:
    """Skipped-record counters summed over an iterator state (every worker's), as of the
    latest record read."""
    totals = {reason: 0 for reason in SKIP_REASONS}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "latest" in node:  # a packer: its "parent" is an older copy of the same reader
                walk(node["latest"])
                return
            if "skipped" in node and isinstance(node["skipped"], dict):
                for reason, n in node["skipped"].items():
                    totals[reason] = totals.get(reason, 0) + int(n)
            for value in node.values():
                walk(value)
        elif isinstance(node, (list, tuple)):
            for value in node:
                walk(value)

    walk(state)
    return totals
