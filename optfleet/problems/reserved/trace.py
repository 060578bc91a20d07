"""Request traces for reserved-capacity planning: arrival, token counts, observed latency, class.

Formats (chosen from the header):

* generic CSV or Parquet: ``t, input_tokens, output_tokens`` and optional ``cached_tokens``,
  ``thinking_tokens``, ``latency_s``, ``class``; ``t`` in the instance's ``trace.time_unit`` (``s``, ``ms``,
  ``us`` or ``datetime``), which must be given;
* the Azure LLM inference trace 2023 (``TIMESTAMP, ContextTokens, GeneratedTokens``): datetimes; each file's
  requests get the class named by the file's last ``_`` part (``AzureLLMInferenceTrace_code.csv`` -> ``code``);
* a pandas DataFrame with the generic columns (from Python).

Arrival times become seconds since the first request (several files share one clock and are merged).
Timestamps out of order within a file are sorted (stable) and a note says how many steps went back in time; a ``t`` column whose span or rate looks like another unit gets a note naming
both readings.  Token counts must be non-negative integers with ``cached <= input``; a bad value is reported
with its file and line (a DataFrame's: its index), exit 2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.instance.data_files import require_data_file
from optfleet.instance.paths import resolve_files

if TYPE_CHECKING:
    import pandas as pd

AZURE_COLUMNS = {"TIMESTAMP": "t", "ContextTokens": "input_tokens", "GeneratedTokens": "output_tokens"}
TOKEN_COLUMNS = ("input_tokens", "cached_tokens", "output_tokens", "thinking_tokens")
SECONDS_PER_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
PLAUSIBLE_SPAN_S = (1.0, 30 * 86_400.0)  # a trace spanning less than a second or more than a month is suspect
PLAUSIBLE_RATE_RPS = 1e5  # ... and so is one arriving faster than this on average
FILE_COLUMN = "_file"  # which of several files a row came from (each file's own order is checked)
LINE_COLUMN = "_line"  # the row's line in its file (messages name the file and the line)


@dataclass(frozen=True)
class RequestTrace:
    """One row per request, sorted by arrival: ``arrival_s`` (seconds since the first request), token counts,
    ``latency_s`` (NaN where not observed), ``class_index`` into ``class_names``, and what loading noticed."""

    arrival_s: NDArray[np.float64]
    input_tokens: NDArray[np.int64]
    cached_tokens: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    thinking_tokens: NDArray[np.int64]
    latency_s: NDArray[np.float64]
    class_index: NDArray[np.int64]
    class_names: tuple[str, ...]
    source: str
    notes: tuple[str, ...] = field(default=())

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def span_s(self) -> float:
        return float(self.arrival_s[-1]) if len(self) else 0.0

    def select(self, rows: NDArray, source: str) -> "RequestTrace":
        """The requests at ``rows`` (sorted), re-timed from the first of them."""
        arrival = self.arrival_s[rows]
        origin = arrival[0] if len(arrival) else 0.0
        return RequestTrace(arrival - origin, self.input_tokens[rows], self.cached_tokens[rows], self.output_tokens[rows],
                            self.thinking_tokens[rows], self.latency_s[rows], self.class_index[rows], self.class_names, source)


def read_trace(spec: Any, base_dir: Path, field: str = "trace") -> RequestTrace:
    """The trace a ``TraceSpec`` names (a file or files, relative to ``base_dir``, or a dataset; a synthetic
    generator; or a DataFrame)."""
    if spec.synthetic is not None:
        from optfleet.problems.reserved.synthetic import generate

        return generate(spec.synthetic, f"{field}.synthetic")
    if spec.frame is not None:
        return trace_from_frame(spec.frame, spec.time_unit, f"{field}.frame", "a DataFrame", f"{field}.time_unit")
    files = resolve_files(base_dir, spec.file, f"{field}.file")
    frames = []
    for i, file in enumerate(files):
        frame, azure = _read_file(file.path, file.field)
        if azure and "class" not in frame.columns:
            frame["class"] = file.path.stem.rsplit("_", 1)[-1]
        frame[FILE_COLUMN] = i
        frame[LINE_COLUMN] = np.arange(len(frame)) + 2  # after the header line
        frames.append((frame, azure, file.field))
    azure_kinds = {azure for _, azure, _ in frames}
    if len(azure_kinds) > 1:
        raise InputError(f"{field}.file", spec.file, "mixes Azure-format and generic files; give one format")
    azure = azure_kinds.pop()
    if azure and spec.time_unit not in (None, "datetime"):
        raise InputError(f"{field}.time_unit", spec.time_unit, "the Azure trace's TIMESTAMP column holds datetimes; give datetime or leave it out")
    import pandas as pd

    frame = pd.concat([f for f, _, _ in frames], ignore_index=True)
    names = [file.name for file in files]
    return trace_from_frame(frame, "datetime" if azure else spec.time_unit, field, ", ".join(names), f"{field}.time_unit", names)


def _read_file(path: Path, field: str) -> tuple["pd.DataFrame", bool]:
    require_data_file(path, field)
    import pandas as pd

    try:
        frame = pd.read_parquet(path) if path.suffix.lower() == ".parquet" else pd.read_csv(path)
    except ImportError as exc:
        raise InputError(field, str(path), f"reading Parquet needs the 'parquet' extra ({exc})") from None
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(field, str(path), f"cannot parse trace: {' '.join(str(exc).split())}") from None
    except OSError as exc:
        raise InputError(field, str(path), f"cannot be read: {exc.strerror or exc}") from None
    azure = set(AZURE_COLUMNS) <= set(frame.columns)
    return (frame.rename(columns=AZURE_COLUMNS) if azure else frame), azure


def trace_from_frame(frame: "pd.DataFrame", time_unit: str | None, field: str, source: str, unit_field: str = "trace.time_unit",
                     files: list[str] | None = None) -> RequestTrace:
    """Validate a frame with the generic columns and build the trace (module docstring); ``unit_field`` is where
    the time unit is set and ``files`` the files the rows were read from (for messages: a bad value is named by
    its file and line, or by its index in a DataFrame)."""
    import pandas as pd

    missing = [c for c in ("t", "input_tokens", "output_tokens") if c not in frame.columns]
    if missing:
        raise InputError(field, source, f"trace lacks column(s) {missing}; expected t,input_tokens,output_tokens"
                         "[,cached_tokens,thinking_tokens,latency_s,class] or the Azure 2023 format")
    if frame.empty:
        raise InputError(field, source, "trace has no requests")
    if time_unit is None:
        raise InputError(unit_field, None, "say what the t column counts: s, ms, us or datetime")
    where = _locator(frame, files)
    seconds = _seconds(frame["t"], time_unit, field, unit_field, where)
    tokens = {name: _token_column(frame[name], f"{field}:{name}", where) if name in frame.columns else np.zeros(len(frame), dtype=np.int64)
              for name in TOKEN_COLUMNS}
    over = tokens["cached_tokens"] > tokens["input_tokens"]
    if over.any():
        row = int(np.flatnonzero(over)[0])
        raise InputError(f"{field}:cached_tokens {where(row)}", int(tokens["cached_tokens"][row]),
                         f"more cached tokens than input tokens ({int(tokens['input_tokens'][row])})")
    latency = (pd.to_numeric(frame["latency_s"], errors="coerce").to_numpy(dtype=np.float64) if "latency_s" in frame.columns
               else np.full(len(frame), np.nan))
    bad_latency = np.isinf(latency) | (latency < 0)
    if bad_latency.any():
        row = int(np.flatnonzero(bad_latency)[0])
        raise InputError(f"{field}:latency_s {where(row)}", _plain(frame["latency_s"].iloc[row]),
                         "a latency must be a finite number of seconds >= 0 (leave the cell empty where none was observed)")
    labels = frame["class"].astype(str).to_numpy() if "class" in frame.columns else np.full(len(frame), "all", dtype=object)
    names, class_index = np.unique(labels, return_inverse=True)
    notes = []
    files = frame[FILE_COLUMN].to_numpy() if FILE_COLUMN in frame.columns else np.zeros(len(frame), dtype=np.int64)
    backwards = int(np.count_nonzero((np.diff(seconds) < 0) & (files[1:] == files[:-1])))
    if backwards:
        notes.append(f"{field}: timestamps were not in order ({backwards:,} steps back in time within a file); sorted by t")
    order = np.argsort(seconds, kind="stable")
    seconds = seconds[order]
    arrival = seconds - seconds[0]
    note = _unit_note(arrival, time_unit, field)
    if note:
        notes.append(note)
    return RequestTrace(arrival, *(tokens[name][order] for name in TOKEN_COLUMNS), latency[order], class_index[order].astype(np.int64),
                        tuple(str(n) for n in names), source, tuple(notes))


def _locator(frame: "pd.DataFrame", files: list[str] | None) -> Callable[[int], str]:
    """Where row ``i`` of ``frame`` is, for a message: ``line 3`` of its file (``line 3 of b.csv`` among several),
    or ``index 7`` of a DataFrame."""
    if files is None or LINE_COLUMN not in frame.columns:
        return lambda row: f"index {_plain(frame.index[row])!r}"
    lines, owner = frame[LINE_COLUMN].to_numpy(), frame[FILE_COLUMN].to_numpy()
    if len(files) == 1:
        return lambda row: f"line {lines[row]}"
    return lambda row: f"line {lines[row]} of {files[owner[row]]}"


def _seconds(values: "pd.Series", time_unit: str, field: str, unit_field: str, where: Callable[[int], str]) -> NDArray[np.float64]:
    import pandas as pd

    dates = pd.api.types.is_datetime64_any_dtype(values)
    if dates and time_unit != "datetime":
        raise InputError(unit_field, time_unit, "the t column holds dates and times; give datetime")
    if time_unit == "datetime" and pd.api.types.is_numeric_dtype(values):
        raise InputError(unit_field, time_unit, "the t column holds numbers, not dates; give s, ms or us")
    if time_unit == "datetime":
        _refuse_mixed_time_zones(values, field, where)
        stamps = pd.to_datetime(values, errors="coerce", format="mixed", utc=True)
        bad = stamps.isna().to_numpy()
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InputError(f"{field}:t {where(row)}", _plain(values.iloc[row]), f"not a date and time ({unit_field} is datetime)")
        return ((stamps - stamps.min()).dt.total_seconds()).to_numpy(dtype=np.float64)
    numeric = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(numeric)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"{field}:t {where(row)}", _plain(values.iloc[row]), f"not a number of {time_unit} ({unit_field})")
    return (numeric - numeric.min()) * SECONDS_PER_UNIT[time_unit]


def _refuse_mixed_time_zones(values: "pd.Series", field: str, where: Callable[[int], str]) -> None:
    """An InputError naming the first timestamp that carries a time zone when the first one does not, or the other
    way round: a naive time has no place on an aware clock (pandas refused the mix with an internal error).  Aware
    timestamps with different UTC offsets are one clock (read in UTC).  Each distinct shape of a timestamp (its text
    with every digit a 0) is parsed once, so a long trace costs one vectorised pass."""
    import pandas as pd

    if pd.api.types.is_datetime64_any_dtype(values) or pd.api.types.is_numeric_dtype(values):
        return  # one dtype, one time zone (or numbers, refused by the caller)
    shapes = values.astype(str).str.replace(r"\d", "0", regex=True)
    aware: dict[str, bool | None] = {}
    for shape, row in zip(*np.unique(shapes.to_numpy(dtype=str), return_index=True), strict=True):
        try:
            aware[shape] = pd.Timestamp(values.iloc[int(row)]).tzinfo is not None
        except (ValueError, TypeError, OverflowError):
            aware[shape] = None  # not a date: the caller names it
    kinds = shapes.map(aware).to_numpy(dtype=object)
    known = np.flatnonzero(kinds != None)  # noqa: E711 - elementwise on an object array
    if known.size == 0:
        return
    first = int(known[0])
    odd = known[kinds[known] != kinds[first]]
    if odd.size:
        row = int(odd[0])
        have, lack = ("has", "lacks") if kinds[row] else ("lacks", "has")
        raise InputError(f"{field}:t {where(row)}", _plain(values.iloc[row]),
                         f"{have} a time zone (a UTC offset) that the first timestamp ({where(first)}: {_plain(values.iloc[first])!r}) "
                         f"{lack}: give every timestamp with an offset (e.g. +00:00 or Z) or none")


def _unit_note(arrival_s: NDArray[np.float64], time_unit: str, field: str) -> str | None:
    """A note when the span or the mean rate is implausible read in ``time_unit`` but plausible in another unit."""
    if time_unit == "datetime" or len(arrival_s) < 2 or arrival_s[-1] <= 0:
        return None
    n = len(arrival_s)

    def plausible(span_s: float) -> bool:
        return PLAUSIBLE_SPAN_S[0] <= span_s <= PLAUSIBLE_SPAN_S[1] and n / span_s <= PLAUSIBLE_RATE_RPS

    span_s = float(arrival_s[-1])
    if plausible(span_s):
        return None
    for other, per_unit in SECONDS_PER_UNIT.items():
        other_span = span_s / SECONDS_PER_UNIT[time_unit] * per_unit
        if other != time_unit and plausible(other_span):
            return (f"{field}: read as {time_unit}, t spans {_duration(span_s)} ({n / span_s:,.3g} requests/s); read as {other} it "
                    f"would span {_duration(other_span)} ({n / other_span:,.3g} requests/s): check trace.time_unit")
    return None


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86_400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3)):
        if seconds >= size:
            return f"{seconds / size:,.3g} {unit}"
    return f"{seconds * 1e6:,.3g} us"


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (a message shows ``-10``, not ``np.int64(-10)``)."""
    return value.item() if hasattr(value, "item") and callable(value.item) else value


def _token_column(values: "pd.Series", field: str, where: Callable[[int], str]) -> NDArray[np.int64]:
    import pandas as pd

    numeric = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(numeric) | (numeric < 0) | (numeric != np.floor(numeric)) | (numeric > 2**53)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"{field} {where(row)}", _plain(values.iloc[row]), "token counts must be non-negative integers")
    return numeric.astype(np.int64)
