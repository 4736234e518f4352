"""The options of `depthdelusion data-exponent` and `data-exponent-ridge`, each declared once
beside its field (flag, help, default: :mod:`depthdelusion.option_fields`); imports no JAX, so
the commands' help is quick."""
from __future__ import annotations

from dataclasses import dataclass

from depthdelusion.analysis.fitting.options import SEED
from depthdelusion.option_fields import COUNT, POSITIVE, POSITIVE_FLOAT, FromArguments, option


@dataclass(frozen=True)
class DataExponentOptions(FromArguments):
    """What the study measures of ROOT's sweeps, or that it refits a written study's tables."""

    #: the validation split holds ~330k bytes
    tokens: int = option(1 << 17, "held-out tokens per run for the spectra", type=POSITIVE)
    largest_only: bool = option(False, "spectra and readout of each sweep's largest budget only "
                                "(default: every run)")
    sweep_commands: str | None = option(None, "a text file of the sweep commands that trained ROOT, "
                                        "quoted in README.md", metavar="FILE")
    refit_tables: bool = option(False, "ROOT is a written study directory: refit its measured b from "
                                "runs.csv (no run directories needed) and rewrite the tables in --out")


@dataclass(frozen=True)
class RidgeOptions(FromArguments):
    """The feature pool, the n grid (doubling from n_min to n_max), the replicates and the target."""

    tokens: int = option(1 << 17, "held-out tokens in the feature pool", type=POSITIVE)
    rows: int = option(16, "sequences per forward pass", type=POSITIVE)
    n_min: int = option(64, "smallest training sample", type=POSITIVE)
    n_max: int = option(32768, "largest training sample (the grid doubles from --n-min)", type=POSITIVE)
    reps: int = option(64, "independent replicates", type=POSITIVE)
    seed: int = option(SEED, "seed of the subsamples and noise", type=COUNT)
    noise: float = option(2.0, "noise standard deviation over the target signal's", type=POSITIVE_FLOAT)
    target_rank: int = option(1, "the target readout: the head's column of the k-th most frequent next token",
                              type=POSITIVE)
