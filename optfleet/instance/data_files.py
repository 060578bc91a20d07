"""Checks of the data files an instance names (traces, tables) that a library reads itself (pandas, pyarrow).

Text documents go through :func:`optfleet.instance.documents.read_text`; a trace may be far larger than a document
and pandas streams it, so only the path is checked here, with the same wording as ``read_text``; and a bad cell
of a table read is named by :func:`refuse_cells`.
"""

from __future__ import annotations

import codecs
import math
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


BINARY_DATA = "is binary data, not text"
"""How a text file holding a NUL byte is refused: by the document reader and by every text table's reader."""

SCAN_BYTES = 2**20


BINARY_SUFFIXES = (".parquet", ".pq")


def require_data_file(path: Path, field: str) -> None:
    """:func:`require_file`, and for a text table (any suffix but :data:`BINARY_SUFFIXES`) an InputError naming
    ``field`` when the file holds a NUL byte (text never does), as :func:`optfleet.instance.documents.read_text`
    refuses a document: read in chunks of a MiB, so a large trace is scanned without being held (about a second per
    GB).  A file with a UTF-16 byte-order mark, whose characters hold zero bytes, is left to its reader."""
    require_file(path, field)
    if path.suffix.lower() in BINARY_SUFFIXES:
        return
    try:
        with path.open("rb") as stream:
            chunk = stream.read(SCAN_BYTES)
            if chunk.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
                return
            while chunk:
                if b"\x00" in chunk:
                    raise InputError(field, str(path), BINARY_DATA)
                chunk = stream.read(SCAN_BYTES)
    except OSError as exc:
        raise InputError(field, str(path), f"cannot be read: {exc.strerror or exc}") from None


def refuse_cells(field: str, cells: Any, bad: np.ndarray, problem: str, path: Path | str) -> None:
    """An InputError naming ``field``, the first of ``cells`` (a column, in file order) where ``bad`` holds, as
    written, and its row (counted from 1 after the header); nothing when no cell is bad."""
    if bad.any():
        row = int(np.argmax(bad))
        value = cells.iloc[row]
        if _missing(value):  # a blank cell, "NA" or a row shorter than the header: pandas reads each as NaN
            raise InputError(field, "", f"has no number (a blank cell, NA, NaN, or a row shorter than the header); it {problem} "
                             f"(row {row + 1} of {path})")
        raise InputError(field, str(value), f"{problem} (row {row + 1} of {path})")


def _missing(value: Any) -> bool:
    """True for pandas's reading of an empty cell (NaN, None)."""
    return value is None or (isinstance(value, float) and math.isnan(value))
