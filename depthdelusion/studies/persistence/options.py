"""The options of `depthdelusion persistence-probe` and `persistence-study`, each declared once
beside its field (flag, help, default: :mod:`depthdelusion.option_fields`). No JAX: the
commands' help reads them. The study's step and window are the analysis' own defaults
(`analysis.science.persistence`), which the report's persistence lengths use too."""
from __future__ import annotations

from dataclasses import dataclass

from depthdelusion.analysis.fitting.options import SEED
from depthdelusion.analysis.science.persistence import DEFAULT_STEP, DEFAULT_WINDOW
from depthdelusion.config import PARAMETRIZATIONS
from depthdelusion.option_fields import COUNT, POSITIVE, POSITIVE_FLOAT, FromArguments, option

DEFAULT_WIDTHS = (64, 256, 1024)
DEFAULT_DEPTHS = (8, 16, 32, 64)
COMPUTE_DTYPES = ("auto", "float32", "bfloat16")


@dataclass(frozen=True)
class ProbeOptions(FromArguments):
    """The probe's grid (comma-separated lists, checked by `probe.ProbeSpec`) and what every
    shape shares: small batch and sequence so W = 1024 stays cheap on a CPU."""

    widths: str = option(",".join(map(str, DEFAULT_WIDTHS)), "comma-separated")
    depths: str = option(",".join(map(str, DEFAULT_DEPTHS)), "comma-separated")
    steps: int = option(3, "K, AdamW updates after init", type=POSITIVE)
    batch_size: int = option(4, "sequences per step", type=POSITIVE)
    seq_len: int = option(32, "tokens per sequence", type=POSITIVE)
    head_dim: int = option(16, "per-head dimension", type=POSITIVE)
    lr: float = option(3e-4, "AdamW learning rate", type=POSITIVE_FLOAT)
    parametrization: str = option("sp", "one of sp, mup, depth_mup, completep", choices=PARAMETRIZATIONS)
    compute_dtype: str = option("auto", "auto: bfloat16 on accelerators, float32 on CPU", choices=COMPUTE_DTYPES)
    seed: int = option(SEED, "initialisation and data seed", type=COUNT)
    #: shapes above are skipped (and listed): memory and time on a CPU
    max_params: float = option(1.2e8, "skip shapes with more parameters (at the default: about 2 GB "
                               "with Adam)", type=POSITIVE_FLOAT)


@dataclass(frozen=True)
class PersistenceOptions(FromArguments):
    """Where the study measures (the step and the window's relative half-width) and the grid
    files whose runs it expects."""

    step: int = option(DEFAULT_STEP, "requested step", type=COUNT)
    window: float = option(DEFAULT_WINDOW, "relative half-width of the step window (0.2 at step 1000: "
                           "steps 800-1200)", type=POSITIVE_FLOAT)
    grid: list[str] | None = option(None, "a grid file, to list the runs that have not finished (repeatable)",
                                    repeatable=True)
