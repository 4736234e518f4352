"""The shape every study has, declared once per folder so a newcomer finds the same four things in
each: the spec type (a frozen dataclass: what the study measures, read from its experiment file
by `spec.load_spec` or from its flags by `spec.from_flags`), ``measure`` (spec, and what the
study needs beside it, to a frozen results object), ``sections`` (results to the report's
Markdown, computing nothing) and the command (the handler `depthdelusion.cli.COMMANDS` names).

Each study folder lists its studies as ``STUDIES`` in its ``declaration.py`` (and their commands
as ``COMMANDS`` in its ``__init__.py``: `common/command.py`);
tests/studies/common/test_study.py holds every study command of the CLI registry to this
protocol. cli.py never imports a declaration (a declaration imports its study, which may import
JAX), so ``depthdelusion --help`` stays free of JAX.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable, Generic, TypeVar

SpecT = TypeVar("SpecT")
ResultsT = TypeVar("ResultsT")


@dataclasses.dataclass(frozen=True)
class Study(Generic[SpecT, ResultsT]):
    """One study: the command's name, its spec and results types (the spec with a ``validate()``
    of its cross-field checks), and its three functions."""

    command: str  # its name in depthdelusion.cli.COMMANDS, e.g. "coord-check"
    spec_type: type[SpecT]
    results_type: type[ResultsT]
    measure: Callable[..., ResultsT]  # the spec first; e.g. the runs' directory or a log after it
    sections: Callable[[ResultsT], str | list[str]]
    handler: Callable[..., int]  # the command's function: flags to spec, measure, write, exit code

    def unmet(self, registered_handler: Callable[..., int]) -> list[str]:
        """What of the protocol this study does not meet (empty when it meets all of it), given
        the function the CLI registry runs for its command."""
        problems = [f"{self.command}: {name} is not a frozen dataclass"
                    for name, kind in (("spec type", self.spec_type), ("results type", self.results_type))
                    if not (dataclasses.is_dataclass(kind) and kind.__dataclass_params__.frozen)]
        problems += [f"{self.command}: {name} is not callable"
                     for name in ("measure", "sections") if not callable(getattr(self, name))]
        if not callable(getattr(self.spec_type, "validate", None)):  # spec.load_spec and from_flags call it
            problems.append(f"{self.command}: the spec type has no validate() (the cross-field "
                            "checks spec.load_spec and spec.from_flags run; `return None` when none)")
        if callable(self.measure) and _returns(self.measure) is not self.results_type:
            problems.append(f"{self.command}: measure is not annotated to return "
                            f"{getattr(self.results_type, '__name__', self.results_type)}")
        if self.handler is not registered_handler:
            problems.append(f"{self.command}: the handler is not the one the CLI registry runs "
                            f"({getattr(registered_handler, '__qualname__', registered_handler)})")
        return problems


def _returns(function: Callable) -> Any:
    """The return annotation of `function`, resolved (None when it has none)."""
    try:
        return typing.get_type_hints(function).get("return")
    except (NameError, TypeError):  # an annotation naming what the module does not define
        return None
