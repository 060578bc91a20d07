"""Closed-form savings predictions of pool routing, reported beside evaluated plans.

With per-GPU request throughput ``mu = n_max / E[S]`` (a fluid, utilisation-only
view that ignores queueing and integer GPUs), a homogeneous fleet needs
``lambda / mu_h`` GPU-units and a two-pool fleet
``alpha lambda / mu_s + (1 - alpha) lambda / mu_l``, ``alpha`` being the
short pool's traffic share.  Hence the fleet savings

    naive (token-budget routing paper):  s = alpha (1 - 1/rho),  rho = mu_s / mu_h,

which assumes the long pool keeps the homogeneous throughput (``mu_l = mu_h``),
and the corrected form with the routed long pool's own throughput

    corrected:  s = 1 - alpha mu_h / mu_s - (1 - alpha) mu_h / mu_l.

Both are approximations; the evaluated savings compare sized plans.
"""

from __future__ import annotations

from dataclasses import dataclass

from optfleet.problems.fleet.evaluator import FleetEvaluation, PoolMetrics


@dataclass(frozen=True)
class SavingsForecast:
    alpha: float
    rho: float
    naive: float
    corrected: float
    evaluated: float


def _throughput(pool: PoolMetrics) -> float:
    return pool.slots_per_instance / pool.mean_service_ms if pool.mean_service_ms > 0 else float("inf")


def savings_forecast(plan: FleetEvaluation, homogeneous: FleetEvaluation) -> SavingsForecast | None:
    """Closed forms for a two-pool ``plan`` against the ``homogeneous`` fleet (None for one pool)."""
    if len(plan.pools) != 2:
        return None
    short, long = plan.pools
    mu_h = _throughput(homogeneous.pools[0])
    mu_s, mu_l = _throughput(short), _throughput(long)
    alpha = short.share
    rho = mu_s / mu_h
    corrected = 1.0 - alpha * mu_h / mu_s - (1.0 - alpha) * (mu_h / mu_l if long.share > 0 else 0.0)
    return SavingsForecast(
        alpha=alpha,
        rho=rho,
        naive=alpha * (1.0 - 1.0 / rho),
        corrected=corrected,
        evaluated=1.0 - plan.cost_per_hour / homogeneous.cost_per_hour,
    )
