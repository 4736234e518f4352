"""From documents to batches: tokenize, separate documents with EOS, pack into windows.

Windows hold seq_len + 1 tokens (inputs are window[:-1], targets window[1:]) and are filled
end to end with no padding: a document that does not fit continues in the next window.
Attention is not masked at document boundaries and the EOS token is a target like any other
(the GPT-2 / nanodo convention).

Each JAX process reads only its own documents (index ≡ process_index mod process_count) and
yields its share of the global batch, [global_batch / process_count, seq_len + 1] int32.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from depthdelusion.config import DataConfig
from depthdelusion.data import builtin_corpus
from depthdelusion.data.tokenizers import get_tokenizer


class OutOfData(RuntimeError):
    pass


class PackedBatches:
    """Iterator of local batches packed from the documents `document(i)`, i < n_documents."""

    def __init__(
        self,
        document: Callable[[int], str],
        n_documents: int,
        tokenizer,
        seq_len: int,
        local_batch: int,
        process_index: int = 0,
        process_count: int = 1,
        dataset_name: str = "dataset",
    ):
        self.document, self.n_documents, self.tokenizer = document, n_documents, tokenizer
        self.window, self.local_batch = seq_len + 1, local_batch
        self.process_index, self.process_count = process_index, process_count
        self.dataset_name = dataset_name
        self.next_document = process_index
        self.buffer = np.zeros((0,), np.int32)
        self.tokens_yielded = 0

    def __iter__(self) -> Iterator[np.ndarray]:
        return self

    def _fill(self, n_tokens: int) -> None:
        pieces = [self.buffer]
        have = len(self.buffer)
        while have < n_tokens:
            if self.next_document >= self.n_documents:
                raise OutOfData(
                    f"{self.dataset_name}: out of data after {self.tokens_yielded:,} tokens on this "
                    f"process ({self.n_documents:,} documents, a single pass): train for fewer steps "
                    "or use a larger dataset"
                )
            ids = self.tokenizer.encode(self.document(self.next_document))
            pieces += [ids, np.array([self.tokenizer.eos_id], np.int32)]
            have += len(ids) + 1
            self.next_document += self.process_count
        self.buffer = np.concatenate(pieces)

    def __next__(self) -> np.ndarray:
        n = self.local_batch * self.window
        self._fill(n)
        batch, self.buffer = self.buffer[:n], self.buffer[n:]
        self.tokens_yielded += n
        return batch.reshape(self.local_batch, self.window)


def build_batches(cfg: DataConfig, seq_len: int, global_batch: int, process_index: int = 0,
                  process_count: int = 1) -> tuple[PackedBatches, object]:
    """The training batch iterator for this process and the tokenizer it uses."""
    if global_batch % process_count:
        raise ValueError(
            f"train.batch_size={global_batch} is not divisible by the number of processes {process_count}"
        )
    tokenizer = get_tokenizer(cfg.tokenizer)
    if cfg.source != "builtin":
        raise ValueError(f"data.source={cfg.source!r}: valid values are builtin")
    batches = PackedBatches(
        lambda i: builtin_corpus.document(i, cfg.seed), cfg.builtin_documents, tokenizer, seq_len,
        global_batch // process_count, process_index, process_count, dataset_name="builtin corpus",
    )
    return batches, tokenizer
