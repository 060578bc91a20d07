"""Analytic vs simulated: the evaluator's numbers beside the simulation's, with relative errors.

The analytic P99 TTFT is the evaluator's check (``W99 + floor`` under the
instance's TTFT rule); the simulated one is the 99th percentile of each
request's own wait + prefill + first iteration, so the two differ by design
when the rule is ``fleetsim`` (its floor is a mean prefill at one slot).
"""

from __future__ import annotations

import math

import pandas as pd

from optfleet.problems.fleet.evaluator import FleetEvaluation
from optfleet.problems.fleet.simulate.run import SimulationResult

COMPARED = (("utilisation", "utilisation"), ("wait_p99_ms", "wait_p99_ms"), ("ttft_p99_ms", "ttft_p99_ms"))


def comparison_table(evaluation: FleetEvaluation, result: SimulationResult) -> pd.DataFrame:
    """One row per pool and compared metric: analytic, simulated mean, 95 % half-width, relative error."""
    rows = []
    for pool in evaluation.pools:
        measured = result.metrics.get(pool.name)
        if measured is None:
            continue
        for analytic_name, simulated_name in COMPARED:
            analytic = float(getattr(pool, analytic_name))
            simulated, half = measured[simulated_name]
            rows.append({
                "pool": pool.name,
                "metric": simulated_name,
                "analytic": analytic,
                "simulated": simulated,
                "ci95": half,
                "rel_error": (simulated - analytic) / analytic if analytic not in (0.0,) and math.isfinite(analytic) else float("nan"),
            })
    return pd.DataFrame(rows)
