"""Read an instance file (YAML or JSON) into a validated, immutable spec.

Loading does, in order: parse the file; merge the named preset and hardware
profile *under* the user's values (the file always wins); validate with the
pydantic schema of the instance's ``kind``.  Any problem becomes one
:class:`~optfleet.errors.InputError` naming the field path and the value.
Relative paths inside an instance resolve against the instance's folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from optfleet.errors import InputError
from optfleet.instance.caching_schema import CachingInstanceSpec
from optfleet.instance.fleet_schema import FleetInstanceSpec
from optfleet.instance.profiled_schema import ProfiledFleetSpec
from optfleet.instance.presets import apply_defaults

InstanceSpec = FleetInstanceSpec | CachingInstanceSpec | ProfiledFleetSpec
SCHEMAS: dict[str, type[InstanceSpec]] = {"fleet": FleetInstanceSpec, "caching": CachingInstanceSpec, "profiled_fleet": ProfiledFleetSpec}


@dataclass(frozen=True)
class LoadedInstance:
    """A validated instance spec and the folder its relative paths resolve against."""

    spec: InstanceSpec
    base_dir: Path

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


def load_instance(path: str | Path, preset: str | None = None) -> LoadedInstance:
    """Load and validate ``path``; ``preset`` (if given) replaces the file's ``preset`` field."""
    path = Path(path)
    data = read_document(path)
    kind = data.get("kind")
    if kind not in SCHEMAS:
        raise InputError("kind", kind, f"unknown instance kind; known: {', '.join(SCHEMAS)}")
    if preset is not None:
        data = {**data, "preset": preset}
    if kind == "fleet":  # presets and hardware profiles are fleet vocabulary
        data = apply_defaults(data)
    return LoadedInstance(spec=validate_spec(SCHEMAS[kind], data), base_dir=path.resolve().parent)


def validate_spec(schema: type[InstanceSpec], data: dict[str, Any]) -> InstanceSpec:
    """Validate ``data``; the first pydantic error becomes an InputError with its field path."""
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "instance"
        value = error.get("input")
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            value, message = None, "required field is missing"
        raise InputError(field, value, message) from None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
