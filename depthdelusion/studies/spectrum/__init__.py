"""Representation spectra of one trained run (its measurement lives in `common/spectrum.py`,
which the data-exponent study measures through too).

- `study.py` — the `spectrum` command as a study: a `SpectrumSpec` from its arguments
  (`spec.from_flags`), `measure()` to a frozen `SpectrumResults`, `sections()` to tail.md;
  `options.py` — `SpectrumOptions`, the command's flags; `declaration.py` — its `STUDIES`.
"""
from depthdelusion.studies.common.command import Argument, StudyCommand

COMMANDS = (
    StudyCommand(
        "spectrum", "depthdelusion.studies.spectrum.study:run_command",
        "eigenvalue spectra of a trained run's residual stream per layer, with tail indices",
        "Covariance spectra of the token embeddings and of the residual stream after every block, "
        "over held-out tokens, with a tail-index fit per layer.",
        inputs=(Argument("run", "a run directory written by `depthdelusion train`", metavar="RUN"),),
        out="output directory (default RUN/spectrum)", out_required=False,
        options="depthdelusion.studies.spectrum.options:SpectrumOptions"),
)
