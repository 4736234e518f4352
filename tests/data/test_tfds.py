"""TensorFlow Datasets: prepare-data writes a TFDS dataset, any TFDS text dataset is a source, and
neither path needs TensorFlow. The text datasets are built here by a real TFDS builder (the
structure of c4: text, url, timestamp), nothing is downloaded."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import grain
import numpy as np
import pytest
import tensorflow_datasets as tfds
from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter

from depthdelusion.config import DataConfig
from depthdelusion.data.pipeline import Batches, OutOfData, resolve_dataset, validation_batches
from depthdelusion.data.prepare import prepare
from depthdelusion.data.streaming import row_files
from depthdelusion.data.tfds_format import load_dataset_info, shard_ranges, subdivide
from depthdelusion.data.tokenizers import get_tokenizer


def web_text(i: int) -> str:
    return "" if i % 25 == 7 else f"Page {i}: " + "deep and wide models. " * (1 + i % 6)


class TinyWebText(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """c4's structure in miniature: a text feature beside others, configs, train + validation."""

    VERSION = tfds.core.Version("3.0.1")
    BUILDER_CONFIGS = [tfds.core.BuilderConfig(name="en")]

    def _info(self):
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
            "text": tfds.features.Text(), "url": tfds.features.Text(), "timestamp": tfds.features.Text()}))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples(0, 120), "validation": self._generate_examples(1000, 40)}

    def _generate_examples(self, first, n):
        for i in range(first, first + n):
            yield i, {"text": web_text(i), "url": f"https://example.org/{i}", "timestamp": "2019-04-25"}


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
    """A TFDS data dir holding tiny_web_text/en/3.0.1 in array_record, 4 shards per split."""
    data_dir = tmp_path_factory.mktemp("tensorflow_datasets")
    TinyWebText(data_dir=str(data_dir), file_format="array_record").download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            compute_stats=tfds.download.ComputeStatsMode.SKIP, num_shards=4))
    return data_dir


def text_cfg(tfds_dir, **kw):
    return DataConfig(path="tfds:tiny_web_text:en", tfds_dir=str(tfds_dir), tokenizer="bytes", **kw)


def take(batches, n):
    return [next(batches) for _ in range(n)]


def expected_rows(data_dir, rows: int, seed: int = 42) -> list[list[int]]:
    """Each batch row's token stream, from TFDS's own reader: the documents of the shard ranges
    dealt to the row, each + EOS, empty ones skipped."""
    tok = get_tokenizer("bytes")
    dataset = load_dataset_info(Path(data_dir) / "tiny_web_text" / "en" / "3.0.1")
    source = tfds.data_source("tiny_web_text/en", data_dir=str(data_dir), split="train")
    offsets = dict(zip((p for p, _ in dataset.shards["train"]),
                       np.cumsum([0] + [n for _, n in dataset.shards["train"]])))
    units = subdivide(shard_ranges(dataset, "train", "text"), rows)
    streams = []
    for row in range(rows):
        stream = []
        for unit in row_files(units, seed, 1, row, rows):
            for i in range(offsets[unit.path] + unit.start, offsets[unit.path] + unit.stop):
                text = source[int(i)]["text"].decode()
                if text.strip():
                    stream += tok.encode(text).tolist() + [tok.eos_id]
        streams.append(stream)
    return streams


def test_tfds_text_source_packs_each_rows_shard_ranges_once(tfds_dir):
    """8 rows from 4 shards: each shard is cut in two ranges; row r is exactly its ranges'
    documents packed end to end; empty documents are skipped and counted."""
    batches = Batches(text_cfg(tfds_dir), seq_len=15, global_batch=8)
    seen = []
    with pytest.raises(OutOfData, match="tfds:tiny_web_text:en: out of data"):
        while True:
            seen.append(next(batches))
    streams = expected_rows(tfds_dir, 8)
    assert len(seen) == min(len(s) for s in streams) // 16 > 10
    for row in range(8):
        got = np.concatenate([b[row] for b in seen]).tolist()
        assert got == streams[row][: len(got)]
    assert batches.skipped()["empty_document"] >= 1


