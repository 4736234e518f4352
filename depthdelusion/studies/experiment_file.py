"""A study's experiment file, read one way for every study: a YAML mapping (``yaml.safe_load``)
with every required key and no unknown one; each study then checks its own values."""
from __future__ import annotations

from pathlib import Path
from typing import Any


def read_experiment(path: str | Path, keys: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """A study's experiment file: a YAML mapping with every one of `keys` and nothing but `keys`
    and `optional` (an error names the keys missing or unknown)."""
    from depthdelusion.config import read_yaml

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"experiment file not found: {path}")
    raw = read_yaml(path) or {}
    missing = [k for k in keys if k not in raw]
    if missing:
        raise ValueError(f"{path}: missing keys {', '.join(missing)} (needs {', '.join(keys)})")
    unknown = sorted(set(raw) - set(keys) - set(optional))
    if unknown:
        raise ValueError(f"{path}: unknown keys {', '.join(unknown)}; valid keys are "
                         f"{', '.join(keys + optional)}")
    return raw
