"""The reserved kind's methods, grouped by the question each answers.

Every question has the anchor's heuristic (a scan or a percentile) and an exact method; rows of one question are
compared with each other (one group per question), in the question's objective:

=====================  ==============================  =====================  ===================================
question               heuristics                      exact                  objective (min)
=====================  ==============================  =====================  ===================================
overload ``pXX``       ``percentile_pXX``,             ``chance_pXX``         units, with ``P(X_n > G) <= 1 - p``
                       ``overload_scan_pXX``                                  at every window width
latency                ``latency_scan``                ``latency``            units meeting the latency target
hybrid                 ``hybrid_scan``                 ``hybrid``             $/h, spill pro rata (slosizer)
backlog                ``backlog_scan``                ``backlog``            $/h, backlog within the wait limit
robust                 ``worst_scenario``              ``robust``             worst scenario's $/h
commitment             ``flat_commitment``             ``commitment``         $/h of reservation, on-demand, spill
=====================  ==============================  =====================  ===================================

A question is asked when the instance asks it: one overload question per ``plans.percentiles`` entry, the
latency question with ``plans.latency``, hybrid with prices (unless ``plans.hybrid: false``), backlog, robust and
commitment with their blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from optfleet.problems.reserved.problem import ReservedProblem
from optfleet.problems.reserved.schema import percentile_label
from optfleet.registry import lazy


class _Lazy:
    """``module.name`` for every attribute, imported when called (Pyomo only when an exact method runs)."""

    def __init__(self, module: str) -> None:
        self.module = module

    def __getattr__(self, name: str) -> Callable[..., Any]:
        return lazy(self.module, name)


heuristics = _Lazy("optfleet.problems.reserved.heuristics")
exact = _Lazy("optfleet.problems.reserved.exact")


@dataclass(frozen=True)
class Method:
    """One method: its question, whether it is exact, the objective's unit, and its runner
    (``problem -> plan`` for a heuristic, ``problem -> (plan, report)`` for an exact one)."""

    name: str
    question: str
    exact: bool
    runner: Callable[[ReservedProblem], Any]
    description: str


def catalogue(problem: ReservedProblem) -> dict[str, Method]:
    """Every method of ``problem``, in table order (module docstring)."""
    plans = problem.plans
    found: list[Method] = []
    for p in plans.percentiles:
        label = percentile_label(p)
        question = f"overload {label}"
        found += [
            Method(f"percentile_{label}", question, False, lambda pr, p=p: heuristics.percentile_units(pr, p),
                   f"the {label} of the units each window needs, largest over the widths, rounded up"),
            Method(f"overload_scan_{label}", question, False, lambda pr, p=p: heuristics.overload_scan_units(pr, p),
                   f"the first grid point with overload probability <= {1 - p:.4g} at every width"),
            Method(f"chance_{label}", question, True, lambda pr, p=p: exact.chance(pr, p),
                   f"MILP: fewest units with overload probability <= {1 - p:.4g} at every width"),
        ]
    if plans.latency is not None:
        found += [
            Method("latency_scan", "latency", False, heuristics.latency_scan_units, "every grid point from the first purchase up, until the target holds"),
            Method("latency", "latency", True, exact.latency_bisect, "bisection over the grid (latency falls as units grow)"),
        ]
    if problem.prices is not None and plans.hybrid:
        found += [
            Method("hybrid_scan", "hybrid", False, heuristics.hybrid_scan_units, "every grid point's $/h, the cheapest"),
            Method("hybrid", "hybrid", True, exact.hybrid, "MILP: reserved units + pay-as-you-go spill"),
        ]
    if plans.backlog is not None:
        found += [
            Method("backlog_scan", "backlog", False, heuristics.backlog_scan_units, "every grid point's $/h with the online backlog rule"),
            Method("backlog", "backlog", True, exact.backlog, "MILP: units + hindsight spill, backlog within the wait limit"),
        ]
    if plans.robust is not None:
        found += [
            Method("worst_scenario", "robust", False, heuristics.worst_scenario_units, "the largest of every scenario's own hybrid scan"),
            Method("robust", "robust", True, exact.robust, "MILP: one unit count, least worst-scenario $/h"),
        ]
    if plans.commitment is not None:
        found += [
            Method("flat_commitment", "commitment", False, heuristics.flat_commitment, "each model its own hybrid scan, all reserved"),
            Method("commitment", "commitment", True, exact.commitment, "MILP: reservation + on-demand lots + deployments per block"),
        ]
    return {m.name: m for m in found}
