"""cli.COMMANDS names every command each module registers, so none is missing from the CLI."""
import argparse
import importlib

from depthdelusion.cli import COMMANDS


class Recorder:
    def __init__(self):
        self.names = []

    def add_parser(self, name, **kwargs):
        self.names.append(name)
        return argparse.ArgumentParser(prog=name)


def test_every_registered_command_has_a_row_and_every_row_a_command():
    for module in dict.fromkeys(m for _, m, _ in COMMANDS):
        recorder = Recorder()
        importlib.import_module(module).register(recorder)
        assert sorted(recorder.names) == sorted(n for n, m, _ in COMMANDS if m == module), module
