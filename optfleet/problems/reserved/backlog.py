"""The backlog model on long traces: exact, one purchase-grid point at a time, pruned by proven lower bounds.

At a fixed unit count ``G`` the backlog model (models/reserved.py) splits into *segments*.  The online rule
(evaluator.py: spill only what would wait too long, when it would) keeps the queue at its highest: by induction,
``q_t = min(cap, max(0, q_{t-1} + X_t - G - o_t))`` is non-decreasing in ``q_{t-1}`` and non-increasing in the spill
``o_t >= 0``, so no plan's queue is above the online queue.  Where the online queue is empty at the end of a window,
every plan's queue is, and the windows before and after are independent problems.  For each segment:

* the online rule (evaluator.py: spill only what would wait too long, when it would) spills the least volume
  ``V`` any plan can (the fluid finite buffer: it keeps the queue as full as the wait limit allows, so it serves
  the most), at cost ``U``;
* every plan therefore pays at least ``L = pi_min V`` (``pi_min`` the cheapest window of the segment that has
  work to spill); when ``L = U`` the online rule is optimal there, else the segment's LP
  (:func:`optfleet.models.reserved.backlog_fixed_arrays`) gives its optimum.

So ``cost(G) >= c H G + sum L`` (a proven bound; ``c H G`` for a grid point not replayed before the time limit)
and ``cost(G) <= c H G + sum U``.  Grid points are visited in
order of their bound; one whose bound is not below the best cost found is skipped, proven no better.  The search
ends optimal when every grid point is solved or skipped; at the time limit the report's bound is the least bound
of the grid points left (a lower bound on the optimum).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from optfleet.models.reserved import SpillWindows, backlog_fixed_arrays
from optfleet.solvers.highs import solve_arrays
from optfleet.solvers.report import OPTIMAL, TIME_LIMIT, SolveReport, relative_gap

TOLERANCE = 1e-9  # relative: a bound this close to the best cost proves it


@dataclass(frozen=True)
class OnlineSegments:
    """The online rule at one unit count: each window's spill (unit-windows), and each window's segment."""

    spill: NDArray[np.float64]
    segment: NDArray[np.int64]


def online_segments(needed: NDArray[np.float64], units: float, wait_windows: float) -> OnlineSegments:
    """The online rule's spill and the segments (module docstring) at ``units``."""
    cap = wait_windows * units
    spill = np.zeros(len(needed))
    segment = np.zeros(len(needed), dtype=np.int64)
    queue = 0.0
    current = -1
    for t, x in enumerate(needed.tolist()):
        if queue <= 0.0:
            current += 1
        segment[t] = current
        level = queue + x - units
        if level > cap:
            spill[t] = level - cap
            queue = cap
        else:
            queue = level if level > 0.0 else 0.0
    return OnlineSegments(spill, segment)


def _segment_costs(windows: SpillWindows, online: OnlineSegments) -> tuple[NDArray, NDArray]:
    """Per segment: the online cost ``U`` and the bound ``L = pi_min V`` ($ over the span)."""
    count = int(online.segment[-1]) + 1
    upper = np.bincount(online.segment, weights=windows.spill_price * online.spill, minlength=count)
    volume = np.bincount(online.segment, weights=online.spill, minlength=count)
    price = np.where(windows.units_needed > 0, windows.spill_price, np.inf)
    cheapest = np.full(count, np.inf)
    np.minimum.at(cheapest, online.segment, price)
    lower = np.where(volume > 0, np.where(np.isfinite(cheapest), cheapest, 0.0) * volume, 0.0)
    return upper, lower


def solve_backlog_by_units(windows: SpillWindows, units_grid: NDArray[np.float64], unit_per_hour: float, max_wait_s: float,
                           time_limit_s: float | None = None) -> tuple[int, SolveReport]:
    """The backlog optimum over ``units_grid`` (module docstring): the units and a report in $/h."""
    start = time.perf_counter()
    wait_windows = max_wait_s / windows.width_s
    reserved = unit_per_hour * windows.hours
    cases = {}
    bound = {g: reserved * g for g in units_grid.tolist()}  # spill >= 0: the bound of a grid point not yet replayed
    status = OPTIMAL
    for g in units_grid.tolist():
        if cases and time_limit_s is not None and time.perf_counter() - start > time_limit_s:  # one replay at least: an incumbent
            status = TIME_LIMIT
            break
        online = online_segments(windows.units_needed, g, wait_windows)
        upper, lower = _segment_costs(windows, online)
        cases[g] = (online, upper, lower)
        bound[g] = reserved * g + lower.sum()
    best_units, best = min(((g, reserved * g + upper.sum()) for g, (_, upper, _) in cases.items()), key=lambda c: (c[1], c[0]))
    lp_runs = 0
    open_units = sorted(bound, key=lambda g: (bound[g], g))
    while status == OPTIMAL and open_units and bound[open_units[0]] < best - TOLERANCE * max(1.0, abs(best)):
        if time_limit_s is not None and time.perf_counter() - start > time_limit_s:
            status = TIME_LIMIT
            break
        g = open_units.pop(0)
        online, upper, lower = cases[g]
        loose = np.flatnonzero(upper - lower > TOLERANCE * np.maximum(1.0, upper))
        cost = reserved * g + upper.sum()
        if len(loose):
            rows = np.isin(online.segment, loose)
            starts = np.concatenate([[True], online.segment[rows][1:] != online.segment[rows][:-1]])
            report, _ = solve_arrays(backlog_fixed_arrays(windows.units_needed[rows], windows.spill_price[rows], starts, g, wait_windows),
                                     what=f"the backlog LP at {g:g} units")
            lp_runs += 1
            cost = reserved * g + upper.sum() - upper[loose].sum() + report.objective
        bound[g] = cost
        if cost < best - TOLERANCE * max(1.0, abs(best)) or (abs(cost - best) <= TOLERANCE * max(1.0, abs(best)) and g < best_units):
            best_units, best = int(g), cost
    proven = min([best, *(bound[g] for g in open_units)])
    hours = windows.hours
    gap = 0.0 if status == OPTIMAL else relative_gap(best, proven)
    report = SolveReport(status, best / hours, proven / hours, gap, time.perf_counter() - start, "highs",
                         f"{len(cases)} unit counts, {lp_runs} segment LPs", {"solver_runs": lp_runs})
    return int(best_units), report