@pytest.mark.parametrize("workers", [0, 1])  # 1: shard ranges pickled to, and seeked in, a worker process
def test_tfds_text_source_resumes_exactly(tfds_dir, workers):
    cfg = text_cfg(tfds_dir, workers=workers)
    straight = take(Batches(cfg, 15, 4), 10)
    first = Batches(cfg, 15, 4)
    take(first, 4)
    state = json.loads(json.dumps(first.get_state()))
    first.close()
    resumed = Batches(cfg, 15, 4)
    resumed.set_state(state)
    rest = take(resumed, 6)
    resumed.close()
    for a, b in zip(straight[4:], rest):
        np.testing.assert_array_equal(a, b)


def test_tfds_text_source_splits_processes_and_has_validation(tfds_dir):
    cfg = text_cfg(tfds_dir)
    one = take(Batches(cfg, 15, 8), 5)
    halves = [take(Batches(cfg, 15, 8, p, 2), 5) for p in range(2)]
    for t in range(5):
        np.testing.assert_array_equal(one[t], np.concatenate([halves[0][t], halves[1][t]]))
    val = validation_batches(cfg, 15, 4, n_batches=2)
    assert len(val) == 2 and "Page 10" in get_tokenizer("bytes").decode(np.concatenate(val).reshape(-1))


def _rewrite_shard(path: str, records: list[bytes]) -> None:
    writer = ArrayRecordWriter(path, "group_size:1")
    for record in records:
        writer.write(record)
    writer.close()


