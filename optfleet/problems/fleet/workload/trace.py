"""Request traces: per-request input and output token counts.

Two formats are read (chosen from the header):

* the Azure LLM inference trace (Splitwise, ISCA'24):
  ``TIMESTAMP,ContextTokens,GeneratedTokens`` -> ``l_in, l_out``;
* the generic form ``l_in,l_out[,t,category]`` as CSV or Parquet
  (Parquet needs the optional ``pyarrow`` extra).

Token counts must be non-negative integers and every request needs at least
one token in total; a bad row is reported with its line number.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.instance.data_files import require_data_file
from optfleet.instance.shared_schema import MAX_TOKENS

if TYPE_CHECKING:
    import pandas as pd

AZURE_COLUMNS = {"ContextTokens": "l_in", "GeneratedTokens": "l_out", "TIMESTAMP": "t"}


@dataclass(frozen=True)
class RequestTrace:
    """Input and output token counts of every request of a trace, in file order."""

    l_in: NDArray[np.int64]
    l_out: NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.l_in)


def read_trace(path: Path, field: str) -> RequestTrace:
    """Load an Azure-format or generic trace file; errors name ``field``, the column and the row."""
    require_data_file(path, field)
    import pandas as pd  # imported here: pandas costs a quarter second of start-up; only traces need it

    try:
        if path.suffix.lower() == ".parquet":
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(path)
    except ImportError as exc:
        raise InputError(field, str(path), f"reading Parquet needs the 'parquet' extra ({exc})") from None
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(field, str(path), f"cannot parse trace: {exc}") from None
    except OSError as exc:
        raise InputError(field, str(path), f"cannot be read: {exc.strerror or exc}") from None
    frame = frame.rename(columns=AZURE_COLUMNS)
    missing = [c for c in ("l_in", "l_out") if c not in frame.columns]
    if missing:
        raise InputError(field, str(path), f"trace lacks column(s) {missing}; expected TIMESTAMP,ContextTokens,GeneratedTokens or l_in,l_out[,t,category]")
    if frame.empty:
        raise InputError(field, str(path), "trace has no requests")
    columns = {name: _token_column(frame[name], f"{field}:{name}") for name in ("l_in", "l_out")}
    total = columns["l_in"] + columns["l_out"]
    if (total <= 0).any():
        row = int(np.flatnonzero(total <= 0)[0])
        raise InputError(f"{field}:row {row + 2}", 0, "a request needs at least one token")
    return RequestTrace(columns["l_in"], columns["l_out"])


def _token_column(values: "pd.Series", field: str) -> NDArray[np.int64]:
    import pandas as pd

    numeric = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(numeric) | (numeric < 0) | (numeric != np.floor(numeric)) | (numeric > MAX_TOKENS)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"{field} row {row + 2}", values.iloc[row], f"token counts must be non-negative integers of at most {MAX_TOKENS:,} "
                         "(the largest count float64 holds exactly)")
    return numeric.astype(np.int64)


def concatenate_traces(traces: list[RequestTrace]) -> RequestTrace:
    """One trace holding the requests of all ``traces`` in order."""
    return RequestTrace(np.concatenate([t.l_in for t in traces]), np.concatenate([t.l_out for t in traces]))
