"""The study commands' parsers, built from what each study folder declares: ``COMMANDS`` in its
``__init__.py`` (:class:`depthdelusion.studies.common.command.StudyCommand`). The folders are
found by walking ``depthdelusion.studies`` (pkgutil), so a new study's command needs no edit
here. Listing them imports each folder's ``__init__.py`` alone (no JAX: it imports nothing but
the declaration's types); a command's options object (its ``options.py``) is imported only when
that command's arguments are defined, and the module that runs it only when it runs."""
from __future__ import annotations

import argparse
import functools
import importlib
import pkgutil

from depthdelusion.studies.common.command import PlannedRunOptions, StudyCommand

from .arguments import CommandArguments, add_options, add_out, add_set

STUDIES_PACKAGE = "depthdelusion.studies"


def declared_commands(package: str = STUDIES_PACKAGE) -> tuple[StudyCommand, ...]:
    """Every command the folders of ``package`` declare (their ``COMMANDS``), folders by name,
    each folder's in its own order; a folder without ``COMMANDS`` (``common``) adds none."""
    folders = sorted(m.name for m in pkgutil.iter_modules(importlib.import_module(package).__path__,
                                                          package + ".") if m.ispkg)
    return tuple(command for folder in folders
                 for command in getattr(importlib.import_module(folder), "COMMANDS", ()))


def define(p: argparse.ArgumentParser, command: StudyCommand) -> None:
    """The arguments of ``command``: its inputs, ``--out``, ``--set``, a planned study's flags,
    then every option its options object declares (its defaults shown in the help)."""
    for argument in command.inputs:
        p.add_argument(argument.name, **argument.keywords())
    add_out(p, command.out, required=command.out_required)
    if command.overrides:
        add_set(p, command.overrides)
    if command.planned:  # studies/common/planned_runs.py: trained a few runs at a time, then reported
        add_options(p, PlannedRunOptions, None, command=command.name)
    if command.options:
        module, name = command.options.split(":")
        add_options(p, getattr(importlib.import_module(module), name), "the study's options", command=command.name)


def arguments(commands: tuple[StudyCommand, ...]) -> CommandArguments:
    """The parsers' registry of ``commands``: each one's :func:`define` and description."""
    registry = CommandArguments()
    for command in commands:
        registry.command(command.name, command.description)(functools.partial(define, command=command))
    return registry


COMMANDS = declared_commands()
ARGUMENTS = arguments(COMMANDS)
