"""Windowed work: the trace cut into windows of ``Delta`` seconds from the first arrival.

Window ``n`` holds the requests with ``n Delta <= t < (n + 1) Delta``; there are ``floor(span / Delta) + 1``
windows, empty ones included (they count in every percentile and probability, as in slosizer).  Per window:

    D_n = sum_j B_j                     (adjusted tokens of its requests)
    X_n = D_n / (tau Delta)             (units it needs)
    P_n = sum_j paygo_j                 ($ of its requests at pay-as-you-go prices)
    p_n = P_n / D_n                     ($ per adjusted token spilled from it; 0 for an empty window)

Spilling ``o_n <= D_n`` adjusted tokens of window ``n`` to pay-as-you-go costs ``p_n o_n``: the window's
tokens spill pro rata, slosizer's hybrid rule (its overflow fraction ``(X_n - G)+ / X_n`` of every token).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class WindowSeries:
    """The windows of one trace (or one model's share of it) at width ``width_s`` (module docstring)."""

    width_s: float
    tau_tokens_per_s_per_unit: float
    work: NDArray[np.float64]
    paygo_cost: NDArray[np.float64]

    @property
    def n_windows(self) -> int:
        return len(self.work)

    @property
    def hours(self) -> float:
        """The span the windows cover, ``N Delta / 3600`` hours: what a $/h figure divides by."""
        return self.n_windows * self.width_s / 3600.0

    @property
    def work_per_unit(self) -> float:
        """``tau Delta``: adjusted tokens one unit serves in a window."""
        return self.tau_tokens_per_s_per_unit * self.width_s

    @cached_property
    def units_needed(self) -> NDArray[np.float64]:
        """``X_n = D_n / (tau Delta)``."""
        return self.work / self.work_per_unit

    @cached_property
    def price_per_work(self) -> NDArray[np.float64]:
        """``p_n = P_n / D_n`` ($ per adjusted token spilled; 0 for an empty window)."""
        return np.divide(self.paygo_cost, self.work, out=np.zeros_like(self.work), where=self.work > 0)


def window_index(arrival_s: NDArray[np.float64], width_s: float) -> NDArray[np.int64]:
    """``floor(t / Delta)`` of every arrival."""
    return np.floor(arrival_s / width_s).astype(np.int64)


def window_series(arrival_s: NDArray[np.float64], work: NDArray[np.float64], paygo_cost: NDArray[np.float64], tau: float,
                  width_s: float, span_s: float | None = None) -> WindowSeries:
    """The windows of requests arriving at ``arrival_s`` with adjusted tokens ``work`` and pay-as-you-go cost
    ``paygo_cost``; ``span_s`` (default: the last arrival) fixes the window count, so that several models' series
    over one trace line up."""
    span = float(arrival_s[-1]) if span_s is None else span_s
    count = int(np.floor(span / width_s)) + 1
    index = window_index(arrival_s, width_s)
    return WindowSeries(width_s, tau, np.bincount(index, weights=work, minlength=count).astype(np.float64),
                        np.bincount(index, weights=paygo_cost, minlength=count).astype(np.float64))
