"""The options of `depthdelusion redundancy-study`, each declared once beside its field (flag,
help, default: :mod:`depthdelusion.option_fields`)."""
from __future__ import annotations

from dataclasses import dataclass

from depthdelusion.option_fields import POSITIVE, FromArguments, option


@dataclass(frozen=True)
class RedundancyOptions(FromArguments):
    """The seeds per case, and whether to draw the figure or only rewrite the report."""

    seeds: int = option(10, "seeds per case", type=POSITIVE)
    no_figures: bool = option(False, "skip the PNGs (matplotlib not needed)")
    report_only: bool = option(False, "rewrite report.md from the tables already in --out")
