"""Spot caps per period from a spot availability trace in the format of skypilot-org/spot-traces.

The format (the repository's README, "Data Description"): one JSON document per instance type and zone,

    {"metadata": {"gap_seconds": G}, "data": [v_0, v_1, ...]}

one value per tick of ``G`` seconds from the trace's start.  The README calls each value "the number of available
instances at a specific tick"; the repository's multi-node traces hold such counts (0-16 for its 16-node V100
trace), and its single-node traces hold 0/1 flags that its collection records as *preempted* (1: the probe
instance was preempted or could not be launched).  The instance says which (``values``): the instances available
at tick ``i`` are ``a_i = v_i`` or ``a_i = 1 - v_i``.  The file names the instance type and zone
(``us-east-2b_v100_1.json``: zone, GPU, GPUs per instance); its content does not.

Tick ``i`` is in force over ``[i G, (i + 1) G)`` seconds of the trace, and period ``t`` covers ``[s + t P, s + (t + 1)
P)`` with ``s = start_hour x 3600`` and ``P`` the period's seconds.  The spot cap of the period is

    cap[t] = gpus_per_instance x min { a_i : tick i in force during period t },

the spot GPUs available throughout the period: a GPU bought when more were available and lost when the count
dropped is a preemption, which the plan's ``preemption_probability`` and ``confidence`` already price.  This reads
the availability only; the preemption probability stays the instance's own number.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.instance.data_files import require_data_file
from optfleet.problems.capacity_plan.schema import MAX_SPOT_GPUS, SpotTraceSpec

SECONDS_PER_HOUR = 3600.0
TICK_ROUND_OFF = 1e-9
"""Period edges that fall on a tick edge (within this many ticks) do not bring in the next tick."""


def read_availability(path: Path, values: str, field: str) -> tuple[float, NDArray[np.int64]]:
    """``(G, a)``: the trace's seconds per tick and the instances available at each tick (module docstring); an
    InputError names ``field`` (the trace's ``file``) with the part of the document at fault."""
    require_data_file(path, field)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(field, str(path), f"is not a JSON document (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise InputError(field, str(path), "is not a spot trace: its JSON nests too deeply to read") from None
    except UnicodeDecodeError as exc:
        raise InputError(field, str(path), f"is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    metadata = document.get("metadata") if isinstance(document, dict) else None
    gap_s = metadata.get("gap_seconds") if isinstance(metadata, dict) else None
    if isinstance(gap_s, bool) or not isinstance(gap_s, (int, float)) or not math.isfinite(gap_s) or gap_s <= 0:
        raise InputError(f"{field}:metadata.gap_seconds", gap_s, "must be the seconds between ticks, a number > 0 "
                         '(a spot trace is {"metadata": {"gap_seconds": G}, "data": [...]})')
    data = document.get("data")
    if not isinstance(data, list) or not data:
        raise InputError(f"{field}:data", type(data).__name__ if data is not None else None, "must be a non-empty list of values, one per tick")
    allowed = (0, 1) if values == "preempted" else None
    for i, value in enumerate(data):
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_SPOT_GPUS:
            raise InputError(f"{field}:data[{i}]", value, f"is above the {MAX_SPOT_GPUS} instances a spot cap may hold "
                             "(schema.MAX_SPOT_GPUS)")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (allowed is not None and value not in allowed):
            says = "is not 0 or 1 (values: preempted)" if allowed is not None else "is not a whole number of instances >= 0"
            raise InputError(f"{field}:data[{i}]", value, says)
    ticks = np.asarray(data, dtype=np.int64)
    return float(gap_s), (1 - ticks if values == "preempted" else ticks)


def trace_caps(path: Path, trace: SpotTraceSpec, periods: int, period_hours: float, field: str) -> NDArray[np.int64]:
    """``cap[t]`` for the horizon's periods (module docstring); an InputError names the field of ``trace`` at
    ``field`` (``gpus[1].spot.availability_trace``) when the trace ends before the horizon or a cap is too large."""
    gap_s, available = read_availability(path, trace.values, f"{field}.file")
    period_s = period_hours * SECONDS_PER_HOUR
    start_s = trace.start_hour * SECONDS_PER_HOUR
    edges = (start_s + period_s * np.arange(periods + 1)) / gap_s
    if not np.ceil(edges[-1] - TICK_ROUND_OFF) <= len(available):
        raise InputError(f"{field}.file", str(path), f"covers {len(available) * gap_s / SECONDS_PER_HOUR:.6g} h ({len(available)} ticks "
                         f"of {gap_s:g} s); from start_hour {trace.start_hour:g} the horizon needs {edges[-1] * gap_s / SECONDS_PER_HOUR:.6g} h")
    first = np.floor(edges[:-1] + TICK_ROUND_OFF).astype(np.int64)
    stop = np.ceil(edges[1:] - TICK_ROUND_OFF).astype(np.int64)
    caps = np.array([available[a:b].min() for a, b in zip(first, np.maximum(stop, first + 1), strict=True)], dtype=np.int64)
    caps *= trace.gpus_per_instance
    if caps.max() > MAX_SPOT_GPUS:
        raise InputError(f"{field}.gpus_per_instance", trace.gpus_per_instance, f"gives {int(caps.max())} spot GPUs in period "
                         f"{int(np.argmax(caps))}, above the {MAX_SPOT_GPUS} a spot cap may hold (schema.MAX_SPOT_GPUS)")
    return caps
