"""The options of `depthdelusion coord-check`, each declared once beside its field (flag, help,
default: :mod:`depthdelusion.option_fields`); imports no JAX, so the command's help is quick."""
from __future__ import annotations

from dataclasses import dataclass

from depthdelusion.config import PARAMETRIZATIONS
from depthdelusion.option_fields import POSITIVE, POSITIVE_FLOAT, FromArguments, option

DEFAULT_WIDTHS = (64, 128, 256, 512)
DEFAULT_DEPTHS = (2, 4, 8, 16)


@dataclass(frozen=True)
class CoordCheckOptions(FromArguments):
    """The grid (comma-separated lists, checked by the spec: `study.from_options`) and what every
    shape shares: a constant base lr, tiny batches so the 512 × 16 corner stays cheap."""

    widths: str = option(",".join(map(str, DEFAULT_WIDTHS)), "comma-separated")
    depths: str = option(",".join(map(str, DEFAULT_DEPTHS)), "comma-separated")
    steps: int = option(10, "updates per shape", type=POSITIVE)
    parametrization: str = option(",".join(PARAMETRIZATIONS),
                                  "comma-separated: sp, mup, depth_mup, completep (one panel each)")
    lr: float = option(1e-2, "base learning rate (constant)", type=POSITIVE_FLOAT)
    batch_size: int = option(4, "sequences per step", type=POSITIVE)
    seq_len: int = option(64, "tokens per sequence", type=POSITIVE)
    head_dim: int = option(16, "per-head dimension", type=POSITIVE)
    base_width: int = option(64, "the shape where the multipliers are 1", type=POSITIVE)
    base_depth: int = option(2, "the shape where the multipliers are 1", type=POSITIVE)
