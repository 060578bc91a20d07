"""Windowed statistics of the units a trace needs, at a unit count ``G`` and as curves over ``G``.

For windows ``X_1..X_N`` (windows.py):

    mean, p95, p99 of X_n          (pandas' linear interpolation, or the empirical ``inverted_cdf``)
    overload probability           P(X_n > G)     = #{n: X_n > G} / N
    expected overflow (units)      E[(X_n - G)+]
    expected spare (units)         E[(G - X_n)+]

The curves use one sort (:func:`weighted_excess`): the windows above ``G`` are a suffix of the sorted ``X``,
and ``E[(G - X)+] = G - E[X] + E[(X - G)+]``.
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


def weighted_excess(values: NDArray[np.float64], weights: NDArray[np.float64], points: NDArray) -> NDArray[np.float64]:
    """``sum_n w_n (x_n - G)+`` at every ``G`` of ``points`` with one sort: with ``x`` ascending, the values above ``G``
    are a suffix, so the sum is ``sum_{x_n > G} w_n x_n - G sum_{x_n > G} w_n`` (suffix sums)."""
    order = np.argsort(values, kind="stable")
    x, w = values[order], weights[order]
    suffix_weight = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])
    suffix_mass = np.concatenate([np.cumsum((w * x)[::-1])[::-1], [0.0]])
    g = np.asarray(points, dtype=np.float64)
    k = np.searchsorted(x, g, side="right")
    return np.maximum(suffix_mass[k] - g * suffix_weight[k], 0.0)


def curves(series: WindowSeries, units: NDArray) -> dict[str, NDArray[np.float64]]:
    """Overload probability, expected overflow and expected spare at every unit count in ``units``:
    ``E[(X - G)+]`` is :func:`weighted_excess` with weights ``1/N``, and ``E[(G - X)+] = G - E[X] + E[(X - G)+]``."""
    x = series.units_needed
    n = len(x)
    g = np.asarray(units, dtype=np.float64)
    overflow = weighted_excess(x, np.full(n, 1.0 / n), g)
    return {
        "units": g,
        "overload_probability": (n - np.searchsorted(np.sort(x), g, side="right")) / n,
        "expected_overflow_units": overflow,
        "expected_spare_units": np.maximum(g - x.mean() + overflow, 0.0),
    }


def overloaded_windows_allowed(n_windows: int, max_probability: float) -> int:
    """``floor(eps N)`` (to round-off): the most windows that may be overloaded with ``P(X_n > G) <= eps``."""
    return int(np.floor(max_probability * n_windows + 1e-9))
