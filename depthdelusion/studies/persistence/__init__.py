"""Gradient persistence: per-layer gradient profiles, persistence lengths and their tables
(`docs/persistence.md`).

- `probe.py` — the probe of freshly trained shapes: its flags a frozen `ProbeSpec`
  (`spec.from_flags`), `measure()` trains the grid into a frozen `ProbeResults`, `sections()`
  renders report.md.
- `study.py` — the study of trained runs: its spec, `PersistenceSpec` (run roots, grid files,
  step, window), is built from its flags by `spec.from_flags`; `measure(spec)` computes its
  numbers into a frozen `PersistenceResults`; `sections.py` — its report rendered from them.
- `options.py` — `ProbeOptions` and `PersistenceOptions`, the commands' flags; `declaration.py` —
  its `STUDIES`.
"""
from depthdelusion.studies.common.command import Argument, StudyCommand

COMMANDS = (
    StudyCommand(
        "persistence-probe", "depthdelusion.studies.persistence.probe:run_command",
        "per-layer gradient profiles at init and over the first steps for a width x depth grid; ℓ per shape",
        "Per-layer weight- and activation-gradient norms at initialisation and over the first K AdamW "
        "steps for a grid of widths x depths (built-in corpus), the persistence rate 1/ℓ of each with "
        "its sign, ℓ(W) power law vs log form, and one figure panel per width.",
        options="depthdelusion.studies.persistence.options:ProbeOptions"),
    StudyCommand(
        "persistence-study", "depthdelusion.studies.persistence.study:run_command",
        "tables and figures of the persistence study from its trained runs",
        "Windowed persistence rate per run, its evolution over training, ℓ(W) power law vs log form "
        "over all runs, loss vs depth and the loss-optimal depth per width, seed-level intervals per "
        "cell, the paper's implied ℓ(W) against the measured one. RUNS: one or more sweep output "
        "directories (experiments/persistence_study.yaml, persistence_width.yaml, or another sweep "
        "logging per-layer gradient norms); each is a study of its own.",
        inputs=(Argument("runs", "sweep output directories", metavar="RUNS", nargs="+"),),
        options="depthdelusion.studies.persistence.options:PersistenceOptions"),
)
