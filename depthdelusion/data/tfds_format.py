"""TensorFlow Datasets (TFDS) on disk, read and written without TensorFlow.

A TFDS dataset is a builder directory `DATA_DIR/NAME[/CONFIG]/VERSION/` holding
`dataset_info.json` + `features.json` (what the records are) and shards
`NAME-SPLIT.FORMAT-0000K-of-0000N` of serialized `tf.train.Example` records, in `array_record`
(random access) or `tfrecord` (sequential) files. `tensorflow_datasets` reads these JSON files
and (de)serializes examples in pure Python (its own copy of the Example proto), so neither
reading nor writing here imports TensorFlow.

Two uses:
- packed token windows (`depthdelusion prepare-data`): dataset `depthdelusion_windows`, config
  `{tokenizer}_seq{seq_len}`, one feature `tokens` = Tensor(shape=(window,), uint16 or int32,
  stored as raw bytes), splits `train` / `validation`, always array_record; the reader kind
  (`READER_KEY`), tokenizer, window and counts are in the dataset's metadata (`info.metadata`,
  metadata.json). Any TFDS reader
  opens it: `tfds.data_source("depthdelusion_windows/gpt2_seq1024", data_dir=OUT)`.
- any TFDS text dataset as a document source (`data.path=tfds:NAME[:CONFIG]`): the records of
  one text feature, read shard by shard (a shard range is the unit dealt to batch rows).
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np
from etils import epath

WINDOWS_NAME = "depthdelusion_windows"
WINDOWS_VERSION = "1.0.0"
WINDOWS_FEATURE = "tokens"
# `tfds build` writes tfrecord unless asked for array_record; both are read.
FILE_FORMATS = ("array_record", "tfrecord")
# A prepared dataset's metadata.json names the reader that reads it; the loader dispatches on it.
READER_KEY = "depthdelusion_reader"
PACKED_WINDOWS = "packed_windows"  # prepared.py: packed windows by random access
READER_KINDS = (PACKED_WINDOWS,)


def windows_config(tokenizer: str, seq_len: int) -> str:
    return f"{tokenizer}_seq{seq_len}"


def _tfds():
    import tensorflow_datasets as tfds  # ~1 s to import: only where a TFDS path is used

    return tfds


def _example_proto():
    from tensorflow_datasets.proto import tf_example_pb2  # TFDS's copy: no TensorFlow

    return tf_example_pb2.Example


# ---------------------------------------------------------------- finding and describing

def is_builder_dir(path: epath.Path) -> bool:
    return (path / "dataset_info.json").exists()


def builder_dirs_under(root: epath.Path) -> list[epath.Path]:
    """TFDS builder directories at `root`: itself, or NAME/VERSION or NAME/CONFIG/VERSION below."""
    if is_builder_dir(root):
        return [root]
    return sorted(p.parent for depth in ("*/*/", "*/*/*/") for p in root.glob(depth + "dataset_info.json"))


def default_data_dir() -> str:
    return str(_tfds().core.constants.get_default_data_dir())  # $TFDS_DATA_DIR or ~/tensorflow_datasets


def _version_key(path: epath.Path) -> tuple[int, ...]:
    return tuple(int(x) for x in path.name.split("."))


def find_builder_dir(spec: str, data_dir: str | None) -> epath.Path:
    """The builder directory of `spec` = NAME[:CONFIG][:VERSION] or TFDS's own
    NAME/CONFIG[:VERSION], under `data_dir` (None: TFDS's default); the newest version unless one
    is named."""
    data_dir = data_dir or default_data_dir()
    if "/" in spec:  # TFDS's spelling: NAME/CONFIG[:VERSION]
        name, _, rest = spec.partition("/")
        config, _, version = rest.partition(":")
    else:  # NAME, NAME:CONFIG, NAME:VERSION or NAME:CONFIG:VERSION
        name, _, rest = spec.partition(":")
        config, _, version = rest.partition(":")
        if _is_version(config) and not version:
            config, version = "", config
    where = f"data.path=tfds:{spec} (data.tfds_dir={data_dir})"
    build_hint = (f"build it on a machine with network (`tfds build {name}"
                  f"{' --config ' + config if config else ''} --data_dir DIR --file_format array_record`), "
                  "copy DIR here and set data.tfds_dir=DIR")
    base = epath.Path(data_dir) / name
    if not base.is_dir():
        raise ValueError(f"{where}: no directory {base}: {build_hint}")
    if config:
        if not (base / config).is_dir():
            raise ValueError(f"{where}: no config {config!r} in {base} (found: "
                             f"{', '.join(_configs(base)) or 'none'})")
        base = base / config
    versions = [p for p in base.iterdir() if p.is_dir() and _is_version(p.name) and is_builder_dir(p)]
    if version:
        versions = [p for p in versions if p.name == version]
    if not versions:
        configs = _configs(base)
        if configs and not config:
            raise ValueError(f"{where}: {name} has configs {', '.join(configs)}: name one, "
                             f"e.g. data.path=tfds:{name}:{configs[0]}")
        raise ValueError(f"{where}: no prepared version{' ' + version if version else ''} "
                         f"(a directory with dataset_info.json) in {base}: {build_hint}")
    return max(versions, key=_version_key)


def _configs(base: epath.Path) -> list[str]:
    """A dataset directory's config subdirectories (not its versions, nor TFDS's .config/)."""
    return sorted(p.name for p in base.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and not _is_version(p.name))


def _is_version(name: str) -> bool:
    parts = name.split(".")
    return len(parts) == 3 and all(p.isdigit() for p in parts)


@dataclasses.dataclass
class TfdsDataset:
    """What a builder directory holds, from its dataset_info.json / features.json."""

    root: str
    name: str
    file_format: str
    features: object  # tfds.features.FeaturesDict
    metadata: dict
    shards: dict[str, list[tuple[str, int]]]  # split -> [(shard path, number of records)]


def prepared_reader(dataset: TfdsDataset) -> str | None:
    """The reader kind a dataset written by prepare-data names in its metadata.json; None for
    any other TFDS dataset (a text source, streamed). Datasets prepared before the metadata
    named its reader hold packed windows."""
    where = f"{dataset.root}/metadata.json"
    kind = dataset.metadata.get(READER_KEY)
    if kind is None:
        if dataset.name != WINDOWS_NAME:
            return None
        if "window" in dataset.metadata:
            return PACKED_WINDOWS
        raise ValueError(f"{where}: a {WINDOWS_NAME} dataset whose metadata names no reader "
                         f"({READER_KEY}: one of {', '.join(READER_KINDS)}): prepare it again with "
                         "`depthdelusion prepare-data`")
    if kind not in READER_KINDS:
        raise ValueError(f"{where}: {READER_KEY}={kind!r} is not a reader kind this version reads "
                         f"(valid: {', '.join(READER_KINDS)}): prepare it again with this version's "
                         "`depthdelusion prepare-data`")
    return kind


WINDOWS_METADATA = ("window", "tokenizer", "dtype")


def windows_metadata(root) -> dict:
    """A packed-windows dataset's metadata (TFDS's own reader), with the fields the window reader
    needs; a missing one is an error naming the file."""
    meta = load_dataset_info(epath.Path(root)).metadata
    missing = [k for k in WINDOWS_METADATA if k not in meta]
    if missing:
        raise ValueError(f"{root}/metadata.json: missing {', '.join(missing)} (a packed-windows dataset "
                         "names its window, tokenizer and dtype): prepare it again with "
                         "`depthdelusion prepare-data`")
    return meta


def load_dataset_info(root: epath.Path) -> TfdsDataset:
    """Read a builder directory's description through TFDS's own reader (no TensorFlow)."""
    info = _tfds().builder_from_directory(root).info
    file_format = info.file_format.value if info.file_format else "tfrecord"
    if file_format not in FILE_FORMATS:
        raise ValueError(f"{root}: TFDS file format {file_format!r}: readable formats are "
                         f"{', '.join(FILE_FORMATS)} (rebuild with `tfds build --file_format array_record`)")
    shards = {name: [(str(path), int(n)) for path, n in zip(split.filepaths, split.shard_lengths)]
              for name, split in info.splits.items()}
    metadata = dict(info.metadata) if info.metadata is not None else {}
    return TfdsDataset(str(root), info.name, file_format, info.features, metadata, shards)


def check_text_feature(dataset: TfdsDataset, feature: str) -> None:
    """`feature` (nested names joined by '/') must be a scalar text feature of the dataset."""
    tfds = _tfds()
    node = dataset.features
    try:
        for part in feature.split("/"):
            node = node[part]
    except (KeyError, TypeError):
        node = None
    is_text = isinstance(node, tfds.features.Text) or (
        isinstance(node, tfds.features.Tensor) and node.shape == () and node.np_dtype == np.object_)
    if not is_text:
        texts = sorted(k for k, v in dataset.features.items() if isinstance(v, tfds.features.Text))
        raise ValueError(
            f"data.tfds_text_feature={feature!r}: {dataset.root} has no scalar text feature of that "
            f"name (its top-level text features: {', '.join(texts) or 'none'}; all: "
            f"{', '.join(sorted(dataset.features.keys()))})"
        )


# ---------------------------------------------------------------- reading records

@dataclasses.dataclass(frozen=True)
class ShardRange:
    """Records [start, stop) of one shard: the unit of documents dealt to a batch row."""

    path: str
    file_format: str
    feature: str
    start: int
    stop: int


def shard_ranges(dataset: TfdsDataset, split: str, feature: str) -> list[ShardRange]:
    return [ShardRange(path, dataset.file_format, feature, 0, n)
            for path, n in dataset.shards.get(split, []) if n > 0]


def subdivide(ranges: list[ShardRange], at_least: int) -> list[ShardRange]:
    """Cut every shard into equal contiguous ranges until there are `at_least` of them (TFDS
    shuffles examples across shards when it builds a dataset, so a range is a random sample)."""
    if len(ranges) >= at_least or not ranges:
        return ranges
    pieces = -(-at_least // len(ranges))
    out = []
    for r in ranges:
        bounds = np.linspace(r.start, r.stop, pieces + 1).round().astype(int)
        out += [dataclasses.replace(r, start=int(a), stop=int(b)) for a, b in zip(bounds, bounds[1:]) if b > a]
    return out


def _array_record_records(path: str, start: int, stop: int) -> Iterator[bytes]:
    from array_record.python.array_record_module import ArrayRecordReader

    reader = ArrayRecordReader(path)
    try:
        for begin in range(start, stop, 256):
            yield from reader.read(begin, min(begin + 256, stop))
    finally:
        reader.close()


def _tfrecord_records(path: str, start: int, stop: int, counts: dict[str, int]) -> Iterator[bytes]:
    """TFRecord framing: u64 length, u32 CRC of the length, data, u32 CRC of the data (CRCs are
    not checked; a record cut short counts as a corrupt shard)."""
    with epath.Path(path).open("rb") as f:
        for index in range(stop):
            header = f.read(12)
            if len(header) < 12:  # shorter than dataset_info.json's shard length says
                counts["corrupt_shard"] += 1
                return
            (length,) = struct.unpack("<Q", header[:8])
            if index < start:
                f.seek(length + 4, 1)
                continue
            data = f.read(length)
            if len(data) < length or len(f.read(4)) < 4:
                counts["corrupt_shard"] += 1
                return
            yield data


def documents_of_range(unit: ShardRange, counts: dict[str, int], skip: int = 0) -> Iterator[str | None]:
    """One item per record of the range after the first `skip` (None for a bad one): the text
    of the feature, or None with a count (unparseable record, feature missing, invalid UTF-8,
    empty text)."""
    from google.protobuf.message import DecodeError

    example = _example_proto()
    start = unit.start + skip
    if unit.file_format == "array_record":
        records = _array_record_records(unit.path, start, unit.stop)
    else:
        records = _tfrecord_records(unit.path, start, unit.stop, counts)
    for record in records:
        try:
            feature = example.FromString(record).features.feature
        except DecodeError:
            counts["malformed_record"] += 1
            yield None
            continue
        values = feature[unit.feature].bytes_list.value if unit.feature in feature else []
        if len(values) != 1:
            counts["missing_text"] += 1
            yield None
            continue
        try:
            text = values[0].decode("utf-8")
        except UnicodeDecodeError:
            counts["invalid_utf8"] += 1
            yield None
            continue
        if not text.strip():
            counts["empty_document"] += 1
            yield None
            continue
        yield text


# ---------------------------------------------------------------- packed windows

def decode_window(record: bytes, dtype: str) -> np.ndarray:
    """A `depthdelusion_windows` record -> its tokens as int32 (the Example's one bytes value)."""
    raw = _example_proto().FromString(record).features.feature[WINDOWS_FEATURE].bytes_list.value[0]
    return np.frombuffer(raw, dtype).astype(np.int32)


class WindowsWriter:
    """Writes packed windows as the TFDS dataset `depthdelusion_windows/{tokenizer}_seq{seq_len}`
    under `data_dir`; dataset_info.json, written last by `finish`, marks it complete."""

    SHARD_WINDOWS = 65_536

    def __init__(self, data_dir: str, tokenizer: str, seq_len: int, dtype: str):
        tfds = _tfds()
        self.config = windows_config(tokenizer, seq_len)
        self.root = epath.Path(data_dir) / WINDOWS_NAME / self.config / WINDOWS_VERSION
        if is_builder_dir(self.root):
            raise ValueError(f"{self.root} already holds a prepared dataset: choose a new --out")
        self.window, self.dtype = seq_len + 1, dtype
        self.features = tfds.features.FeaturesDict({WINDOWS_FEATURE: tfds.features.Tensor(
            shape=(self.window,), dtype=np.dtype(dtype), encoding=tfds.features.Encoding.BYTES,
            doc=f"{self.window} token ids (seq_len + 1): inputs [:-1], targets [1:]")})
        self.splits: list = []

    def _template(self, split: str):
        return _tfds().core.ShardedFileTemplate(
            data_dir=self.root, dataset_name=WINDOWS_NAME, split=split, filetype_suffix="array_record")

    def write_split(self, split: str, windows: Iterator[np.ndarray], max_windows: int | None = None) -> int:
        """Write `windows` (at most `max_windows`) as the split's shards; returns how many.

        Each shard is written under a temporary name and renamed once the shard count is known.
        ArrayRecordWriter writes local files only: for a remote OUT (gs://) each shard is
        written to a local temporary file and uploaded when it is complete, so the local disk
        holds one shard at a time."""
        from array_record.python.array_record_module import ArrayRecordWriter

        self.root.mkdir(parents=True, exist_ok=True)
        template = self._template(split)
        staging = None if "://" not in str(self.root) else Path(tempfile.mkdtemp(prefix="depthdelusion-shard-"))
        tmp_paths, lengths, num_bytes, writer = [], [], 0, None

        def close_shard():
            writer.close()
            if staging is not None:
                local = staging / tmp_paths[-1].name
                with open(local, "rb") as src, tmp_paths[-1].open("wb") as dst:
                    shutil.copyfileobj(src, dst, 16 << 20)
                local.unlink()

        try:
            for window in windows:
                if max_windows is not None and sum(lengths) >= max_windows:
                    break
                if not lengths or lengths[-1] == self.SHARD_WINDOWS:
                    if writer is not None:
                        close_shard()
                    tmp_paths.append(self.root / f".{split}-{len(tmp_paths):05d}.tmp")
                    target = tmp_paths[-1] if staging is None else staging / tmp_paths[-1].name
                    writer = ArrayRecordWriter(str(target), "group_size:1")
                    lengths.append(0)
                record = self.features.serialize_example({WINDOWS_FEATURE: window.astype(self.dtype)})
                writer.write(record)
                lengths[-1] += 1
                num_bytes += len(record)
            if writer is not None:
                close_shard()
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
        for k, tmp in enumerate(tmp_paths):
            tmp.rename(template.sharded_filepath(shard_index=k, num_shards=len(tmp_paths)))
        if lengths:
            self.splits.append(_tfds().core.SplitInfo(
                name=split, shard_lengths=lengths, num_bytes=num_bytes, filename_template=template))
        return sum(lengths)

    def finish(self, metadata: dict, description: str) -> str:
        """Write dataset_info.json, features.json and metadata.json; returns the builder dir."""
        tfds = _tfds()
        from tensorflow_datasets.core import dataset_info

        identity = dataset_info.DatasetIdentity(
            name=WINDOWS_NAME, version=tfds.core.Version(WINDOWS_VERSION), data_dir=str(self.root),
            module_name="", config_name=self.config,
            config_description=f"{metadata['tokenizer']} tokens packed into windows of {self.window}")
        info = tfds.core.DatasetInfo(
            builder=identity, description=description, features=self.features,
            metadata=tfds.core.MetadataDict(json.loads(json.dumps(metadata))),
            split_dict=tfds.core.SplitDict(self.splits))
        info.set_file_format(tfds.core.FileFormat.ARRAY_RECORD)
        info.write_to_directory(self.root)  # metadata.json and features.json, dataset_info.json last
        return str(self.root)
