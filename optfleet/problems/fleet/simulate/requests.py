"""Simulated requests: Poisson arrivals drawn from the workload, routed one by one by a plan.

Independent of the analytical evaluator's routing (fleet/routing.py): here
every request is an individual draw — its lengths sampled from the request
mix, its category compressible with probability ``p_c`` — and the plan's rule
is applied to it: the smallest pool whose window ``C_j >= L_total``, unless
``C_{j-1} < L_total <= gamma C_{j-1}``, the request is compressible and
``L_out < C_{j-1}``, in which case its input is cut to ``C_{j-1} - L_out``
tokens and it goes to pool ``j-1``.  A plan admitting ``served_share < 1``
rejects each arrival independently with probability ``1 - served_share``.  Under split rules (plan.py) a request of
a rule whose compressed shares total ``z`` is compressed, if compressible,
with probability ``z / p_c`` (into pool j with probability ``z_j / p_c``);
otherwise it goes to pool j with probability ``x_j / (1 - z)``, so each pool
receives exactly its share of the rule's requests in expectation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.problems.fleet.plan import Plan
from optfleet.problems.fleet.problem import FleetProblem


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
    if plan.served_share < 1.0:
        admitted = rng.random(count) < plan.served_share
        arrival, l_in, l_out, compressible = arrival[admitted], l_in[admitted], l_out[admitted], compressible[admitted]
    windows = np.array([p.window_tokens for p in plan.pools], dtype=np.int64)
    l_total = l_in + l_out
    if plan.rules is not None:
        pool, compress = _split_routing(plan, problem.compressible_fraction, l_total, l_out, compressible, rng)
        l_in[compress] = windows[pool[compress]] - l_out[compress]
        return RequestStream(arrival, l_in, l_out, pool, compress)
    if l_total.max() > windows[-1]:
        raise InputError("plan.pools", windows.tolist(), f"the largest window {windows[-1]} cannot hold a {l_total.max()}-token request")
    pool = np.searchsorted(windows, l_total, side="left")
    lower = windows[np.maximum(pool - 1, 0)]
    compress = (pool > 0) & compressible & (l_total <= plan.gamma * lower) & (l_out < lower)
    pool[compress] -= 1
    l_in[compress] = lower[compress] - l_out[compress]
    return RequestStream(arrival, l_in, l_out, pool, compress)


def _split_routing(
    plan: Plan, p_c: float, l_total: NDArray[np.int64], l_out: NDArray[np.int64], compressible: NDArray[np.bool_], rng: np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Pool index and compressed flag of every request under ``plan.rules``."""
    index = {p.name: j for j, p in enumerate(plan.pools)}
    pool = np.full(len(l_total), -1, dtype=np.int64)
    compress = np.zeros(len(l_total), dtype=bool)
    draw_compress, draw_pool = rng.random(len(l_total)), rng.random(len(l_total))
    for rule in plan.rules or ():
        mine = rule.covers(l_total, l_out)
        squeezed = sum(v for _, v in rule.compressed)
        if rule.compressed and p_c > 0:
            edges = np.cumsum([v / p_c for _, v in rule.compressed])
            chosen = mine & compressible & (draw_compress < edges[-1])
            pool[chosen] = np.array([index[n] for n, _ in rule.compressed])[np.searchsorted(edges, draw_compress[chosen], side="right")]
            compress |= chosen
        rest = mine & ~compress
        if rule.shares and squeezed < 1:
            edges = np.cumsum([v / (1 - squeezed) for _, v in rule.shares])
            pick = np.minimum(np.searchsorted(edges, draw_pool[rest], side="right"), len(edges) - 1)
            pool[rest] = np.array([index[n] for n, _ in rule.shares])[pick]
    if (pool < 0).any():
        bad = int(np.flatnonzero(pool < 0)[0])
        raise InputError("plan.rules", f"L_total {l_total[bad]}", "no rule routes this request")
    return pool, compress
