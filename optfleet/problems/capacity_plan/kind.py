"""The capacity_plan kind: registry entry and runs.

Methods: ``milp`` (exact, models/capacity_plan.py), ``rolling_horizon`` (the MILP over moving windows, rolling.py)
and the practitioners' rules (baselines.py).  Each run's
schedule is scored by the one evaluator (evaluator.py): the row's objective is the planned cost over the horizon
($, reservations at their full term); it is feasible when the evaluator finds no violation (SLO capacity, caps,
spot confidence, constraints).  The bound of the rows is the MILP's (its optimum, or its lower bound when stopped
by the time limit): every rule's schedule lies in the MILP's policy space, so its bound bounds them all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from optfleet.errors import InfeasibleError
from optfleet.problems.capacity_plan import baselines
from optfleet.problems.capacity_plan.problem import CapacityProblem, prepare
from optfleet.problems.capacity_plan.schema import METHODS, CapacityPlanInstanceSpec
from optfleet.progress import Progress
from optfleet.registry import SOLVE_BLOCK_OVERRIDES, ProblemKind, lazy
from optfleet.results import MINIMISE, MethodResult, Reference, no_plan

REPORT = "optfleet.problems.capacity_plan.report"
EXACT = "milp"
OBJECTIVE_UNIT = "$"

DESCRIPTIONS = {
    "milp": "exact MILP: one type per model and period, spot at its confidence",
    "rolling_horizon": "the MILP over moving windows; no bound of its own; budget checked after",
    "static_peak": "peak count all horizon, one type per model; caps ignored",
    "per_period_on_demand": "perfect-system count, all on demand; caps ignored",
    "reserve_percentile": "reserve a percentile of GPUs in use, rest on demand; caps ignored",
    "spot_fallback": "SkyServe-like spot + extra, on-demand floor and fallback; caps ignored",
    "greedy_packing": "per period, largest model first, cheapest extra GPUs within caps; no reservations",
}

RUNNERS: dict[str, Callable[[CapacityProblem], Any]] = {
    "rolling_horizon": lazy("optfleet.problems.capacity_plan.rolling", "rolling_horizon"),  # the MILP: imported when run
    "static_peak": baselines.static_peak,
    "per_period_on_demand": baselines.per_period_on_demand,
    "reserve_percentile": baselines.reserve_percentile,
    "spot_fallback": baselines.spot_fallback,
    "greedy_packing": baselines.greedy_packing,
}


def methods(problem: CapacityProblem) -> tuple[str, ...]:
    return METHODS


def default_method(problem: CapacityProblem) -> str:
    return problem.spec.solve.method or EXACT


def solve_methods(problem: CapacityProblem, chosen: str) -> tuple[str, ...]:
    return tuple(m for m in METHODS if m != chosen)


def run(problem: CapacityProblem, method: str, progress: Progress) -> list[MethodResult]:
    """One method's schedule, scored by the evaluator (module docstring)."""
    from optfleet.problems.capacity_plan.evaluator import evaluate
    from optfleet.problems.capacity_plan.exact import solve_milp

    progress(method, 0, 1)
    start = time.perf_counter()
    report = None
    try:
        if method == EXACT:
            schedule, report = solve_milp(problem, lambda step, done, total: progress(f"{method}: {step}", done, total))
        else:
            schedule = RUNNERS[method](problem)
    except InfeasibleError as exc:
        return [no_plan(method, time.perf_counter() - start, str(exc), objective_unit=OBJECTIVE_UNIT)]
    seconds = time.perf_counter() - start
    evaluation = evaluate(problem, schedule)
    violations = evaluation.violations
    note = "" if not violations else f"{len(violations)} violation{'s' if len(violations) > 1 else ''}; first: {violations[0]}"
    return [MethodResult(method, schedule, evaluation, seconds, objective=evaluation.total_cost, objective_unit=OBJECTIVE_UNIT,
                         sense=MINIMISE, feasible=evaluation.feasible, report=report, note=note, columns=columns(method, evaluation))]


