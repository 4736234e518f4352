"""The options of `depthdelusion spectrum`, each declared once beside its field (flag, help,
default: :mod:`depthdelusion.option_fields`); imports no JAX, so the command's help is quick."""
from __future__ import annotations

from dataclasses import dataclass

from depthdelusion.option_fields import POSITIVE, FromArguments, option


@dataclass(frozen=True)
class SpectrumOptions(FromArguments):
    """How much is measured: the held-out tokens and the sequences per forward pass."""

    tokens: int = option(1 << 18, "held-out tokens to use", type=POSITIVE)
    rows: int = option(16, "sequences per forward pass", type=POSITIVE)
