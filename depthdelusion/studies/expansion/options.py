"""The options of `depthdelusion expand`, `expansion-study`, `expansion-prediction` and
`expansion-growth`, each declared once beside its field (flag, help, default:
:mod:`depthdelusion.option_fields`); the studies' specs take their defaults from here. Imports
neither JAX nor scipy, so the commands' help is quick."""
from __future__ import annotations

from dataclasses import dataclass

from depthdelusion.analysis.fitting.options import SEED
from depthdelusion.option_fields import COUNT, POSITIVE, FromArguments, option


@dataclass(frozen=True)
class ExpandOptions(FromArguments):
    """Where to insert blocks and from which checkpoint, or (``probe``) what to measure instead."""

    after: str | None = option(None, "insert a block after each of these blocks", metavar="K[,K...]")
    seed: int = option(SEED, "draw of the inserted blocks", type=COUNT)
    probe: bool = option(False, "measure instead of expanding")
    batches: int = option(16, "--probe: train and held-out batches each", type=POSITIVE)
    etas: str | None = option(None, "--probe: jumpboard step sizes", metavar="E[,E...]")
    step: int | None = option(None, "--after: the parent's checkpoint to expand (default the newest)", type=COUNT)


@dataclass(frozen=True)
class ExpansionStudyOptions(FromArguments):
    """The two grids, their sweeps' parent folder, the batches per probe and what to train first
    (checked by `study.ExpansionSpec`)."""

    depth_grid: str = option("experiments/depth_expansion.yaml", "the depth grid's YAML")
    growth_grid: str = option("experiments/depth_expansion_growth.yaml", "the growth grid's YAML")
    runs: str = option("runs", "parent folder of the two sweeps' run directories")
    probe_batches: int = option(16, "batches per probe", type=POSITIVE)
    train: str = option("all", "what to train before probing: both grids and the grown runs (all), the "
                        "growth grid and grown runs only (growth), nothing (none)", choices=("all", "growth", "none"))


@dataclass(frozen=True)
class PredictionOptions(FromArguments):
    """The steps each child trains after its expansion and the batches per probe."""

    steps: int = option(100, "training steps of each child after expansion", type=POSITIVE)
    probe_batches: int = option(12, "batches per probe", type=POSITIVE)


@dataclass(frozen=True)
class GrowthOptions(FromArguments):
    """The growth sweep and/or the static control sweep, the checkpoint grown from and the seeds
    kept out of the lr choice (checked by `trials.GrowthSpec`)."""

    runs: str | None = option(None, "the growth sweep directory (omit with --static-control to compare "
                              "the table already in OUT)")
    switch_step: int = option(150, "the parents' checkpoint to grow from", type=POSITIVE)
    test_seeds: str = option("", "seeds kept out of the lr choice, on which the difference is measured at "
                             "each arm's chosen lr (default: none; the difference is then measured on the "
                             "seeds that chose the lrs)", metavar="S[,S...]")
    static_control: str | None = option(None, "the static control sweep's directory "
                                        "(experiments/depth_expansion_static_control.yaml)", metavar="DIR")
    static_grid: str = option("experiments/depth_expansion_static_control.yaml",
                              "the control's grid, which says how many runs are planned", metavar="YAML")
