"""The anchor's sizing methods (the slosizer package, v0.3.1), as baselines beside the exact models.

Each returns a unit count on the purchase grid, then applies the instance's ``headroom_fraction``:
``G <- round_up(G (1 + headroom))`` (the exact models take no headroom).

* :func:`percentile_units`: the largest, over the window widths, of the ``p`` quantile of ``X_n``, rounded up
  to the grid;
* :func:`overload_scan_units`: the smallest grid point with ``P(X_n > G) <= 1 - p`` at every width (a scan);
* :func:`latency_scan_units`: the smallest grid point meeting the latency target, trying every grid point
  from the first purchase up (slosizer's linear scan; each try replays the fluid queue);
* :func:`hybrid_scan_units`: every grid point's hybrid $/h, the cheapest (ties: fewer units; all points' costs
  from one sort of the windows, the same sums as one pass per point);
* :func:`backlog_scan_units`: the same with the online backlog rule (evaluator.py);
* :func:`worst_scenario_units`: the largest of every scenario's own hybrid scan (size for the worst day);
* :func:`flat_commitment`: each model its own hybrid scan, all of it reserved, no on-demand units.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from optfleet.problems.reserved.evaluator import (
    CommitmentPlan,
    backlog_spill_per_hour,
    block_index,
    latency_met,
    spill_per_hour_on_grid,
)
from optfleet.problems.reserved.problem import ReservedProblem, infeasible_within_grid
from optfleet.problems.reserved.stats import curves, quantile
from optfleet.problems.reserved.windows import WindowSeries


def with_headroom(problem: ReservedProblem, units: int) -> int:
    return problem.profile.round_up(units * (1.0 + problem.spec.headroom_fraction)) if units else 0


def percentile_units(problem: ReservedProblem, p: float) -> int:
    needed = max(quantile(s.units_needed, p, problem.spec.quantile_method) for s in problem.windows)
    return with_headroom(problem, problem.profile.round_up(needed))


def overload_scan_units(problem: ReservedProblem, p: float) -> int:
    grid = problem.grid()
    worst = np.max([curves(s, grid)["overload_probability"] for s in problem.windows], axis=0)
    meets = np.flatnonzero(worst <= 1.0 - p + 1e-12)
    if not len(meets):
        busiest = max(problem.windows, key=lambda s: s.units_needed.max())
        raise infeasible_within_grid(problem, f"overload probability <= {1 - p:.4g}",
                                     f"the busiest {busiest.width_s:g}-s window needs {busiest.units_needed.max():,.2f}")
    return with_headroom(problem, int(grid[meets[0]]))


def latency_scan_units(problem: ReservedProblem) -> int:
    grid = problem.grid(latency_search_max(problem))
    for units in grid[1:]:
        if latency_met(problem, units):
            return with_headroom(problem, int(units))
    raise infeasible_within_grid(problem, "the latency target", latency_binding(problem))


def latency_search_max(problem: ReservedProblem) -> int:
    """The top of the latency search: ``max_units`` when the instance sets it, else 8 times the busiest window's
    units (queueing within a window can need more than its average)."""
    if problem.spec.max_units is not None:
        return problem.max_units
    return problem.profile.round_up(8 * problem.max_units)


def latency_binding(problem: ReservedProblem) -> str:
    """Why a latency target fails at the top of the search: the base latency alone, or the queue."""
    target = problem.plans.latency
    if target.metric == "e2e":
        floor_s = quantile(problem.baseline_latency_s, target.percentile, problem.spec.quantile_method)
        if floor_s > target.threshold_s:
            return (f"the base latency alone has p{100 * target.percentile:g} = {floor_s:.3g} s > {target.threshold_s:g} s: no purchase "
                    "meets it")
    return f"the queue still delays requests at {latency_search_max(problem):,} units"


def cheapest_units(grid: np.ndarray, cost_per_hour: Callable[[int], float]) -> int:
    """The grid point of least ``cost_per_hour`` (ties: the first, fewer units)."""
    costs = [cost_per_hour(int(g)) for g in grid]
    return int(grid[int(np.argmin(costs))])


def hybrid_scan_for(problem: ReservedProblem, series: WindowSeries, grid: np.ndarray) -> int:
    """The cheapest grid point by the hybrid rule (every point's $/h, from one sort: evaluator.spill_per_hour_on_grid)."""
    costs = problem.prices.unit_per_hour * grid + spill_per_hour_on_grid(series, grid)
    return int(grid[int(np.argmin(costs))])


def hybrid_scan_units(problem: ReservedProblem) -> int:
    return with_headroom(problem, hybrid_scan_for(problem, problem.cost_windows, problem.grid()))


def backlog_scan_units(problem: ReservedProblem) -> int:
    price, wait = problem.prices.unit_per_hour, problem.plans.backlog.max_wait_s
    return with_headroom(problem, cheapest_units(problem.grid(), lambda g: price * g + backlog_spill_per_hour(problem.cost_windows, g, wait)))


def worst_scenario_units(problem: ReservedProblem) -> int:
    grid = problem.grid()
    return with_headroom(problem, max(hybrid_scan_for(problem, s.cost_windows, grid) for s in problem.scenarios))


def flat_commitment(problem: ReservedProblem) -> CommitmentPlan:
    n_blocks = int(block_index(problem)[-1]) + 1
    units = []
    for model in problem.commitment_models:
        peak = model.profile.round_up(float(model.cost_windows.units_needed.max()))
        units.append(with_headroom(problem, hybrid_scan_for(problem, model.cost_windows, model.profile.grid(peak))))
    deployed = np.repeat(np.array(units, dtype=np.int64)[:, None], n_blocks, axis=1)
    return CommitmentPlan(int(sum(units)), np.zeros(n_blocks, dtype=np.int64), deployed)
