"""The command line: each command's function takes exactly its parser's arguments, an options
object's declared fields are flags of every command that takes it, the exit codes are in the
help. (That parsing lives only in depthdelusion/cli/, that the package has no import cycle and
that no --help imports JAX: tests/architecture/.)"""
import argparse
import dataclasses
import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from depthdelusion import cli, exit_codes

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "depthdelusion"


def _parsers() -> dict[str, argparse.ArgumentParser]:
    return cli.add_commands(argparse.ArgumentParser().add_subparsers())


def _function(target: str):
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("name,target", [(n, t) for n, t, _ in cli.COMMANDS])
def test_every_command_function_takes_exactly_its_parsers_arguments(name, target):
    # argparse has no public way to list a parser's options: its actions are read directly.
    # An option that belongs to an options object the function gets whole (``option_groups``,
    # e.g. FitOptions) is one of that object's fields.
    dests = {a.dest for a in _parsers()[name]._actions} - {"help"}
    function = _function(target)
    groups = getattr(function, "option_groups", {})
    fields = {f.name for options in groups.values() for f in dataclasses.fields(options)}
    parameters = {n: p for n, p in inspect.signature(function).parameters.items() if n not in groups}
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values()), target
    assert dests - fields == set(parameters), f"{name}: parser {sorted(dests)} vs {target} {sorted(parameters)}"
    required = {n for n, p in parameters.items() if p.default is inspect.Parameter.empty}
    parser_defaults = {a.dest for a in _parsers()[name]._actions
                       if a.default is not argparse.SUPPRESS or a.required}
    assert required <= parser_defaults, f"{name}: {sorted(required - parser_defaults)} has no value"



#: Commands that take an options object for a flag or two of it (cli/ adds those alone).
TAKE_A_FEW = {"sweep"}  # the closing report's --bootstrap, of FitOptions


def _commands_taking(options_type):
    return [name for name, target, _ in cli.COMMANDS if name not in TAKE_A_FEW
            and options_type in getattr(_function(target), "option_groups", {}).values()]


@pytest.mark.parametrize("options_name", ["FitOptions", "RowOptions"])
def test_a_declared_field_is_an_option_of_every_command_taking_its_options(monkeypatch, options_name):
    """A field added to FitOptions or RowOptions with its declaration (option_fields.option) is a
    flag, with its help, type and default, of every command that takes the object, and parses
    into the object: nothing in cli/ names it."""
    from depthdelusion import option_fields
    from depthdelusion.analysis.fitting import options

    original = getattr(options, options_name)
    extended = dataclasses.make_dataclass(
        options_name, [("trial_budget", int, option_fields.option(
            7, "trials per fit (a field no command names)", type=option_fields.POSITIVE, metavar="T"))],
        bases=(original,), frozen=True)
    commands = _commands_taking(original)  # before the patch: the command modules import the original
    assert commands, options_name
    monkeypatch.setattr(options, options_name, extended)
    parsers = _parsers()
    for name in commands:
        actions = {s: a for a in parsers[name]._actions for s in a.option_strings}
        assert "--trial-budget" in actions, f"{name} lacks --trial-budget"
        assert (actions["--trial-budget"].metavar, actions["--trial-budget"].default) == ("T", 7), name
        assert actions["--trial-budget"].help.startswith("trials per fit"), name
        with pytest.raises(SystemExit):  # the declared type refuses 0
            parsers[name].parse_args(["--trial-budget", "0"])
    argv = ["fit", "paper", "--trial-budget", "3"]
    monkeypatch.setitem(_function(dict((n, t) for n, t, _ in cli.COMMANDS)["fit"]).option_groups,
                        "rows" if options_name == "RowOptions" else "options", extended)
    _, run = cli.command(argv)
    group = run.keywords["rows" if options_name == "RowOptions" else "options"]
    assert isinstance(group, extended) and group.trial_budget == 3


def test_help_shows_the_declared_defaults():
    """The default in a declared option's help is the field's own (one place for both)."""
    from depthdelusion.analysis.fitting.options import FitOptions

    actions = {s: a for a in _parsers()["fit"]._actions for s in a.option_strings}
    for name in ("bootstrap", "seed", "loss", "outlier_threshold"):
        flag = "--" + name.replace("_", "-")
        default = getattr(FitOptions(), name)
        assert actions[flag].help.endswith(f"; default {default}"), flag
        assert actions[flag].default == default, flag

