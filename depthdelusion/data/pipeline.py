"""The grain input pipeline: documents -> tokens (+ EOS) -> packed windows -> local batches.

Each JAX process reads only its share of the data and yields [global_batch / process_count,
seq_len + 1] int32 batches; the trainer assembles the global batch with
`jax.make_array_from_process_local_data`. The global batch does not depend on the number of
processes (P): row r of every global batch has a fixed source, and process p serves rows
[p·B/P, (p+1)·B/P). The iterator's state (`get_state` / `set_state`) goes into the run's
checkpoint: restoring it yields exactly the batches an uninterrupted run sees.

Streaming (SlimPajama, jsonl, text, TFDS text datasets, the built-in corpus): the training files
(for TFDS, ranges of a shard's records) are shuffled with the seed (a new order each epoch) and
dealt out to the B rows of the batch (file k of the order feeds row k mod B); each row packs its
own stream, so a process opens only its rows' files. This needs at least B files (SlimPajama
has 59k; otherwise use prepare-data; TFDS shards are cut into ranges until there are enough).
With `data.workers` > 0 each row's files are dealt again to grain worker processes (the batches
then depend on the worker count, not on P). Documents keep their order within a file
(SlimPajama's files are already shuffled mixtures, as are a TFDS dataset's shards).
Prepared windows (a TFDS ArrayRecord dataset, see tfds_format.py): a global, seeded permutation
of the packed windows (reshuffled each epoch); global batch t is windows [tB, (t+1)B) of it;
random access makes resuming free.

Single pass by default: a window is never repeated unless `data.epochs` > 1, and running out is
an OutOfData error naming the dataset and the tokens consumed.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import grain
import numpy as np
from etils import epath

from depthdelusion.config import DataConfig
from depthdelusion.data import builtin_corpus
from depthdelusion.data.packing import PackWindowsIterDataset
from depthdelusion.data.tfds_format import decode_window, subdivide
from depthdelusion.data.sources import (SKIP_REASONS, DatasetFiles, DocumentsIterDataset, find_dataset,
                                        legacy_windows_error)
from depthdelusion.data.tokenizers import get_tokenizer


class OutOfData(ValueError):
    """The data ran out before train.steps: an input problem, reported as one clear line."""


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


def _parse_absl_flags() -> None:
    """grain's worker processes read absl flags; outside an absl app nobody parses them."""
    from absl import flags

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()


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


def _row_files(files: list, seed: int, epochs: int, row: int, rows: int) -> list:
    """The files feeding batch row `row` of `rows`: every epoch a new seeded order, dealt out."""
    order = []
    for epoch in range(epochs):
        perm = np.random.default_rng([seed, epoch]).permutation(len(files))
        order += [files[i] for i in perm[row::rows]]
    return order


def document_kind(found: DatasetFiles) -> str:
    """How `sources` reads a document file of this dataset."""
    return {"text": "text", "tfds_text": "tfds"}.get(found.format, "jsonl")


def _streaming(files: list, kind: str, tokenizer: str, window: int) -> grain.IterDataset:
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


def _prepared_meta(found: DatasetFiles, cfg: DataConfig, window: int) -> dict:
    if found.format == "legacy_windows":
        raise legacy_windows_error(found.root)
    meta = json.loads((epath.Path(found.root) / "metadata.json").read_text())  # the TFDS metadata
    if meta["window"] != window or meta["tokenizer"] != cfg.tokenizer:
        raise ValueError(
            f"data.path={found.root} was prepared with tokenizer={meta['tokenizer']} and windows of "
            f"{meta['window']} tokens (seq_len {meta['window'] - 1}); this run has "
            f"tokenizer={cfg.tokenizer}, seq_len {window - 1}: set them to match or prepare it again"
        )
    return meta


def train_dataset(cfg: DataConfig, seq_len: int, global_batch: int, process_index: int = 0,
                  process_count: int = 1) -> grain.IterDataset:
    """This process's training batches, [global_batch / process_count, seq_len + 1] int32."""
    if global_batch % process_count:
        raise ValueError(
            f"train.batch_size={global_batch} is not divisible by the number of processes {process_count}"
        )
    local_batch, window = global_batch // process_count, seq_len + 1
    first_row = process_index * local_batch
    found = resolve_dataset(cfg)
    if found.format in ("arrayrecord", "legacy_windows"):
        meta = _prepared_meta(found, cfg, window)
        source = grain.sources.ArrayRecordDataSource(found.train)
        windows = grain.MapDataset.source(source).shuffle(seed=cfg.seed).repeat(cfg.epochs)
        n_rows = len(windows) // global_batch * local_batch
        rows = _ProcessRows(windows, meta["dtype"], local_batch, global_batch, first_row)
        ds = grain.MapDataset.range(n_rows).map(rows).to_iter_dataset()
        if cfg.workers > 0:  # rows come back in order from the workers: batches do not change
            _parse_absl_flags()
            ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=cfg.workers))
        ds = ds.batch(local_batch, drop_remainder=True)
        if cfg.prefetch > 0 and cfg.workers == 0:
            ds = grain.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=cfg.prefetch)
        return ds
    kind, units = document_kind(found), found.train
    if found.format == "tfds_text":
        units = subdivide(units, global_batch * max(1, cfg.workers))
    if len(units) < global_batch * max(1, cfg.workers):
        raise ValueError(
            f"{dataset_name(cfg)} has {len(units)} training files; streaming feeds each of the "
            f"train.batch_size={global_batch} batch rows from its own files (x data.workers="
            f"{cfg.workers}), so it needs at least {global_batch * max(1, cfg.workers)}: split the "
            "files, or tokenize them once with `depthdelusion prepare-data` and train on that"
        )
    ds = RowsIterDataset([
        _streaming(_row_files(units, cfg.seed, cfg.epochs, row, global_batch), kind, cfg.tokenizer, window)
        for row in range(first_row, first_row + local_batch)
    ])
    if cfg.workers > 0:
        _parse_absl_flags()
        return ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=cfg.workers))
    if cfg.prefetch > 0:  # a background thread tokenizes and packs while the device computes
        return grain.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=cfg.prefetch)
    return ds


def validation_batches(cfg: DataConfig, seq_len: int, global_batch: int, n_batches: int,
                       process_index: int = 0, process_count: int = 1) -> list[np.ndarray] | None:
    """The first `n_batches` validation batches (the same every time), this process's rows;
    None when the dataset has no validation split."""
    found = resolve_dataset(cfg)
    if not found.validation or n_batches < 1:
        return None
    local_batch, window = global_batch // process_count, seq_len + 1
    if found.format in ("arrayrecord", "legacy_windows"):
        meta = _prepared_meta(found, cfg, window)
        source = grain.sources.ArrayRecordDataSource(found.validation)
        windows: Iterator[np.ndarray] = iter(
            grain.MapDataset.source(source).map(_DecodeWindow(meta["dtype"])))
    else:
        windows = iter(_streaming(found.validation, document_kind(found), cfg.tokenizer, window))
    mine = (w for i, w in enumerate(windows) if i % process_count == process_index)
    rows = [w for _, w in zip(range(n_batches * local_batch), mine)]
    if len(rows) < local_batch:
        raise ValueError(
            f"{dataset_name(cfg)}: the validation split holds fewer than one batch "
            f"({len(rows)} windows of {window} tokens for {local_batch} rows per process)"
        )
    n = len(rows) // local_batch * local_batch
    return list(np.stack(rows[:n]).reshape(-1, local_batch, window))


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
        return skipped_counts(self.iterator.get_state())

    def close(self) -> None:
        close = getattr(self.iterator, "close", None)
        if close is not None:
            close()
