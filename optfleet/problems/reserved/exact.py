"""The exact reserved-capacity methods: build the model (models/reserved.py), solve it, return the plan and
the solver's report (status, bound, gap).

* hybrid, robust (without overload limits): Pyomo up to ``PYOMO_WINDOW_LIMIT`` cost windows, else the same
  rows as arrays (with HiGHS; another solver gets the Pyomo model);
* backlog: Pyomo up to ``PYOMO_WINDOW_LIMIT`` cost windows, else unit count by unit count (backlog.py);
* chance (per percentile), commitment: Pyomo;
* latency: bisection over the purchase grid, exact because every latency percentile is non-increasing in the
  units (latency.py); its report is optimal with bound = the answer (the grid point below it fails).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
from optfleet.models.reserved import (
    PYOMO_WINDOW_LIMIT,
    CommitmentData,
    OverloadLimit,
    PurchaseGrid,
    SpillWindows,
    grid_points,
    build_backlog,
    build_chance,
    build_commitment,
    build_hybrid,
    build_robust,
    commitment_schedule,
    hybrid_arrays,
    robust_arrays,
    robust_hours,
    units_bought,
    units_from_columns,
)
from optfleet.solvers import highs
from optfleet.solvers.report import OPTIMAL, SolveReport

from optfleet.errors import InfeasibleError
from optfleet.problems.reserved.backlog import solve_backlog_by_units
from optfleet.problems.reserved.evaluator import CommitmentPlan, UnitsPlan, block_index, latency_met
from optfleet.problems.reserved.heuristics import latency_binding, latency_search_max
from optfleet.problems.reserved.problem import ReservedProblem, infeasible_within_grid
from optfleet.problems.reserved.stats import overloaded_windows_allowed
from optfleet.problems.reserved.windows import WindowSeries


def purchase_grid(problem: ReservedProblem) -> PurchaseGrid:
    return PurchaseGrid(problem.profile.min_units, problem.profile.increment_units, problem.max_units)


def spill_windows(series: WindowSeries) -> SpillWindows:
    """The model's view of a series: ``X_n`` and ``pi_n = p_n tau Delta`` ($ per unit-window spilled)."""
    return SpillWindows(series.units_needed, series.price_per_work * series.work_per_unit, series.hours, series.width_s)


def overload_limits(windows: tuple[WindowSeries, ...], p: float) -> list[OverloadLimit]:
    return [OverloadLimit(s.units_needed, overloaded_windows_allowed(s.n_windows, 1.0 - p)) for s in windows]


def per_hour(report: SolveReport, hours: float) -> SolveReport:
    """A cost model's report in $/h: the models minimise dollars over ``hours`` (models/reserved.py)."""
    scale = (lambda v: None if v is None else v / hours)
    return replace(report, objective=scale(report.objective), bound=scale(report.bound))


def _options(problem: ReservedProblem) -> dict:
    return {"solver": problem.spec.solve.solver, "time_limit": problem.spec.solve.time_limit_s}


def _solve(problem: ReservedProblem, model, what: str) -> SolveReport:
    report = highs.solve(model, **_options(problem))
    if not report.has_solution:
        raise InfeasibleError(f"{what}: the solver found no plan ({report.status}); {report.summary}")
    return report


def _solve_arrays(problem: ReservedProblem, args: tuple, what: str) -> tuple[SolveReport, np.ndarray]:
    report, values = highs.solve_arrays(args, what=what, time_limit=problem.spec.solve.time_limit_s)
    if values is None:
        raise InfeasibleError(f"{what}: the solver found no plan ({report.status}); {report.summary}")
    return report, values


def _as_arrays(problem: ReservedProblem, n_windows: int) -> bool:
    """Whether to build a model as arrays: beyond ``PYOMO_WINDOW_LIMIT`` windows, with HiGHS."""
    return n_windows > PYOMO_WINDOW_LIMIT and problem.spec.solve.solver == "highs"


def hybrid(problem: ReservedProblem) -> tuple[UnitsPlan, SolveReport]:
    windows, grid = spill_windows(problem.cost_windows), purchase_grid(problem)
    if _as_arrays(problem, problem.cost_windows.n_windows):
        report, values = _solve_arrays(problem, hybrid_arrays(windows, grid, problem.prices.unit_per_hour), "the hybrid model")
        return UnitsPlan(units_from_columns(values, grid)), per_hour(report, windows.hours)
    model = build_hybrid(windows, grid, problem.prices.unit_per_hour)
    report = _solve(problem, model, "the hybrid model")
    return UnitsPlan(units_bought(model)), per_hour(report, windows.hours)


