"""Load-aware spillover (token-budget routing, Algorithm 1 lines 16-17), decided on the pools' live state.

The two pools are simulated together as FCFS queues of KV slots (the fleet simulator's slot model:
optfleet/problems/fleet/simulate/slots.py): request ``i`` of pool ``p`` starts at
``max(arrival_i, earliest free slot of p)`` and holds the slot for its service time in ``p``.  At each arrival the
dispatcher sees, for its target pool, the requests in the system ``N`` (admitted, not finished) and the queue
``Q = max(N - slots, 0)``; the target is *overloaded* when

* ``Q > queue_limit`` (the paper's "queue depth exceeds a configurable limit"), or
* ``N / gpus >= pressure_limit`` (the fleet simulator's rule, inference-fleet-sim's spillover router:
  ``(active + queued) / n_gpus >= 0.85``; note it counts requests per GPU instance, so with many KV slots per
  instance it fires long before any request waits).

An overloaded target spills to the other pool if that pool can serve the request: it has a KV slot, and, for the
short pool, the estimated budget fits its window.  Spill decisions use this slot model (started empty)
in both replay modes.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.routing.dispatcher import LONG, SHORT


@dataclass(frozen=True)
class SpillRule:
    """``queue_limit`` (waiting requests) and ``pressure_limit`` (requests per GPU instance); None disables one."""

    queue_limit: int | None = None
    pressure_limit: float | None = None

    @property
    def active(self) -> bool:
        return self.queue_limit is not None or self.pressure_limit is not None


def spill(rule: SpillRule, arrival_s: NDArray[np.float64], target: NDArray[np.int64], fits_short: NDArray[np.bool_],
          service_s: tuple[NDArray[np.float64], NDArray[np.float64]], slots: tuple[int, int], gpus: tuple[int, int]) -> NDArray[np.int64]:
    """The pool of every request after spillover (module docstring); ``service_s[p][i]`` is request i's service
    time in pool p, ``slots``/``gpus`` the pools' KV slots and GPU instances (short, long)."""
    if not rule.active:
        return target
    queue_limit = np.inf if rule.queue_limit is None else rule.queue_limit
    pressure = np.inf if rule.pressure_limit is None else rule.pressure_limit
    free = [[0.0] * max(min(s, len(arrival_s)), 1) for s in slots]
    finishing: list[list[float]] = [[], []]
    services = [s.tolist() for s in service_s]
    pool = target.copy()
    pop, push, replace = heapq.heappop, heapq.heappush, heapq.heapreplace
    for i, (now, p, fits) in enumerate(zip(arrival_s.tolist(), target.tolist(), fits_short.tolist(), strict=True)):
        in_system = finishing[p]
        while in_system and in_system[0] <= now:
            pop(in_system)
        count = len(in_system)
        overloaded = count - slots[p] > queue_limit or count / max(gpus[p], 1) >= pressure
        if overloaded and (p == SHORT or fits) and slots[1 - p] > 0:
            p = LONG if p == SHORT else SHORT
            pool[i] = p
            in_system = finishing[p]
            while in_system and in_system[0] <= now:
                pop(in_system)
        slots_p = free[p]
        start = slots_p[0] if slots_p[0] > now else now
        end = start + services[p][i]
        replace(slots_p, end)
        push(in_system, end)
    return pool
