"""A command-line option declared once, next to the field of the options object it sets.

``field: int = option(0, "random seed ...", type=COUNT)`` puts the option's help, type, choices
and metavar (and how a command that narrows it reads it) in the dataclass field's metadata; the
field's name gives the flag (``--name-with-dashes``) and its default is the option's (a ``bool``
field defaulting to False is a switch). The command line (:mod:`depthdelusion.cli`) builds every
command that takes the options object from these declarations, and shows the default in the help
from the same place. Pure data and parsers that raise ValueError: no argparse here, so the
modules that own the options stay free of the command line.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

#: The key of a field's metadata that holds its :class:`Option`.
OPTION = "depthdelusion.option"


@dataclasses.dataclass(frozen=True)
class Option:
    """How one field appears on the command line (the flag is the field's name, dashed)."""

    help: str
    #: parses the text of the flag's value; raises ValueError whose message is the one-line error
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    #: the flag may be given several times; the field gets the list of values
    repeatable: bool = False
    #: an older spelling still accepted: (its flag, {its value: this option's value}), with a warning
    deprecated: tuple[str, dict[str, str]] | None = None
    #: how a command reads the option otherwise, declared here so that no command declares the
    #: flag again: {command: {"help": ..., "choices": ..., "deprecated": None, "default": ...}}
    #: (e.g. `report --loss` without the asymmetric loss, the sweep's own bootstrap count)
    commands: dict[str, dict] | None = None

    def in_command(self, field: dataclasses.Field, command: str | None) -> tuple[Option, Any]:
        """This option as ``command`` reads it, and its default there (the field's unless the
        command declares another)."""
        changes = dict((self.commands or {}).get(command, {}))
        default = changes.pop("default", field.default)
        return dataclasses.replace(self, commands=None, **changes), default


def option(default, help: str, **declaration) -> Any:
    """A dataclass field with ``default`` and its command-line :class:`Option` (keywords as there)."""
    return dataclasses.field(default=default, metadata={OPTION: Option(help=help, **declaration)})


def declared_in(options_type, name: str, command: str | None = None) -> Any:
    """A field of another options object that takes the option its field ``name`` declares: the
    same declaration (help, per-command readings), written once in ``options_type``, and its
    default as ``command`` reads it (the field's own without one), so that the object built
    without the flag holds what the parser gives. The field that takes it has the same name,
    so the same flag."""
    declared = {f.name: f for f in dataclasses.fields(options_type)}[name]
    _, default = declared.metadata[OPTION].in_command(declared, command)
    return dataclasses.field(default=default, metadata=declared.metadata)


def declared_options(options_type) -> list[tuple[dataclasses.Field, Option]]:
    """The fields of the dataclass ``options_type`` that declare an :class:`Option`, in order."""
    return [(f, f.metadata[OPTION]) for f in dataclasses.fields(options_type) if OPTION in f.metadata]


class FromArguments:
    """What an options object needs to be built by the command line: :meth:`from_arguments`."""

    @classmethod
    def from_arguments(cls, args: dict):
        """Take this object's fields out of a command's parsed arguments (``args`` loses them);
        a field the command line left out keeps its default."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{name: args.pop(name) for name in list(args) if name in names})


def command_words(options) -> list[str]:
    """The command-line words that give ``options`` (an options object): the flag and value of
    every declared field whose value is not its default, in declaration order; a switch is its
    flag alone, a repeatable option its flag before each value. For a report's "Regenerate
    with" line, so that it names the flags from their one declaration."""
    words = []
    for field, declared in declared_options(type(options)):
        value = getattr(options, field.name)
        if value == field.default:
            continue
        if isinstance(field.default, bool):
            words.append(flag(field.name))
            continue
        for item in (value if declared.repeatable else [value]):
            words += [flag(field.name), _text(item)]
    return words


def _text(value) -> str:
    """A value as the command line gives it: a float in its shortest exact form (1e-08, 0.5)."""
    if isinstance(value, float) and float(f"{value:g}") == value:
        return f"{value:g}"
    return str(value)


def flag(field_name: str) -> str:
    """The command-line flag of a field: ``drop_outliers`` -> ``--drop-outliers``."""
    return "--" + field_name.replace("_", "-")


def bounded(kind: type, minimum: float, inclusive: bool = True) -> Callable[[str], float]:
    """A parser of a number of ``kind`` (int or float) at least ``minimum`` (above it when not
    ``inclusive``); its ValueError says the valid range."""
    valid = f"{'an integer' if kind is int else 'a number'} {'>=' if inclusive else '>'} {minimum:g}"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise ValueError(f"{text!r} is not {valid}") from None
        if not (value >= minimum if inclusive else value > minimum) or value != value:
            raise ValueError(f"{text}: must be {valid}")
        return value
    parse.__name__ = kind.__name__
    return parse


COUNT = bounded(int, 0)  # a number of refits, replicates, a seed, ...: 0 or more
POSITIVE = bounded(int, 1)  # a number of starts, points, steps, ...: 1 or more
POSITIVE_FLOAT = bounded(float, 0.0, inclusive=False)

SEED_HELP = "random seed (an integer >= 0): the bootstrap's resamples and any other random draw"
