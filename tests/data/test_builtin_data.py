"""The built-in corpus is deterministic, structured, and packs into batches without waste."""
import re

import numpy as np
import pytest

from depthdelusion.data import builtin_corpus
from depthdelusion.data.tokenizers import ByteTokenizer, get_tokenizer


def test_documents_are_deterministic_and_seed_dependent():
    assert builtin_corpus.document(7, seed=1) == builtin_corpus.document(7, seed=1)
    assert builtin_corpus.document(7, seed=1) != builtin_corpus.document(7, seed=2)
    assert builtin_corpus.document(7, seed=1) != builtin_corpus.document(8, seed=1)


def test_questions_recall_facts_stated_earlier_in_the_document():
    """The long-range dependency is real: every answer is the fact introduced at the top."""
    checked = 0
    for i in range(200):
        doc = builtin_corpus.document(i)
        facts = {m[0]: m[1:] for m in re.findall(r"(\w+) is a (\w+) (\w+) from (\w+)\.", doc)}
        for name, home in re.findall(r"Where is (\w+) from\? \1 is from (\w+)\.", doc):
            assert facts[name][2] == home
            checked += 1
        for name, trade in re.findall(r"What does (\w+) do\? \1 is a (\w+)\.", doc):
            assert facts[name][1] == trade
            checked += 1
    assert checked > 100


def test_brackets_nest_and_sums_are_right():
    for i in range(300):
        doc = builtin_corpus.document(i)
        depth = 0
        for ch in doc:
            depth += {"(": 1, ")": -1}.get(ch, 0)
            assert depth >= 0
        assert depth == 0
        words = builtin_corpus._NUMBER_WORDS
        for a, b, total in re.findall(r"has (\w+) \w+ and finds (\w+) more, so \w+ has (\w+)", doc):
            assert words.index(a) + words.index(b) == words.index(total)


def test_word_frequencies_are_zipfian():
    counts = {}
    for i in range(400):
        for word in re.findall(r"[a-z]+", builtin_corpus.document(i)):
            counts[word] = counts.get(word, 0) + 1
    freq = np.sort(np.array(list(counts.values())))[::-1][:200]
    slope = np.polyfit(np.log(np.arange(1, len(freq) + 1)), np.log(freq), 1)[0]
    assert -1.6 < slope < -0.6


def test_unigram_entropy_is_a_meaningful_ceiling():
    h = builtin_corpus.unigram_entropy(300)
    assert 2.5 < h < 3.5  # nats per byte; a trained model must get well below it


def test_byte_tokenizer_round_trips_unicode():
    tok = ByteTokenizer()
    text = "depth ≠ width — ünïcode"
    assert tok.decode(tok.encode(text)) == text
    assert tok.vocab_size == 257 and tok.eos_id == 256
    with pytest.raises(ValueError, match="data.tokenizer='gpt3': valid values are bytes"):
        get_tokenizer("gpt3")




# sha256 of documents 0..299 (seed 42), each followed by a NUL byte, as generated before the
# Zipf knob existed (main at 59ad280): the default must keep every committed result's corpus.
_DEFAULT_CORPUS_SHA256 = "a9f4ac360ce47fcca95872f69deb9f4e3c07624a30e7a9316ad4e5869efe084e"


def test_default_zipf_exponent_keeps_the_corpus_bit_identical(tmp_path, monkeypatch):
    import hashlib

    from depthdelusion.config import DataConfig
    from depthdelusion.data.pipeline import builtin_root

    digest = hashlib.sha256()
    for i in range(300):
        digest.update(builtin_corpus.document(i).encode() + b"\0")
    assert digest.hexdigest() == _DEFAULT_CORPUS_SHA256
    # the cache keeps its old name for the default, so corpora written before stay in use
    monkeypatch.setenv("DEPTHDELUSION_CACHE", str(tmp_path))
    assert builtin_root(DataConfig(builtin_documents=3)).name == "builtin-v2-seed42-docs3"
    steep = builtin_root(DataConfig(builtin_documents=3, builtin_zipf_exponent=2.0))
    assert steep.name == "builtin-v2-seed42-docs3-zipf2"


def test_zipf_exponent_sets_how_often_the_top_words_recur():
    import collections

    def top_share(zipf: float) -> float:
        counts = collections.Counter(w for i in range(100)
                                     for w in re.findall(r"[a-z]+", builtin_corpus.document(i, zipf=zipf)))
        return sum(c for _, c in counts.most_common(20)) / sum(counts.values())

    flat, default, steep = top_share(0.6), top_share(1.1), top_share(2.0)
    assert flat < default < steep
    assert builtin_corpus.document(3, zipf=2.0) != builtin_corpus.document(3)


@pytest.mark.parametrize("value", [-0.5, 4.5, float("nan"), "steep"])
def test_bad_zipf_exponent_names_the_field(value):
    from depthdelusion.config import load_config

    with pytest.raises(ValueError, match=r"data\.builtin_zipf_exponent=.*(\[0, 4\]|must be a number)"):
        load_config(overrides=[f"data.builtin_zipf_exponent={value}"])


def test_zipf_exponent_with_another_dataset_is_refused_not_ignored(tmp_path):
    from depthdelusion.config import load_config

    with pytest.raises(ValueError, match=r"data\.builtin_zipf_exponent=1\.6 shapes the built-in corpus only"):
        load_config(overrides=["data.builtin_zipf_exponent=1.6", f"data.path={tmp_path}"])
    load_config(overrides=["data.builtin_zipf_exponent=1.1", f"data.path={tmp_path}"])  # the default: fine
