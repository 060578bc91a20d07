"""The Splitwise-style grid search (Patel et al., "Splitwise: Efficient Generative LLM Inference Using Phase
Splitting", ISCA 2024, section 6: cluster designs found by simulating grids of prompt-machine and token-machine counts).

For every busy pool and every (prefill, decode) option pair, every ``(x, y)`` in ``{1..GRID} x {1..GRID}`` (Splitwise's
39 x 39) is tested against the SLO with the analytic pool model, and the cheapest feasible point of any pair is the
pool's choice.  The search is exhaustive over the grid (points are tried in order of cost, so the first feasible one is
the grid's cheapest); it assumes nothing about monotonicity, but it sees only the grid: a pool that needs more than
``GRID`` instances of a role gets no choice (the evaluator then reports it), and the fleet constraints are not
searched (the evaluator checks them).  Aggregated options are not part of this baseline.
"""

from __future__ import annotations

import numpy as np

from optfleet.problems.pd_fleet.plan import DisaggregatedPoolPlan, PdPlan, PoolPlan
from optfleet.problems.pd_fleet.problem import PdProblem
from optfleet.problems.pd_fleet.sizing import disaggregated_pool

GRID = 39
"""Counts tried per role, 1..39: Splitwise's grid (its Figure 13 searches 39 x 39 prompt x token machine counts)."""

SPLITWISE_GRID = "splitwise_grid"


def splitwise_grid(problem: PdProblem, grid: int = GRID) -> PdPlan:
    """The cheapest feasible grid point of every busy pool (module docstring)."""
    pools: list[PoolPlan] = [None] * len(problem.pools)
    counts = np.arange(1, grid + 1)
    for pool in problem.busy_pools:
        best: tuple[float, PoolPlan] | None = None
        for prefill in problem.prefill:
            for decode in problem.decode:
                model = disaggregated_pool(problem, pool, prefill, decode)
                cost = prefill.cost_per_instance_hour * counts[:, None] + decode.cost_per_instance_hour * counts[None, :]
                states = {}
                for flat in np.argsort(cost, axis=None, kind="stable"):
                    x, y = (int(v) + 1 for v in np.unravel_index(flat, cost.shape))
                    if best is not None and cost[x - 1, y - 1] >= best[0]:
                        break
                    if y not in states:
                        states[y] = model.decode_state(y)
                    if not model.decode_violations(states[y]) and not model.prefill_violations(x, states[y]):
                        best = (float(cost[x - 1, y - 1]), DisaggregatedPoolPlan(prefill.label, x, decode.label, y))
                        break
        pools[pool.index] = None if best is None else best[1]
    return PdPlan(SPLITWISE_GRID, tuple(pools))
