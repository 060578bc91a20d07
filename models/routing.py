"""Exact views of token-budget pool routing (kind ``routing``), built as arrays for HiGHS.

**Hindsight placement** (:func:`hindsight_arrays`).  Request ``i`` (true lengths known) is served in the long pool
(service ``l_i`` slot-seconds), or short uncompressed if its true budget fits the short window (``a_i``; binary
``x_i``), or short compressed to ``T_c = B - L_out`` if its category is compressible and ``B < L_total <= gamma B``
(``c_i``; binary ``y_i``).  With ``n_s``, ``n_l`` KV slots per GPU instance and span ``T``:

    min  (1/T) sum_i [ l_i / n_l + (a_i / n_s - l_i / n_l) x_i + (c_i / n_s - l_i / n_l) y_i ]   (busy GPU instances)
    s.t. x_i + y_i <= 1                                                  (one placement)
         sum_{i in w} (a_i x_i + c_i y_i) <= K_s,w                       (short capacity of window w)
         sum_{i in w} l_i (1 - x_i - y_i) <= K_l,w                       (long capacity of window w)

with ``K_p,w = rho_max x slots_p x |w|`` offered slot-seconds.  Every online router's placement (a mis-routed
request is served long, one of the options) is a point of this set, so the optimum bounds them all.

**Hindsight overflow** (the same function, ``objective="overflow"``): when no placement fits the capacities, the
least work any placement puts above them, the slot-seconds that must queue beyond ``rho_max`` and so break the
SLO.  The capacity rows get an overflow column each, ``o_s,w, o_l,w >= 0``:

    min  sum_w (o_s,w + o_l,w)
    s.t. x_i + y_i <= 1,   sum_{i in w} (a_i x_i + c_i y_i) - o_s,w <= K_s,w,   sum_{i in w} l_i (1 - x_i - y_i) - o_l,w <= K_l,w

always feasible (every request long, overflow as needed); every router's placement with its own overflow
``sum_p,w (work_p,w - K_p,w)^+`` is a point, so the optimum bounds every router's overflow.  Among the placements
of least overflow, a second solve takes the one of least busy instances (``overflow_cap``: the overflow columns
at no cost, their sum at most the first solve's optimum).

The threshold design is models/routing_design.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.models.arrays import pass_model_args


@dataclass(frozen=True)
class HindsightData:
    """Per request: capacity window, slot-seconds short (NaN: not allowed), compressed (NaN: not allowed) and long;
    per window: the short and long capacities; the pools' slots per GPU instance and the span."""

    window: NDArray[np.int64]
    short_s: NDArray[np.float64]
    compressed_s: NDArray[np.float64]
    long_s: NDArray[np.float64]
    capacity_short: NDArray[np.float64]
    capacity_long: NDArray[np.float64]
    slots_per_instance: tuple[int, int]
    span_s: float


@dataclass(frozen=True)
class HindsightColumns:
    """Which request each column places short (``x``: uncompressed, ``y``: compressed)."""

    x_requests: NDArray[np.int64]
    y_requests: NDArray[np.int64]


HINDSIGHT_OBJECTIVES = ("busy_instances", "overflow")


def hindsight_arrays(data: HindsightData, objective: str = "busy_instances", overflow_cap: float | None = None) -> tuple[tuple, HindsightColumns]:
    """``passModel`` arguments of the hindsight model (module docstring; ``objective`` busy GPU instances, its
    constant as the objective offset, or overflow slot-seconds) and its columns.  ``overflow_cap`` (with the busy
    objective) lets the capacity rows overflow by at most that many slot-seconds in all: the second stage of the
    lexicographic hindsight (least overflow, then least busy instances among the placements that reach it)."""
    if objective not in HINDSIGHT_OBJECTIVES:
        raise ValueError(f"objective must be one of {HINDSIGHT_OBJECTIVES}")
    n_s, n_l = data.slots_per_instance
    xs = np.flatnonzero(~np.isnan(data.short_s))
    ys = np.flatnonzero(~np.isnan(data.compressed_s))
    requests = np.concatenate([xs, ys])
    placed_short = np.concatenate([data.short_s[xs], data.compressed_s[ys]])
    long_s = data.long_s[requests]
    cost = (placed_short / n_s - long_s / n_l) / data.span_s
    count, windows = len(requests), len(data.capacity_short)
    col = np.arange(count)
    both = np.intersect1d(xs, ys)
    pair_x = np.searchsorted(xs, both)
    pair_y = len(xs) + np.searchsorted(ys, both)
    pair_rows = np.arange(len(both))
    short_rows = len(both) + data.window[requests]
    long_rows = len(both) + windows + data.window[requests]
    rows = np.concatenate([pair_rows, pair_rows, short_rows, long_rows])
    cols = np.concatenate([pair_x, pair_y, col, col])
    values = np.concatenate([np.ones(2 * len(both)), placed_short, -long_s])
    long_total = np.bincount(data.window, weights=data.long_s, minlength=windows)
    row_upper = np.concatenate([np.ones(len(both)), data.capacity_short, data.capacity_long - long_total])
    upper = np.ones(count)
    integrality = np.ones(count, dtype=np.int32)
    constant = float(data.long_s.sum()) / n_l / data.span_s
    if objective == "overflow" or overflow_cap is not None:
        # one overflow column per capacity row (short rows first), at -1 in its row; its cost is 1 under the overflow
        # objective (the placements then cost nothing), else 0 with their sum capped by one more row
        overflow = np.arange(2 * windows)
        rows = np.concatenate([rows, len(both) + overflow])
        cols = np.concatenate([cols, count + overflow])
        values = np.concatenate([values, -np.ones(2 * windows)])
        if objective == "overflow":
            cost, constant = np.zeros(count), 0.0
        cost = np.concatenate([cost, np.full(2 * windows, 1.0 if objective == "overflow" else 0.0)])
        upper = np.concatenate([upper, np.full(2 * windows, np.inf)])
        integrality = np.concatenate([integrality, np.zeros(2 * windows, dtype=np.int32)])
        if overflow_cap is not None:
            cap_row = len(row_upper)
            rows = np.concatenate([rows, np.full(2 * windows, cap_row)])
            cols = np.concatenate([cols, count + overflow])
            values = np.concatenate([values, np.ones(2 * windows)])
            row_upper = np.append(row_upper, overflow_cap)
    else:
        # one last column fixed at 0 (no cost, no entry): HiGHS refuses a model without columns (no request fits short)
        cost, upper, integrality = np.append(cost, 0.0), np.append(upper, 0.0), np.append(integrality, 1).astype(np.int32)
    args = pass_model_args(cost, np.zeros(len(cost)), upper, integrality, rows, cols, values, np.full(len(row_upper), -np.inf), row_upper)
    return (*args[:5], constant, *args[6:]), HindsightColumns(xs, ys)


def hindsight_placement(values: NDArray[np.float64], columns: HindsightColumns, requests: int) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """(short uncompressed, short compressed) per request from the column values."""
    short, compressed = np.zeros(requests, dtype=bool), np.zeros(requests, dtype=bool)
    chosen = values[: len(columns.x_requests) + len(columns.y_requests)] > 0.5
    short[columns.x_requests[chosen[: len(columns.x_requests)]]] = True
    compressed[columns.y_requests[chosen[len(columns.x_requests):]]] = True
    return short, compressed
