"""Where a command may write: checked before it computes anything, so no result is lost to an
unwritable path and no command writes over its own input.

Remote locations (``gs://``) are left to the writer: they cannot be checked without credentials
and a network round trip. Standard library only: the parser and the analysis both use it.
"""
from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Iterable


def unwritable(text: str, directory: bool = True) -> str | None:
    """Why the local path ``text`` cannot be written as a directory (or, with ``directory``
    False, as a file), or None when it can (or is remote)."""
    if "://" in text:
        return None
    if not text.strip():
        return "an empty path"
    path = Path(text)
    if path.exists():
        if directory and not path.is_dir():
            return f"{text} is a file, not a directory"
        if not directory and path.is_dir():
            return f"{text} is a directory, not a file"
        if not os.access(path, os.W_OK):
            return f"{text} is not writable"
        why = _cannot_write_in(path if directory else path.parent)
        return f"{text} is not writable ({why})" if why else None
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"cannot create {text}: {ancestor} is a file, not a directory"
    why = (None if os.access(ancestor, os.W_OK | os.X_OK) else "no permission") or _cannot_write_in(ancestor)
    return f"cannot create {text}: {ancestor} is not writable ({why})" if why else None


def _cannot_write_in(folder: Path) -> str | None:
    """Why no file can be made in ``folder``, found by making (and removing) one; None if it
    can. os.access says yes to root in /proc and on some read-only mounts: only trying tells."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".depthdelusion-probe-"):
            return None
    except OSError as err:
        return err.strerror or type(err).__name__


def refuse_own_inputs(flag: str, out: str | None, names: Iterable[str],
                      inputs: Iterable[str | None]) -> None:
    """ValueError when a file that ``out`` would receive (a name matching one of ``names``,
    glob patterns allowed, in ``out`` or in a folder of it, where a command writes per ``--by``
    value) is one of the input files."""
    if out is None or "://" in out:
        return
    out_dir = Path(out).resolve()
    names = tuple(names)
    for text in inputs:
        if text is None or "://" in str(text) or not Path(text).is_file():
            continue
        path = Path(text).resolve()
        if out_dir in path.parents[:2] and any(fnmatch.fnmatch(path.name, n) for n in names):
            raise ValueError(f"{flag} {out} would overwrite the input {text} ({path.name} is one of "
                             "the files written there); choose another output directory")


def refuse_input_as_output(flag: str, out: str | None, inputs: Iterable[str | None]) -> None:
    """ValueError when the output file ``out`` is one of the input files."""
    if out is None or "://" in out or not Path(out).exists():
        return
    for text in inputs:
        if text is not None and "://" not in str(text) and Path(text).exists() \
                and Path(text).resolve() == Path(out).resolve():
            raise ValueError(f"{flag} {out} is the input {text}: writing it would overwrite it; "
                             "choose another file")
