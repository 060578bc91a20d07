"""A seeded synthetic request trace with a diurnal arrival rate (``trace.synthetic`` of a reserved instance).

Arrivals are a non-homogeneous Poisson process with rate

    lambda(t) = mean_rps (1 + a cos(2 pi (t - 3600 peak_hour) / 86400)),   a = (r - 1) / (r + 1),

so the peak rate is ``r`` times the trough rate and the mean over a day is ``mean_rps``.  Each second's count is
Poisson with that second's integrated rate (exact for a piecewise-constant rate per second; the cosine changes
by under 0.01 % within a second) and the arrivals spread uniformly within it.  Each request draws its class by
the classes' shares, and its token counts from the class's lognormal lengths (mean ``mean_tokens``, log-sd
``sigma``, rounded to whole tokens); ``cached_fraction`` of its input is cached.  The same seed gives the same
trace on every machine (numpy's PCG64).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.problems.reserved.trace import RequestTrace

SECONDS_PER_DAY = 86_400


def diurnal_rate_rps(t_s: NDArray[np.float64], mean_rps: float, peak_to_trough: float, peak_hour: float) -> NDArray[np.float64]:
    """``lambda(t)`` of the module docstring."""
    amplitude = (peak_to_trough - 1.0) / (peak_to_trough + 1.0)
    return mean_rps * (1.0 + amplitude * np.cos(2.0 * np.pi * (t_s - 3600.0 * peak_hour) / SECONDS_PER_DAY))


def generate(spec, field: str = "trace.synthetic") -> RequestTrace:
    """Draw the trace of a ``SyntheticSpec`` (module docstring); an InputError naming ``field`` when it draws no
    request (the expected count ``mean_rps x days x 86,400`` is too small, or the span rounds to no whole second)."""
    rng = np.random.default_rng(spec.seed)
    seconds = int(round(spec.days * SECONDS_PER_DAY))
    starts = np.arange(seconds, dtype=np.float64)
    counts = rng.poisson(diurnal_rate_rps(starts + 0.5, spec.mean_rps, spec.peak_to_trough, spec.peak_hour))
    arrival = np.sort(np.repeat(starts, counts) + rng.random(int(counts.sum())))
    n = len(arrival)
    if n == 0:
        expected = spec.mean_rps * seconds
        raise InputError(field, {"days": spec.days, "mean_rps": spec.mean_rps},
                         f"draws no request: its {seconds:,} whole second(s) at mean_rps {spec.mean_rps:g} expect {expected:.3g} requests "
                         f"(mean_rps x days x 86,400 s); raise mean_rps or days so that they expect at least a few dozen")
    shares = np.array([c.share for c in spec.classes], dtype=np.float64)
    class_index = rng.choice(len(shares), size=n, p=shares / shares.sum()).astype(np.int64)
    columns = {name: np.zeros(n, dtype=np.int64) for name in ("input", "cached", "output", "thinking")}
    for k, cls in enumerate(spec.classes):
        rows = np.flatnonzero(class_index == k)
        columns["input"][rows] = _lengths(rng, cls.input_tokens, len(rows))
        columns["output"][rows] = _lengths(rng, cls.output_tokens, len(rows))
        columns["thinking"][rows] = _lengths(rng, cls.thinking_tokens, len(rows))
        columns["cached"][rows] = np.floor(cls.cached_fraction * columns["input"][rows]).astype(np.int64)
    origin = arrival[0] if n else 0.0
    return RequestTrace(arrival - origin, columns["input"], columns["cached"], columns["output"], columns["thinking"],
                        np.full(n, np.nan), class_index, tuple(c.name for c in spec.classes),
                        f"synthetic (seed {spec.seed}, {spec.days:g} days, {spec.mean_rps:g} req/s mean, peak/trough {spec.peak_to_trough:g})")


def _lengths(rng: np.random.Generator, spec, size: int) -> NDArray[np.int64]:
    """Lognormal counts with mean ``spec.mean_tokens`` (``mu = ln mean - sigma^2 / 2``), rounded; constant when sigma is 0."""
    if spec.mean_tokens <= 0:
        return np.zeros(size, dtype=np.int64)
    if spec.sigma == 0:
        return np.full(size, int(round(spec.mean_tokens)), dtype=np.int64)
    mu = np.log(spec.mean_tokens) - spec.sigma**2 / 2.0
    return np.rint(rng.lognormal(mu, spec.sigma, size)).astype(np.int64)