def backlog(problem: ReservedProblem) -> tuple[UnitsPlan, SolveReport]:
    windows, grid = spill_windows(problem.cost_windows), purchase_grid(problem)
    args = (windows, grid, problem.prices.unit_per_hour, problem.plans.backlog.max_wait_s)
    if _as_arrays(problem, problem.cost_windows.n_windows):
        units, report = solve_backlog_by_units(windows, grid_points(grid), *args[2:], time_limit_s=problem.spec.solve.time_limit_s)
        return UnitsPlan(units), report
    model = build_backlog(*args)
    report = _solve(problem, model, "the backlog model")
    return UnitsPlan(units_bought(model)), per_hour(report, windows.hours)


def chance(problem: ReservedProblem, p: float) -> tuple[UnitsPlan, SolveReport]:
    limits = overload_limits(problem.windows, p)
    model = build_chance(limits, purchase_grid(problem))
    report = highs.solve(model, **_options(problem))
    if not report.has_solution:
        busiest = max(problem.windows, key=lambda s: np.sort(s.units_needed)[-1 - overloaded_windows_allowed(s.n_windows, 1.0 - p)])
        k = overloaded_windows_allowed(busiest.n_windows, 1.0 - p)
        need = np.sort(busiest.units_needed)[-1 - k]
        raise infeasible_within_grid(problem, f"overload probability <= {1 - p:.4g} ({report.status})",
                                     f"at {busiest.width_s:g}-s windows only {k:,} may overload and the next busiest needs {need:,.2f}")
    return UnitsPlan(units_bought(model)), report


def robust(problem: ReservedProblem) -> tuple[UnitsPlan, SolveReport]:
    eps = problem.plans.robust.max_overload_probability
    scenarios, grid = [spill_windows(s.cost_windows) for s in problem.scenarios], purchase_grid(problem)
    hours = robust_hours(scenarios)
    if eps is None and _as_arrays(problem, sum(len(s.units_needed) for s in scenarios)):
        report, values = _solve_arrays(problem, robust_arrays(scenarios, grid, problem.prices.unit_per_hour), "the robust model")
        return UnitsPlan(units_from_columns(values, grid)), per_hour(report, hours)
    limits = None if eps is None else [overload_limits(s.windows, 1.0 - eps) for s in problem.scenarios]
    model = build_robust(scenarios, grid, problem.prices.unit_per_hour, limits)
    report = _solve(problem, model, "the robust model")
    return UnitsPlan(units_bought(model)), per_hour(report, hours)


def commitment_data(problem: ReservedProblem) -> CommitmentData:
    c = problem.plans.commitment
    grids = []
    for model in problem.commitment_models:
        peak = model.profile.round_up(float(model.cost_windows.units_needed.max()))
        grids.append(PurchaseGrid(model.profile.min_units, model.profile.increment_units, max(peak, model.profile.min_units)))
    of = block_index(problem)
    return CommitmentData(grids, [spill_windows(m.cost_windows) for m in problem.commitment_models], of, int(of[-1]) + 1, c.block_s / 3600.0,
                          problem.prices.unit_per_hour, c.on_demand_per_unit_hour, c.term_blocks, sum(g.max_units for g in grids))


def commitment(problem: ReservedProblem) -> tuple[CommitmentPlan, SolveReport]:
    data = commitment_data(problem)
    model = build_commitment(data)
    report = _solve(problem, model, "the commitment model")
    return CommitmentPlan(*commitment_schedule(model, data)), per_hour(report, data.windows[0].hours)


def latency_bisect(problem: ReservedProblem) -> tuple[UnitsPlan, SolveReport]:
    """The smallest grid point meeting the latency target, by bisection (exact: module docstring)."""
    start = time.perf_counter()
    grid = problem.grid(latency_search_max(problem))[1:]
    low, high = 0, len(grid) - 1  # invariant: the answer, if any, is in grid[low..high]
    if not latency_met(problem, int(grid[high])):
        raise infeasible_within_grid(problem, "the latency target", latency_binding(problem))
    runs = 1
    while low < high:
        mid = (low + high) // 2
        runs += 1
        if latency_met(problem, int(grid[mid])):
            high = mid
        else:
            low = mid + 1
    units = int(grid[low])
    report = SolveReport(OPTIMAL, float(units), float(units), 0.0, time.perf_counter() - start, "bisection",
                         f"{runs} fluid-queue replays over {len(grid)} grid points", {"solver_runs": runs})
    return UnitsPlan(units), report
