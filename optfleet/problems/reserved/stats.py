"""Windowed statistics of the units a trace needs, at a unit count ``G`` and as curves over ``G``.

For windows ``X_1..X_N`` (windows.py):

    mean, p95, p99 of X_n          (pandas' linear interpolation, or the empirical ``inverted_cdf``)
    overload probability           P(X_n > G)     = #{n: X_n > G} / N
    expected overflow (units)      E[(X_n - G)+]
    expected spare (units)         E[(G - X_n)+]

The curves use one sort: with ``X`` ascending and prefix sums ``S``, the windows above ``G`` are the last
``N - k`` with ``k = #{X_n <= G}``, so ``E[(X - G)+] = (S_N - S_k - (N - k) G) / N`` and
``E[(G - X)+] = (k G - S_k) / N``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.reserved.windows import WindowSeries


def quantile(values: NDArray[np.float64], q: float, method: str) -> float:
    """The ``q`` quantile of ``values`` by ``method`` (``linear``: pandas' default; ``inverted_cdf``)."""
    return float(np.quantile(values, q, method=method))


@dataclass(frozen=True)
class WindowStats:
    """The statistics of one window width at one unit count (module docstring)."""

    width_s: float
    mean_units: float
    p95_units: float
    p99_units: float
    peak_units: float
    overload_probability: float
    expected_overflow_units: float
    expected_spare_units: float


def window_stats(series: WindowSeries, units: float, method: str) -> WindowStats:
    x = series.units_needed
    return WindowStats(series.width_s, float(x.mean()), quantile(x, 0.95, method), quantile(x, 0.99, method), float(x.max()),
                       float(np.mean(x > units)), float(np.maximum(x - units, 0.0).mean()), float(np.maximum(units - x, 0.0).mean()))


def curves(series: WindowSeries, units: NDArray) -> dict[str, NDArray[np.float64]]:
    """Overload probability, expected overflow and expected spare at every unit count in ``units`` (one sort)."""
    x = np.sort(series.units_needed)
    n = len(x)
    prefix = np.concatenate([[0.0], np.cumsum(x)])
    g = np.asarray(units, dtype=np.float64)
    k = np.searchsorted(x, g, side="right")
    return {
        "units": g,
        "overload_probability": (n - k) / n,
        "expected_overflow_units": (prefix[n] - prefix[k] - (n - k) * g) / n,
        "expected_spare_units": (k * g - prefix[k]) / n,
    }


def overloaded_windows_allowed(n_windows: int, max_probability: float) -> int:
    """``floor(eps N)`` (to round-off): the most windows that may be overloaded with ``P(X_n > G) <= eps``."""
    return int(np.floor(max_probability * n_windows + 1e-9))
