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

**Threshold design** (:func:`design_arrays`): one binary ``z_c`` per candidate ``c`` (window, threshold, band) with
fleet cost ``f_c`` and mis-route probability ``p_c``: ``min sum f_c z_c`` s.t. ``sum z_c = 1``,
``sum p_c z_c <= epsilon``.  Exact over the candidate grid (the same answer as enumerating it).
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
    slots_per_gpu: tuple[int, int]
    span_s: float


@dataclass(frozen=True)
class HindsightColumns:
    """Which request each column places short (``x``: uncompressed, ``y``: compressed)."""

    x_requests: NDArray[np.int64]
    y_requests: NDArray[np.int64]


def hindsight_arrays(data: HindsightData) -> tuple[tuple, HindsightColumns]:
    """``passModel`` arguments of the hindsight model (its constant as the objective offset) and its columns."""
    n_s, n_l = data.slots_per_gpu
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
    # one last column fixed at 0 (no cost, no entry): HiGHS refuses a model without columns (no request fits short)
    args = pass_model_args(np.append(cost, 0.0), np.zeros(count + 1), np.append(np.ones(count), 0.0), np.ones(count + 1, dtype=np.int32), rows,
                      cols, values, np.full(len(row_upper), -np.inf), row_upper)
    constant = float(data.long_s.sum()) / n_l / data.span_s
    return (*args[:5], constant, *args[6:]), HindsightColumns(xs, ys)


def hindsight_placement(values: NDArray[np.float64], columns: HindsightColumns, requests: int) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """(short uncompressed, short compressed) per request from the column values."""
    short, compressed = np.zeros(requests, dtype=bool), np.zeros(requests, dtype=bool)
    chosen = values[: len(columns.x_requests) + len(columns.y_requests)] > 0.5
    short[columns.x_requests[chosen[: len(columns.x_requests)]]] = True
    compressed[columns.y_requests[chosen[len(columns.x_requests):]]] = True
    return short, compressed


def design_arrays(cost: NDArray[np.float64], misroute: NDArray[np.float64], epsilon: float) -> tuple:
    """``passModel`` arguments of the threshold design's one-hot selection (module docstring)."""
    count = len(cost)
    col = np.arange(count)
    return pass_model_args(cost, np.zeros(count), np.ones(count), np.ones(count, dtype=np.int32), np.concatenate([np.zeros(count), np.ones(count)]),
                      np.concatenate([col, col]), np.concatenate([np.ones(count), misroute]), np.array([1.0, -np.inf]), np.array([1.0, epsilon]))
