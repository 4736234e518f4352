"""Every command's options are declared once, beside the fields of the options objects its function
takes (`option_groups`): the parser has no other option with a default of its own (only the
inputs and outputs below, which have none), and the help shows each declared default."""
import argparse
import importlib
from pathlib import Path

import pytest

from depthdelusion.analysis.fitting.options import FitOptions, RowOptions
from depthdelusion.cli import COMMANDS, add_commands
from depthdelusion.option_fields import declared_options, flag

CLI = Path(__file__).resolve().parents[2] / "depthdelusion" / "cli"
#: written by hand in every command that has them: where it writes, run-config overrides, the
#: help, and --json, the form of the answer (a switch: nothing to declare but its help)
BY_HAND = {"--help", "--out", "--set", "--json"}
#: What a command reads or writes besides RUNS and --out, by hand: none has a default of its own
#: (each is None, off or empty unless given; checked below), so there is no default to declare.
INPUTS = {
    "report": {"--table"}, "isoflop": {"--table"},  # a published table instead of RUNS
    "fit": {"--table", "--pool"},  # ... and one to pool RUNS with
    "shape": {"--table", "--compute"},  # published tables (suites), and the budgets asked about
    "expansion-prediction": {"--runs"},  # the growth runs it reads
    "runs": {"--csv", "--mlflow-experiment", "--tracking-uri", "--wandb-dir"},  # its output; its sources
    "plan": {"--table"},  # the Markdown file it also writes
    "sky-jobs": {"--dir"},  # where the job files go (required)
    "laws": {"--columns"},  # what the listing shows, a switch like --json
}
#: The options objects that a command may take in part (cli/analysis.py's ``REPORT_WITHOUT``,
#: the sweep's ``--bootstrap``, ...): their other fields need not be on its parser.
TAKEN_IN_PART = {flag(f.name) for options in (FitOptions, RowOptions) for f, _ in declared_options(options)}
ALL_COMMANDS = [(name, target) for name, target, _ in COMMANDS]


def _parser(name: str) -> argparse.ArgumentParser:
    return add_commands(argparse.ArgumentParser().add_subparsers(), only=name)[name]


def _options_on(parser: argparse.ArgumentParser) -> dict:
    """{flag: action} of the parser's long options."""
    return {s: a for a in parser._actions for s in a.option_strings if s.startswith("--")}


def _declared(target: str, name: str) -> dict:
    """{flag: (field, Option as command ``name`` reads it, its default there)} of every options
    object the command's function takes."""
    module, function = target.split(":")
    groups = getattr(getattr(importlib.import_module(module), function), "option_groups", {})
    return {flag(field.name): (field, *declared.in_command(field, name)) for options in groups.values()
            for field, declared in declared_options(options)}


@pytest.mark.parametrize("name, target", ALL_COMMANDS, ids=[n for n, _ in ALL_COMMANDS])
def test_every_option_of_a_command_is_a_declared_field(name, target):
    declared, on_parser = _declared(target, name), _options_on(_parser(name))
    elsewhere = {option for command, option, _ in READ_OTHERWISE if command == name}  # checked below
    older = {d.deprecated[0] for _, d, _ in declared.values() if d.deprecated}  # e.g. --method for --loss
    inputs = INPUTS.get(name, set())
    by_hand = sorted(set(on_parser) - set(declared) - BY_HAND - inputs - elsewhere - older)
    assert not by_hand, f"{name}: options declared by hand, not by an options object's field: {by_hand}"
    assert inputs <= set(on_parser), f"{name}: INPUTS names options the command no longer has"
    for option in inputs | (BY_HAND & set(on_parser)) - {"--help"}:
        assert on_parser[option].default in (None, False, []), f"{name} {option}: a default by hand"
    missing = set(declared) - set(on_parser) - TAKEN_IN_PART
    assert not missing, f"{name}: declared options missing from the parser: {sorted(missing)}"
    for option in set(declared) & set(on_parser):
        field, _, default = declared[option]
        action = on_parser[option]
        assert (action.dest, action.default) == (field.name, default), f"{name} {option}"


