"""CLI subcommands of the analysis package (placeholder until the analysis package lands)."""


def register(subparsers) -> None:
    del subparsers
