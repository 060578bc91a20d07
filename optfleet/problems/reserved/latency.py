"""Latency on reserved units: ``R_j = L_base,j + W_j`` (the slosizer formalisation's latency planning).

``L_base`` is the model's latency without contention, linear in the token counts,

    L_base = b_0 + b_in I + b_cache C + b_out O + b_think H,

fitted by least squares to the trace's observed ``latency_s`` when it has at least 20 of them (negative
coefficients clipped to 0 after the fit, as slosizer does), else slosizer's fallback 0.15 s + 3e-5 s per input,
8e-6 per cached, 9e-4 per output and 7e-4 per thinking token.

``W_j`` is the delay of a first-come-first-served fluid queue served at ``r = G tau`` adjusted tokens per second:
the backlog ``Q_j`` found by request ``j`` follows Lindley's recursion

    Q_j = max(0, Q_{j-1} + B_{j-1} - r (t_j - t_{j-1})),   W_j = Q_j / r,

computed without a loop as ``Q_j = P_j - min_{k <= j} P_k`` with ``P_j = sum_{i<j} B_i - r t_j``.  Every request
is served by the reserved units (none spills): the latency a plan's units give on their own.  More units never
raise any ``W_j`` (Lindley's recursion is monotone in ``r``), so every latency percentile falls as ``G`` grows:
the smallest ``G`` meeting a latency target is found by bisection over the purchase grid, exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.reserved.trace import RequestTrace

MIN_LATENCY_OBSERVATIONS = 20
FALLBACK = (0.15, 3e-5, 8e-6, 9e-4, 7e-4)  # slosizer's default baseline latency model (s, s per token)


@dataclass(frozen=True)
class BaselineLatency:
    """``L_base`` coefficients (module docstring) and how they were obtained."""

    intercept_s: float
    per_input_s: float
    per_cached_s: float
    per_output_s: float
    per_thinking_s: float
    how: str

    def predict_s(self, trace: RequestTrace) -> NDArray[np.float64]:
        return (self.intercept_s + self.per_input_s * trace.input_tokens + self.per_cached_s * trace.cached_tokens
                + self.per_output_s * trace.output_tokens + self.per_thinking_s * trace.thinking_tokens).astype(np.float64)


def baseline_latency(trace: RequestTrace, given) -> BaselineLatency:
    """The instance's ``baseline_latency`` when given, else the least-squares fit or the fallback (module docstring)."""
    if given is not None:
        return BaselineLatency(given.intercept_s, given.per_input_s, given.per_cached_s, given.per_output_s, given.per_thinking_s,
                               "given in the instance")
    observed = np.isfinite(trace.latency_s)
    count = int(observed.sum())
    if count < MIN_LATENCY_OBSERVATIONS:
        return BaselineLatency(*FALLBACK, f"slosizer's fallback ({count} observed latencies, fewer than {MIN_LATENCY_OBSERVATIONS})")
    design = np.column_stack([np.ones(count), *(c[observed].astype(np.float64) for c in
                                                (trace.input_tokens, trace.cached_tokens, trace.output_tokens, trace.thinking_tokens))])
    coefficients, *_ = np.linalg.lstsq(design, trace.latency_s[observed], rcond=None)
    return BaselineLatency(*np.maximum(coefficients, 0.0).tolist(), f"least squares on {count:,} observed latencies, negatives clipped to 0")


def queue_delay_s(arrival_s: NDArray[np.float64], work: NDArray[np.float64], service_rate: float) -> NDArray[np.float64]:
    """``W_j`` of the fluid queue at ``service_rate`` adjusted tokens per second (module docstring); infinite
    with no service."""
    if service_rate <= 0:
        return np.full(len(arrival_s), np.inf)
    before = np.concatenate([[0.0], np.cumsum(work[:-1])])
    level = before - service_rate * arrival_s
    backlog = level - np.minimum.accumulate(level)
    return np.maximum(backlog, 0.0) / service_rate
