"""Pack token sequences end to end into fixed windows, with no padding.

Each document arrives as its token ids followed by EOS; windows of `window` (= seq_len + 1)
tokens are cut from the concatenation, so a document that does not fit continues in the next
window. Attention is not masked at document boundaries and EOS is a target like any other token
(the GPT-2 / nanodo convention): the model learns to predict a document's end, and a window's
first tokens may see the end of the previous document.
"""
from __future__ import annotations

from typing import Any

import grain
import numpy as np


class PackWindowsIterDataset(grain.IterDataset):
    def __init__(self, parent: grain.IterDataset, window: int):
        super().__init__(parent)
        self.window = window

    def __iter__(self) -> "PackWindowsIterator":
        return PackWindowsIterator(self._parent.__iter__(), self.window)


class PackWindowsIterator(grain.DatasetIterator):
    """State: the parent's state before the sequence the next window starts in, and how many of
    that sequence's tokens earlier windows already took. Restoring re-reads that sequence."""

    def __init__(self, parent: grain.DatasetIterator, window: int):
        super().__init__(parent)
        self.window = window
        # (parent state before the sequence, the sequence) not yet fully emitted, oldest first.
        self._pending: list[tuple[Any, np.ndarray]] = []
        self._used = 0  # tokens of the oldest pending sequence already emitted
        self._next_state = parent.get_state()  # parent state before the next unread sequence

    def __next__(self) -> np.ndarray:
        have = sum(len(seq) for _, seq in self._pending) - self._used
        while have < self.window:
            seq = np.asarray(next(self._parent), np.int32)
            self._pending.append((self._next_state, seq))
            self._next_state = self._parent.get_state()
            have += len(seq)
        out = np.concatenate([seq for _, seq in self._pending])[self._used:self._used + self.window]
        self._used += self.window
        while self._pending and self._used >= len(self._pending[0][1]):
            self._used -= len(self._pending.pop(0)[1])
        return out

    def get_state(self) -> dict[str, Any]:
        parent = self._pending[0][0] if self._pending else self._next_state
        # "latest" (the reader's state after the newest sequence read) is for reporting only, e.g.
        # skip counters; restoring uses "parent" and replays from there.
        return {"parent": parent, "used": self._used, "latest": self._next_state}

    def set_state(self, state: dict[str, Any]) -> None:
        self._parent.set_state(state["parent"])
        self._pending, self._used = [], state["used"]
        self._next_state = state["parent"]
