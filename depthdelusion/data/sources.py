"""Where documents come from: finding the files of a dataset and reading documents from them.

Layouts recognised from a `data.path` (local, or remote such as gs:// through etils.epath):
- `slimpajama`: a directory with `train/chunk*/*.jsonl.zst` (and `validation/chunk*/…`), each line
  `{"text": ..., "meta": {"redpajama_set_name": ...}}` — SlimPajama-627B as published;
- `arrayrecord`: packed token windows written by `depthdelusion prepare-data`: a TFDS dataset
  (`tfds_format.py`), given as the --out directory, its builder directory, or
  `tfds:depthdelusion_windows/CONFIG` (`legacy_windows`: the pre-TFDS layout, `metadata.json`
  beside `train/*.array_record`; it must be converted, see `legacy_windows_error`);
- `tfds_text`: `tfds:NAME[:CONFIG]` (under data.tfds_dir), or any other TFDS builder directory:
  the documents are one text feature of its records, shard ranges being the units dealt out;
- `jsonl`: a .jsonl / .jsonl.zst file, a directory of them, or a glob — one `{"text": ...}` per line;
- `text`: a .txt file, a directory of them, or a glob — one document per file.

Each layout is read by one of two readers (`DatasetFiles.reader`): `streaming` (streaming.py)
for documents, or the kind a prepared dataset's metadata.json names (`packed_windows`:
prepared.py).

Bad records are skipped and counted, never fatal: malformed JSON or TFDS records, a missing or
non-string text, invalid UTF-8, empty documents, and empty or truncated .zst / tfrecord shards.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterator

import grain
import zstandard
from etils import epath

from depthdelusion.data import tfds_format

SKIP_REASONS = ("malformed_json", "missing_text", "invalid_utf8", "empty_document",
                "empty_shard", "corrupt_shard", "malformed_record")
FORMATS = ("slimpajama", "arrayrecord", "jsonl", "text")
STREAMING = "streaming"  # the reader of every layout but a prepared dataset's


@dataclasses.dataclass
class DatasetFiles:
    """A dataset's format, its train / validation files (sorted, as strings; for `tfds_text`,
    `tfds_format.ShardRange`s) and the reader that reads them: `streaming`, or a prepared
    dataset's reader kind (`tfds_format.READER_KINDS`)."""

    format: str
    root: str
    train: list
    validation: list
    reader: str = STREAMING


def _glob(pattern_root: epath.Path, pattern: str) -> list[str]:
    return sorted(str(p) for p in pattern_root.glob(pattern))


def _document_files(path: str) -> list[str]:
    """Files named by a file path, a directory (searched three levels deep) or a glob."""
    parts = path.split("/")
    wild = [i for i, part in enumerate(parts) if any(ch in part for ch in "*?[")]
    if wild:
        base = "/".join(parts[:wild[0]]) or ("/" if path.startswith("/") else ".")
        files = _glob(epath.Path(base), "/".join(parts[wild[0]:]))
    elif epath.Path(path).is_dir():
        # No recursive ** in epath (it would be thousands of requests on GCS): three levels.
        files = [f for depth in ("", "*/", "*/*/") for ext in ("*.jsonl", "*.jsonl.zst", "*.txt")
                 for f in _glob(epath.Path(path), depth + ext)]
    else:
        files = [path] if epath.Path(path).exists() else []
    return sorted(set(files))


def legacy_windows_error(path: str) -> ValueError:
    return ValueError(
        f"data.path={path} holds packed windows in the layout written before prepare-data wrote "
        f"TFDS datasets: convert it (no re-tokenizing) with `depthdelusion prepare-data {path} "
        "--out NEW_DIR` and set data.path=NEW_DIR"
    )


