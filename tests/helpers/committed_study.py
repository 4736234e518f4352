"""A committed study (a folder under analysis/) regenerated in a temporary folder from its
committed inputs, its text files compared with the committed ones character for character: the
writers print only the digits the data support, so the same inputs give the same text on any
machine, and a difference is either a stale committed file or a number printed past its support."""
from __future__ import annotations

import contextlib
import difflib
import shutil
import subprocess
from pathlib import Path

from depthdelusion.cli import main
from text_compare import text_differences

ROOT = Path(__file__).resolve().parents[2]
def committed_copy(rel: str, dest: Path, *, from_git: bool = False) -> Path:
    """The folder `rel` (relative to the repository) copied to dest/rel; returns the copy.
    `from_git`: as the checkout's last commit (HEAD) has it, not the working tree, for a folder
    that a running job extends while the suite runs (depth_at_width's runs and report); the
    working tree's where this is not a git checkout."""
    if from_git and (ROOT / ".git").exists():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", "HEAD", "--", rel], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
        assert archive.wait() == 0, f"git archive HEAD -- {rel} failed"
    else:
        shutil.copytree(ROOT / rel, dest / rel)
    return dest / rel


def text_files(folder: Path) -> list[str]:
    """The generated text files of a study folder: its .md and .csv files, not its README."""
    return sorted(p.name for p in folder.iterdir() if p.suffix in (".md", ".csv") and p.name != "README.md")


def differences(committed: Path, fresh: Path, names: list[str]) -> list[str]:
    """Per file of `names` that differs: the first lines of its unified diff, committed →
    regenerated."""
    out = []
    for name in names:
        old, new = (committed / name).read_text(), (fresh / name).read_text()
        if old != new:
            diff = difflib.unified_diff(old.splitlines(), new.splitlines(), f"committed/{name}",
                                        f"regenerated/{name}", n=0, lineterm="")
            out.append("\n".join(list(diff)[:24]))
    return out


def regenerate_planned_study(rel: str, experiment: str, argv: list[str], tmp: Path, *,
                             from_git: bool = False, exact: bool = True) -> list[str]:
    """A planned study (depth-confound, depth-vs-size) regenerated with `argv` (its command with
    --report-only, relative paths as its report quotes them) in `tmp`, from the committed
    experiment file and runs; returns the differences of its text files from the committed ones
    (a file written or not written counts as one): character for character, or (``exact=False``,
    a study with fitted-law cells) number by number within :mod:`text_compare`'s tolerances,
    every word and decision exact."""
    committed = committed_copy(rel, tmp / "committed", from_git=from_git)
    (tmp / "experiments" / experiment).parent.mkdir(parents=True)  # experiment may be in a folder
    shutil.copy(ROOT / "experiments" / experiment, tmp / "experiments" / experiment)
    fresh = tmp / rel
    shutil.copytree(committed / "runs", fresh / "runs")
    with contextlib.chdir(tmp):
        assert main(argv) == 0
    names = text_files(committed)
    if text_files(fresh) != names:
        return [f"{rel}: regenerated {text_files(fresh)}, committed {names}"]
    if exact:
        return differences(committed, fresh, names)
    return [f"{name}: " + "\n".join(found[:10]) for name in names
            if (found := text_differences((committed / name).read_text(), (fresh / name).read_text(),
                                          csv_file=name.endswith(".csv"),
                                          interval_columns=("ci_lo", "ci_hi")))]
