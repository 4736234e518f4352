"""The one command-line entry point. Thin: parses arguments and calls library functions.

Each subcommand is defined beside the code it drives, by a ``register(subparsers)`` function in
its module; :data:`COMMANDS` names that module and the command's one-line help. A module is
imported only when one of its commands runs, so ``depthdelusion --help`` and the analysis
commands (``fit``, ``report``, ...) never import JAX. To add a command: write ``register`` in
your module and add one row to :data:`COMMANDS`.
"""
from __future__ import annotations

import argparse
import importlib
import sys

#: (command, module whose ``register(subparsers)`` defines it, one-line help), in listing order.
COMMANDS = (
    ("train", "depthdelusion.train.commands",
     "train one model; writes config.yaml, metrics.jsonl, summary.json"),
    ("prepare-data", "depthdelusion.data.commands",
     "tokenize and pack a corpus into ArrayRecord shards for fast, exactly resumable training"),
    ("sweep", "depthdelusion.sweep_commands",
     "run an experiment grid (idempotent), then write runs.csv and the report"),
    ("plan", "depthdelusion.sweep_commands",
     "compile the train step for a TPU slice on this host; per-chip HBM, fits or not"),
    ("bench", "depthdelusion.train.commands",
     "compile time, step time, tokens/s, MFU and peak memory of the train step"),
    ("coord-check", "depthdelusion.train.commands",
     "RMS of every block's output and the logits over the first steps, per shape"),
    ("lr-transfer", "depthdelusion.train.commands",
     "lr sweep per width x depth and parameterization, then a depth sweep; CSV, PNG, report"),
    ("report", "depthdelusion.analysis.commands",
     "fit the laws and write the analysis report (md, tex, csv, png); no JAX needed"),
    ("fit", "depthdelusion.analysis.commands", "fit one law to a table of runs and print its summary; no JAX needed"),
    ("laws", "depthdelusion.analysis.commands", "list the registered laws: formulas and the columns each needs"),
    ("persistence", "depthdelusion.analysis.commands", "gradient persistence length per run and ℓ(W)"),
    ("audit", "depthdelusion.analysis.commands", "check parameter counts against depth and width"),
    ("expand", "depthdelusion.studies.expansion_commands",
     "insert zero-output blocks into a trained run (new run directory), or --probe the "
     "first-order signal per insertion layer"),
    ("expansion-study", "depthdelusion.studies.expansion_commands",
     "the depth-expansion study: train (resumable), grow, probe, tables and figures"),
    ("persistence-probe", "depthdelusion.studies.persistence_probe",
     "per-layer gradient profiles at init and over the first steps for a width x depth grid; ℓ per shape"),
    ("persistence-study", "depthdelusion.studies.persistence_study",
     "tables and figures of the persistence study from its trained runs"),
    ("spectrum", "depthdelusion.studies.spectrum",
     "eigenvalue spectra of a trained run's residual stream per layer, with tail indices"),
    ("data-exponent", "depthdelusion.studies.data_exponent",
     "token sweeps' measured data exponent vs the one predicted from spectra and the LM head"),
)


class _Only:
    """Subparsers seen by a module's ``register``: only ``command`` becomes a real subparser
    (with the help from COMMANDS); the module's other commands go to throwaway parsers."""

    def __init__(self, subparsers, command: str, help: str):
        self._subparsers, self._command, self._help = subparsers, command, help

    def add_parser(self, name: str, **kwargs):
        if name != self._command:
            return argparse.ArgumentParser(prog=name, add_help=False)
        kwargs["help"] = self._help
        kwargs.setdefault("description", self._help[:1].upper() + self._help[1:] + ".")
        return self._subparsers.add_parser(name, **kwargs)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI parser with every command listed; only ``command``'s module is imported (and its
    arguments defined). ``command=None`` imports none: enough for ``--help``."""
    parser = argparse.ArgumentParser(
        prog="depthdelusion",
        description="Depth x width scaling-law training and analysis.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module, help_text in COMMANDS:
        if name == command:
            importlib.import_module(module).register(_Only(subparsers, name, help_text))
        else:
            subparsers.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and not argv[0].startswith("-") else None
    try:
        parser = build_parser(command)
    except ModuleNotFoundError as err:  # e.g. `train` in an analysis-only install
        print(f"depthdelusion {command}: error: needs the Python package {err.name!r}, which is not "
              "installed; install depthdelusion with its dependencies (pip install depthdelusion) "
              "for this command", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as err:
        # Configuration and input errors: one clear line, no traceback.
        print(f"depthdelusion {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
