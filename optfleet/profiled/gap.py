"""Run every profiled-fleet method and return one table of rows (no printing).

Methods: ``milp`` (the mixed-type optimum), ``single:<type>`` for every GPU
type (each the MILP restricted to that type, solved exactly) and
``greedy-cost-per-request``.  Every plan is scored by the one evaluator.

Columns per row: method, GPUs per type, total GPUs, $/hour, served req/s,
``gap_to_bound_pct`` against the mixed MILP's proven bound ``z*``, in the
sense of the objective,

    min cost:    100 (cost - z*) / cost            (the house relative gap, solvers/report.py)
    max served:  100 (z* - served) / z*            (under a budget cap)

``mixed_savings_pct`` = ``100 (cost - cost_milp) / cost`` (how much the
mixed fleet saves against this method; the Mélange paper's "savings"),
status, seconds, and a note (the reason a method has no plan or which
constraints its plan breaks).  :func:`savings_vs_best_single` sums the
mixed-vs-single comparison up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from optfleet.errors import InfeasibleError
from optfleet.profiled.baselines import GREEDY, greedy_cost_per_request, single_type_fleet
from optfleet.profiled.evaluator import ProfiledEvaluation, evaluate
from optfleet.profiled.problem import ProfiledProblem
from optfleet.profiled.solve import ProfiledResult, solve_profiled
from optfleet.solvers import SolveReport

MILP = "milp"


@dataclass(frozen=True)
class MethodOutcome:
    """One method's result: its evaluation (None without a plan), solver report, reason and wall time."""

    method: str
    evaluation: ProfiledEvaluation | None
    report: SolveReport | None
    seconds: float
    reason: str | None = None

    @property
    def status(self) -> str:
        if self.evaluation is None:
            return "infeasible"
        if self.report is None:
            return "heuristic" if self.evaluation.feasible else "violates"
        return self.report.status


def methods(problem: ProfiledProblem) -> tuple[str, ...]:
    """``milp``, ``single:<type>`` per type, and the greedy heuristic."""
    return (MILP, *(f"single:{name}" for name in problem.gpu_names), GREEDY)


def run_method(problem: ProfiledProblem, method: str, *, time_limit_s: float | None = None, mip_gap: float | None = None) -> MethodOutcome:
    """Run one method; an infeasible one is recorded with its reason, not raised."""
    began = time.perf_counter()
    try:
        if method == GREEDY:
            plan = greedy_cost_per_request(problem)
            return MethodOutcome(method, evaluate(problem, plan), None, time.perf_counter() - began)
        if method == MILP:
            result: ProfiledResult = solve_profiled(problem, time_limit_s=time_limit_s, mip_gap=mip_gap)
        elif method.startswith("single:"):
            result = single_type_fleet(problem, method.removeprefix("single:"), time_limit_s=time_limit_s, mip_gap=mip_gap)
        else:
            raise ValueError(f"unknown method {method!r}; known: {', '.join(methods(problem))}")
    except InfeasibleError as exc:
        return MethodOutcome(method, None, None, time.perf_counter() - began, str(exc))
    return MethodOutcome(method, result.evaluation, result.report, result.seconds)


def run_methods(problem: ProfiledProblem, *, time_limit_s: float | None = None, mip_gap: float | None = None) -> list[MethodOutcome]:
    """Every method of :func:`methods`, in that order."""
    return [run_method(problem, m, time_limit_s=time_limit_s, mip_gap=mip_gap) for m in methods(problem)]


def gap_rows(problem: ProfiledProblem, outcomes: list[MethodOutcome] | None = None, **options: Any) -> list[dict[str, Any]]:
    """The comparison table (see the module docstring); runs :func:`run_methods` unless ``outcomes`` are given."""
    outcomes = outcomes if outcomes is not None else run_methods(problem, **options)
    milp = next((o for o in outcomes if o.method == MILP), None)
    bound = milp.report.bound if milp is not None and milp.report is not None else None
    milp_cost = milp.evaluation.cost_per_hour if milp is not None and milp.evaluation is not None else None
    budget = problem.budget is not None
    rows = []
    for o in outcomes:
        e = o.evaluation
        row: dict[str, Any] = {
            "method": o.method,
            "gpus_by_type": dict(zip(problem.gpu_names, e.plan.gpus, strict=True)) if e else None,
            "gpus": e.plan.describe_gpus() if e else "-",
            "total_gpus": e.plan.total_gpus if e else None,
            "cost_per_hour": e.cost_per_hour if e else None,
            "served_rps": e.served_rps if e else None,
            "gap_to_bound_pct": _gap_pct(e, bound, budget),
            "mixed_savings_pct": _savings_pct(e, milp_cost) if not budget else None,
            "status": o.status,
            "seconds": o.seconds,
            "note": o.reason if e is None else "; ".join(e.violations),
        }
        rows.append(row)
    return rows


def savings_vs_best_single(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The mixed MILP against the cheapest feasible single-type fleet: both costs and the saving in %.

    None if the MILP or every single type has no feasible plan, or under a
    budget cap (the methods then serve different rates; compare served_rps).
    """
    milp = next((r for r in rows if r["method"] == MILP and r["mixed_savings_pct"] is not None), None)
    singles = [r for r in rows if r["method"].startswith("single:") and r["mixed_savings_pct"] is not None]
    if milp is None or not singles:
        return None
    best = min(singles, key=lambda r: r["cost_per_hour"])
    return {
        "mixed_cost_per_hour": milp["cost_per_hour"],
        "best_single": best["method"].removeprefix("single:"),
        "best_single_cost_per_hour": best["cost_per_hour"],
        "savings_pct": 100 * (best["cost_per_hour"] - milp["cost_per_hour"]) / best["cost_per_hour"],
    }


def _gap_pct(e: ProfiledEvaluation | None, bound: float | None, budget: bool) -> float | None:
    """None for a missing or infeasible plan (a gap would flatter a plan that breaks the rules)."""
    if e is None or not e.feasible or bound is None:
        return None
    if budget:
        gap = (bound - e.served_rps) / bound if bound > 0 else 0.0
    else:
        gap = (e.cost_per_hour - bound) / max(e.cost_per_hour, 1e-10)
    return 100 * _clean(gap)


def _savings_pct(e: ProfiledEvaluation | None, milp_cost: float | None) -> float | None:
    if e is None or not e.feasible or milp_cost is None:
        return None
    return 100 * _clean((e.cost_per_hour - milp_cost) / max(e.cost_per_hour, 1e-10))


def _clean(ratio: float) -> float:
    """Solver round-off (|ratio| < 1e-9) reads as 0."""
    return 0.0 if abs(ratio) < 1e-9 else ratio
