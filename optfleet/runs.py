"""Run fleet methods on a problem and collect scored, timed results.

Every method's plan goes through the same evaluator; a method that finds no
feasible plan is recorded with its reason instead of stopping the others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from optfleet.errors import InfeasibleError
from optfleet.fleet.evaluator import FleetEvaluation, evaluate
from optfleet.fleet.problem import FleetProblem
from optfleet.heuristics import FLEET_METHODS
from optfleet.heuristics.closed_forms import SavingsForecast, savings_forecast


@dataclass(frozen=True)
class MethodResult:
    """One method's outcome: its evaluation (None if infeasible), the reason, and its wall time."""

    method: str
    evaluation: FleetEvaluation | None
    seconds: float
    infeasible_reason: str | None = None
    forecast: SavingsForecast | None = None
    savings_vs_homogeneous: float | None = None


@dataclass(frozen=True)
class FleetRun:
    """All method results of one solve; ``chosen`` is the method the user asked for."""

    problem: FleetProblem
    chosen: str
    results: dict[str, MethodResult] = field(default_factory=dict)

    @property
    def main(self) -> MethodResult:
        return self.results[self.chosen]


def run_method(problem: FleetProblem, method: str) -> MethodResult:
    """Run one registered method and evaluate its plan."""
    start = time.perf_counter()
    try:
        plan = FLEET_METHODS[method](problem)
    except InfeasibleError as exc:
        return MethodResult(method, None, time.perf_counter() - start, infeasible_reason=str(exc))
    seconds = time.perf_counter() - start
    return MethodResult(method, evaluate(problem, plan), seconds)


def run_fleet(problem: FleetProblem, chosen: str, methods: list[str] | None = None) -> FleetRun:
    """Run ``chosen`` and every other method (default: all registered), with savings vs homogeneous."""
    names = list(dict.fromkeys([chosen, *(methods or FLEET_METHODS)]))
    raw = {name: run_method(problem, name) for name in names}
    if "homogeneous" not in raw:
        raw["homogeneous"] = run_method(problem, "homogeneous")
    base = raw["homogeneous"].evaluation
    results = {}
    for name, result in raw.items():
        if result.evaluation is None or base is None:
            results[name] = result
            continue
        results[name] = MethodResult(
            method=name,
            evaluation=result.evaluation,
            seconds=result.seconds,
            forecast=savings_forecast(result.evaluation, base),
            savings_vs_homogeneous=1.0 - result.evaluation.cost_per_hour / base.cost_per_hour,
        )
    return FleetRun(problem=problem, chosen=chosen, results=results)


def run_to_dict(run: FleetRun) -> dict[str, Any]:
    """Machine-readable form of a run (the ``--json`` output)."""
    def one(result: MethodResult) -> dict[str, Any]:
        body: dict[str, Any] = {"method": result.method, "seconds": result.seconds, "feasible": result.evaluation is not None}
        if result.evaluation is None:
            body["infeasible_reason"] = result.infeasible_reason
            return body
        body.update(result.evaluation.to_dict())
        body["savings_vs_homogeneous"] = result.savings_vs_homogeneous
        if result.forecast is not None:
            body["closed_forms"] = {
                "alpha": result.forecast.alpha,
                "rho": result.forecast.rho,
                "naive_savings": result.forecast.naive,
                "corrected_savings": result.forecast.corrected,
                "evaluated_savings": result.forecast.evaluated,
            }
        return body

    problem = run.problem
    return {
        "instance": problem.name,
        "kind": "fleet",
        "rate_rps": problem.rate_rps,
        "ttft_p99_slo_ms": problem.ttft_p99_ms,
        "rho_max": problem.rho_max,
        "ttft_rule": problem.ttft_rule,
        "method": run.chosen,
        "result": one(run.main),
        "baselines": [one(r) for name, r in run.results.items() if name != run.chosen],
    }
