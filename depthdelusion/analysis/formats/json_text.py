"""JSON text as ``json.dumps(obj, indent=2, allow_nan=False)`` writes it, written in pieces.

A fit's JSON holds per-row dicts (residuals, robust z, leverage, Cook's distance): four dicts
of n entries each. With ``indent`` the standard library encodes in pure Python, which took
minutes and gigabytes (the whole text, then a parse and a second encoding) at millions of rows;
here each scalar is encoded by the C helpers the standard library's own encoder uses, and the
text goes to ``write`` a block of entries at a time. A per-row mapping handed over as
:class:`Rows` (names and one array) is written from the array, without the dict of n entries
that would otherwise be built only to be written.
"""
from __future__ import annotations

import math
from json.encoder import encode_basestring_ascii

import numpy as np

INDENT = "  "
_BLOCK = 65_536  # container entries per write


class Rows:
    """``{name: float(value)}`` over ``names`` and ``values`` (one float per name), for
    :func:`dump` to write as that dict would be written (a repeated name: where it first
    appears, with its last value) but from the array; ``as_dict()`` is that dict."""

    def __init__(self, names, values):
        self.names = names
        self.values = np.asarray(values, float)
        if len(self.names) != len(self.values):
            raise ValueError(f"{len(self.names)} names for {len(self.values)} values")
        self._repeated = None

    def as_dict(self) -> dict:
        return {n: float(v) for n, v in zip(self.names, self.values)}

    def __len__(self) -> int:
        return len(self.as_dict()) if self._repeats() else len(self.names)

    def _repeats(self) -> bool:
        if self._repeated is None:  # one look at millions of names, not one per question
            self._repeated = len(set(self.names)) != len(self.names)
        return self._repeated


def dumps(obj, *, null_nonfinite: bool = False) -> str:
    """The text of :func:`dump` as one string."""
    parts = []
    dump(obj, parts.append, null_nonfinite=null_nonfinite)
    return "".join(parts)


def dump(obj, write, *, null_nonfinite: bool = False) -> None:
    """Write ``obj`` (dicts, lists, tuples, str, numbers incl. numpy scalars, bool, None) as
    ``json.dumps(obj, indent=2, allow_nan=False)`` would (numpy scalars as the Python numbers
    they equal). A non-finite float is ``null`` with ``null_nonfinite`` (as
    :meth:`.FitResult.to_json` writes open interval ends), else a ValueError, as json's."""
    _write(obj, 0, write, null_nonfinite)


def _write(obj, level, write, null_nonfinite) -> None:
    if isinstance(obj, Rows) and obj._repeats():
        _write(obj.as_dict(), level, write, null_nonfinite)
    elif isinstance(obj, Rows) and not len(obj):
        write("{}")
    elif isinstance(obj, Rows):
        _rows(obj, level, write, null_nonfinite)
    elif isinstance(obj, dict):
        entries = [(_key(k), v) for k, v in obj.items()]
        _container(entries, "{", "}", level, write, null_nonfinite)
    elif isinstance(obj, (list, tuple)):
        _container([(None, v) for v in obj], "[", "]", level, write, null_nonfinite)
    else:
        write(_scalar(obj, null_nonfinite))


def _container(entries, opening, closing, level, write, null_nonfinite) -> None:
    if not entries:
        write(opening + closing)
        return
    pad = "\n" + INDENT * (level + 1)
    write(opening)
    for a in range(0, len(entries), _BLOCK):
        text = []
        for i, (key, value) in enumerate(entries[a:a + _BLOCK], start=a):
            head = ("," if i else "") + pad + ("" if key is None else key + ": ")
            if isinstance(value, (dict, list, tuple, Rows)) and len(value):
                write("".join(text) + head)
                text = []
                _write(value, level + 1, write, null_nonfinite)
            elif type(value) is float and value - value == 0.0:  # the per-row numbers: fast
                text.append(head + float.__repr__(value))
            elif isinstance(value, (dict, list, tuple, Rows)):
                text.append(head + ("[]" if isinstance(value, (list, tuple)) else "{}"))
            else:
                text.append(head + _scalar(value, null_nonfinite))
        write("".join(text))
    write("\n" + INDENT * level + closing)


def _rows(rows: Rows, level, write, null_nonfinite) -> None:
    """``rows`` (distinct names, at least one) as :func:`_container` writes their dict."""
    pad = "\n" + INDENT * (level + 1)
    write("{")
    for a in range(0, len(rows.names), _BLOCK):
        values = rows.values[a:a + _BLOCK]
        finite = np.isfinite(values).tolist()
        text = [("," if a + i else "") + pad + _key(name) + ": "
                + (float.__repr__(value) if ok else _scalar(value, null_nonfinite))
                for i, (name, value, ok) in enumerate(zip(rows.names[a:a + _BLOCK], values.tolist(), finite))]
        write("".join(text))
    write("\n" + INDENT * level + "}")


def _key(key) -> str:
    """A dict key as json writes it: str as is, numbers, bool and None as their JSON text."""
    if isinstance(key, str):
        return encode_basestring_ascii(key)
    if isinstance(key, (bool, np.bool_)) or key is None or isinstance(key, (int, float, np.number)):
        return encode_basestring_ascii(_scalar(key, False))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _scalar(value, null_nonfinite) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return int.__repr__(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isfinite(value):
            return float.__repr__(value)
        if null_nonfinite:
            return "null"
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
