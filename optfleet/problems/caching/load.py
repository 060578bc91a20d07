"""Read conversation traces from CSV, Parquet or JSON-lines files.

Every format holds one turn per row with the columns

* ``conversation_id``: any label (read as text);
* ``t``: arrival time in seconds (>= 0; within a conversation, non-decreasing
  in file order);
* ``q``: new prompt tokens of the turn; ``a``: answer tokens (integers >= 0).

Other columns are ignored.  The format follows the suffix: ``.csv``,
``.parquet`` / ``.pq`` (needs the optional ``parquet`` extra, pyarrow),
``.jsonl`` / ``.ndjson`` (one JSON object per line).  The result is
:func:`~optfleet.problems.caching.trace.build_trace` of the columns, so every check of
that function applies (errors name ``trace.<column>`` and the file row, 0-based
among data rows).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from optfleet.errors import InputError
from optfleet.instance.data_files import refuse_cells, require_data_file
from optfleet.instance.shared_schema import MAX_TOKENS
from optfleet.problems.caching.trace import ConversationTrace, build_trace

COLUMNS = ("conversation_id", "t", "q", "a")
FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def load_trace(path: str | Path, field: str = "trace") -> ConversationTrace:
    """Read ``path`` (format by suffix) into a validated :class:`ConversationTrace`."""
    path = Path(path)
    frame = read_turns(path, field)
    return trace_from_frame(frame, field, path)


def read_turns(path: Path, field: str = "trace") -> pd.DataFrame:
    """The file's rows as a DataFrame with at least the four trace columns (not yet validated)."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(f"{field}.file", str(path), f"unknown trace format {path.suffix!r}; use one of {', '.join(FORMATS)}")
    require_data_file(path, f"{field}.file")
    try:
        if fmt == "csv":
            frame = pd.read_csv(path, dtype={"conversation_id": str}, skipinitialspace=True)
        elif fmt == "jsonl":
            frame = pd.read_json(path, lines=True, dtype={"conversation_id": str})
        else:
            frame = _read_parquet(path, field)
    except pd.errors.EmptyDataError:
        raise InputError(f"{field}.file", str(path), "the trace file is empty (no header, no turns)") from None
    except (ValueError, pd.errors.ParserError) as exc:
        raise InputError(f"{field}.file", str(path), f"cannot read it as {fmt}: {str(exc).strip().splitlines()[0]}") from None
    except OSError as exc:
        raise InputError(f"{field}.file", str(path), f"cannot be read: {exc.strerror or exc}") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"{field}.file", str(path), f"missing column(s) {', '.join(missing)}; a trace needs {', '.join(COLUMNS)}")
    return frame


def trace_from_frame(frame: pd.DataFrame, field: str = "trace", source: str | Path = "the trace") -> ConversationTrace:
    """Validate the four columns of ``frame`` and build the trace; a bad cell is named by its column, its value as
    written and its row in ``source`` (counted from 1 after the header)."""
    numbers = {}
    for column in ("t", "q", "a"):
        raw = frame[column]
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
        refuse_cells(f"{field}.{column}", raw, np.isnan(values), "not a number", source)
        if column != "t":
            refuse_cells(f"{field}.{column}", raw, ~np.isfinite(values) | (values < 0) | (values != np.round(values)) | (values > MAX_TOKENS),
                         f"token counts must be integers >= 0 and at most {MAX_TOKENS:,} (the largest count float64 holds exactly)",
                         source)
        numbers[column] = values
    labels = frame["conversation_id"]
    if labels.isna().any():
        row = int(np.flatnonzero(labels.isna().to_numpy())[0])
        raise InputError(f"{field}.conversation_id", None, f"row {row}: missing conversation id")
    return build_trace(labels.astype(str).to_numpy(), numbers["t"], numbers["q"], numbers["a"], field=field)


def _read_parquet(path: Path, field: str) -> pd.DataFrame:
    try:
        import pyarrow  # noqa: F401  (pandas needs it for Parquet)
    except ImportError:
        raise InputError(f"{field}.file", str(path), "reading Parquet needs pyarrow: pip install 'optfleet[parquet]'") from None
    return pd.read_parquet(path)
