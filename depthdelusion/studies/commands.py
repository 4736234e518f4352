"""CLI subcommands of the studies: `persistence-probe` and `persistence-study`."""
from __future__ import annotations


def register(subparsers) -> None:
    from depthdelusion.studies import persistence_probe, persistence_study

    persistence_probe.register(subparsers)
    persistence_study.register(subparsers)
