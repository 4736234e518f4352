"""Every study command of the CLI registry is declared as a `Study` in its folder's
declaration.py and meets the protocol (studies/common/study.py): a frozen spec and results type,
measure annotated to return the results, sections callable, and the handler the registry runs."""
import dataclasses
import importlib
from pathlib import Path

import pytest

from depthdelusion import cli
from depthdelusion.studies.common.study import Study

STUDIES = Path(__file__).resolve().parents[3] / "depthdelusion" / "studies"
#: commands whose handler lives in a study folder but which are tools, not studies
TOOLS = {"expand": "grows a trained run's depth, or probes where to: no spec, measure or report"}
STUDY_COMMANDS = [(name, target) for name, target, _ in cli.COMMANDS
                  if target.startswith("depthdelusion.studies.") and name not in TOOLS]


def declared_studies(folder: str) -> tuple[Study, ...]:
    """The folder's STUDIES; none when it has no declaration.py."""
    name = f"depthdelusion.studies.{folder}.declaration"
    try:
        return importlib.import_module(name).STUDIES
    except ModuleNotFoundError as err:
        if err.name != name:
            raise
        return ()


def registered_handler(target: str):
    module, function = target.split(":")
    return getattr(importlib.import_module(module), function)


@pytest.mark.parametrize("name, target", STUDY_COMMANDS, ids=[n for n, _ in STUDY_COMMANDS])
def test_every_study_command_is_a_declared_study_that_meets_the_protocol(name, target):
    folder = target.split(":")[0].split(".")[2]
    study = next((s for s in declared_studies(folder) if s.command == name), None)
    assert study is not None, f"{name}: no Study in depthdelusion/studies/{folder}/declaration.py"
    assert study.unmet(registered_handler(target)) == []


def test_every_declared_study_is_a_command_of_the_registry():
    """Every folder's STUDIES, the folders that have no command yet included: a study whose
    folder does not declare its command (COMMANDS in its __init__.py) is not a command."""
    registered = {name for name, _ in STUDY_COMMANDS}
    folders = [p.parent.name for p in sorted(STUDIES.glob("*/declaration.py"))]
    declared = [s.command for folder in folders for s in declared_studies(folder)]
    assert sorted(declared) == sorted(registered)


@dataclasses.dataclass
class LooseSpec:  # not frozen
    x: int = 0


@dataclasses.dataclass(frozen=True)
class Results:
    x: int = 0


@dataclasses.dataclass(frozen=True)
class Spec:
    x: int = 0

    def validate(self) -> None:
        return None


def measure(spec: LooseSpec) -> Results:
    return Results(spec.x)


def unannotated_measure(spec):
    return Results(spec.x)


def handler() -> int:
    return 0


def test_a_study_that_misses_a_part_of_the_protocol_is_named_with_what_it_misses():
    study = Study(command="toy", spec_type=LooseSpec, results_type=Results, measure=measure,
                  sections=None, handler=handler)
    assert study.unmet(handler) == ["toy: spec type is not a frozen dataclass", "toy: sections is not callable",
                                    "toy: the spec type has no validate() (the cross-field checks "
                                    "spec.load_spec and spec.from_flags run; `return None` when none)"]
    assert dataclasses.replace(study, spec_type=Spec, sections=str, measure=unannotated_measure).unmet(
        registered_handler=measure) == ["toy: measure is not annotated to return Results",
                                        "toy: the handler is not the one the CLI registry runs (measure)"]
