"""Tokenizers: text -> token ids, with an end-of-document id placed between documents."""
from __future__ import annotations

import numpy as np


class ByteTokenizer:
    """UTF-8 bytes as ids 0..255, EOS = 256: vocabulary 257, never an unknown token."""

    name = "bytes"
    vocab_size = 257
    eos_id = 256

    def encode(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8"), np.uint8).astype(np.int32)

    def decode(self, ids) -> str:
        data = bytes(int(i) for i in ids if int(i) < 256)
        return data.decode("utf-8", errors="replace")


TOKENIZERS = {"bytes": ByteTokenizer}


def get_tokenizer(name: str):
    if name not in TOKENIZERS:
        raise ValueError(f"data.tokenizer={name!r}: valid values are {', '.join(TOKENIZERS)}")
    return TOKENIZERS[name]()
