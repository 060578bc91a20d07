"""The reserved kind (provisioned-throughput units: Vertex GSUs, Azure PTUs, ...): registry entry and runs.

Methods and the questions grouping them: ``methods.py``.  Each run scores its plan with the one evaluator
(``evaluator.py``); the row's objective is its question's (units, or $/h by the question's rule) and it is
feasible when the plan meets the question's target (overload limit, latency target).

The bound of a question's rows is its exact method's bound (the MILP's, or the bisection's, proven by
monotonicity).  Without the exact method, an exhaustive scan without headroom is the optimum under the same
rule (it tries every grid point); otherwise there is no bound.  The backlog model's bound is its optimum with
spill chosen in hindsight, a lower bound on the online backlog rule the evaluator scores plans with.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from optfleet.errors import InfeasibleError
from optfleet.numbers import duration, significant
from optfleet.problems.reserved.methods import Method, catalogue
from optfleet.problems.reserved.problem import ReservedProblem, prepare
from optfleet.problems.reserved.schema import ReservedInstanceSpec, percentile_label
from optfleet.progress import Progress
from optfleet.registry import SOLVE_BLOCK_OVERRIDES, ProblemKind, lazy
from optfleet.results import MINIMISE, MethodResult, Reference, no_plan

REPORT = "optfleet.problems.reserved.report"
EXHAUSTIVE = {"overload": "overload_scan_", "latency": "latency_scan", "hybrid": "hybrid_scan", "backlog": "backlog_scan"}


def methods(problem: ReservedProblem) -> tuple[str, ...]:
    return tuple(catalogue(problem))


def default_method(problem: ReservedProblem) -> str:
    """``solve.method``, else the hybrid model with prices, else the first exact method asked for."""
    names = catalogue(problem)
    if problem.spec.solve.method is not None:
        return problem.spec.solve.method
    if "hybrid" in names:
        return "hybrid"
    return next(m.name for m in names.values() if m.exact)


def solve_methods(problem: ReservedProblem, chosen: str) -> tuple[str, ...]:
    """The chosen method's question's other methods (its heuristics, or its exact model)."""
    names = catalogue(problem)
    question = names[chosen].question if chosen in names else None
    return tuple(m.name for m in names.values() if m.question == question and m.name != chosen)


def objective_unit(problem: ReservedProblem, question: str) -> str:
    return f"{problem.unit_name}s" if question.startswith(("overload", "latency")) else "$/h"


def run(problem: ReservedProblem, method: str, progress: Progress) -> list[MethodResult]:
    """One method's plan, scored by the evaluator (module docstring)."""
    from optfleet.problems.reserved.evaluator import UnitsPlan, evaluate

    m = catalogue(problem)[method]
    group = (("question", m.question),)
    unit = objective_unit(problem, m.question)
    progress(f"{method} ({m.question})", 0, 1)
    start = time.perf_counter()
    try:
        outcome = m.runner(problem)
    except InfeasibleError as exc:
        return [no_plan(method, time.perf_counter() - start, str(exc), objective_unit=unit, group=group)]
    plan, report = outcome if m.exact else (outcome, None)
    seconds = time.perf_counter() - start
    plan = UnitsPlan(plan) if isinstance(plan, int) else plan
    evaluation = evaluate(problem, plan)
    objective, feasible, note = _judge(problem, m, plan, evaluation)
    if problem.spec.max_units is not None and _largest_units(plan) > problem.max_units:
        feasible, note = False, "; ".join(filter(None, [note, f"buys more than max_units = {problem.max_units:,}"]))
    return [MethodResult(method, plan, evaluation, seconds, objective=objective, objective_unit=unit, sense=MINIMISE, feasible=feasible,
                         report=report, note=note, group=group, columns=_columns(problem, m, plan, evaluation))]


def _largest_units(plan) -> int:
    """The most units a plan holds at once (a schedule: its largest block's deployments)."""
    return plan.units if hasattr(plan, "units") else int(plan.deployed.sum(axis=0).max())


def _judge(problem: ReservedProblem, m: Method, plan, e) -> tuple[float, bool, str]:
    """The row's objective in its question, whether the plan meets the question's target, and why not."""
    from optfleet.problems.reserved.evaluator import schedule_is_covered

    q = m.question
    if q.startswith("overload"):
        p = next(p for p in problem.plans.percentiles if q == f"overload {percentile_label(p)}")
        worst = e.max_overload_probability
        ok = worst <= 1.0 - p + 1e-12
        return e.units, ok, "" if ok else f"overloads {significant(100 * worst, 3)} % of windows at some width (> {significant(100 * (1 - p), 3)} %)"
    if q == "latency":
        target = problem.plans.latency
        ok = e.latency is not None and e.latency.target_value_s <= target.threshold_s
        value = "-" if e.latency is None else duration(e.latency.target_value_s)
        return e.units, ok, "" if ok else f"p{100 * target.percentile:g} {target.metric} latency {value} > {target.threshold_s:g} s"
    if q == "hybrid":
        return e.total_per_hour, True, ""
    if q == "backlog":
        return e.backlog_total_per_hour, True, ""
    if q == "robust":
        eps = problem.plans.robust.max_overload_probability
        ok = _robust_overload_ok(problem, e.units, eps)
        return e.worst_scenario_per_hour, ok, "" if ok else f"overloads more than {significant(100 * eps, 3)} % of windows in some scenario"
    covered = schedule_is_covered(problem, plan)
    return e.commitment_per_hour, covered, "" if covered else "deploys more units in some block than the reservation and on-demand lots hold"


