"""Read an instance (a YAML or JSON file, or a mapping) into a validated, immutable spec of its kind.

Loading does, in order: parse the file; apply the caller's overrides (the
CLI's ``--preset``, ``--time-limit``, ... or ``optfleet.solve(..., key=value)``);
let the kind fill its defaults (the fleet's presets and hardware profiles,
merged *under* the user's values); validate with the kind's pydantic schema
(:mod:`optfleet.registry`).  Any problem becomes one
:class:`~optfleet.errors.InputError` naming the field path and the value.
Relative paths inside an instance resolve against the instance's folder; a file field may name a public dataset
instead, ``dataset:NAME[/PART]`` (optfleet.instance.paths).

Overrides are ``{field: value}``; a field is a dotted path into the document
(``"solve.time_limit_s"``; ``"solve__time_limit_s"`` from Python keywords),
or one of the kind's option names (``time_limit_s``, ``solver``) that it maps
to its own field.  ``None`` values are ignored; the value :data:`REMOVE`
(the CLI's ``--set FIELD=null``) deletes the field, so its default applies.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from optfleet.errors import InputError
from optfleet.instance.documents import read_document
from optfleet.instance.paths import NamedFile, resolve_files, resolve_path
from optfleet.instance.shared_schema import RENAMED_FIELD
from optfleet.registry import kind as registered_kind


@dataclass(frozen=True)
class LoadedInstance:
    """A validated instance spec, its kind, the folder its relative paths resolve against, and the document it was
    read from with the overrides applied (before the kind's defaults: a reload with more overrides starts there)."""

    spec: Any
    base_dir: Path
    document: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def kind(self) -> str:
        return self.spec.kind

    def resolve(self, name: str, field: str = "file") -> Path:
        """The one file ``name`` (written at ``field``, which messages name) names: a path, relative to the
        instance's folder, or a dataset's file, ``dataset:NAME/PART`` (optfleet.instance.paths)."""
        return resolve_path(self.base_dir, name, field)

    def resolve_files(self, value: str | list[str], field: str) -> list[NamedFile]:
        """Every file ``value`` (a name or a list of names, at ``field``) names; ``dataset:NAME`` stands for all
        of that dataset's files (optfleet.instance.paths)."""
        return resolve_files(self.base_dir, value, field)


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
        if value is None:
            continue
        if name in OPTION_NAMES and name not in kind.overrides:
            flag = OPTION_NAMES[name]
            raise InputError(f"{name} (--{flag})" if flag else name, value,
                             f"does not apply to kind {kind.name} (its options: "
                             + (", ".join(f"--{OPTION_NAMES[o]}" if OPTION_NAMES.get(o) else o for o in kind.overrides) or "none") + ")")
        _set_path(data, kind.overrides.get(name, name.replace("__", ".")), value)
    raw = copy.deepcopy(data)  # what a reload with other overrides starts from (the kind's defaults applied once)
    if kind.preprocess is not None:
        data = kind.preprocess(data)
    return LoadedInstance(spec=validate_spec(kind.schema, data), base_dir=base_dir, document=raw)


class _Remove:
    """The override value that deletes a field (:data:`REMOVE`)."""

    def __repr__(self) -> str:
        return "null (removed)"


REMOVE = _Remove()
"""An override value that deletes its field from the document, so the kind's default applies."""


# Generic option names (CLI --preset, --time-limit, --solver, ...) that each kind maps to its own fields.
OPTION_NAMES = {"preset": "preset", "time_limit_s": "time-limit", "solver": "solver", "mip_gap": None, "method": "method"}
"""The options' API names and their command-line flags (without the dashes; None: the API's only)."""


def _set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``data[a][b]... = value`` for ``dotted = "a.b..."`` (a number indexes a list: ``constraints.0.instances``),
    creating mappings on the way; :data:`REMOVE` deletes the field, which must be there (a misspelt field is an error)."""
    *parents, last = dotted.split(".")
    node: Any = data
    for i, key in enumerate([*parents, last]):
        where = ".".join([*parents, last][: i + 1])
        if isinstance(node, list):
            if not key.isdigit() or int(key) >= len(node):
                raise InputError(where, key, f"cannot set {dotted}: the list has {len(node)} entries (indices 0..{len(node) - 1})")
            key = int(key)
        elif not isinstance(node, dict):
            raise InputError(where.rsplit(".", 1)[0], node, f"cannot set {dotted}: this field is not a mapping or a list")
        if i == len(parents):
            if value is not REMOVE:
                node[key] = value
            elif isinstance(node, list):
                raise InputError(where, "null", f"cannot remove {dotted}: a list entry is removed by setting the whole list")
            elif key not in node:
                raise InputError(where, "null", "is not set in the instance, so there is nothing to remove (check its spelling)")
            else:
                del node[key]
            return
        child = node[key] if isinstance(node, list) else node.get(key)
        if child is None:
            if value is REMOVE:
                raise InputError(where, "null", f"cannot remove {dotted}: {where} is not set in the instance (check its spelling)")
            child = node[key] = {}
        node = child


def validate_spec(schema: type[BaseModel], data: Mapping[str, Any]) -> Any:
    """Validate ``data``; the first pydantic error becomes an InputError with its field path."""
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"] if not _is_type_tag(part)) or "instance"
        value = error.get("input")
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            value, message = None, "required field is missing"
        if error["type"] == RENAMED_FIELD:
            where, value = f"{where}.{error['ctx']['old']}", error["ctx"]["value"]
        raise InputError(where, value, message) from None


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "tuple", "set", "none"}


def _is_type_tag(part: object) -> bool:
    """Whether a pydantic error location part names a member type of a union (``list[str]``, ``function-after[...]``)
    rather than a field: such parts are left out of the field path a message names."""
    return isinstance(part, str) and ("[" in part or part in _TYPE_TAGS or part.startswith(("function-", "constrained-")))
