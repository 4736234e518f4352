"""The code version a run records: the git commit of the checkout the package runs from
(with ``+dirty`` when it has uncommitted changes), else the installed package's version."""
from __future__ import annotations

import functools
import subprocess
from importlib import metadata
from pathlib import Path


@functools.cache
def code_version() -> str:
    """``git:SHA[+dirty]`` inside a git checkout, else ``depthdelusion==X.Y.Z`` (or
    ``unknown``). Looked up once per process: git is not asked again at every run."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
        if sha:
            return f"git:{sha}" + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass  # no git, or not a checkout (an installed wheel): the package version says it
    try:
        return f"depthdelusion=={metadata.version('depthdelusion')}"
    except metadata.PackageNotFoundError:
        return "unknown"
