"""The test environment is reproducible: the committed lock (constraints.txt) pins every
requirement of pyproject.toml that CI installs, at versions pyproject.toml allows, and every
extra that the docs, error messages or scripts tell users to install exists."""
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
LOCK = ROOT / "constraints.txt"
# what tells a user to install an extra: pip install -e ".[NAMES]" or depthdelusion[NAME] (a
# comma-separated list of lower-case names)
EXTRA_MENTION = re.compile(r"(?:\.|depthdelusion)\[([a-z0-9_,-]+)\]")
WHERE_EXTRAS_ARE_NAMED = ["README.md", ".ci/run", "pyproject.toml", "docs/**/*.md", "analysis/**/*.md",
                          "experiments/**/*", "tpu/**/*", "depthdelusion/**/*.py", "tests/**/*.py",
                          "benchmarks/**/*"]


SKY_LOCK = ROOT / "constraints-skypilot.txt"  # .ci/run's SkyPilot environment


def lock_pins(lock: Path = LOCK) -> dict[str, list[Version]]:
    """{package: the versions the lock pins} (several where a pin depends on the Python version)."""
    pins: dict[str, list[Version]] = {}
    for number, line in enumerate(lock.read_text().splitlines(), 1):
        if not line or line[0] in " #":
            continue
        requirement = Requirement(line)
        (spec,) = requirement.specifier  # a lock line pins exactly one version
        assert spec.operator == "==", f"{lock.name}:{number}: not a pin: {line!r}"
        pins.setdefault(canonicalize_name(requirement.name), []).append(Version(spec.version))
    return pins


def lock_extras() -> set[str]:
    """The extras the lock was compiled for, read from the command uv wrote at its top."""
    header = LOCK.read_text().splitlines()[1]
    assert "uv pip compile pyproject.toml" in header, header
    return set(re.findall(r"--extra (\S+)", header))


def installed_extras(text: str) -> set[str]:
    """The extras of the one install of this checkout with extras; every install of it (but the
    analysis-only --no-deps one) goes through the lock."""
    lines = text.replace("\\\n", " ").splitlines()  # a command continued with \ is one line
    installs = [line for line in lines if re.match(r"python3 -m (uv )?pip install .*-e \"?\.", line)
                and "--no-deps" not in line]
    for install in installs:
        assert "-c constraints.txt" in install, f"installs without the lock: {install!r}"
    (extras,) = [EXTRA_MENTION.search(line).group(1) for line in installs if EXTRA_MENTION.search(line)]
    return set(extras.split(","))


def locked_requirements() -> list[Requirement]:
    optional = PYPROJECT["project"]["optional-dependencies"]
    names = PYPROJECT["project"]["dependencies"] + [r for extra in lock_extras() for r in optional[extra]]
    return [Requirement(r) for r in names]


def test_ci_and_the_readme_install_the_same_extras_through_the_lock():
    ci = installed_extras((ROOT / ".ci/run").read_text())
    readme = installed_extras((ROOT / "README.md").read_text())
    assert ci == readme
    assert ci <= lock_extras(), f"the lock was not compiled for the extras {ci - lock_extras()}"


def test_the_lock_pins_every_requirement_at_a_version_pyproject_allows():
    pins = lock_pins()
    for requirement in locked_requirements():
        versions = pins.get(canonicalize_name(requirement.name))
        assert versions, f"{requirement} (pyproject.toml) has no pin in constraints.txt"
        for version in versions:
            assert requirement.specifier.contains(version, prereleases=True), (
                f"constraints.txt pins {requirement.name}=={version}, outside pyproject.toml's "
                f"{requirement}: re-lock with the command at the top of constraints.txt")


def test_the_skypilot_lock_pins_its_extra_at_versions_pyproject_allows():
    """.ci/run installs the skypilot-check extra through constraints-skypilot.txt, compiled for it."""
    header = SKY_LOCK.read_text().splitlines()[1]
    assert re.findall(r"--extra (\S+)", header) == ["skypilot-check"], header
    assert '-e ".[skypilot-check]" -c constraints-skypilot.txt' in (ROOT / ".ci/run").read_text()
    pins = lock_pins(SKY_LOCK)
    wanted = PYPROJECT["project"]["dependencies"] + PYPROJECT["project"]["optional-dependencies"]["skypilot-check"]
    for requirement in map(Requirement, wanted):
        versions = pins.get(canonicalize_name(requirement.name))
        assert versions and all(requirement.specifier.contains(v, prereleases=True) for v in versions), (
            f"{SKY_LOCK.name} pins {requirement.name} at {versions}, pyproject.toml asks {requirement}: "
            "re-lock with the command at its top")


def test_the_lock_has_no_direct_requirement_that_pyproject_dropped():
    direct = {canonicalize_name(r.name) for r in locked_requirements()}
    pinned_for_pyproject, name = set(), None
    for line in LOCK.read_text().splitlines():  # a pin, then its "# via ..." lines
        if line and line[0] not in " #":
            name = canonicalize_name(Requirement(line).name)
        elif "depthdelusion (pyproject.toml)" in line:
            pinned_for_pyproject.add(name)
    assert pinned_for_pyproject - direct == set(), "constraints.txt pins these for pyproject.toml, which no " \
        "longer asks for them: re-lock with the command at the top of constraints.txt"
    assert direct <= pinned_for_pyproject


def test_every_extra_named_in_the_docs_scripts_and_messages_exists():
    defined = set(PYPROJECT["project"]["optional-dependencies"])
    for pattern in WHERE_EXTRAS_ARE_NAMED:
        for path in sorted(ROOT.glob(pattern)):
            if not path.is_file() or path.suffix in {".png", ".pdf", ".csv", ".jsonl"}:
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                for match in EXTRA_MENTION.finditer(line):
                    for extra in match.group(1).split(","):
                        assert extra in defined, (f"{path.relative_to(ROOT)}:{number} names the extra "
                                                  f"{extra!r}; pyproject.toml defines {sorted(defined)}")


def test_the_tpu_workers_lock_pins_what_the_suite_ran_with():
    tested = {name: versions for name, versions in lock_pins().items() if len(versions) == 1}
    workers = {canonicalize_name(Requirement(line.split("#")[0]).name): line.split("#")[0].strip()
               for line in (ROOT / "tpu/constraints.txt").read_text().splitlines() if line and line[0] != "#"}
    for name, line in workers.items():
        version = Version(line.split("==")[1])
        assert name not in tested or tested[name] == [version], (
            f"tpu/constraints.txt pins {line}, the tested lock {name}=={tested[name][0]}: regenerate it "
            "with the command at its top")
