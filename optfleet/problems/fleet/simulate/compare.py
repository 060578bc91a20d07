"""Analytic vs simulated: the evaluator's numbers beside the simulation's, with relative errors.

The analytic P99 TTFT is the evaluator's check (``W99 + floor`` under the
instance's TTFT rule); the simulated one is the 99th percentile of each
request's own wait + prefill + first iteration, so the two differ by design
when the rule is ``fleetsim`` (its floor is a mean prefill at one slot).

TPOT rows appear where both sides have the number: the simulation in batching
mode (simulate/run.py), and the evaluator's ``tpot_mean_ms`` (under the slot
model ``t_w / (1 - lambda_g E[P])``, a full batch at the full window stretched
by the prefill compute: an upper estimate, pool_config.py) and
``tpot_p99_ms`` where ``PoolMetrics`` has one.  A model without TPOT leaves
them unset: ``tpot_p99_ms`` None (or absent), ``tpot_mean_ms`` 0 for a pool
with traffic.
"""

from __future__ import annotations

import math

import pandas as pd

from optfleet.problems.fleet.evaluator import FleetEvaluation, PoolMetrics
from optfleet.problems.fleet.simulate.run import SimulationResult

COMPARED = ("utilisation", "wait_p99_ms", "ttft_p99_ms", "tpot_mean_ms", "tpot_p99_ms")
"""Metrics named alike by the evaluator's PoolMetrics and the simulation's metrics."""


def comparison_table(evaluation: FleetEvaluation, result: SimulationResult) -> pd.DataFrame:
    """One row per pool and metric both sides have: analytic, simulated mean, 95 % half-width, relative error, and the
    pool's requests measured per replication (a handful cannot pin a P99 or an occupancy down)."""
    rows = []
    for pool in evaluation.pools:
        measured = result.metrics.get(pool.name)
        if measured is None:
            continue
        for name in COMPARED:
            analytic = _analytic(pool, name)
            if analytic is None or name not in measured:
                continue
            simulated, half = measured[name]
            rows.append({
                "pool": pool.name,
                "metric": name,
                "analytic": analytic,
                "simulated": simulated,
                "ci95": half,
                "rel_error": (simulated - analytic) / analytic if analytic != 0.0 and math.isfinite(analytic) else float("nan"),
                "requests": round(measured["requests"][0]),
            })
    return pd.DataFrame(rows)


def _analytic(pool: PoolMetrics, name: str) -> float | None:
    """The evaluator's ``name`` for ``pool``; None where it has none: a field PoolMetrics lacks or leaves None, or a
    TPOT of 0 for a pool with traffic (module docstring)."""
    value = getattr(pool, name, None)
    if value is None or (name.startswith("tpot_") and value == 0.0 and pool.share > 0):
        return None
    return float(value)