def _robust_overload_ok(problem: ReservedProblem, units: float, eps: float | None) -> bool:
    if eps is None:
        return True
    return all(float((s.units_needed > units).mean()) <= eps + 1e-12 for sc in problem.scenarios for s in sc.windows)


def _columns(problem: ReservedProblem, m: Method, plan, e) -> dict[str, Any]:
    columns: dict[str, Any] = {"description": m.description}
    if hasattr(plan, "units"):
        columns["units"] = plan.units
    else:
        columns.update(reservation_units=plan.reservation_units, on_demand_lots=int(plan.lots.sum()), mean_deployed_units=e.units)
    columns.update(reserved_per_hour=e.reserved_per_hour, spill_per_hour=e.spill_per_hour, total_per_hour=e.total_per_hour)
    if problem.plans.backlog is not None:
        columns["backlog_total_per_hour"] = e.backlog_total_per_hour
    if e.scenario_per_hour:
        columns["worst_scenario_per_hour"] = e.worst_scenario_per_hour
    if e.commitment_per_hour is not None:
        columns["commitment_per_hour"] = e.commitment_per_hour
    for w in e.windows:
        tag = f"{w.width_s:g}s"
        columns[f"overload_pct_{tag}"] = 100.0 * w.overload_probability
        columns[f"overflow_units_{tag}"] = w.expected_overflow_units
        columns[f"spare_units_{tag}"] = w.expected_spare_units
    if e.latency is not None:
        columns.update(p50_e2e_s=e.latency.p50_e2e_s, p99_e2e_s=e.latency.p99_e2e_s, p99_queue_s=e.latency.p99_queue_s)
        if e.latency.attainment is not None:
            columns["slo_attainment_pct"] = 100.0 * e.latency.attainment
    return columns


def reference(problem: ReservedProblem, results: Sequence[MethodResult]) -> Reference:
    """The question's bound (module docstring)."""
    exact = next((r for r in results if r.report is not None), None)
    if exact is not None and exact.report.bound is not None:
        report = exact.report
        proven = report.status == "optimal"
        if dict(exact.group)["question"] == "backlog":
            return Reference(report.bound, "the backlog model's optimum with hindsight spill (a lower bound on the online backlog rule)"
                             + ("" if proven else "; not proven optimal: its lower bound"))
        return Reference(report.bound, f"{exact.method}'s {'optimum' if proven else 'lower bound (not proven optimal: the gaps are upper bounds)'}")
    question = dict(results[0].group)["question"] if results else ""
    proved_none = next((r for r in results if not r.has_plan and catalogue(problem).get(r.method, None) is not None
                        and catalogue(problem)[r.method].exact), None)
    if proved_none is not None:
        return Reference(None, f"no bound: {proved_none.method} found no plan ({proved_none.note})")
    scan_prefix = EXHAUSTIVE.get(question.split(" ")[0])
    if question != "backlog" and scan_prefix and problem.spec.headroom_fraction == 0:
        scan = next((r for r in results if r.method.startswith(scan_prefix) and r.has_plan), None)
        if scan is not None:
            return Reference(scan.objective, f"{scan.method}'s answer: an exhaustive scan of the grid, optimal under the same rule")
    return Reference(None, "no bound: the question's exact method did not run")


def result_json(problem: ReservedProblem, result: MethodResult) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if result.report is not None:
        body["solver"] = result.report.to_dict()
    plan = result.plan
    if plan is not None and not hasattr(plan, "units"):
        body["schedule"] = {"reservation_units": plan.reservation_units, "on_demand_lots": plan.lots.tolist(),
                            "deployed_units": {m.name: row.tolist() for m, row in zip(problem.commitment_models, plan.deployed, strict=True)}}
    return body


def facts(problem: ReservedProblem) -> dict[str, Any]:
    trace, profile = problem.trace, problem.profile
    return {
        "trace": {"source": trace.source, "requests": len(trace), "span_s": trace.span_s, "classes": list(trace.class_names)},
        "profile": {"provider": profile.provider, "model": profile.model, "unit_name": profile.unit_name,
                    "tau_tokens_per_s_per_unit": profile.tau_tokens_per_s_per_unit, "weights": profile.weights.__dict__,
                    "min_units": profile.min_units, "increment_units": profile.increment_units, "source": profile.source},
        "windows_s": [s.width_s for s in problem.windows], "cost_window_s": problem.cost_windows.width_s,
        "max_units": problem.max_units, "baseline_latency": problem.baseline.__dict__,
        "questions": sorted({m.question for m in catalogue(problem).values()}),
        "notes": list(problem.notes),
    }


KIND = ProblemKind(
    name="reserved",
    summary="reserved capacity (provisioned throughput units): percentile, latency and hybrid scans against exact models",
    schema=ReservedInstanceSpec,
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
    facts=facts,
    result_json=result_json,
    overrides=SOLVE_BLOCK_OVERRIDES,
    solve_files=lazy(REPORT, "solve_files"),
    plot=lazy("optfleet.problems.reserved.plot", "plot_gap"),
    explain=lazy("optfleet.problems.reserved.explain", "explainer"),
)
