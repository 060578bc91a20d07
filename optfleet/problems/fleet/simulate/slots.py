"""Slot-mode simulation: each pool is ``c = n n_max`` KV slots served FCFS.

A request waits until a slot is free, then holds it for its whole service
time ``S = (ceil(L_in/C_chunk) + L_out) t_iter`` (FleetOpt, Chen et al. 2026).  The
FCFS G/G/c recursion keeps a min-heap of the slots' free times: request i
starts at ``max(arrival_i, earliest free time)`` and frees its slot at
``start + S_i``.  Service starts are then non-decreasing in arrival order, so
the queue seen by an arriving request is ``i - #{j : start_j <= arrival_i}``.
"""

from __future__ import annotations

import heapq

import numpy as np
from numpy.typing import NDArray


def fcfs_starts(
    arrival_s: NDArray[np.float64], service_s: NDArray[np.float64], servers: int, busy_until_s: NDArray[np.float64] | None = None
) -> NDArray[np.float64]:
    """Service start times of an FCFS queue with ``servers`` identical servers.

    ``busy_until_s`` lists slots already busy at time 0 and when they free up
    (a stationary start, see :func:`stationary_backlog`).
    """
    if servers < 1:
        raise ValueError("a pool with requests needs at least one slot")
    held = [] if busy_until_s is None else busy_until_s.tolist()
    if len(held) > servers:
        raise ValueError(f"{len(held)} slots busy at time 0, more than the pool's {servers}")
    free = held + [0.0] * min(servers - len(held), len(arrival_s))  # idle slots: no more than the arrivals can use
    heapq.heapify(free)
    starts = np.empty(len(arrival_s))
    replace = heapq.heapreplace
    for i, (arrive, service) in enumerate(zip(arrival_s.tolist(), service_s.tolist(), strict=True)):
        start = free[0] if free[0] > arrive else arrive
        starts[i] = start
        replace(free, start + service)
    return starts


def queue_lengths(arrival_s: NDArray[np.float64], start_s: NDArray[np.float64]) -> NDArray[np.int64]:
    """Number of requests waiting (not yet started) just before each arrival."""
    started = np.searchsorted(start_s, arrival_s, side="right")
    return np.maximum(np.arange(len(arrival_s)) - started, 0)


def stationary_backlog(service_s: NDArray[np.float64], rate_rps: float, servers: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """Remaining service times of the requests in service at time 0 of a pool started in equilibrium.

    For an M/G/infinity queue (and an M/G/c queue that rarely queues) the
    requests in service at a random time are Poisson(``lambda E[S]``) in
    number, their service times length-biased (probability proportional to
    S) and their remaining times uniform over S.  Sampled from the run's own
    service times and capped at ``servers``; this removes the long fill-up
    transient of pools with long service times.
    """
    count = min(int(rng.poisson(rate_rps * float(service_s.mean()))), servers)
    if count == 0:
        return np.zeros(0)
    picked = rng.choice(len(service_s), size=count, p=service_s / service_s.sum())
    return rng.random(count) * service_s[picked]
