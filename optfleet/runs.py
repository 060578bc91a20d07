"""Run fleet methods on a problem and collect scored, timed results.

Every method's plan goes through the same evaluator; a method that finds no
feasible plan is recorded with its reason instead of stopping the others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from optfleet.errors import InfeasibleError, InputError
from optfleet.exact import solve_milp
from optfleet.fleet.constraint_check import constraint_violations
from optfleet.fleet.evaluator import FleetEvaluation, evaluate
from optfleet.fleet.problem import FleetProblem
from optfleet.heuristics import FLEET_METHODS
from optfleet.heuristics.closed_forms import SavingsForecast, savings_forecast
from optfleet.solvers import SolveReport

METHODS = (*FLEET_METHODS, "milp")
SINGLE_TYPE_PREFIX = "milp:"


def single_type_methods(problem: FleetProblem) -> list[str]:
    """``milp:<GPU type>`` per type of a multi-type GPU catalog: the exact best fleet of that type alone."""
    types = list(dict.fromkeys(o.gpu_name for o in problem.options))
    return [f"{SINGLE_TYPE_PREFIX}{t}" for t in types] if len(types) > 1 else []


def _restricted(problem: FleetProblem, method: str) -> FleetProblem:
    gpu_type = method.removeprefix(SINGLE_TYPE_PREFIX)
    options = tuple(o for o in problem.options if o.gpu_name == gpu_type)
    if not options:
        raise InputError("--methods", method, f"no configuration of GPU type {gpu_type!r}; types: {', '.join(dict.fromkeys(o.gpu_name for o in problem.options))}")
    return problem.with_options(options)


@dataclass(frozen=True)
class MethodResult:
    """One method's outcome: its evaluation (None if infeasible), the reason, and its wall time."""

    method: str
    evaluation: FleetEvaluation | None
    seconds: float
    infeasible_reason: str | None = None
    forecast: SavingsForecast | None = None
    savings_vs_homogeneous: float | None = None
    solve_report: SolveReport | None = None
    iterations: int | None = None


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
    """Run one method (a heuristic, or ``milp``) and evaluate its plan."""
    start = time.perf_counter()
    try:
        if method == "milp" or method.startswith(SINGLE_TYPE_PREFIX):
            restricted = problem if method == "milp" else _restricted(problem, method)
            exact = solve_milp(restricted, routing=problem.milp_routing, max_pools=problem.max_pools,
                               time_limit_s=problem.time_limit_s, mip_gap=problem.mip_gap)
            return MethodResult(method, exact.evaluation, time.perf_counter() - start, solve_report=exact.report, iterations=exact.iterations)
        plan = FLEET_METHODS[method](problem)
    except InfeasibleError as exc:
        return MethodResult(method, None, time.perf_counter() - start, infeasible_reason=str(exc))
    seconds = time.perf_counter() - start
    return MethodResult(method, evaluate(problem, plan), seconds)


def run_fleet(problem: FleetProblem, chosen: str, methods: list[str] | None = None) -> FleetRun:
    """Run ``chosen`` and every other method (default: the heuristics), with savings vs homogeneous.

    When ``methods`` names ``milp`` and the instance has a multi-type GPU
    catalog, the single-type MILPs (:func:`single_type_methods`) run too.
    """
    names = list(dict.fromkeys([chosen, *(methods or FLEET_METHODS)]))
    if methods is not None and "milp" in names:
        names += single_type_methods(problem)
    raw = {}
    for name in names:
        try:
            raw[name] = run_method(problem, name)
        except InputError as exc:
            if name == chosen:
                raise
            raw[name] = MethodResult(name, None, 0.0, infeasible_reason=f"not available here: {exc}")
    if "homogeneous" not in raw:
        raw["homogeneous"] = run_method(problem, "homogeneous")
    base = raw["homogeneous"].evaluation
    results = {}
    for name, result in raw.items():
        if result.evaluation is None or base is None or result.evaluation.plan.served_share < 1.0:
            results[name] = result  # a budget-capped plan serves less traffic: savings are not comparable
            continue
        results[name] = MethodResult(
            method=name,
            evaluation=result.evaluation,
            seconds=result.seconds,
            forecast=savings_forecast(result.evaluation, base),
            savings_vs_homogeneous=1.0 - result.evaluation.cost_per_hour / base.cost_per_hour,
            solve_report=result.solve_report,
            iterations=result.iterations,
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
        if result.solve_report is not None:
            body["solver"] = {**result.solve_report.to_dict(), "table_iterations": result.iterations}
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


def gap_rows(run: FleetRun) -> list[dict[str, Any]]:
    """One row per method: pools, $/h and the gap to the MILP's proven bound (or to the best plan found).

    Over a multi-type GPU catalog, rows also give the saving against the
    cheapest single-type MILP fleet (``savings_vs_single_type_pct``).
    """
    milp = run.results.get("milp")
    bound = milp.solve_report.bound if milp is not None and milp.solve_report is not None else None
    feasible = [r.evaluation.cost_per_hour for r in run.results.values() if r.evaluation is not None]
    reference = bound if bound is not None else (min(feasible) if feasible else None)
    singles = [r.evaluation.cost_per_hour for name, r in run.results.items() if name.startswith(SINGLE_TYPE_PREFIX) and r.evaluation is not None]
    best_single = min(singles) if singles else None
    label = (lambda p: f"{p.gpu} {p.window_tokens}:{p.gpus}") if run.problem.heterogeneous else (lambda p: f"{p.window_tokens}:{p.gpus}")
    rows = []
    for result in run.results.values():
        e = result.evaluation
        row: dict[str, Any] = {"method": result.method, "time_s": round(result.seconds, 3)}
        if e is None:
            available = not (result.infeasible_reason or "").startswith("not available")
            row.update({"pools": "-", "cost_per_hour": None, "gap_pct": None, "status": "infeasible" if available else "not available"})
        else:
            row.update({
                "pools": " + ".join(label(p) for p in e.pools),
                "cost_per_hour": round(e.cost_per_hour, 2),
                "gap_pct": None if reference is None else round(100 * (e.cost_per_hour - reference) / reference, 3) + 0.0,  # no "-0.0"
                "status": result.solve_report.status if result.solve_report is not None else ("meets SLO" if e.meets_slo else "violates SLO"),
            })
            broken = constraint_violations(run.problem, e)
            if broken:
                row["status"] += f"; breaks {broken[0]}" + (f" (+{len(broken) - 1} more)" if len(broken) > 1 else "")
        if best_single is not None:
            row["savings_vs_single_type_pct"] = None if e is None else round(100 * (1 - e.cost_per_hour / best_single), 3)
        rows.append(row)
    return rows
