"""The grids of ``E[S^2]/E[S]`` that close the fleet MILP's moments gap (models/fleet_moments.py), refined where the
relaxation's plan sits.

The driver (milp.py) solves the model's relaxation with every graded pool's table at the bottom of its ratio interval
(a lower bound on every plan that meets the rule) and its restriction at the top (every plan passes the evaluator).
While they differ, the grid gets new points from the relaxation's plan: for each pool below its table size, with
load ``a``, ``n`` instances (``c`` slots) and own ratio ``R`` in the interval ``[g_l, g_{l+1}]``:

* ``R`` itself, so that the restriction's interval ending there holds the plan at its own moments;
* the **critical ratio** ``R* = b_0 / w``, ``w = ln(C(c, a)/0.01) / (2 (c - a))`` Kimura's ``W99`` per unit of R
  (optfleet/queueing/kimura.py: W99 is linear in R at fixed ``c``, ``a``) and ``b_0`` the budget of the lowest floor
  level (the largest): the largest R at which the plan's pool meets its wait budget at any floor level.  When
  ``g_l < R* < R`` the plan broke the rule, and the new interval ``[R*, R]`` has its table at ``R*`` (times
  ``1 + CUT_MARGIN``), which no longer admits the load at ``n`` instances at any floor level: the relaxation's plan is
  cut off (with every variant that only trades its floor level) while every routing with a ratio at most ``R*`` keeps
  its table;
* otherwise the geometric mean of ``g_l`` and ``R`` (bisection in log R, which shrinks the interval whatever the
  plan's failure).

Each refinement only splits intervals, so each relaxation restricts the last one (its tables are at higher
bottoms) and the bound never falls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.fleet.milp_data import FleetMilpData
from optfleet.queueing.kimura import wait_quantile_s

CUT_MARGIN = 1e-6  # relative: the cut point sits this far above the critical ratio, so the plan's load fails its table
MIN_WIDTH = 1e-4
RATIO_TOLERANCE = 1e-9  # relative: a ratio this close to an edge may sit in the interval below it  # relative: an interval narrower than this is not split again


@dataclass(frozen=True)
class PoolState:
    """A pool of a solved model, what refining its grid needs: option ``j``, instances, load (erlangs) and own ratio
    ``E[S^2]/E[S]`` in ms."""

    j: int
    instances: int
    load_erlangs: float
    ratio_ms: float


def initial_grid(data: FleetMilpData, own_ratio_ms: dict[int, float]) -> tuple[NDArray[np.float64] | None, ...]:
    """Per pool option below whose table size a plan can sit (``N_j > 1``, a floor level), the edges
    ``least <= own <= greatest`` of its class ratios (``FleetMilpData.least_ratio_ms``, ``greatest_ratio_ms``) with the
    incumbent's own ratio ``own_ratio_ms[j]`` in between where given; None for the other options."""
    edges = []
    for j, option in enumerate(data.pools):
        low, high = float(data.least_ratio_ms[j]), float(data.greatest_ratio_ms[j])
        if option.table_instances <= 1 or option.levels == 0 or not high > low > 0:
            edges.append(None)
            continue
        points = [low, high] + ([own_ratio_ms[j]] if j in own_ratio_ms and low < own_ratio_ms[j] < high else [])
        edges.append(_distinct(points))
    return tuple(edges)


def critical_ratio_ms(data: FleetMilpData, state: PoolState, level: int = 0) -> float:
    """``R*`` of the module docstring: the largest ``E[S^2]/E[S]`` (ms) at which ``state``'s pool (its load at its
    instance count) meets the wait budget of floor ``level`` (inf when its Erlang C is at most the tail and Kimura's wait
    is 0 at any R; 0 when its load reaches its slots)."""
    option, problem = data.pools[state.j], data.problem
    servers = state.instances * option.slots_per_instance
    per_second = float(wait_quantile_s(servers, state.load_erlangs, 1.0, 0.0, problem.ttft_quantile))  # W99 at R = 1 s
    budget_s = (problem.ttft_p99_ms - option.level_floors_ms[level]) / 1000.0
    if per_second == 0.0:
        return np.inf
    return 1000.0 * max(budget_s, 0.0) / per_second


def refine(data: FleetMilpData, grid: tuple[NDArray[np.float64] | None, ...], pools: list[PoolState]) -> tuple[tuple[NDArray[np.float64] | None, ...], int]:
    """The grid with the points of the module docstring for each of ``pools`` (graded, below its table size), and how
    many points were added (0: nothing left to refine)."""
    edges = list(grid)
    added = 0
    for state in pools:
        current = edges[state.j]
        if current is None or state.instances >= data.pools[state.j].table_instances or state.ratio_ms <= 0:
            continue
        # the interval the model can put the pool in: the first whose top is at least R (to the solver's tolerance)
        interval = int(np.clip(np.searchsorted(current, state.ratio_ms * (1 - RATIO_TOLERANCE), side="left") - 1, 0, len(current) - 2))
        bottom = float(current[interval])
        points = [state.ratio_ms]
        cut = critical_ratio_ms(data, state) * (1 + CUT_MARGIN)
        if bottom * (1 + MIN_WIDTH) < cut < state.ratio_ms:
            points.append(cut)
        elif state.ratio_ms > bottom * (1 + MIN_WIDTH):
            points.append(float(np.sqrt(bottom * state.ratio_ms)))
        inside = [p for p in points if current[0] < p < current[-1] and np.min(np.abs(current - p) / p) > MIN_WIDTH]
        if inside:
            edges[state.j] = _distinct([*current, *inside])
            added += len(inside)
    return tuple(edges), added


def _distinct(points: list[float]) -> NDArray[np.float64]:
    return np.unique(np.asarray(points, dtype=np.float64))
