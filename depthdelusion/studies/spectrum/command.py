"""`depthdelusion spectrum`: covariance spectra of a trained run's token embeddings and residual
stream (the measurement is `studies/common/spectrum.py`, shared with the data-exponent study)."""
from __future__ import annotations

import shlex

from depthdelusion.studies.common.spectrum import DEFAULT_ROWS, DEFAULT_TOKENS, measure, write_outputs


def run_spectrum(*, run: str, tokens: int = DEFAULT_TOKENS, rows: int = DEFAULT_ROWS,
                 out: str | None = None) -> int:
    """`depthdelusion spectrum` (the parser is `depthdelusion.cli`)."""
    for name, value in (("tokens", tokens), ("rows", rows)):
        if value < 1:
            raise ValueError(f"--{name}={value}: must be a positive integer")
    full, fits, info = measure(run, tokens, rows)
    command = (f"depthdelusion spectrum {shlex.quote(str(run))} --tokens {tokens} "
               f"--rows {rows}" + (f" --out {shlex.quote(out)}" if out else ""))
    paths = write_outputs(full, fits, info, out or f"{run.rstrip('/')}/spectrum", command)
    print(next(p for p in paths if p.name == "tail.md").read_text())
    print(f"written: {', '.join(str(p) for p in paths)}")
    return 0