def columns(method: str, evaluation) -> dict[str, Any]:
    """The row's own columns: the cost by purchase option, the expected fallback, GPU-periods and attainment."""
    return {
        "description": DESCRIPTIONS[method],
        **{f"{option}_cost": cost for option, cost in evaluation.cost_by_option.items()},
        "expected_fallback_cost": evaluation.expected_fallback_cost,
        **{f"{option}_gpu_periods": count for option, count in evaluation.gpu_periods_by_option.items()},
        "min_attainment_pct": 100.0 * evaluation.min_attainment,
        "mean_attainment_pct": 100.0 * float(evaluation.attainment.mean()),
        "violations": len(evaluation.violations),
    }


def reference(problem: CapacityProblem, results: Sequence[MethodResult]) -> Reference:
    """The MILP's bound (module docstring)."""
    exact = next((r for r in results if r.method == EXACT), None)
    if exact is None:
        return Reference(None, "no bound: the MILP did not run")
    if exact.report is None or exact.report.bound is None:
        return Reference(None, f"no bound: the MILP found no plan ({exact.note})")
    report = exact.report
    if report.proven_optimal and not report.gap:
        return Reference(report.bound, "the MILP's optimum")
    if report.proven_optimal:
        return Reference(report.bound, f"the MILP's lower bound (its plan proven within solve.mip_gap: gap {100 * report.gap:.2f} %)")
    return Reference(report.bound, f"the MILP's lower bound ({report.status}: not proven optimal)")


def result_json(problem: CapacityProblem, result: MethodResult) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if result.report is not None:
        body["solver"] = result.report.to_dict()
    if result.plan is not None:
        e = result.evaluation
        body.update(schedule=result.plan.to_dict(problem), cost_by_option=e.cost_by_option, cost_by_model=e.cost_by_model,
                    sunk_cost_of_reservations_held=e.sunk_cost,
                    attainment={name: e.attainment[m].tolist() for m, name in enumerate(problem.model_names)},
                    attainment_with_fallback={name: e.attainment_with_fallback[m].tolist() for m, name in enumerate(problem.model_names)},
                    violations=list(e.violations))
    return body


def facts(problem: CapacityProblem) -> dict[str, Any]:
    table = problem.table
    return {
        "periods": problem.periods, "period_hours": problem.spec.period_hours,
        "models": {name: {"mean_rate_rps": float(problem.rates_rps[m].mean()), "peak_rate_rps": float(problem.rates_rps[m].max()),
                          "peak_instances": {g: (int(table.instances[m, i].max()) if table.usable()[m, i].all() else None)
                                             for i, g in enumerate(problem.type_names)},
                          "unusable": {problem.type_names[g]: reason for (i, g), reason in table.reasons.items() if i == m}}
                   for m, name in enumerate(problem.model_names)},
        "gpu_types": {o.name: {"gpu": o.gpu, "reserved_cost_per_gpu": o.reserved_cost_per_gpu, "reserved_term_periods": o.reserved_term_periods,
                               "on_demand_per_gpu_period": o.on_demand_per_gpu_period, "spot_per_gpu_period": o.spot_per_gpu_period,
                               "spot_counted": o.spot_counted.tolist()} for o in problem.offers},
        "engine_sources": list(table.engine_sources),
    }


KIND = ProblemKind(
    name="capacity_plan",
    summary="GPU purchases over periods for several models (reserved, on-demand, spot): exact MILP against practitioners' rules",
    schema=CapacityPlanInstanceSpec,
    prepare=prepare,
    methods=methods,
    default_method=default_method,
    solve_methods=solve_methods,
    gap_methods=methods,
    run=run,
    reference=reference,
    describe=lazy(REPORT, "describe"),
    render_solve=lazy(REPORT, "render_solve"),
    render_gap=lazy(REPORT, "render_gap"),
    explain=lazy("optfleet.problems.capacity_plan.explain", "explainer"),
    facts=facts,
    result_json=result_json,
    overrides={**SOLVE_BLOCK_OVERRIDES, "mip_gap": "solve.mip_gap"},
    solve_files=lazy(REPORT, "solve_files"),
    plot=lazy("optfleet.problems.capacity_plan.plot", "plot_gap"),
)
