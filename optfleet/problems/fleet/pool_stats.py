"""Exact statistics of the requests a pool serves, and its minimum instance count.

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

Time per output token (pool_config.py), when the instance sets targets: the
longest iteration bounds every TPOT percentile, so a pool whose bound is
above the strictest percentile target meets it at no count; the mean TPOT
``t_w / (1 - lambda E[P] / n)`` meets a target ``T`` from

    n >= lambda E[P] / (1 - t_w / T)      (E[P] in seconds; none when t_w >= T),

with ``E[P]`` the pool's mean prefill compute per request (0 under the paper's model).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.queueing import INFEASIBLE, RELATIVE_TOLERANCE, min_instances
from optfleet.queueing.sizing import MAX_GPUS

QUANTILE = 0.99
_QUANTILE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class PoolStats:
    """Workload statistics of one pool (independent of its instance count)."""

    share: float
    mean_service_ms: float
    service_scv: float
    prefill_ms: float
    first_iteration_ms: float
    mean_prefill_compute_ms: float = 0.0

    @property
    def ttft_floor_ms(self) -> float:
        """TTFT of the pool's P99 request with no queueing wait."""
        return self.prefill_ms + self.first_iteration_ms


def weighted_quantile_index(values_sorted_weights: NDArray[np.float64], total: float, quantile: float = QUANTILE) -> int:
    """Index of the lower ``quantile`` point: first ``i`` with cumulative weight ``>= q total``."""
    cumulative = np.cumsum(values_sorted_weights)
    return int(np.searchsorted(cumulative, quantile * total * (1.0 - _QUANTILE_TOLERANCE), side="left"))


def pool_stats(config: PoolConfig, l_in: ArrayLike, l_out: ArrayLike, weight: ArrayLike, ttft_rule: str, quantile: float = QUANTILE) -> PoolStats:
    """Exact :class:`PoolStats` of the weighted atoms ``(l_in, l_out, weight)`` served by ``config`` (the paper rule's
    floor at ``quantile``: P99 unless explain varies ``ttft_quantile``)."""
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
    floor = config.first_token_ms(l_in, l_out)
    order = np.argsort(floor, kind="stable")
    at = order[weighted_quantile_index(weight[order], share, quantile)]
    compute = float(np.dot(weight, config.prefill_compute_ms(l_in)) / share)
    return PoolStats(share, mean, scv, float(floor[at] - iteration[at]), float(iteration[at]), compute)


def size_pools(
    rate_rps: ArrayLike,
    mean_service_ms: ArrayLike,
    service_scv: ArrayLike,
    ttft_floor_ms: ArrayLike,
    slots_per_instance: ArrayLike,
    ttft_p99_ms: float,
    rho_max: float,
    tpot_gpus: ArrayLike | None = None,
    quantile: float = QUANTILE,
) -> NDArray[np.int64]:
    """Minimum GPUs per pool (vectorised); ``-1`` where the TTFT floor alone breaks the SLO.  ``tpot_gpus`` is
    :meth:`TpotTargets.min_instances` (the feasible counts of both are up-sets of ``n``: the least count meeting both is
    the larger least count)."""
    rate = np.asarray(rate_rps, dtype=np.float64)
    mean_s = np.asarray(mean_service_ms, dtype=np.float64) / 1000.0
    budget_s = (ttft_p99_ms - np.asarray(ttft_floor_ms, dtype=np.float64)) / 1000.0
    need = min_instances(rate * mean_s, slots_per_instance, mean_s, service_scv, budget_s, rho_max, quantile)
    if tpot_gpus is None:
        return need
    tpot = np.asarray(tpot_gpus, dtype=np.int64)
    return np.where((need < 0) | (tpot < 0), INFEASIBLE, np.maximum(need, tpot)).astype(np.int64)


@dataclass(frozen=True)
class TpotTargets:
    """The instance's time-per-output-token targets: the strictest percentile target and the mean's (None: none)."""

    percentile_ms: float | None = None
    mean_ms: float | None = None

    @property
    def any(self) -> bool:
        return self.percentile_ms is not None or self.mean_ms is not None

    def bound_fits(self, tpot_bound_ms: ArrayLike) -> NDArray[np.bool_]:
        """Whether the longest-iteration bound meets the strictest percentile target."""
        bound = np.asarray(tpot_bound_ms, dtype=np.float64)
        return bound <= self.percentile_ms * (1 + RELATIVE_TOLERANCE) if self.percentile_ms is not None else np.ones(bound.shape, bool)

    def mean_capacity(self, window_step_ms: ArrayLike) -> NDArray[np.float64]:
        """``1 - t_w / T``: the share of an instance's time prefill compute may take for the mean target (1 without
        one; <= 0 when no count meets it)."""
        step = np.asarray(window_step_ms, dtype=np.float64)
        return 1.0 - step / self.mean_ms if self.mean_ms is not None else np.ones(step.shape)

    def reachable(self, tpot_bound_ms: ArrayLike, window_step_ms: ArrayLike) -> NDArray[np.bool_]:
        """Whether a pool can meet the targets at some count: its longest iteration within the strictest percentile
        target and its window step below the mean target."""
        return self.bound_fits(tpot_bound_ms) & (self.mean_capacity(window_step_ms) > 0)

    def min_instances(self, rate_rps: ArrayLike, mean_prefill_compute_ms: ArrayLike, window_step_ms: ArrayLike,
                 tpot_bound_ms: ArrayLike) -> NDArray[np.int64]:
        """Fewest instances meeting the targets (module docstring): 0 for an idle pool, -1 where none does."""
        rate = np.asarray(rate_rps, dtype=np.float64)
        load = rate * np.asarray(mean_prefill_compute_ms, dtype=np.float64) / 1000.0
        capacity = self.mean_capacity(window_step_ms)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            need = np.where(load > 0, np.ceil(load / capacity * (1.0 - RELATIVE_TOLERANCE)), 0.0)
        ok = (rate <= 0) | (self.reachable(tpot_bound_ms, window_step_ms) & (need <= MAX_GPUS))
        return np.where(ok, np.where(load > 0, need, 0.0), INFEASIBLE).astype(np.int64)
