"""The files an instance names: a path (relative paths resolve against the instance's folder) or a public dataset,
``dataset:NAME`` (every file of it) or ``dataset:NAME/PART`` (one file; optfleet.datasets)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from optfleet.datasets.store import is_reference, reference_files


@dataclass(frozen=True)
class NamedFile:
    """A file an instance names: the field that names it (``trace.file[1]`` in a list), the name as written (a
    dataset's file as ``dataset:NAME/PART``) and its path."""

    field: str
    name: str
    path: Path


def resolve_path(base_dir: Path, name: str, field: str) -> Path:
    """The one file ``name`` names (``field`` is where it is written, for messages)."""
    if is_reference(name):
        return reference_files(name, field, one=True)[0][1]
    path = Path(name).expanduser()
    return path if path.is_absolute() else (base_dir / path).resolve()


def resolve_files(base_dir: Path, value: str | list[str], field: str) -> list[NamedFile]:
    """Every file ``value`` (a name or a list of names, at ``field``) names, a dataset's files in their order."""
    names = [value] if isinstance(value, str) else list(value)
    files: list[NamedFile] = []
    for i, name in enumerate(names):
        where = field if isinstance(value, str) else f"{field}[{i}]"
        if is_reference(name):
            files += [NamedFile(where, shown, path) for shown, path in reference_files(name, where)]
        else:
            files.append(NamedFile(where, name, resolve_path(base_dir, name, where)))
    return files