def _tfds_dataset(path: str, root: epath.Path, text_feature: str) -> DatasetFiles:
    dataset = tfds_format.load_dataset_info(root)
    reader = tfds_format.prepared_reader(dataset)
    if reader is not None:
        return DatasetFiles("arrayrecord", str(root), [p for p, _ in dataset.shards.get("train", [])],
                            [p for p, _ in dataset.shards.get("validation", [])], reader)
    tfds_format.check_text_feature(dataset, text_feature)
    train = tfds_format.shard_ranges(dataset, "train", text_feature)
    if not train:
        raise ValueError(f"data.path={path}: {root} has no records in a split named 'train' "
                         f"(splits: {', '.join(dataset.shards) or 'none'})")
    return DatasetFiles("tfds_text", str(root), train,
                        tfds_format.shard_ranges(dataset, "validation", text_feature))


def find_dataset(path: str, format: str = "auto", tfds_dir: str | None = None,
                 tfds_text_feature: str = "text") -> DatasetFiles:
    """Recognise the layout at `path` and list its files; a path matching nothing is an error."""
    if format not in ("auto", *FORMATS):
        raise ValueError(f"data.format={format!r}: valid values are auto, {', '.join(FORMATS)}")
    if path.startswith("tfds:"):
        return _tfds_dataset(path, tfds_format.find_builder_dir(path[len("tfds:"):], tfds_dir), tfds_text_feature)
    root = epath.Path(path)
    if format in ("auto", "arrayrecord") and root.is_dir():
        # Not below a train/ directory: listing SlimPajama's 59k shards on GCS would take minutes.
        found = [] if (root / "train").is_dir() else tfds_format.builder_dirs_under(root)
        if len(found) > 1:
            raise ValueError(f"data.path={path} holds {len(found)} TFDS datasets: point it at one of "
                             + ", ".join(str(p) for p in found))
        if found:
            return _tfds_dataset(path, found[0], tfds_text_feature)
        if (root / "metadata.json").exists():
            return DatasetFiles("legacy_windows", path, _glob(root / "train", "*.array_record*"),
                                _glob(root / "validation", "*.array_record*"), tfds_format.PACKED_WINDOWS)
    if format in ("auto", "slimpajama") and root.is_dir() and (root / "train").is_dir():
        train = _glob(root / "train", "chunk*/*.jsonl.zst")
        if train or format == "slimpajama":
            if not train:
                raise ValueError(f"data.path={path}: no train/chunk*/*.jsonl.zst files (SlimPajama layout)")
            return DatasetFiles("slimpajama", path, train, _glob(root / "validation", "chunk*/*.jsonl.zst"))
    files = _document_files(path)
    if not files:
        raise ValueError(
            f"data.path={path!r} matches no files: give a SlimPajama root (train/chunk*/*.jsonl.zst), "
            "a directory prepared by `depthdelusion prepare-data`, a TFDS dataset (tfds:NAME[:CONFIG] "
            "or its directory), or .jsonl / .jsonl.zst / .txt files (a file, a directory or a glob)"
        )
    kinds = {"text" if f.endswith(".txt") else "jsonl" for f in files}
    if format in ("jsonl", "text"):
        kinds = {format}
    if len(kinds) > 1:
        raise ValueError(f"data.path={path!r} mixes .txt and .jsonl files: point it at one kind")
    return DatasetFiles(kinds.pop(), path, files, [])


def _zst_lines(raw, counts: dict[str, int]) -> Iterator[bytes]:
    """Lines of a zstd stream (one or more frames). A stream that ends inside a frame (a
    truncated download) or fails to decode counts as a corrupt shard; the complete lines read
    before the damage are kept."""
    decompressor = zstandard.ZstdDecompressor()
    frame = decompressor.decompressobj()
    in_frame, got_input, pending = False, False, b""
    while chunk := raw.read(1 << 20):
        got_input = True
        while chunk:
            try:
                pending += frame.decompress(chunk)
            except zstandard.ZstdError:
                counts["corrupt_shard"] += 1
                return
            in_frame = not frame.eof
            chunk = frame.unused_data if frame.eof else b""
            if frame.eof:
                frame = decompressor.decompressobj()
        *lines, pending = pending.split(b"\n")
        yield from lines
    if not got_input:
        counts["empty_shard"] += 1
    elif in_frame:
        counts["corrupt_shard"] += 1
    elif pending:
        yield pending


