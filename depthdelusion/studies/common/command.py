"""A study's command, declared in its folder's ``__init__.py`` as ``COMMANDS`` (a tuple of
:class:`StudyCommand`): its name, the function that runs it, its help and its arguments, as data.

The command line (depthdelusion/cli/studies.py) finds every study folder's ``COMMANDS`` and builds
their parsers from them, so a new study adds its command without editing ``cli/``. A folder's
``__init__.py`` is imported to list the commands (``depthdelusion --help``), so it imports
nothing but this module; the options object is named as ``"module:Class"`` and imported only
when the command's own arguments are defined (its ``options.py``, which imports no JAX).
:class:`PlannedRunOptions` declares the planned studies' ``--max-runs`` and ``--report-only`` (``planned``).
"""
from __future__ import annotations

import dataclasses

from depthdelusion.option_fields import COUNT, FromArguments, option


@dataclasses.dataclass(frozen=True)
class Argument:
    """An input of the command: a positional argument (``name`` without dashes, e.g. "run") or
    a flag ("--runs"), with what argparse takes beside its name."""

    name: str
    help: str
    metavar: str | None = None
    nargs: str | None = None
    required: bool | None = None  # for a flag; a positional argument is always required

    def keywords(self) -> dict:
        """The keyword arguments of its ``add_argument`` (those it sets)."""
        return {key: value for key, value in (("help", self.help), ("metavar", self.metavar),
                                              ("nargs", self.nargs), ("required", self.required))
                if value is not None}


@dataclasses.dataclass(frozen=True)
class StudyCommand:
    """One command of a study folder; the parser shows its parts in this order: ``inputs``,
    ``--out``, ``--set``, the planned study's flags, then the options object's flags."""

    name: str  # e.g. "coord-check"
    target: str  # "module:function" that runs it, imported only when it runs
    help: str  # one line, in `depthdelusion --help`
    description: str  # the command's own --help
    inputs: tuple[Argument, ...] = ()
    out: str = "output directory"  # help of --out DIR
    out_required: bool = True
    overrides: str | None = None  # help of --set KEY=VALUE, when the command takes one
    planned: bool = False  # planned from its finished runs: PlannedRunOptions' --max-runs and --report-only
    options: str | None = None  # "module:Class" of the options object whose declared flags it takes


@dataclasses.dataclass(frozen=True)
class PlannedRunOptions(FromArguments):
    """What one invocation of a planned study does (``planned``): ``max_runs`` bounds the runs it
    trains (None: until its plan is done); ``report_only`` trains nothing and reports what
    finished; a study that trains nothing reads it as rewriting its report from what it wrote before."""

    max_runs: int | None = option(None, "train at most N runs this time", type=COUNT)
    report_only: bool = option(False, "train nothing; report what finished", commands={
        "redundancy-study": dict(help="rewrite report.md from the tables already in --out")})
