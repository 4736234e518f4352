"""The data exponent: the measured exponent of token sweeps against the one predicted from the
spectrum of the LM head's input and its readout, and ridge readouts on one run's frozen features.

- `study.py` — token sweeps: a `DataExponentSpec` from the command's flags, `measure()` (or
  `refit()` of a written study from its tables) to a frozen `DataExponentResults`, `sections()` to
  tables.md (`analysis/science/data_power.py`, `readout.py`, `redundancy.py`).
- `ridge.py` — ridge readouts on a trained run's frozen features (the LM head's input): the data
  exponent against its spectrum's prediction and wrong spectra (`analysis/science/ridge_exponent.py`):
  a `RidgeSpec` from the command's flags, `measure()` to a frozen `RidgeResults`, `sections()` to
  ridge.md.
- `options.py` — `DataExponentOptions` and `RidgeOptions`, the commands' flags; `declaration.py` —
  its `STUDIES`.
"""
from depthdelusion.studies.common.command import Argument, StudyCommand

COMMANDS = (
    StudyCommand(
        "data-exponent", "depthdelusion.studies.data_exponent.study:run_data_exponent",
        "token sweeps' measured data exponent vs the one predicted from spectra and the LM head",
        "Token sweeps (ROOT/SWEEP/RUN/, one run per budget): the data exponent b of L = E + B·T^-b "
        "with its profile-likelihood interval, against 2βs/(2βs+1) from the spectrum of the LM "
        "head's input and the readout's source smoothness s.",
        inputs=(Argument("root", "a directory of token sweeps: ROOT/SWEEP/RUN/", metavar="ROOT"),),
        out="the study directory to write",
        options="depthdelusion.studies.data_exponent.options:DataExponentOptions"),
    StudyCommand(
        "data-exponent-ridge", "depthdelusion.studies.data_exponent.ridge:run_command",
        "ridge readouts on a trained run's frozen features: data exponent vs its spectrum's and wrong ones",
        "Ridge readouts on a trained run's frozen features (the LM head's input over held-out tokens; "
        "target: the head's centred readout of the most frequent next token plus Gaussian noise): the "
        "data exponent b of the exact excess risk over n, ridge tuned per n, with a bootstrap "
        "interval, against 2βs/(2βs+1) from the features' spectrum and from spectra with β halved "
        "and doubled (which must fail).",
        inputs=(Argument("run", "a run directory written by `depthdelusion train`", metavar="RUN"),),
        out="the directory to write ridge.csv, curves.csv and ridge.md into",
        options="depthdelusion.studies.data_exponent.options:RidgeOptions"),
)