def _lines(path: str, counts: dict[str, int]) -> Iterator[bytes]:
    """Raw lines of a .jsonl or .jsonl.zst file."""
    with epath.Path(path).open("rb") as raw:
        if path.endswith(".zst"):
            yield from _zst_lines(raw, counts)
        else:
            yield from raw


def parse_jsonl_line(line: bytes, counts: dict[str, int]) -> str | None:
    """The document text of one JSONL line, or None (and a count) if the record is bad."""
    try:
        text_line = line.decode("utf-8")
    except UnicodeDecodeError:
        counts["invalid_utf8"] += 1
        return None
    if not text_line.strip():
        return None  # blank line: not a record
    try:
        record = json.loads(text_line)
    except json.JSONDecodeError:
        counts["malformed_json"] += 1
        return None
    text = record.get("text") if isinstance(record, dict) else None
    if not isinstance(text, str):
        counts["missing_text"] += 1
        return None
    if not text.strip():
        counts["empty_document"] += 1
        return None
    return text


def _documents_of_file(path, kind: str, counts: dict[str, int], skip: int = 0) -> Iterator[str | None]:
    """One item per raw record (None for a skipped one), so positions count raw records; the
    first `skip` records are passed over now (by seeking where the format allows)."""
    if kind == "tfds":
        return tfds_format.documents_of_range(path, counts, skip)
    docs = _documents_of_plain_file(path, kind, counts)
    for _ in range(skip):  # replayed: the caller restores the counts they change
        next(docs)
    return docs


def _documents_of_plain_file(path: str, kind: str, counts: dict[str, int]) -> Iterator[str | None]:
    if kind == "text":
        data = epath.Path(path).read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            counts["invalid_utf8"] += 1
            yield None
            return
        if not text.strip():
            counts["empty_document"] += 1
            yield None
        else:
            yield text
        return
    for line in _lines(path, counts):
        yield parse_jsonl_line(line, counts)


class DocumentsIterDataset(grain.IterDataset):
    """Documents (str) read from the files its parent yields, one file after another.

    The parent is a grain iterator of file paths or TFDS shard ranges (so grain's `mp_prefetch`
    can give each worker its own files). Checkpointable: the state is the parent's state before
    the current file, the number of raw records already read from it, and the skip counters.
    """

    def __init__(self, parent: grain.IterDataset, kind: str):
        super().__init__(parent)
        self.kind = kind

    def __iter__(self) -> "DocumentsIterator":
        return DocumentsIterator(self._parent.__iter__(), self.kind)


class DocumentsIterator(grain.DatasetIterator):
    def __init__(self, parent: grain.DatasetIterator, kind: str):
        super().__init__(parent)
        self.kind = kind
        self.counts = {reason: 0 for reason in SKIP_REASONS}
        self._file_state: dict[str, Any] = parent.get_state()
        self._records = 0
        self._current: Iterator[str | None] | None = None

    def _open_next_file(self, skip: int = 0) -> None:
        self._file_state = self._parent.get_state()
        path = next(self._parent)  # StopIteration ends the dataset
        self._current = _documents_of_file(path, self.kind, self.counts, skip)
        self._records = skip

    def __next__(self) -> str:
        while True:
            if self._current is None:
                self._open_next_file()
            for doc in self._current:
                self._records += 1
                if doc is not None:
                    return doc
            self._current = None

    def get_state(self) -> dict[str, Any]:
        return {"file": self._file_state, "records": self._records, "skipped": dict(self.counts)}

    def set_state(self, state: dict[str, Any]) -> None:
        self._parent.set_state(state["file"])
        self._current, self._records = None, 0
        if state["records"]:
            self._open_next_file(skip=state["records"])  # back to where we were in the file
        self.counts.update(state["skipped"])  # in place: open file readers hold this dict
