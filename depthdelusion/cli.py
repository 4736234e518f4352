"""The one command-line entry point. Thin: parses arguments and calls library functions.

Each subcommand lives beside the code it drives and registers itself through a
`register(subparsers)` function, so importing the CLI does not import JAX for
commands that do not need it (the analysis commands run on a laptop without JAX).
"""
from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    from depthdelusion.analysis import commands as analysis_commands
    from depthdelusion import sweep_commands
    from depthdelusion.data import commands as data_commands
    from depthdelusion.train import commands as train_commands
    from depthdelusion.studies import commands as study_commands

    parser = argparse.ArgumentParser(
        prog="depthdelusion",
        description="Depth x width scaling-law training and analysis.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    train_commands.register(subparsers)
    data_commands.register(subparsers)
    analysis_commands.register(subparsers)
    sweep_commands.register(subparsers)
    study_commands.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as err:
        # Configuration and input errors: one clear line, no traceback.
        print(f"depthdelusion {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