def _copy_dataset(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst / "tiny_web_text" / "en" / "3.0.1"


def test_bad_tfds_records_are_skipped_and_counted(tfds_dir, tmp_path):
    root = _copy_dataset(tfds_dir, tmp_path / "tfds")
    from tensorflow_datasets.proto import tf_example_pb2

    def example(**features):
        ex = tf_example_pb2.Example()
        for name, value in features.items():
            ex.features.feature[name].bytes_list.value.append(value)
        return ex.SerializeToString()

    bad = [b"\x0a\xff\xff not a protobuf", example(url=b"no text"), example(text=b"bad \xff\xfe utf8"),
           example(text=b"   ")]
    info_path = root / "dataset_info.json"
    info = json.loads(info_path.read_text())
    for k in range(4):
        shard = root / f"tiny_web_text-train.array_record-0000{k}-of-00004"
        reader = ArrayRecordReader(str(shard))
        records = reader.read_all()
        reader.close()
        _rewrite_shard(str(shard), records[:3] + bad + records[3:])
    train = next(s for s in info["splits"] if s["name"] == "train")
    train["shardLengths"] = [str(int(n) + len(bad)) for n in train["shardLengths"]]
    info_path.write_text(json.dumps(info))
    batches = Batches(DataConfig(path=str(root), tokenizer="bytes", prefetch=0), 15, 4)
    with pytest.raises(OutOfData):
        while True:
            next(batches)
    skipped = batches.skipped()
    assert skipped["malformed_record"] == 4 and skipped["missing_text"] == 4
    assert skipped["invalid_utf8"] == 4 and skipped["empty_document"] >= 4


def _as_tfrecord(root: Path, truncate_shard: int | None = None) -> None:
    """Rewrite the array_record shards as tfrecord (what `tfds build` writes by default), with
    tensorboardX's TensorFlow-free TFRecord writer."""
    from tensorboardX.record_writer import RecordWriter

    info = json.loads((root / "dataset_info.json").read_text())
    info["fileFormat"] = "tfrecord"
    (root / "dataset_info.json").write_text(json.dumps(info))
    for shard in sorted(root.glob("*.array_record-*")):
        reader = ArrayRecordReader(str(shard))
        records = reader.read_all()
        reader.close()
        target = Path(str(shard).replace(".array_record-", ".tfrecord-"))
        writer = RecordWriter(str(target))
        for record in records:
            writer.write(record)
        writer.close()
        shard.unlink()
        if truncate_shard is not None and target.name.startswith("tiny_web_text-train") \
                and target.name.endswith(f"{truncate_shard}-of-00004"):
            target.write_bytes(target.read_bytes()[:-50])


def test_tfrecord_shards_read_like_array_record_and_truncation_is_counted(tfds_dir, tmp_path):
    cfg = text_cfg(tfds_dir, prefetch=0)
    reference = take(Batches(cfg, 15, 4), 8)
    _as_tfrecord(_copy_dataset(tfds_dir, tmp_path / "tfrecord"))
    as_tfrecord = Batches(text_cfg(tmp_path / "tfrecord", prefetch=0), 15, 4)
    for a, b in zip(reference, take(as_tfrecord, 8)):
        np.testing.assert_array_equal(a, b)
    state = as_tfrecord.get_state()  # resuming seeks past whole records
    again = Batches(text_cfg(tmp_path / "tfrecord", prefetch=0), 15, 4)
    again.set_state(state)
    np.testing.assert_array_equal(next(again), next(as_tfrecord))
    _as_tfrecord(_copy_dataset(tfds_dir, tmp_path / "cut"), truncate_shard=2)
    cut = Batches(text_cfg(tmp_path / "cut", prefetch=0), 15, 1)  # one row reads every shard to its end
    with pytest.raises(OutOfData):
        while True:
            next(cut)
    assert cut.skipped()["corrupt_shard"] == 1


def test_tfds_names_that_are_not_there_are_clear_errors(tfds_dir):
    with pytest.raises(ValueError, match=r"tfds:c4:en .*no directory .*tfds build c4 --config en"):
        Batches(DataConfig(path="tfds:c4:en", tfds_dir=str(tfds_dir)), 15, 4)
    with pytest.raises(ValueError, match="tiny_web_text has configs en: name one, e.g. data.path=tfds:tiny_web_text:en"):
        Batches(DataConfig(path="tfds:tiny_web_text", tfds_dir=str(tfds_dir)), 15, 4)
    with pytest.raises(ValueError, match=r"data.tfds_text_feature='body'.*text features: text, timestamp, url;"):
        Batches(text_cfg(tfds_dir, tfds_text_feature="body"), 15, 4)
    with pytest.raises(ValueError, match="no prepared version 9.9.9"):
        Batches(DataConfig(path="tfds:tiny_web_text:en:9.9.9", tfds_dir=str(tfds_dir)), 15, 4)
    for spec in ("tiny_web_text:en:3.0.1", "tiny_web_text/en:3.0.1", "tiny_web_text/en"):  # TFDS's spelling too
        assert resolve_dataset(DataConfig(path=f"tfds:{spec}", tfds_dir=str(tfds_dir))).root.endswith("en/3.0.1")


# ---------------------------------------------------------------- prepare-data writes TFDS

READ_WITHOUT_TENSORFLOW = textwrap.dedent("""
    import json, sys

    class WithoutTensorFlow:  # as if TensorFlow were not installed, whatever this machine has
        def __init__(self, finder):
            self.finder = finder

        def find_spec(self, name, path=None, target=None):
            if name == "tensorflow" or name.startswith("tensorflow."):
                return None
            return self.finder.find_spec(name, path, target)

    sys.meta_path[:] = [WithoutTensorFlow(f) for f in sys.meta_path]
    import tensorflow_datasets as tfds
    from depthdelusion.config import DataConfig
    from depthdelusion.data.pipeline import Batches

    out, tfds_dir = sys.argv[1], sys.argv[2]
    source = tfds.data_source("depthdelusion_windows/bytes_seq15", data_dir=out, split="train")
    builder = tfds.builder_from_directory(out + "/depthdelusion_windows/bytes_seq15/1.0.0")
    validation = builder.as_data_source(split="validation")
    text = next(Batches(DataConfig(path="tfds:tiny_web_text:en", tfds_dir=tfds_dir), 15, 4))
    print(json.dumps({
        "train": [source[i]["tokens"].tolist() for i in range(len(source))],
        "validation_windows": len(validation),
        "metadata": dict(builder.info.metadata),
        "features": str(builder.info.features),
        "text_batch": text.tolist(),
        "tensorflow_imported": any(m == "tensorflow" or m.startswith("tensorflow.") for m in sys.modules),
    }))
""")


def test_prepare_data_writes_a_tfds_dataset_that_tfds_reads_without_tensorflow(tfds_dir, tmp_path):
    from depthdelusion.cli import main

    out = tmp_path / "prepared"
    assert main(["prepare-data", "tfds:tiny_web_text:en", "--tfds-dir", str(tfds_dir), "--tokenizer",
                 "bytes", "--seq-len", "15", "--out", str(out)]) == 0
    script = tmp_path / "read.py"
    script.write_text(READ_WITHOUT_TENSORFLOW)
    run = subprocess.run([sys.executable, str(script), str(out), str(tfds_dir)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    read = json.loads(run.stdout.strip().splitlines()[-1])
    assert not read["tensorflow_imported"]
    meta = read["metadata"]
    assert meta["tokenizer"] == "bytes" and meta["window"] == 16 and meta["dtype"] == "uint16"
    assert "Tensor(shape=(16,), dtype=uint16" in read["features"]
    assert read["validation_windows"] == meta["validation_windows"] > 0
    # The windows TFDS reads are the source's documents (all its train shards in order) packed.
    tok = get_tokenizer("bytes")
    stream = []
    for i in range(len(tfds.data_source("tiny_web_text/en", data_dir=str(tfds_dir), split="train"))):
        text = tfds.data_source("tiny_web_text/en", data_dir=str(tfds_dir), split="train")[i]["text"].decode()
        if text.strip():
            stream += tok.encode(text).tolist() + [tok.eos_id]
    assert np.concatenate(read["train"]).tolist() == stream[: 16 * len(read["train"])]
    assert len(read["train"]) == meta["train_windows"] == len(stream) // 16
    np.testing.assert_array_equal(read["text_batch"], next(Batches(text_cfg(tfds_dir), 15, 4)))


def test_training_reads_the_prepared_windows_tfds_holds(tfds_dir, tmp_path):
    """Every way to name the prepared dataset gives the same batches; one pass of them holds
    each window TFDS reads exactly once; resuming is exact."""
    out = tmp_path / "prepared"
    meta = prepare("tfds:tiny_web_text:en", str(out), tokenizer="bytes", seq_len=15, tfds_dir=str(tfds_dir))
    cfgs = [DataConfig(path=str(out)), DataConfig(path=meta["tfds_builder_dir"]),
            DataConfig(path="tfds:depthdelusion_windows/bytes_seq15", tfds_dir=str(out))]
    runs = []
    for cfg in cfgs:
        batches = Batches(cfg, 15, 4)
        seen = []
        with pytest.raises(OutOfData):
            while True:
                seen.append(next(batches))
        runs.append(np.concatenate(seen))
    for other in runs[1:]:
        np.testing.assert_array_equal(runs[0], other)
    # Window i of the pass is window perm[i] of what TFDS reads, perm the seeded shuffle.
    source = tfds.data_source("depthdelusion_windows/bytes_seq15", data_dir=str(out), split="train")
    perm = list(grain.MapDataset.range(len(source)).shuffle(seed=42))
    assert len(runs[0]) == len(source) // 4 * 4
    np.testing.assert_array_equal(runs[0], [source[int(i)]["tokens"] for i in perm[: len(runs[0])]])
    it = Batches(cfgs[0], 15, 4)
    take(it, 3)
    again = Batches(cfgs[0], 15, 4)
    again.set_state(it.get_state())
    np.testing.assert_array_equal(np.concatenate(take(again, 4)), runs[0][12:28])
    with pytest.raises(ValueError, match=f"{out}.*already holds a prepared dataset"):
        prepare("tfds:tiny_web_text:en", str(out), tokenizer="bytes", seq_len=15, tfds_dir=str(tfds_dir))


def test_the_prepared_dataset_names_its_reader_and_the_loader_dispatches_on_it(tfds_dir, tmp_path):
    """metadata.json carries the reader kind; an unknown or missing kind is a clear error naming
    the file and the valid kinds; a dataset prepared before the kind was written still reads."""
    out = tmp_path / "prepared"
    meta = prepare("tfds:tiny_web_text:en", str(out), tokenizer="bytes", seq_len=15, tfds_dir=str(tfds_dir))
    meta_file = Path(meta["tfds_builder_dir"]) / "metadata.json"
    written = json.loads(meta_file.read_text())
    assert written["depthdelusion_reader"] == "packed_windows"
    cfg = DataConfig(path=str(out), tokenizer="bytes")
    assert resolve_dataset(cfg).reader == "packed_windows"
    assert resolve_dataset(text_cfg(tfds_dir)).reader == "streaming"
    expected = take(Batches(cfg, 15, 4), 3)

    meta_file.write_text(json.dumps({**written, "depthdelusion_reader": "packed_documents"}))
    with pytest.raises(ValueError, match=rf"{meta_file}: depthdelusion_reader='packed_documents' .*valid: packed_windows"):
        Batches(cfg, 15, 4)
    meta_file.write_text(json.dumps({k: v for k, v in written.items() if k not in ("depthdelusion_reader", "window")}))
    with pytest.raises(ValueError, match=rf"{meta_file}: .* names no reader .*packed_windows.*prepare-data"):
        Batches(cfg, 15, 4)
    meta_file.write_text(json.dumps({k: v for k, v in written.items() if k != "dtype"}))
    with pytest.raises(ValueError, match=rf"{meta_file}: missing dtype .*prepare-data"):
        Batches(cfg, 15, 4)
    meta_file.write_text(json.dumps({k: v for k, v in written.items() if k != "depthdelusion_reader"}))
    for a, b in zip(expected, take(Batches(cfg, 15, 4), 3)):
        np.testing.assert_array_equal(a, b)


def test_a_directory_prepared_before_tfds_names_its_conversion_and_converts(tmp_path):
    """The pre-TFDS layout: metadata.json beside train/ and validation/ raw uint16 windows."""
    legacy = tmp_path / "legacy"
    rng = np.random.default_rng(0)
    windows = {"train": rng.integers(0, 257, (40, 16)).astype(np.uint16),
               "validation": rng.integers(0, 257, (8, 16)).astype(np.uint16)}
    for split, array in windows.items():
        (legacy / split).mkdir(parents=True)
        _rewrite_shard(str(legacy / split / "windows-00000-of-00001.array_record"), [w.tobytes() for w in array])
    (legacy / "metadata.json").write_text(json.dumps({
        "tokenizer": "bytes", "window": 16, "seq_len": 15, "dtype": "uint16", "source": "old",
        "source_format": "jsonl", "train_windows": 40, "validation_windows": 8}))
    with pytest.raises(ValueError, match=f"convert it .* `depthdelusion prepare-data {legacy} --out NEW_DIR`"):
        Batches(DataConfig(path=str(legacy)), 15, 4)
    meta = prepare(str(legacy), str(tmp_path / "new"))  # its own tokenizer and window, not the defaults
    assert meta["tfds_name"] == "depthdelusion_windows/bytes_seq15"
    for split, array in windows.items():
        source = tfds.data_source(meta["tfds_name"], data_dir=str(tmp_path / "new"), split=split)
        np.testing.assert_array_equal([source[i]["tokens"] for i in range(len(source))], array)
    assert len(take(Batches(DataConfig(path=str(tmp_path / "new")), 15, 4), 10)) == 10


def test_config_overrides_select_the_tfds_dataset_and_its_text_feature(tfds_dir):
    from depthdelusion.config import load_config

    cfg = load_config(None, ["data.path=tfds:tiny_web_text:en", f"data.tfds_dir={tfds_dir}",
                             "data.tfds_text_feature=url", "data.tokenizer=bytes"])
    batch = next(Batches(cfg.data, 31, 4))
    assert all(get_tokenizer("bytes").decode(row).startswith("https://example.org/") for row in batch)


def test_the_default_install_does_not_pull_tensorflow():
    """The project's dependencies, followed through every installed package's own (extras not
    asked for), never reach TensorFlow: tensorflow-datasets names it only as an extra."""
    import re
    import tomllib
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement

    def name(text):
        return re.sub(r"[-_.]+", "-", text).lower()

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    assert "tensorflow-datasets" in {name(r.name) for r in todo}
    seen, done = set(), set()
    while todo:
        req = todo.pop()
        key = (name(req.name), frozenset(req.extras))
        if key in done:
            continue
        done.add(key)
        seen.add(key[0])
        try:
            subs = [Requirement(r) for r in requires(req.name) or []]
        except PackageNotFoundError:
            continue
        todo += [r for r in subs  # the package's own requirements and those of the extras asked for
                 if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in ("", *req.extras))]
    assert "tensorflow" not in seen and "tensorflow-cpu" not in seen and len(seen) > 30
