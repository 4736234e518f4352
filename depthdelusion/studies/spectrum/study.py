"""`depthdelusion spectrum RUN`: covariance spectra of a trained run's token embeddings and residual
stream, with a tail-index fit per layer. The measurement and its files are
`studies/common/spectrum.py`, shared with the data-exponent study.

The study's shape: its spec (`SpectrumSpec`, from the command's flags by `spec.from_flags`),
`measure` to a frozen `SpectrumResults`, `sections` to tail.md; spectrum.csv, tail.csv and
spectrum.png from the same results (`spectrum.write_outputs`).
"""
from __future__ import annotations

import dataclasses
import shlex

import numpy as np

from depthdelusion.config import bounded
from depthdelusion.studies.common import spectrum
from depthdelusion.option_fields import command_words
from depthdelusion.studies.common.spec import from_flags
from depthdelusion.studies.spectrum.options import SpectrumOptions

FLAGS = {"run": "RUN"}  # field -> the command's argument, where it is not --field


@dataclasses.dataclass(frozen=True)
class SpectrumSpec:
    """What is measured: the run directory, the held-out tokens and the sequences per forward pass
    (the command's arguments, `spec.from_flags`)."""

    run: str
    tokens: int = bounded(SpectrumOptions.tokens, ge=1)
    rows: int = bounded(SpectrumOptions.rows, ge=1)

    def validate(self) -> None:
        """Nothing spans fields; the run directory is checked where it is read (`spectrum.load_run`)."""


@dataclasses.dataclass(frozen=True)
class SpectrumResults:
    """The spectra and tail fits measured, and the command that regenerates them; rendered by
    `sections`."""

    spec: SpectrumSpec
    eigenvalues_LxW: np.ndarray  # every layer's covariance eigenvalues, from the largest
    fits: tuple  # analysis.science.spectra's tail fit per layer
    info: dict  # what was measured: checkpoint step, tokens, shape, wall times
    command: str


def measure(spec: SpectrumSpec, *, command: str = "") -> SpectrumResults:
    """The spectra of `spec.run` over its held-out tokens; ``command`` is the one quoted in tail.md."""
    eigenvalues_LxW, fits, info = spectrum.measure(spec.run, spec.tokens, spec.rows)
    return SpectrumResults(spec, eigenvalues_LxW, tuple(fits), info, command)


def sections(r: SpectrumResults) -> str:
    """tail.md (formatting `r`, computing nothing)."""
    return spectrum.tail_markdown(list(r.fits), r.info, r.command)


def run_command(*, run: str, out: str | None = None, options: SpectrumOptions = SpectrumOptions()) -> int:
    """`depthdelusion spectrum` (the parser is `depthdelusion.cli`, from `SpectrumOptions`)."""
    spec = from_flags(SpectrumSpec, {"run": run, **dataclasses.asdict(options)}, FLAGS)
    command = shlex.join(["depthdelusion", "spectrum", str(run), *command_words(options)]
                         + (["--out", out] if out else []))
    r = measure(spec, command=command)
    paths = spectrum.write_outputs(r.eigenvalues_LxW, list(r.fits), r.info, out or f"{run.rstrip('/')}/spectrum",
                                   r.command)
    print(next(p for p in paths if p.name == "tail.md").read_text())
    print(f"written: {', '.join(str(p) for p in paths)}")
    return 0


run_command.option_groups = {"options": SpectrumOptions}
