"""Serve each pool's share of a routed stream with the fleet simulator's models (slot or batching mode).

Slot mode (optfleet/problems/fleet/simulate/slots.py): a pool is ``n n_max`` KV slots served FCFS, started in
equilibrium (``stationary_backlog``); a request's first token comes ``(ceil(L_in / C_chunk) + 1) t_iter`` after
admission and it leaves after ``S = (ceil(L_in / C_chunk) + L_out) t_iter``.  Batching mode
(optfleet/problems/fleet/simulate/batching.py): iteration-level continuous batching, started empty.

Per request: TTFT = first token - arrival; TPOT = (finish - first token) / (L_out - 1) for ``L_out >= 2`` (the
time per output token after the first).  Requests arriving before the warm-up cut (``warmup_share`` of the
arrivals) are not measured.  Unlike the fleet simulator's own runs, batching mode here does not lengthen the
warm-up to the slowest pool's fill time: a pool whose service times are long against the stream's span is
measured while it still fills, so its batching-mode latencies are optimistic (slot mode starts in equilibrium).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.simulate.batching import simulate_batching
from optfleet.problems.fleet.simulate.run import request_tpot_ms
from optfleet.problems.fleet.simulate.slots import fcfs_starts, stationary_backlog


@dataclass(frozen=True)
class PoolLatency:
    """Measured requests' TTFT and TPOT (ms) of one pool."""

    ttft_ms: NDArray[np.float64]
    tpot_ms: NDArray[np.float64]

    def percentile(self, metric: str, p: float) -> float | None:
        values = getattr(self, metric)
        return float(np.percentile(values, p)) if len(values) else None


def pool_latency(config: PoolConfig, gpus: int, arrival_s: NDArray[np.float64], l_in: NDArray[np.int64], l_out: NDArray[np.int64],
                 mode: str, measured_from_s: float, rng: np.random.Generator) -> PoolLatency:
    """TTFT and TPOT of one pool's requests (module docstring)."""
    if mode == "slots":
        service = config.service_ms(l_in, l_out) / 1000.0
        span = max(float(arrival_s[-1]), 1e-9)
        backlog = stationary_backlog(service, len(arrival_s) / span, gpus * config.slots_per_instance, rng)
        start = fcfs_starts(arrival_s, service, gpus * config.slots_per_instance, backlog)
        first, finish = start + config.first_token_ms(l_in, l_out) / 1000.0, start + service
    else:
        times = simulate_batching(config, gpus, arrival_s, l_in, l_out)
        first, finish = times.first_token_s, times.finish_s
    keep = arrival_s >= measured_from_s
    return PoolLatency(1000.0 * (first - arrival_s)[keep], request_tpot_ms(first[keep], finish[keep], l_out[keep]))


def fewest_instances(config: PoolConfig, arrival_s: NDArray[np.float64], l_in: NDArray[np.int64], l_out: NDArray[np.int64],
                measured_from_s: float, ttft_p99_ms: float, lower: int, upper: int, seed: int) -> int | None:
    """The fewest GPU instances, at least ``lower`` (the utilisation cap's count), whose slot-mode replay of these
    requests meets P99 TTFT <= ``ttft_p99_ms`` (bisection up to ``upper``, doubling beyond); None if even
    64 x ``upper`` does not (the SLO is below the requests' own prefill time).  P99 TTFT falls as GPUs are added
    (more slots, same FCFS order), up to the sampled stationary start."""
    if len(arrival_s) == 0:
        return 0
    upper = max(upper, lower)

    def meets(gpus: int) -> bool:
        latency = pool_latency(config, gpus, arrival_s, l_in, l_out, "slots", measured_from_s, np.random.default_rng(seed))
        value = latency.percentile("ttft_ms", 99)
        return value is None or value <= ttft_p99_ms

    hi = max(upper, 1)
    while not meets(hi):
        if hi >= 64 * max(upper, 1):
            return None
        hi *= 2
    lo = max(lower, 1) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi
