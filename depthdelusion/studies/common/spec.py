"""A study's spec: its experiment file (YAML) read into a frozen dataclass by one loader for every
study, with the field checks of run configs (`depthdelusion.config`: `coerce_value` for a
field's type, `check_bounds` for the range declared with `bounded`). An unknown key, a missing
one, a value of the wrong type or out of its range is a ValueError naming the file, the field,
what would be valid and the field's line (the CLI prints it as one line and exits 2). The
spec's own ``validate()`` then checks what spans fields (an lr grid's spacing, a depth that must
be one of the depths) and may fill the fields derived from the others (``init=False``).

Field types: the scalars and Literals of run configs, ``list[...]`` of them (kept as lists, the
values the studies always used), nested frozen dataclasses (a YAML mapping), ``list`` of
those, and ``dict`` for a mapping passed on whole (a run config, checked by the spec's
``validate()`` through `config.from_dict`)."""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any, TypeVar, get_args, get_origin

import yaml

from depthdelusion.config import bounded, check_bounds, coerce_value, from_dict, parse_scalar, read_yaml

Spec = TypeVar("Spec")


class SpecError(ValueError):
    """A bad field of a spec: the message, and the dotted field at fault (``lrs[1]``,
    ``iso_flop.width``; "" when no one field is) that `load_spec` finds the line of."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.field = field


def load_spec(spec_type: type[Spec], path: str | Path) -> Spec:
    """The study spec `spec_type` in the YAML file at `path`, every field checked, then its
    ``validate()``; every error one line starting with the file, ending with the line of the
    field at fault where there is one."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"experiment file not found: {path}")
    try:
        spec = from_mapping(spec_type, read_yaml(path), "")
        spec.validate()
    except ValueError as err:
        text = str(err)
        line = _line_of(path, getattr(err, "field", ""))
        text = text if text.startswith(str(path)) else f"{path}: {text}"
        raise ValueError(text + (f" (line {line})" if line else "")) from None
    return spec


def _line_of(path: Path, field: str) -> int | None:
    """The line (from 1) where `field` (dotted, with [i] for list items) is written in the YAML
    file, or where the nearest field above it is; None when it is not there."""
    if not field:
        return None
    node, line = yaml.compose(path.read_text()), None
    for part in field.replace("[", ".[").split("."):
        if isinstance(node, yaml.MappingNode):
            key, node = next(((k, v) for k, v in node.value if k.value == part), (None, None))
            line = key.start_mark.line + 1 if key is not None else line
        elif isinstance(node, yaml.SequenceNode) and part.startswith("[") and int(part[1:-1]) < len(node.value):
            node = node.value[int(part[1:-1])]
            line = node.start_mark.line + 1
        else:
            node = None
        if node is None:
            break
    return line


def _keys(spec_type: type) -> tuple[list[str], list[str]]:
    """(every key the file may give, the ones it must give)."""
    fields = [f for f in dataclasses.fields(spec_type) if f.init]
    required = [f.name for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    return [f.name for f in fields], required


def from_mapping(spec_type: type[Spec], raw: Any, where: str) -> Spec:
    """`spec_type` from a YAML mapping; `where` is the dotted field it sits at ("" at the top)."""
    keys, required = _keys(spec_type)
    at = f"{where}: " if where else ""
    if not isinstance(raw, dict):
        raise SpecError(f"{at}expected a mapping with keys {', '.join(keys)}, got {raw!r}", where)
    unknown = sorted(str(k) for k in set(raw) - set(keys))
    if unknown:
        raise SpecError(f"{at}unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                        f"valid keys are {', '.join(keys)}", f"{where}.{unknown[0]}" if where else unknown[0])
    missing = [k for k in required if k not in raw]
    if missing:
        raise ValueError(f"{at}missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                         f"(needs {', '.join(required)})")
    hints = typing.get_type_hints(spec_type)
    prefix = f"{where}." if where else ""
    spec = spec_type(**{k: field_value(f"{prefix}{k}", hints[k], raw[k]) for k in keys if k in raw})
    try:
        check_bounds(spec, where)
    except ValueError as err:  # its message starts with the field: "iso_flop.width=0: ..."
        raise SpecError(str(err), str(err).split("=", 1)[0]) from None
    return spec


def field_value(where: str, annotation: Any, value: Any) -> Any:
    """`value` checked against a spec field's annotation (see the module's docstring)."""
    if dataclasses.is_dataclass(annotation):
        return from_mapping(annotation, value, where)
    origin = get_origin(annotation)
    if annotation is dict or origin is dict:
        if not isinstance(value, dict):
            raise SpecError(f"{where}={value!r}: must be a mapping (key: value)", where)
        return value
    if origin is list:
        (item,) = get_args(annotation)
        if not isinstance(value, list):
            raise SpecError(f"{where}={value!r}: must be a list, e.g. [a, b]", where)
        return [field_value(f"{where}[{i}]", item, v) for i, v in enumerate(value)]
    try:
        return coerce_value(where, annotation, value)
    except ValueError as err:
        raise SpecError(str(err), where) from None


def required(**bounds) -> Any:
    """A field the file must give, valid in the range `bounds` (config.bounded's ge, gt, le, lt)."""
    return bounded(dataclasses.MISSING, **bounds)


def check_run_config(raw: dict, where: str = "base") -> None:
    """A run config inside a spec (`where`: its field), checked as a run's config is
    (`config.from_dict`, then `Config.validate`) before the study trains its first run."""
    try:
        from_dict(raw, where).validate()
    except ValueError as err:
        text = str(err)
        raise SpecError(text if text.startswith(where) else f"{where}: {text}", where) from None


def spec_error(where: str, value: Any, valid: str) -> SpecError:
    """A spec's own check failed: FIELD=VALUE and what would be valid (the loader adds the file
    and the line)."""
    return SpecError(f"{where}={value!r}: {valid}", where)


def from_flags(spec_type: type[Spec], values: dict, flags: dict[str, str] | None = None) -> Spec:
    """The spec `spec_type` from a command's flag values (keyed by field), with the loader's field
    checks and the spec's ``validate()``; an error is one line starting with the flag at fault
    (``--seeds=0: must be a positive integer``). Field FIELD_NAME is flag --field-name unless
    `flags` names it otherwise (``{"parametrizations": "--parametrization"}``)."""
    try:
        spec = from_mapping(spec_type, values, "")
        spec.validate()
    except ValueError as err:
        text, field = str(err), getattr(err, "field", "")
        top = field.split(".")[0].split("[")[0]
        if top and text.startswith(top):
            flag = (flags or {}).get(top, "--" + top.replace("_", "-"))
            text = flag + text[len(top):]
        raise ValueError(text) from None
    return spec


def comma_separated(text: Any) -> list:
    """A list flag's value (``64,128``): its items, each a YAML scalar as ``--set`` reads it, for
    `from_flags` to check against the field's item type."""
    return [parse_scalar(v) for v in str(text).split(",") if v.strip()]
