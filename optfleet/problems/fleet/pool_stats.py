"""Exact statistics of the requests a pool serves, and its minimum GPU count.

For pool j with routed atoms (weights w_i summing to the pool's share):

    E[S] = sum w_i S_i / sum w_i,   Cs^2 = E[S^2] / E[S]^2 - 1

and the load-independent part of the P99 TTFT, by the instance's TTFT rule:

* ``paper``: the weighted 0.99-quantile over the pool of
  ``(ceil(L_in/C_chunk) + 1) t_iter`` — prefill plus the first decode
  iteration (FleetOpt, Chen et al. 2026; with flat iteration time this is exactly
  ``P99(prefill) + t_iter``);
* ``fleetsim``: inference-fleet-sim's check, the pool *mean* of
  ``ceil(L_in/C_chunk) (W + H)`` (prefill at one active slot, no decode step).

The P99 TTFT is then ``W99(n) + floor`` (Kimura's W99, queueing/kimura.py) and
the pool needs the smallest ``n`` with ``a / (n n_max) <= rho_max`` and
``W99 <= SLO - floor`` (queueing/sizing.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.queueing import min_gpus

QUANTILE = 0.99
_QUANTILE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class PoolStats:
    """Workload statistics of one pool (independent of its GPU count)."""

    share: float
    mean_service_ms: float
    service_scv: float
    prefill_ms: float
    first_iteration_ms: float

    @property
    def ttft_floor_ms(self) -> float:
        """TTFT of the pool's P99 request with no queueing wait."""
        return self.prefill_ms + self.first_iteration_ms


def weighted_quantile_index(values_sorted_weights: NDArray[np.float64], total: float, quantile: float = QUANTILE) -> int:
    """Index of the lower ``quantile`` point: first ``i`` with cumulative weight ``>= q total``."""
    cumulative = np.cumsum(values_sorted_weights)
    return int(np.searchsorted(cumulative, quantile * total * (1.0 - _QUANTILE_TOLERANCE), side="left"))


def pool_stats(config: PoolConfig, l_in: ArrayLike, l_out: ArrayLike, weight: ArrayLike, ttft_rule: str) -> PoolStats:
    """Exact :class:`PoolStats` of the weighted atoms ``(l_in, l_out, weight)`` served by ``config``."""
    weight = np.asarray(weight, dtype=np.float64)
    share = float(weight.sum())
    if share <= 0:
        return PoolStats(0.0, 0.0, 0.0, 0.0, 0.0)
    service = config.service_ms(l_in, l_out)
    mean = float(np.dot(weight, service) / share)
    second = float(np.dot(weight, service * service) / share)
    scv = max(second / (mean * mean) - 1.0, 0.0)
    chunks = config.prefill_chunks(l_in)
    if ttft_rule == "fleetsim":
        prefill = float(np.dot(weight, chunks) / share) * (config.w_ms + config.h_ms_per_slot)
        return PoolStats(share, mean, scv, prefill, 0.0)
    iteration = config.iteration_ms(np.asarray(l_in) + np.asarray(l_out))
    floor = (chunks + 1) * iteration
    order = np.argsort(floor, kind="stable")
    at = order[weighted_quantile_index(weight[order], share)]
    return PoolStats(share, mean, scv, float(chunks[at] * iteration[at]), float(iteration[at]))


def size_pools(
    rate_rps: ArrayLike,
    mean_service_ms: ArrayLike,
    service_scv: ArrayLike,
    ttft_floor_ms: ArrayLike,
    slots_per_gpu: ArrayLike,
    ttft_p99_ms: float,
    rho_max: float,
) -> NDArray[np.int64]:
    """Minimum GPUs per pool (vectorised); ``-1`` where the TTFT floor alone breaks the SLO."""
    rate = np.asarray(rate_rps, dtype=np.float64)
    mean_s = np.asarray(mean_service_ms, dtype=np.float64) / 1000.0
    budget_s = (ttft_p99_ms - np.asarray(ttft_floor_ms, dtype=np.float64)) / 1000.0
    return min_gpus(rate * mean_s, slots_per_gpu, mean_s, service_scv, budget_s, rho_max)
