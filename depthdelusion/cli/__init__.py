"""The one command-line entry point: every command's arguments are parsed in this package, nowhere else.

A command is a row of :data:`COMMANDS`: its name, its one-line help, and the plain function that
runs it ("module:function", keyword arguments named like the parser's destinations, returning an
exit code of :mod:`depthdelusion.exit_codes`), plus a function that defines its arguments, in
:mod:`.training` or :mod:`.analysis` (what they share: :mod:`.arguments`). A study's commands are
declared in its folder (``COMMANDS`` in ``studies/<study>/__init__.py``) and found there by
:mod:`.studies`, which builds their rows and parsers. An
options object a command takes whole (``FitOptions``, ``RowOptions``, ``ReportOptions``,
``ShapeOptions``, the training commands' in :mod:`depthdelusion.training_options`, fit's,
isoflop's and persistence's in ``analysis/command_options.py``, a study's
``studies/<study>/options.py``: the function's ``option_groups``) declares its own flags next to
its fields (:mod:`depthdelusion.option_fields`); the parser is built from that declaration,
defaults included. A flag written here by hand is an input or output with no default of its own
(RUNS' alternatives, ``--out``, ``--set``, ``--json``). The module that runs a command is
imported only when the command runs, and only the invoked command's arguments are defined, so
``depthdelusion --help``, the help of every command and the analysis commands themselves never
import JAX (no help imports the module that runs its command). To add a command: write the function in the module that owns the job, add a
row to :data:`COMMANDS` and an ``@ARGUMENTS.command("name")`` function (a study's command: a
``StudyCommand`` in its folder's ``COMMANDS``, nothing here).
"""
from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
from typing import Callable

from depthdelusion import exit_codes

from . import analysis, studies, training

#: (command, "module:function" that runs it, one-line help), in listing order: the training and
#: analysis commands, then the study commands each study folder declares (:mod:`.studies`).
COMMANDS = (
    ("train", "depthdelusion.train.commands:run_train",
     "train one model; writes config.yaml, metrics.jsonl, summary.json"),
    ("prepare-data", "depthdelusion.data.commands:run_prepare",
     "tokenize and pack a corpus into ArrayRecord shards for fast, exactly resumable training"),
    ("sweep", "depthdelusion.sweep_commands:run_sweep_command",
     "run an experiment grid (idempotent), then write runs.csv and the report"),
    ("plan", "depthdelusion.sweep_commands:run_plan_command",
     "compile the train step for a TPU slice on this host; per-chip HBM, fits or not"),
    ("sky-jobs", "depthdelusion.skypilot_jobs:run_sky_jobs",
     "a grid as SkyPilot managed jobs, one TPU slice per run (spot, reserved or best-effort)"),
    ("bench", "depthdelusion.train.commands:run_bench",
     "compile time, step time, tokens/s, MFU and peak memory of the train step"),
    ("report", "depthdelusion.analysis.commands:run_report",
     "fit the laws and write the analysis report (md, tex, csv, png); no JAX needed"),
    ("fit", "depthdelusion.analysis.commands:run_fit",
     "fit one law to a table of runs and print its summary; no JAX needed"),
    ("shape", "depthdelusion.analysis.shape_command:run_shape",
     "how deep and how wide for C FLOPs: the optimum and the band of near-optimal shapes, pooled "
     "over tables (suites), with intervals"),
    ("isoflop", "depthdelusion.analysis.commands:run_isoflop",
     "isoFLOP profiles (Approach 2): N*(C), D*(C) exponents with intervals, the method's bias on "
     "this grid"),
    ("runs", "depthdelusion.analysis.table.run_table:run_command",
     "runs export: one run table (docs/run_table.md) from run directories, MLflow or W&B"),
    ("tables", "depthdelusion.analysis.tables_command:run_tables",
     "published run tables by name: list, show (provenance, license), get (downloaded, as a run table)"),
    ("laws", "depthdelusion.analysis.commands:run_laws",
     "list the registered laws: formulas and the columns each needs"),
    ("persistence", "depthdelusion.analysis.commands:run_persistence",
     "gradient persistence length per run and ℓ(W)"),
    ("audit", "depthdelusion.analysis.commands:run_audit",
     "check parameter counts against depth and width"),
) + tuple((c.name, c.target, c.help) for c in studies.COMMANDS)

