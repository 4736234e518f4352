"""The options of `depthdelusion redundancy-study`, each declared once beside its field (flag,
help, default: :mod:`depthdelusion.option_fields`)."""
from __future__ import annotations

from dataclasses import dataclass

from depthdelusion.analysis.report.options import FigureOptions
from depthdelusion.option_fields import POSITIVE, FromArguments, declared_in, option
from depthdelusion.studies.common.command import PlannedRunOptions


@dataclass(frozen=True)
class RedundancyOptions(FromArguments):
    """The seeds per case, and whether to draw the figure or only rewrite the report."""

    seeds: int = option(10, "seeds per case", type=POSITIVE)
    no_figures: bool = declared_in(FigureOptions, "no_figures")
    report_only: bool = declared_in(PlannedRunOptions, "report_only")  # as redundancy-study reads it
