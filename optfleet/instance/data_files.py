"""Checks of the data files an instance names (traces, tables) that a library reads itself (pandas, pyarrow).

Text documents go through :func:`optfleet.instance.documents.read_text`; a trace may be far larger than a document
and pandas streams it, so only the path is checked here, with the same wording as ``read_text``.
"""

from __future__ import annotations

from pathlib import Path

from optfleet.errors import InputError


def require_file(path: Path, field: str) -> None:
    """An InputError naming ``field`` unless ``path`` is an existing regular file (a directory, or a device, is said
    to be one)."""
    if path.is_dir():
        raise InputError(field, str(path), "is a directory, not a file")
    if not path.is_file():
        raise InputError(field, str(path), "not a regular file (a device, socket or pipe)" if path.exists() else "file not found")