EPILOG = f"""exit codes:
  {exit_codes.OK:<3} done
  {exit_codes.FAILED:<3} the command ran and the answer is no: a sweep or lr-transfer with failed runs,
      a plan that does not fit
  {exit_codes.USAGE:<3} bad command line, configuration or input: one line on stderr names the flag,
      field or file, and what would be valid
  {exit_codes.PREEMPTED:<3} preempted (SIGTERM): the state is saved; run the same command again to resume
  {exit_codes.INTERRUPTED:<3} interrupted (Ctrl-C): one line, no traceback; a report is written whole or not at all
  {exit_codes.BROKEN_PIPE:<3} the reader of standard output stopped (`... | head`): nothing more is printed
"""

_DEFINE = {**training.ARGUMENTS.define, **studies.ARGUMENTS.define, **analysis.ARGUMENTS.define}
_DESCRIPTIONS = {**training.ARGUMENTS.descriptions, **studies.ARGUMENTS.descriptions,
                 **analysis.ARGUMENTS.descriptions}


class _Parser(argparse.ArgumentParser):
    """A usage error is one line on stderr (exit 2), naming the flag, and where the help is;
    the usage block is left to --help."""

    def error(self, message):
        self.exit(exit_codes.USAGE, f"{self.prog}: error: {message} (usage: {self.prog} --help)\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, with the arguments of command ``only`` alone when it is given
    (the others are listed, not defined: what defines them may import more than this command
    needs); imports none of the modules that run them."""
    parser = _Parser(prog="depthdelusion", epilog=EPILOG,
                     description="Depth x width scaling-law training and analysis.",
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_commands(parser.add_subparsers(dest="command", metavar="COMMAND", required=True), only)
    return parser


def add_commands(subparsers, only: str | None = None) -> dict[str, argparse.ArgumentParser]:
    """Add every command of :data:`COMMANDS` to `subparsers`, with its arguments (command
    ``only``'s alone when given); returns their parsers by name."""
    parsers = {}
    for name, target, help_text in COMMANDS:
        description = _DESCRIPTIONS.get(name, help_text[:1].upper() + help_text[1:] + ".")
        sub = subparsers.add_parser(name, help=help_text, description=description, epilog=EPILOG,
                                    formatter_class=_Formatter)
        if only is None or name == only:
            _DEFINE[name](sub)
        sub.set_defaults(target=target)
        parsers[name] = sub
    return parsers


class _Formatter(argparse.HelpFormatter):
    """Wraps the description and keeps the exit-code table's lines."""

    def _fill_text(self, text, width, indent):
        if text is EPILOG:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def _missing_package(err: ModuleNotFoundError) -> bool:
    return bool(err.name) and err.name.split(".")[0] != "depthdelusion"


def command(argv: list[str]) -> tuple[str, Callable[[], int]]:
    """Parse `argv`: (the command's name, its function bound to the parsed arguments). Imports
    the command's module; a usage error exits (status 2) like any argparse parser."""
    argv = list(argv)
    args = vars(build_parser(only=_command_name(argv) or "").parse_args(argv))
    name, target = args.pop("command"), args.pop("target")
    module, function = target.split(":")
    run = getattr(importlib.import_module(module), function)
    for parameter, options in getattr(run, "option_groups", {}).items():  # e.g. FitOptions
        args[parameter] = options.from_arguments(args)
    return name, functools.partial(run, **args)


def _command_name(argv: list[str]) -> str | None:
    """The command ``argv`` names (its first word: the top level has no option that takes a value)."""
    return argv[0] if argv and not argv[0].startswith("-") else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    name = _command_name(argv) or "COMMAND"
    try:
        name, run = command(argv)
        code = int(run())
        sys.stdout.flush()  # a reader gone (`| head`) shows here, not in the interpreter's exit
        return code
    except ModuleNotFoundError as err:
        if not _missing_package(err):
            raise
        print(f"depthdelusion {name}: error: needs the Python package {err.name!r}, which is not "
              "installed; install depthdelusion with its dependencies (pip install depthdelusion) "
              "for this command", file=sys.stderr)
        return exit_codes.USAGE
    except (ValueError, FileNotFoundError) as err:
        # Configuration and input errors: one clear line, no traceback.
        print(f"depthdelusion {name}: error: {err}", file=sys.stderr)
        return exit_codes.USAGE
    except KeyboardInterrupt:  # Ctrl-C: the user knows why it stopped; a traceback says nothing more
        print(f"\ndepthdelusion {name}: interrupted (Ctrl-C)", file=sys.stderr)
        return exit_codes.INTERRUPTED
    except BrokenPipeError:  # `... | head` stopped reading: as a shell command would, end quietly
        # Python flushes stdout again at exit; point it at /dev/null so that flush cannot fail too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return exit_codes.BROKEN_PIPE
