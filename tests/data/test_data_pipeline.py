"""The grain pipeline on real files in SlimPajama's format: bad records, resume, sharding, passes."""
import json
from pathlib import Path

import numpy as np
import pytest
import zstandard

from depthdelusion.config import DataConfig
from depthdelusion.data.pipeline import Batches, OutOfData, resolve_dataset, validation_batches
from depthdelusion.data.prepare import prepare
from depthdelusion.data.sources import find_dataset
from depthdelusion.data.streaming import row_files
from depthdelusion.data.tokenizers import get_tokenizer


def record(text, set_name="RedPajamaC4"):
    return json.dumps({"text": text, "meta": {"redpajama_set_name": set_name}}).encode()


def write_zst(path: Path, lines: list[bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(zstandard.ZstdCompressor().compress(b"\n".join(lines) + b"\n"))


def docs(shard: int, n: int) -> list[str]:
    return [f"Document {shard}-{i}: " + "the deep model is wide. " * (1 + (i * 7 + shard) % 5) for i in range(n)]


def make_slimpajama(root: Path, shards: int = 12, per_shard: int = 10) -> list[str]:
    """A SlimPajama-layout directory; returns every good training document."""
    good = []
    for k in range(shards):
        texts = docs(k, per_shard)
        good += texts
        write_zst(root / "train" / f"chunk{1 + k % 2}" / f"example_train_{k}.jsonl.zst", [record(t) for t in texts])
    write_zst(root / "validation" / "chunk1" / "example_holdout_0.jsonl.zst",
              [record(t) for t in docs(99, 40)])
    return good


@pytest.fixture()
def slimpajama(tmp_path):
    root = tmp_path / "SlimPajama-627B"
    good = make_slimpajama(root)
    return root, good


def cfg_for(path, **kw):
    return DataConfig(path=str(path), tokenizer="bytes", **kw)


def take(batches, n):
    return [next(batches) for _ in range(n)]


def test_slimpajama_layout_is_recognised(slimpajama):
    root, _ = slimpajama
    found = find_dataset(str(root))
    assert found.format == "slimpajama" and len(found.train) == 12 and len(found.validation) == 1


def test_path_matching_nothing_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="data.path='.*nothing/\\*.jsonl' matches no files"):
        find_dataset(str(tmp_path / "nothing" / "*.jsonl"))
    with pytest.raises(ValueError, match="matches no files"):
        Batches(cfg_for(tmp_path / "missing"), 16, 2)


def test_each_batch_row_is_its_files_packed_end_to_end_once(slimpajama):
    """Row r of the batches is exactly the concatenation (document + EOS, no padding) of the
    files dealt to row r, cut into windows; the data ends when the shortest row runs out."""
    root, _ = slimpajama
    tok = get_tokenizer("bytes")
    found = find_dataset(str(root))
    batches = Batches(cfg_for(root), seq_len=31, global_batch=4)
    seen = []
    with pytest.raises(OutOfData, match=f"{root}: out of data after .* tokens"):
        while True:
            seen.append(next(batches))
    expected_rows = []
    for row in range(4):
        stream = []
        for path in row_files(found.train, seed=42, epochs=1, row=row, rows=4):
            lines = zstandard.ZstdDecompressor().decompress(Path(path).read_bytes()).splitlines()
            for line in lines:
                stream += tok.encode(json.loads(line)["text"]).tolist() + [tok.eos_id]
        expected_rows.append(stream)
    assert len(seen) == min(len(r) for r in expected_rows) // 32
    for row in range(4):
        got = np.concatenate([b[row] for b in seen]).tolist()
        assert got == expected_rows[row][: len(got)]


def test_bad_records_are_skipped_and_counted(tmp_path):
    root = tmp_path / "sp"
    lines = [record("good one " * 5), b"{not json", json.dumps({"meta": {}}).encode(),
             json.dumps({"text": 3}).encode(), record("   "), b'{"text": "bad \xff\xfe utf8"}',
             record("good two " * 5)]
    write_zst(root / "train" / "chunk1" / "example_train_0.jsonl.zst", lines)
    write_zst(root / "train" / "chunk1" / "example_train_1.jsonl.zst", [record("good three " * 5)])
    (root / "train" / "chunk1" / "example_train_2.jsonl.zst").write_bytes(b"")  # empty shard
    rng = np.random.default_rng(0)  # incompressible text, so half the shard holds whole lines
    noisy = [record(" ".join(str(x) for x in rng.integers(0, 10**9, 30))) for _ in range(200)]
    whole = zstandard.ZstdCompressor().compress(b"\n".join(noisy))
    (root / "train" / "chunk2").mkdir()
    (root / "train" / "chunk2" / "example_train_3.jsonl.zst").write_bytes(whole[: len(whole) // 2])
    batches = Batches(cfg_for(root, prefetch=0), seq_len=15, global_batch=2)
    with pytest.raises(OutOfData):
        while True:
            next(batches)
    assert batches.skipped() == {"malformed_json": 1, "missing_text": 2, "invalid_utf8": 1,
                                 "empty_document": 1, "empty_shard": 1, "corrupt_shard": 1,
                                 "malformed_record": 0}


@pytest.mark.slow  # trains a run
def test_bad_records_reach_metrics_and_summary(tmp_path):
    from depthdelusion.cli import main

    root = tmp_path / "sp"
    for k in range(8):  # one file per batch row at least
        write_zst(root / "train" / "chunk1" / f"example_train_{k}.jsonl.zst",
                  [b"{broken"] * (k == 3) + [record(t) for t in docs(k, 40)])
    out = tmp_path / "run"
    args = ["train", "--set", f"data.path={root}", "--set", "model.depth=1", "--set", "model.width=32",
            "--set", "model.head_dim=16", "--set", "model.seq_len=32", "--set", "train.batch_size=8",
            "--set", "train.steps=4", "--set", "train.layer_stats_every=2", "--out", str(out)]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["data"]["skipped"]["malformed_json"] == 1
    stats = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines() if "data_skipped" in l]
    assert stats and stats[-1]["data_skipped"]["malformed_json"] == 1
    assert summary["eval_loss"] is None  # no validation split in this dataset


@pytest.mark.parametrize("workers", [0, 2])
def test_resume_mid_stream_gives_exactly_the_remaining_batches(slimpajama, workers):
    root, _ = slimpajama
    cfg = cfg_for(root, workers=workers)
    straight = take(Batches(cfg, 31, 4), 12)
    first = Batches(cfg, 31, 4)
    take(first, 5)
    state = json.loads(json.dumps(first.get_state()))  # it must survive a JSON round trip
    first.close()
    resumed = Batches(cfg, 31, 4)
    resumed.set_state(state)
    rest = take(resumed, 7)
    resumed.close()
    for a, b in zip(straight[5:], rest):
        np.testing.assert_array_equal(a, b)


def test_two_processes_read_disjoint_shares_and_each_resumes_exactly(slimpajama):
    root, _ = slimpajama
    cfg = cfg_for(root)
    shares = [take(Batches(cfg, 31, 4, p, 2), 6) for p in range(2)]
    assert shares[0][0].shape == (2, 32)
    files = find_dataset(str(root)).train
    opened = [{f for row in (2 * p, 2 * p + 1) for f in row_files(files, 42, 1, row, 4)} for p in range(2)]
    assert not opened[0] & opened[1] and opened[0] | opened[1] == set(files)  # disjoint shares
    for p in range(2):
        it = Batches(cfg, 31, 4, p, 2)
        take(it, 2)
        state = it.get_state()
        again = Batches(cfg, 31, 4, p, 2)
        again.set_state(state)
        for a, b in zip(shares[p][2:], take(again, 4)):
            np.testing.assert_array_equal(a, b)


def test_global_batches_do_not_depend_on_the_number_of_processes(slimpajama, tmp_path):
    """Row r of every global batch has one source: two processes' halves, stacked, are the
    batches of one process. Streaming and prepared ArrayRecord alike."""
    root, _ = slimpajama
    prepare(str(root), str(tmp_path / "prepared"), tokenizer="bytes", seq_len=31)
    for cfg in (cfg_for(root), DataConfig(path=str(tmp_path / "prepared"))):
        one = take(Batches(cfg, 31, 4), 5)
        halves = [take(Batches(cfg, 31, 4, p, 2), 5) for p in range(2)]
        for t in range(5):
            np.testing.assert_array_equal(one[t], np.concatenate([halves[0][t], halves[1][t]]))


def test_streaming_needs_a_file_per_batch_row(slimpajama):
    root, _ = slimpajama
    with pytest.raises(ValueError, match="has 12 training files; streaming feeds each of the "
                                         "train.batch_size=16 batch rows"):
        Batches(cfg_for(root), 31, 16)


def test_shuffle_is_seeded(slimpajama):
    root, _ = slimpajama
    a = take(Batches(cfg_for(root, seed=1), 31, 4), 3)
    assert all(np.array_equal(x, y) for x, y in zip(a, take(Batches(cfg_for(root, seed=1), 31, 4), 3)))
    assert not all(np.array_equal(x, y) for x, y in zip(a, take(Batches(cfg_for(root, seed=2), 31, 4), 3)))


def test_epochs_allow_a_second_pass(slimpajama):
    root, _ = slimpajama
    one = Batches(cfg_for(root), 31, 4)
    n_one = 0
    with pytest.raises(OutOfData):
        while True:
            next(one)
            n_one += 1
    two = Batches(cfg_for(root, epochs=2), 31, 4)
    assert len(take(two, 2 * n_one)) == 2 * n_one


def test_validation_split_and_holdout(slimpajama, tmp_path):
    root, _ = slimpajama
    val = validation_batches(cfg_for(root), 31, 4, n_batches=3)
    assert len(val) == 3 and val[0].shape == (4, 32)
    assert "Document 99-" in get_tokenizer("bytes").decode(val[0].reshape(-1))
    files = tmp_path / "plain"
    for k in range(3):
        (files / f"part{k}.jsonl").parent.mkdir(exist_ok=True)
        (files / f"part{k}.jsonl").write_bytes(b"\n".join(record(t) for t in docs(k, 10)))
    found = resolve_dataset(DataConfig(path=str(files), holdout_files=1))
    assert found.format == "jsonl" and [Path(f).name for f in found.validation] == ["part2.jsonl"]
    assert validation_batches(DataConfig(path=str(files)), 31, 4, 2) is None


def test_text_files_are_one_document_each(tmp_path):
    for k in range(2):
        (tmp_path / f"d{k}.txt").write_text(f"plain text document number {k}. " * 20)
    batches = Batches(DataConfig(path=str(tmp_path / "*.txt")), 15, 2)
    rows = [get_tokenizer("bytes").decode(row) for row in next(batches)]
    assert sorted(rows) == ["plain text docum"] * 2  # each row starts its own .txt document


def test_prepared_arrayrecord_matches_the_streamed_windows_and_resumes(slimpajama, tmp_path):
    root, _ = slimpajama
    meta = prepare(str(root), str(tmp_path / "prepared"), tokenizer="gpt2", seq_len=31)
    assert meta["dtype"] == "uint16" and meta["train_windows"] > 20 and meta["validation_windows"] > 0
    cfg = DataConfig(path=str(tmp_path / "prepared"), tokenizer="gpt2")
    assert resolve_dataset(cfg).format == "arrayrecord"
    straight = take(Batches(cfg, 31, 4), 6)
    assert straight[0].dtype == np.int32 and straight[0].max() < 50257
    it = Batches(cfg, 31, 4)
    take(it, 2)
    again = Batches(cfg, 31, 4)
    again.set_state(it.get_state())
    for a, b in zip(straight[2:], take(again, 4)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="prepared with tokenizer=gpt2 and windows of 32 tokens"):
        Batches(DataConfig(path=str(tmp_path / "prepared"), tokenizer="gpt2"), 63, 4)


def test_gpt2_tokenizer_is_the_real_one():
    tok = get_tokenizer("gpt2")
    assert tok.encode("Hello world").tolist() == [15496, 995]
    assert tok.vocab_size == 50257 and tok.eos_id == 50256
    assert tok.decode(tok.encode("depth ≠ width")) == "depth ≠ width"
    assert tok.encode("<|endoftext|>").tolist() != [50256]  # text never forges an EOS
