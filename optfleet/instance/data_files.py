"""Checks of the data files an instance names (traces, tables) that a library reads itself (pandas, pyarrow).

Text documents go through :func:`optfleet.instance.documents.read_text`; a trace may be far larger than a document
and pandas streams it, so only the path is checked here, with the same wording as ``read_text``; and a bad cell
of a table read is named by :func:`refuse_cells`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from optfleet.errors import InputError


def require_file(path: Path, field: str) -> None:
    """An InputError naming ``field`` unless ``path`` is an existing regular file (a directory, or a device, is said
    to be one)."""
    if path.is_dir():
        raise InputError(field, str(path), "is a directory, not a file")
    if not path.is_file():
        raise InputError(field, str(path), "not a regular file (a device, socket or pipe)" if path.exists() else "file not found")


def refuse_cells(field: str, cells: Any, bad: np.ndarray, problem: str, path: Path | str) -> None:
    """An InputError naming ``field``, the first of ``cells`` (a column, in file order) where ``bad`` holds, as
    written, and its row (counted from 1 after the header); nothing when no cell is bad."""
    if bad.any():
        row = int(np.argmax(bad))
        raise InputError(field, str(cells.iloc[row]), f"{problem} (row {row + 1} of {path})")
