"""CDF tables of the total request length ``L_total = L_in + L_out``.

A table is a list of ``[tokens, cumulative_probability]`` points, as in the
FleetOpt validation tool's data files (JSON: a bare list or ``{"cdf": [...]}``;
CSV: two columns ``tokens,cumulative_probability``).  Following both papers'
convention, the mass ``F(t_i) - F(t_{i-1})`` of bin ``i`` is spread uniformly
over the integer lengths ``t_{i-1}+1 .. t_i`` (``t_0 = 0``), which makes the
table an exact discrete distribution: every expectation over it is a finite
sum, with no sampling.  That costs one entry per integer length, so a table may
reach :data:`MAX_CDF_TOKENS` tokens at most.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.instance.documents import DuplicateKeyError, parse_json, read_text

_PROB_TOLERANCE = 1e-9

MAX_CDF_TOKENS = 10_000_000
"""The last breakpoint of a table: its distribution has an entry per integer length up to it, each costing about
150 bytes and 2 us of a solve (measured on the toy fleet stretched to 4e6 tokens: 10 s, 0.65 GB), so ten million
lengths (the largest context window offered today) take about 1.5 GB and 20 s.  Checked before anything is
allocated."""


@dataclass(frozen=True)
class CdfTable:
    """A validated CDF table: strictly increasing token breakpoints, non-decreasing F ending at 1."""

    tokens: NDArray[np.int64]
    cumulative: NDArray[np.float64]

    def integer_lengths(self) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Every integer length with its probability: uniform inside each bin."""
        lower = np.concatenate(([0], self.tokens[:-1]))
        widths = self.tokens - lower
        mass = np.diff(np.concatenate(([0.0], self.cumulative)))
        lengths = np.arange(1, int(self.tokens[-1]) + 1, dtype=np.int64)
        prob = np.repeat(mass / widths, widths)
        keep = prob > 0
        return lengths[keep], prob[keep]


def parse_cdf_points(points: Any, field: str) -> CdfTable:
    """Validate a list of ``[tokens, F]`` pairs; every problem names ``field`` and the value."""
    if isinstance(points, dict) and "cdf" in points:
        points, field = points["cdf"], f"{field}.cdf"
    if not isinstance(points, (list, tuple)) or len(points) == 0:
        raise InputError(field, points if not isinstance(points, (list, tuple)) else [], "a CDF table needs at least one [tokens, probability] point")
    tokens: list[int] = []
    cumulative: list[float] = []
    for i, point in enumerate(points):
        where = f"{field}[{i}]"
        if not isinstance(point, (list, tuple)) or len(point) != 2:
            raise InputError(where, point, "each CDF point must be a pair [tokens, cumulative_probability]")
        t, p = point
        tokens.append(_token_count(t, f"{where}[0]"))
        cumulative.append(_probability(p, f"{where}[1]"))
        if i > 0 and tokens[i] <= tokens[i - 1]:
            raise InputError(f"{where}[0]", t, f"CDF token breakpoints must increase strictly (previous {tokens[i - 1]})")
        if i > 0 and cumulative[i] < cumulative[i - 1]:
            raise InputError(f"{where}[1]", p, f"CDF is not monotone: falls from {cumulative[i - 1]}")
    if abs(cumulative[-1] - 1.0) > _PROB_TOLERANCE:
        raise InputError(f"{field}[{len(points) - 1}][1]", cumulative[-1], "a CDF must end at 1")
    cumulative[-1] = 1.0
    return CdfTable(np.asarray(tokens, dtype=np.int64), np.asarray(cumulative, dtype=np.float64))


def read_cdf_file(path: Path, field: str) -> CdfTable:
    """Read a CDF table from JSON or CSV (by file suffix) and validate it; the text is read by
    :func:`~optfleet.instance.documents.read_text` (directories, encodings, byte-order marks, binary data, size)."""
    text = read_text(path, field)
    if not text.strip():
        raise InputError(field, str(path), "the file is empty")
    try:
        if path.suffix.lower() == ".csv":
            rows = [row for row in csv.reader(io.StringIO(text, newline="")) if row and not row[0].lstrip().startswith("#")]
            if rows and not _is_number(rows[0][0]):
                rows = rows[1:]
            points: Any = [[_csv_number(v) for v in row] for row in rows]
        else:
            points = parse_json(text)
    except InputError:
        raise
    except DuplicateKeyError as exc:
        raise InputError(field, str(path), f"duplicate key {exc.key!r}: given twice in one object; JSON would keep only the last") from None
    except ValueError as exc:  # json.JSONDecodeError is one
        raise InputError(field, str(path), f"cannot parse CDF file: {exc}") from None
    return parse_cdf_points(points, field)


def _token_count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not value.is_integer()):
        raise InputError(field, value, "token counts must be integers")
    if value <= 0:
        raise InputError(field, value, "token counts must be positive")
    if value > MAX_CDF_TOKENS:
        raise InputError(field, value, f"the exact distribution has an entry per integer length up to here, {int(value):,} entries, "
                                       f"above the limit of {MAX_CDF_TOKENS:,} (about 150 bytes and 2 us of solve time each)")
    return int(value)


def _probability(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
        raise InputError(field, value, "a cumulative probability must be a number")
    if not 0.0 <= value <= 1.0 + _PROB_TOLERANCE:
        raise InputError(field, value, "a cumulative probability must lie in [0, 1]")
    return float(min(value, 1.0))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _csv_number(text: str) -> float | int:
    value = float(text)
    return int(value) if value.is_integer() else value
