"""Simulated requests: Poisson arrivals drawn from the workload, routed one by one by a plan.

Independent of the analytical evaluator's routing (fleet/routing.py): here
every request is an individual draw — its lengths sampled from the request
mix, its category compressible with probability ``p_c`` — and the plan's rule
is applied to it: the smallest pool whose window ``C_j >= L_total``, unless
``C_{j-1} < L_total <= gamma C_{j-1}``, the request is compressible and
``L_out < C_{j-1}``, in which case its input is cut to ``C_{j-1} - L_out``
tokens and it goes to pool ``j-1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.fleet.plan import Plan
from optfleet.fleet.problem import FleetProblem


@dataclass(frozen=True)
class RequestStream:
    """Requests in arrival order: arrival time (s), lengths after routing, pool index, compressed flag."""

    arrival_s: NDArray[np.float64]
    l_in: NDArray[np.int64]
    l_out: NDArray[np.int64]
    pool: NDArray[np.int64]
    compressed: NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.arrival_s)


def sample_requests(problem: FleetProblem, plan: Plan, count: int, rng: np.random.Generator) -> RequestStream:
    """``count`` Poisson arrivals at ``problem.rate_rps`` with lengths from the mix, routed by ``plan``."""
    if count < 1:
        raise InputError("requests", count, "simulate at least one request")
    mix = problem.mix
    arrival = np.cumsum(rng.exponential(1.0 / problem.rate_rps, size=count))
    atom = rng.choice(len(mix.prob), size=count, p=mix.prob)
    l_in, l_out = mix.l_in[atom].copy(), mix.l_out[atom].copy()
    compressible = rng.random(count) < problem.compressible_fraction
    windows = np.array([p.window_tokens for p in plan.pools], dtype=np.int64)
    l_total = l_in + l_out
    if l_total.max() > windows[-1]:
        raise InputError("plan.pools", windows.tolist(), f"the largest window {windows[-1]} cannot hold a {l_total.max()}-token request")
    pool = np.searchsorted(windows, l_total, side="left")
    lower = windows[np.maximum(pool - 1, 0)]
    compress = (pool > 0) & compressible & (l_total <= plan.gamma * lower) & (l_out < lower)
    pool[compress] -= 1
    l_in[compress] = lower[compress] - l_out[compress]
    return RequestStream(arrival, l_in, l_out, pool, compress)
