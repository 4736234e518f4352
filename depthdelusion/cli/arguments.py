"""What the commands' parsers share: the registry of each command's argument function, the one
``--set`` and ``--out``, argparse types that refuse bad values at parse time, and the options a
command takes from an options object's own declaration (:func:`add_options`)."""
from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Callable

from depthdelusion import option_fields
from depthdelusion.outputs import unwritable

RUNS_HELP = ("a directory of run directories (searched for summary.json), a CSV with the columns "
             "the law needs (params,loss; params,tokens,loss; depth,width,params[,tokens],loss; "
             "aliases: `depthdelusion laws --columns`), or 'paper' for the bundled data of the "
             "Depth Delusion paper")


class CommandArguments:
    """The functions that define a group of commands' arguments, by command name, and their long
    descriptions: ``@ARGUMENTS.command("fit", "Fit a law ...")`` above ``def _fit(p): ...``."""

    def __init__(self):
        self.define: dict[str, Callable[[argparse.ArgumentParser], None]] = {}
        self.descriptions: dict[str, str] = {}

    def command(self, name: str, description: str | None = None):
        def register(define):
            self.define[name] = define
            if description:
                self.descriptions[name] = description
            return define
        return register


def add_set(parser: argparse.ArgumentParser, help: str = "override a config field by its dotted "
            "path, e.g. --set model.depth=24 (repeatable)") -> None:
    """The one ``--set KEY=VALUE`` option (repeatable; the function gets ``overrides``)."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help=help)


def add_out(parser: argparse.ArgumentParser, help: str = "output directory", required: bool = True,
            metavar: str = "DIR") -> None:
    """The one ``--out`` option, a directory (``DIR``) or a file (``FILE``); the function gets
    ``out``, None when optional and absent. Refused at parse time, before any work, when it
    cannot be written."""
    parser.add_argument("--out", required=required, metavar=metavar, help=help,
                        type=writable_path(directory=metavar == "DIR"))


def writable_path(directory: bool = True) -> Callable[[str], str]:
    """An argparse ``type`` accepting a path a command can write: a directory (or a file) that
    exists and is writable, or one that can be created (its nearest existing ancestor is a
    writable directory). Remote paths (gs://) are the writer's to check."""
    def parse(text: str) -> str:
        why = unwritable(text, directory=directory)
        if why:
            raise argparse.ArgumentTypeError(f"{why}; give a {'directory' if directory else 'file'} "
                                             "path that can be written")
        return text
    parse.__name__ = "directory" if directory else "file"
    return parse


def argument_type(parse: Callable[[str], object]) -> Callable[[str], object]:
    """An argparse ``type`` from a parser that raises ValueError (:mod:`depthdelusion.option_fields`):
    its message becomes the usage error, as it is."""
    def checked(text: str):
        try:
            return parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    checked.__name__ = parse.__name__
    return checked


POSITIVE_FLOAT = argument_type(option_fields.POSITIVE_FLOAT)  # shape's --compute, an input


class DeprecatedSpelling(argparse.Action):
    """An older flag of a declared option (``Option.deprecated``): sets the option's value from
    the old one and says so on stderr."""

    def __init__(self, option_strings, dest, renamed: dict[str, str], new_flag: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.renamed, self.new_flag = renamed, new_flag

    def __call__(self, parser, namespace, value, option_string=None):
        new = self.renamed[value]
        print(f"{parser.prog}: warning: {option_string} {value} is deprecated; it is {self.new_flag} {new}",
              file=sys.stderr)
        setattr(namespace, self.dest, new)


def add_options(parser: argparse.ArgumentParser, options_type, title: str | None, *, command: str | None = None,
                without=(), only=None) -> None:
    """Every option the dataclass ``options_type`` declares (``option_fields.option``), in a
    group of the help named ``title`` (None: the command's own options), except the fields named
    in ``without`` (or those alone named in ``only``), each as ``command`` reads it
    (``Option.commands``: narrower choices, another default or help). The parsed value of each
    is under the field's name, its default shown in the help, so that
    ``options_type.from_arguments`` builds the object."""
    group = parser if title is None else parser.add_argument_group(title)
    for field, declared in option_fields.declared_options(options_type):
        if field.name not in without and (only is None or field.name in only):
            _add_declared(group, field, *declared.in_command(field, command))


def _add_declared(group, field: dataclasses.Field, declared: option_fields.Option, default) -> None:
    name = option_fields.flag(field.name)
    shown = default not in (None, "") and not isinstance(default, bool)  # nothing to show
    kwargs = dict(dest=field.name, default=default,
                  help=f"{declared.help}; default {default}" if shown else declared.help)
    if isinstance(default, bool):
        kwargs["action"] = "store_true"
    else:
        kwargs.update(metavar=declared.metavar, choices=declared.choices,
                      type=argument_type(declared.type) if declared.type else None)
        if declared.repeatable:
            kwargs["action"] = "append"
    if declared.deprecated is None:
        group.add_argument(name, **kwargs)
        return
    exclusive = group.add_mutually_exclusive_group()
    exclusive.add_argument(name, **kwargs)
    old, renamed = declared.deprecated
    exclusive.add_argument(old, choices=tuple(renamed), action=DeprecatedSpelling, dest=field.name,
                           renamed=renamed, new_flag=name, default=argparse.SUPPRESS,
                           help=f"deprecated: the older spelling of {name} ("
                           + ", ".join(f"{a} = {b}" for a, b in renamed.items()) + ")")