def test_a_command_reads_a_declared_option_as_its_declaration_says_for_that_command():
    """``Option.commands``: one command narrows the choices, changes the default and the help and
    drops the older spelling; every other command reads the option as declared."""
    from depthdelusion.cli.arguments import add_options
    from depthdelusion.option_fields import option

    @dataclasses.dataclass(frozen=True)
    class Toy:
        mode: str = option("a", "mode a, b or c", choices=("a", "b", "c"), deprecated=("--kind", {"x": "a"}),
                           commands={"narrow": dict(choices=("a", "b"), default="b", help="a or b", deprecated=None)})

    def actions(command):
        parser = argparse.ArgumentParser()
        add_options(parser, Toy, "toy", command=command)
        return {s: a for a in parser._actions for s in a.option_strings}

    narrow, other = actions("narrow"), actions("other")
    assert (narrow["--mode"].choices, narrow["--mode"].default, narrow["--mode"].help) == (("a", "b"), "b", "a or b; default b")
    assert "--kind" not in narrow
    assert (other["--mode"].choices, other["--mode"].default, other["--mode"].help) == (
        ("a", "b", "c"), "a", "mode a, b or c; default a")
    assert "--kind" in other


def test_set_and_out_are_defined_once_and_shared():
    source = "".join(path.read_text() for path in (ROOT / PACKAGE / "cli").glob("*.py"))
    assert source.count('"--set"') == 1 and source.count('"--out"') == 1
    parsers = _parsers()
    for name, target, _ in cli.COMMANDS:
        parameters = inspect.signature(_function(target)).parameters
        options = {s: a for a in parsers[name]._actions for s in a.option_strings}
        if "overrides" in parameters:
            assert isinstance(options["--set"], argparse._AppendAction), name
        if "out" in parameters:
            # a directory everywhere but `tables get --out FILE` (one CSV, as issue 50 names it)
            assert options["--out"].metavar == ("FILE" if name == "tables" else "DIR"), name


def test_help_lists_the_exit_codes(capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["--help"])
    assert exit.value.code == 0
    text = capsys.readouterr().out
    for code, words in ((exit_codes.OK, "done"), (exit_codes.FAILED, "the command ran and the answer is no"),
                        (exit_codes.USAGE, "bad command line"), (exit_codes.PREEMPTED, "preempted"),
                        (exit_codes.INTERRUPTED, "interrupted (Ctrl-C)"),
                        (exit_codes.BROKEN_PIPE, "the reader of standard output stopped")):
        assert f"  {code:<3} {words}" in text
    with pytest.raises(SystemExit) as exit:
        cli.main(["train", "--no-such-flag"])
    assert exit.value.code == exit_codes.USAGE


