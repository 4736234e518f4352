"""Each study command's options (and `shape`'s) are declared once, beside the fields of the options
object its function takes (`option_groups`): the parser has no other option with a default of its
own, and the help shows each declared default."""
import argparse
import importlib
from pathlib import Path

import pytest

from depthdelusion.cli import COMMANDS, add_commands
from depthdelusion.option_fields import declared_options, flag

CLI = Path(__file__).resolve().parents[2] / "depthdelusion" / "cli"
#: written by hand in every command that has them: where it writes, run-config overrides, the help
BY_HAND = {"--help", "--out", "--set"}
#: a command's inputs (what it reads, in what form it answers), which have no default to declare;
#: the planned studies' bound on one invocation (studies/common/planned_runs.py)
INPUTS = {"shape": {"--table", "--compute", "--json"}, "expansion-prediction": {"--runs"},
          "depth-confound": {"--max-runs"}, "depth-vs-size": {"--max-runs"}}
COMMANDS_WITH_OPTIONS = [(name, target) for name, target, _ in COMMANDS
                         if target.startswith("depthdelusion.studies.") or name == "shape"]


def _parser(name: str) -> argparse.ArgumentParser:
    return add_commands(argparse.ArgumentParser().add_subparsers(), only=name)[name]


def _declared(target: str) -> dict:
    """{flag: (field, Option)} of every options object the command's function takes."""
    module, function = target.split(":")
    groups = getattr(getattr(importlib.import_module(module), function), "option_groups", {})
    return {flag(field.name): (field, declared) for options in groups.values()
            for field, declared in declared_options(options)}


@pytest.mark.parametrize("name, target", COMMANDS_WITH_OPTIONS, ids=[n for n, _ in COMMANDS_WITH_OPTIONS])
def test_every_option_of_a_study_command_is_a_declared_field(name, target):
    declared = _declared(target)
    on_parser = {s: a for a in _parser(name)._actions for s in a.option_strings if s.startswith("--")}
    elsewhere = {option for command, option, _ in READ_OTHERWISE if command == name}  # checked below
    by_hand = sorted(set(on_parser) - set(declared) - BY_HAND - INPUTS.get(name, set()) - elsewhere)
    assert not by_hand, f"{name}: options declared by hand, not by an options object's field: {by_hand}"
    assert not set(declared) - set(on_parser), f"{name}: declared options missing from the parser"
    for option, (field, _) in declared.items():
        action = on_parser[option]
        assert (action.dest, action.default) == (field.name, field.default), f"{name} {option}"


@pytest.mark.parametrize("name, target", COMMANDS_WITH_OPTIONS, ids=[n for n, _ in COMMANDS_WITH_OPTIONS])
def test_the_help_of_a_study_command_shows_each_declared_default(name, target, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100000")  # one line per option: no wrapping inside its help
    text = _parser(name).format_help()
    for option, (field, declared) in _declared(target).items():
        if field.default not in (None, "") and not isinstance(field.default, bool):
            assert f"{declared.help}; default {field.default}" in text, f"{name} {option}"


def test_report_options_are_declared_by_its_options_objects():
    """`report`'s --step, --groups and --params are ReportOptions' fields (declared there once, the
    default of the parser and of the function's options object the same), --no-figures
    FigureOptions', and report has no other option by hand than its inputs."""
    from depthdelusion.analysis.report.options import ReportOptions

    target = dict((n, t) for n, t, _ in COMMANDS)["report"]
    declared = _declared(target)
    assert {flag(field.name) for field, _ in declared_options(ReportOptions)} == {"--step", "--groups", "--params"}
    on_parser = {s: a for a in _parser("report")._actions for s in a.option_strings if s.startswith("--")}
    older = {d.deprecated[0] for _, d in declared.values() if d.deprecated}  # e.g. --method for --loss
    assert sorted(set(on_parser) - set(declared) - older - BY_HAND) == ["--table"]
    for option in ("--step", "--groups", "--params"):
        field, _ = declared[option]
        assert (on_parser[option].dest, on_parser[option].default) == (field.name, field.default), option


#: The commands that read an option of an options object otherwise than it is declared (narrower
#: choices, another default or help): the option and the object that declares it.
READ_OTHERWISE = [("fit", "--params", "report.options:ReportOptions"),
                  ("persistence", "--step", "report.options:ReportOptions"),
                  ("sweep", "--bootstrap", "fitting.options:FitOptions"),
                  ("report", "--loss", "fitting.options:FitOptions"),
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
    action = {s: a for a in _parser(name)._actions for s in a.option_strings}[option]
    assert action.help.split("; default ")[0] == in_command.help
    assert (action.dest, action.default, action.choices) == (field.name, default, in_command.choices)
    cli_source = "".join(path.read_text() for path in CLI.glob("*.py"))
    assert f'"{option}"' not in cli_source, f"{option} is spelled in cli/ beside its declaration"


#: Flags that two options objects take from one declaration (``option_fields.declared_in``): the
#: object that takes it, and the one that declares it.
TAKEN = [("depthdelusion.studies.redundancy.options:RedundancyOptions", "no_figures",
          "depthdelusion.analysis.report.options:FigureOptions"),
         ("depthdelusion.studies.redundancy.options:RedundancyOptions", "report_only",
          "depthdelusion.studies.common.command:PlannedRunOptions")]


def _object(path: str):
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("taker, name, owner", TAKEN, ids=[f"{t.split(':')[1]}.{n}" for t, n, _ in TAKEN])
def test_a_flag_two_options_objects_take_is_declared_once(taker, name, owner):
    """The taking field's declaration is the owner's own (help, per-command readings, default), and
    no module of cli/ spells the flag: `report --no-figures`, the planned studies' --report-only and
    redundancy-study's two are one declaration each."""
    taken = {f.name: (f, d) for f, d in declared_options(_object(taker))}[name]
    declared = {f.name: (f, d) for f, d in declared_options(_object(owner))}[name]
    assert taken[1] is declared[1] and taken[0].default == declared[0].default
    assert f'"{flag(name)}"' not in "".join(path.read_text() for path in CLI.glob("*.py"))
