"""Read an instance (a YAML or JSON file, or a mapping) into a validated, immutable spec of its kind.

Loading does, in order: parse the file; apply the caller's overrides (the
CLI's ``--preset``, ``--time-limit``, ... or ``optfleet.solve(..., key=value)``);
let the kind fill its defaults (the fleet's presets and hardware profiles,
merged *under* the user's values); validate with the kind's pydantic schema
(:mod:`optfleet.registry`).  Any problem becomes one
:class:`~optfleet.errors.InputError` naming the field path and the value.
Relative paths inside an instance resolve against the instance's folder.

Overrides are ``{field: value}``; a field is a dotted path into the document
(``"solve.time_limit_s"``; ``"solve__time_limit_s"`` from Python keywords),
or one of the kind's option names (``time_limit_s``, ``solver``) that it maps
to its own field.  ``None`` values are ignored.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from optfleet.errors import InputError
from optfleet.registry import kind as registered_kind


@dataclass(frozen=True)
class LoadedInstance:
    """A validated instance spec, its kind, the folder its relative paths resolve against, and the raw document
    (overrides and defaults applied) it was validated from."""

    spec: Any
    base_dir: Path
    document: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def kind(self) -> str:
        return self.spec.kind

    def resolve(self, relative: str) -> Path:
        path = Path(relative).expanduser()
        return path if path.is_absolute() else (self.base_dir / path).resolve()


def read_document(path: Path) -> dict[str, Any]:
    """Parse a YAML or JSON file into a mapping (JSON by ``.json`` suffix, YAML otherwise)."""
    if not path.is_file():
        raise InputError("instance", str(path), "file not found")
    text = path.read_text()
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise InputError("instance", str(path), f"malformed {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: {_first_line(exc)}") from None
    if not isinstance(data, dict):
        raise InputError("instance", str(path), "the top level must be a mapping of fields")
    return data


def load_instance(source: str | Path | Mapping[str, Any] | LoadedInstance, **overrides: Any) -> LoadedInstance:
    """Load and validate ``source`` (a file path, a document mapping or a loaded instance), with ``overrides``
    (module docstring).  A mapping's relative paths resolve against the working folder."""
    if isinstance(source, LoadedInstance):
        if not any(v is not None for v in overrides.values()):
            return source
        data, base_dir = copy.deepcopy(dict(source.document)), source.base_dir
    elif isinstance(source, Mapping):
        data, base_dir = copy.deepcopy(dict(source)), Path.cwd()
    else:
        path = Path(source)
        data, base_dir = read_document(path), path.resolve().parent
    kind = registered_kind(data.get("kind"))
    for name, value in overrides.items():
        if value is not None:
            _set_path(data, kind.overrides.get(name, name.replace("__", ".")), value)
    if kind.preprocess is not None:
        data = kind.preprocess(data)
    return LoadedInstance(spec=validate_spec(kind.schema, data), base_dir=base_dir, document=data)


def _set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``data[a][b]... = value`` for ``dotted = "a.b..."``, creating mappings on the way."""
    *parents, last = dotted.split(".")
    node = data
    for i, key in enumerate(parents):
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        if not isinstance(child, dict):
            raise InputError(".".join(parents[: i + 1]), child, f"cannot set {dotted}: this field is not a mapping")
        node = child
    node[last] = value


def validate_spec(schema: type[BaseModel], data: Mapping[str, Any]) -> Any:
    """Validate ``data``; the first pydantic error becomes an InputError with its field path."""
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "instance"
        value = error.get("input")
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            value, message = None, "required field is missing"
        raise InputError(where, value, message) from None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