def test_output_cut_short_by_its_reader_ends_quietly(tmp_path):
    """`depthdelusion tables list | head`: the reader has gone before the listing is written; the
    command ends with SIGPIPE's shell code and no traceback (it printed a BrokenPipeError one)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        out = subprocess.run([sys.executable, "-m", "depthdelusion", "tables", "list"], stdout=write_end,
                             stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT,
                             env=dict(os.environ, DEPTHDELUSION_CACHE=str(tmp_path / "cache")))
    finally:
        os.close(write_end)
    assert out.returncode == exit_codes.BROKEN_PIPE, out.stderr
    assert out.stderr == "", out.stderr


@pytest.mark.parametrize("name", [n for n, _, _ in cli.COMMANDS])
def test_every_argument_of_every_command_has_help(name):
    # argparse has no public way to list a parser's options: its actions are read directly.
    bare = [a.option_strings[0] if a.option_strings else a.dest for a in _parsers()[name]._actions
            if not isinstance(a, argparse._HelpAction) and not a.help]
    assert not bare, f"{name}: no help text for {', '.join(bare)}"


@pytest.mark.parametrize("argv", [["train", "--out"], ["sweep", "experiments/tiny.yaml", "--out"],
                                  ["prepare-data", "builtin", "--out"]])
def test_training_commands_refuse_an_out_under_a_file_before_starting(tmp_path, capsys, argv):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file\n")
    out = str(blocker / "run")
    with pytest.raises(SystemExit) as exit:
        cli.main([*argv, out])
    stderr = capsys.readouterr().err
    assert exit.value.code == exit_codes.USAGE
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "--out" in stderr and out in stderr and "is a file, not a directory" in stderr


def test_a_usage_error_is_one_line_naming_the_flag(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(["sweep", "experiments/tiny.yaml", "--out", str(tmp_path), "--bootstrap", "-1"])
    stderr = capsys.readouterr().err
    assert exit.value.code == exit_codes.USAGE
    assert stderr.count("\n") == 1 and "argument --bootstrap: -1: must be an integer >= 0" in stderr


def test_a_regenerate_line_names_the_options_that_differ_from_their_declared_defaults(tmp_path):
    """The flags of a study's "Regenerate with" line come from its options' declaration: the
    fields not at their default, in declaration order (a switch bare, a repeatable option once per
    value), and the command line reads them back into the same options."""
    from depthdelusion.option_fields import command_words
    from depthdelusion.studies.data_exponent.options import DataExponentOptions, RidgeOptions
    from depthdelusion.studies.persistence.options import PersistenceOptions

    assert command_words(RidgeOptions()) == []
    ridge = RidgeOptions(noise=0.5, tokens=1000, seed=3)
    assert command_words(ridge) == ["--tokens", "1000", "--seed", "3", "--noise", "0.5"]
    assert command_words(DataExponentOptions(largest_only=True)) == ["--largest-only"]
    grids = PersistenceOptions(grid=["a.yaml", "b.yaml"], window=0.1)
    assert command_words(grids) == ["--window", "0.1", "--grid", "a.yaml", "--grid", "b.yaml"]
    for argv, options in ((["data-exponent-ridge", "RUN", "--out", str(tmp_path)], ridge),
                          (["persistence-study", "RUNS", "--out", str(tmp_path)], grids)):
        _, run = cli.command(argv + command_words(options))
        assert run.keywords["options"] == options, argv[0]


TOY_FOLDER = '''
from depthdelusion.studies.common.command import Argument, StudyCommand

COMMANDS = (StudyCommand("toy-study", "toy_studies.alpha.run:main", "a toy", "The toy study.",
                         inputs=(Argument("run", "a run directory", metavar="RUN"),), planned=True,
                         options="depthdelusion.studies.coord_check.options:CoordCheckOptions"),)
'''


def test_a_study_folder_adds_its_command_by_declaring_it(tmp_path, monkeypatch):
    """A folder's COMMANDS in its __init__.py is found (folders by name; one without COMMANDS adds
    none) and its parser built from the declaration: inputs, --out, a planned study's flags and
    the options object's declared flags, which are imported only when the arguments are defined."""
    for folder, text in (("zeta", TOY_FOLDER.replace("toy-study", "zeta-study")), ("alpha", TOY_FOLDER),
                         ("common", "")):
        (tmp_path / "toy_studies" / folder).mkdir(parents=True)
        (tmp_path / "toy_studies" / folder / "__init__.py").write_text(text)
    (tmp_path / "toy_studies" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    commands = cli.studies.declared_commands("toy_studies")
    assert [c.name for c in commands] == ["toy-study", "zeta-study"]
    parser = argparse.ArgumentParser()
    cli.studies.arguments(commands).define["toy-study"](parser)
    args = vars(parser.parse_args(["runs/r1", "--out", str(tmp_path / "o"), "--max-runs", "2",
                                   "--steps", "3"]))
    assert args["run"] == "runs/r1" and args["max_runs"] == 2 and not args["report_only"]
    assert args["steps"] == 3 and args["lr"] == 1e-2  # declared by CoordCheckOptions


def test_every_study_folder_declares_its_commands_and_they_are_listed_after_the_others():
    folders = {p.parent.name for p in (ROOT / PACKAGE / "studies").glob("*/__init__.py")} - {"common"}
    declaring = {target.split(".")[2] for _, target, _ in cli.COMMANDS if target.startswith("depthdelusion.studies.")}
    assert declaring == folders
    names = [name for name, *_ in cli.COMMANDS]
    assert names[-len(cli.studies.COMMANDS):] == [c.name for c in cli.studies.COMMANDS]
    assert len(set(names)) == len(names)
