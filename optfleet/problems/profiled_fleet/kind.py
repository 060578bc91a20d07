"""The profiled-fleet kind (Mélange-style capacity from measured throughput): registry entry and methods.

Methods: ``milp`` (the mixed-type optimum, solve.py), ``milp:<type>`` per GPU
type (the MILP restricted to that type, solved exactly: baselines.py) and
``greedy-cost-per-request`` (greedy.py).  Every plan is scored by the one
evaluator (evaluator.py).  Objective: cost in $/h, minimised; under a budget
cap the served rate in req/s, maximised.  The gap's bound is the ``milp``
method's proven bound on that objective.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from optfleet.errors import InfeasibleError
from optfleet.problems.profiled_fleet.evaluator import evaluate
from optfleet.problems.profiled_fleet.greedy import GREEDY, greedy_cost_per_request
from optfleet.problems.profiled_fleet.problem import ProfiledProblem, prepare
from optfleet.problems.profiled_fleet.schema import ProfiledFleetSpec
from optfleet.progress import Progress
from optfleet.registry import ProblemKind, lazy
from optfleet.results import MAXIMISE, MINIMISE, MethodResult, Reference, exact_reference, mixed_vs_best_single, no_plan, proven

MILP = "milp"
SINGLE_TYPE_PREFIX = "milp:"


def methods(problem: ProfiledProblem) -> tuple[str, ...]:
    """``milp``, ``milp:<type>`` per type, and the greedy heuristic."""
    return (MILP, *(f"{SINGLE_TYPE_PREFIX}{name}" for name in problem.gpu_names), GREEDY)


def run(problem: ProfiledProblem, method: str, progress: Progress) -> list[MethodResult]:
    """Run one method and score its plan; a method without a plan is a row with the reason."""
    unit, sense = ("req/s served", MAXIMISE) if problem.budget is not None else ("$/h", MINIMISE)
    began = time.perf_counter()
    report = None
    try:
        if method == GREEDY:
            plan = greedy_cost_per_request(problem)
        elif method == MILP:
            from optfleet.problems.profiled_fleet.solve import solve_profiled  # Pyomo and HiGHS only when a MILP runs

            result = solve_profiled(problem)
            plan, report = result.plan, result.report
        else:
            from optfleet.problems.profiled_fleet.baselines import single_type_fleet

            result = single_type_fleet(problem, method.removeprefix(SINGLE_TYPE_PREFIX))
            plan, report = result.plan, result.report
    except InfeasibleError as exc:
        return [no_plan(method, time.perf_counter() - began, str(exc), objective_unit=unit, sense=sense)]
    evaluation = evaluate(problem, plan)
    objective = evaluation.served_rps if problem.budget is not None else evaluation.cost_per_hour
    return [MethodResult(
        method, plan, evaluation, time.perf_counter() - began, objective=objective, objective_unit=unit, sense=sense,
        feasible=evaluation.feasible, report=report, note="; ".join(evaluation.violations),
        columns={
            "fleet": plan.describe_gpus(),
            "gpus": plan.total_gpus,
            "instances": sum(n // gpu.gpus_per_instance for n, gpu in zip(plan.gpus, problem.gpus, strict=True)),
            "cost_per_hour": evaluation.cost_per_hour,
            "served_rps": evaluation.served_rps,
        },
    )]


def reference(problem: ProfiledProblem, results: Sequence[MethodResult]) -> Reference:
    """The ``milp`` method's proven bound; None, with the reason, when it gave none."""
    what = "served rate (budget cap)" if problem.budget is not None else "cost"
    return exact_reference(results, MILP, lambda milp: Reference(milp.report.bound, f"the MILP's proven {proven(milp.report)} of the {what}"))


def gap_summary(problem: ProfiledProblem, results: Sequence[MethodResult]) -> dict[str, Any] | None:
    """The mixed MILP against the cheapest feasible single-type fleet (None under a budget cap: the methods
    then serve different rates)."""
    mixed = None if problem.budget is not None else mixed_vs_best_single(results, MILP, SINGLE_TYPE_PREFIX)
    return None if mixed is None else {"mixed_vs_best_single_type": mixed}


def result_json(problem: ProfiledProblem, result: MethodResult) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if result.evaluation is not None:
        e = result.evaluation
        body["plan"] = result.plan.to_dict(problem)
        body["evaluation"] = {"cost_per_hour": e.cost_per_hour, "served_rps": e.served_rps, "demand_rps": e.demand_rps,
                              "feasible": e.feasible, "violations": list(e.violations)}
    if result.report is not None:
        body["solver"] = result.report.to_dict()
    return body


def facts(problem: ProfiledProblem) -> dict[str, Any]:
    return {"rate_rps": problem.rate_rps, "buckets": len(problem.demand_buckets), "gpu_types": list(problem.gpu_names),
            "splitting": problem.splitting, "max_utilisation": problem.max_utilisation}


def describe(problem: ProfiledProblem) -> str:
    """What ``optfleet validate`` prints about a valid profiled-fleet instance."""
    return (f"valid profiled_fleet instance '{problem.name}': {problem.rate_rps:g} req/s, {len(problem.demand_buckets)} buckets, "
            f"GPU types {', '.join(problem.gpu_names)}, {problem.splitting}; solve: method {problem.method}, solver {problem.solver}")


KIND = ProblemKind(
    name="profiled_fleet",
    summary="profiled-throughput fleets (Mélange): GPU types sized from measured max request rates per bucket",
    schema=ProfiledFleetSpec,
    prepare=prepare,
    methods=methods,
    default_method=lambda problem: problem.method,
    solve_methods=lambda problem, chosen: (),
    gap_methods=methods,
    run=run,
    reference=reference,
    describe=describe,
    render_solve=lazy("optfleet.problems.profiled_fleet.report", "render_solve"),
    render_gap=lazy("optfleet.problems.profiled_fleet.report", "render_gap"),
    facts=facts,
    result_json=result_json,
    overrides={"time_limit_s": "solve.time_limit_s", "solver": "solve.solver", "mip_gap": "solve.mip_gap", "method": "solve.method"},
    gap_summary=gap_summary,
    explain=lazy("optfleet.problems.profiled_fleet.explain", "explainer"),
)