@pytest.mark.parametrize("name, target", ALL_COMMANDS, ids=[n for n, _ in ALL_COMMANDS])
def test_the_help_of_a_command_shows_each_declared_default(name, target, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100000")  # one line per option: no wrapping inside its help
    parser = _parser(name)
    text, on_parser = parser.format_help(), _options_on(parser)
    for option, (_, declared, default) in _declared(target, name).items():
        if option in on_parser and default not in (None, "") and not isinstance(default, bool):
            assert f"{declared.help}; default {default}" in text, f"{name} {option}"


def test_report_options_are_declared_by_its_options_objects():
    """`report`'s --step, --groups, --params and --workers are ReportOptions' fields (declared there once,
    --params CountOptions' declaration taken; the default of the parser and of the function's
    options object the same), --no-figures
    FigureOptions', and report has no other option by hand than its inputs."""
    from depthdelusion.analysis.report.options import ReportOptions

    target = dict(ALL_COMMANDS)["report"]
    declared = _declared(target, "report")
    assert {flag(field.name) for field, _ in declared_options(ReportOptions)} == {"--step", "--groups", "--params",
                                                                                 "--workers"}
    on_parser = _options_on(_parser("report"))
    older = {d.deprecated[0] for _, d, _ in declared.values() if d.deprecated}  # e.g. --method for --loss
    assert sorted(set(on_parser) - set(declared) - older - BY_HAND) == ["--table"]
    for option in ("--step", "--groups", "--params"):
        field, _, _ = declared[option]
        assert (on_parser[option].dest, on_parser[option].default) == (field.name, field.default), option


#: The commands that read an option of an options object otherwise than it is declared (narrower
#: choices, another default or help): the option and the object that declares it.
READ_OTHERWISE = [("fit", "--params", "fitting.options:CountOptions"),
                  ("shape", "--params", "fitting.options:CountOptions"),
                  ("persistence", "--step", "report.options:ReportOptions"),
                  ("sweep", "--bootstrap", "fitting.options:FitOptions"),
                  ("report", "--loss", "fitting.options:FitOptions"),
                  ("report", "--workers", "report.options:ReportOptions"),
                  ("isoflop", "--loss", "fitting.options:FitOptions"),
                  ("shape", "--column", "fitting.options:RowOptions")]


@pytest.mark.parametrize("name, option, owner", READ_OTHERWISE, ids=[f"{n} {o}" for n, o, _ in READ_OTHERWISE])
def test_a_command_that_reads_a_declared_option_otherwise_says_so_beside_the_field(name, option, owner):
    """The flag, its help, choices and default in that command are the declaration's for that
    command (``Option.commands``), and no module of cli/ spells the flag: it is declared once."""
    module, options_type = owner.split(":")
    options = getattr(importlib.import_module(f"depthdelusion.analysis.{module}"), options_type)
    field, declared = {flag(f.name): (f, d) for f, d in declared_options(options)}[option]
    in_command, default = declared.in_command(field, name)
    action = _options_on(_parser(name))[option]
    assert action.help.split("; default ")[0] == in_command.help
    assert (action.dest, action.default, action.choices) == (field.name, default, in_command.choices)
    cli_source = "".join(path.read_text() for path in CLI.glob("*.py"))
    assert f'"{option}"' not in cli_source, f"{option} is spelled in cli/ beside its declaration"


#: Flags that two options objects take from one declaration (``option_fields.declared_in``): the
#: object that takes it, the one that declares it, and the command whose reading (default
#: included) the taker holds (None: the declaration's own).
TAKEN = [("depthdelusion.studies.redundancy.options:RedundancyOptions", "no_figures",
          "depthdelusion.analysis.report.options:FigureOptions", None),
         ("depthdelusion.studies.redundancy.options:RedundancyOptions", "report_only",
          "depthdelusion.studies.common.command:PlannedRunOptions", None),
         ("depthdelusion.analysis.command_options:FitCommandOptions", "params",
          "depthdelusion.analysis.fitting.options:CountOptions", "fit"),
         ("depthdelusion.analysis.report.options:ReportOptions", "params",
          "depthdelusion.analysis.fitting.options:CountOptions", None),
         ("depthdelusion.analysis.fitting.options:ShapeOptions", "params",
          "depthdelusion.analysis.fitting.options:CountOptions", "shape"),
         ("depthdelusion.analysis.command_options:PersistenceLengthOptions", "step",
          "depthdelusion.analysis.report.options:ReportOptions", "persistence")]


def _object(path: str):
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("taker, name, owner, command", TAKEN, ids=[f"{t.split(':')[1]}.{n}" for t, n, _, _ in TAKEN])
def test_a_flag_two_options_objects_take_is_declared_once(taker, name, owner, command):
    """The taking field's declaration is the owner's own (help, per-command readings), its
    default the owner's as the command reads it (`fit --params` leaves N as given: None, not
    report's "total"), and no module of cli/ spells the flag: `report --no-figures`, the planned
    studies' --report-only, redundancy-study's two, report's, fit's and shape's --params and
    persistence's --step are one declaration each."""
    taken = {f.name: (f, d) for f, d in declared_options(_object(taker))}[name]
    declared = {f.name: (f, d) for f, d in declared_options(_object(owner))}[name]
    assert taken[1] is declared[1]
    assert taken[0].default == declared[1].in_command(declared[0], command)[1]
    assert getattr(_object(taker)(), name) == taken[0].default
    assert f'"{flag(name)}"' not in "".join(path.read_text() for path in CLI.glob("*.py"))
