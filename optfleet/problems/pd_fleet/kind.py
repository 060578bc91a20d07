"""The pd_fleet kind (fleets of aggregated or prefill/decode-disaggregated pools): registry entry and methods.

Methods: ``milp`` (the exact choice per pool between aggregated options and (prefill, decode) pairs at their frontier
points, exact.py), ``best_aggregated`` (the same MILP over aggregated options only), ``splitwise_grid`` (grid.py), and
the literature's mean-based sizing rules ``dynamo_sla`` and ``xpyd_ratio`` (rule_plans.py over baselines.py).  Every
row carries ``assumes``: what its method takes for granted.
Every plan is scored by the one evaluator (evaluator.py).  Objective: cost in $/h, minimised; the gap's bound is the
``milp`` method's proven bound.
"""

from __future__ import annotations

import time
from dataclasses import replace
from collections.abc import Sequence
from typing import Any

from optfleet.errors import InfeasibleError
from optfleet.problems.pd_fleet.analytic import APPROXIMATIONS
from optfleet.problems.pd_fleet.evaluator import approximations_of, evaluate
from optfleet.problems.pd_fleet.grid import GRID, SPLITWISE_GRID, splitwise_grid
from optfleet.problems.pd_fleet.problem import PdProblem, prepare
from optfleet.problems.pd_fleet.rule_plans import DYNAMO_SLA, RULE_OF_METHOD, XPYD_RATIO, rule_plan
from optfleet.problems.pd_fleet.schema import PdFleetSpec
from optfleet.progress import Progress
from optfleet.registry import ProblemKind, lazy
from optfleet.results import MINIMISE, MethodResult, Reference, exact_reference, no_plan, proven

MILP = "milp"
BEST_AGGREGATED = "best_aggregated"
UNIT = "$/h"
ASSUMES = {
    MILP: "P99 TTFT/TPOT by the analytic pool model; exact over aggregated options and (x, y) frontiers",
    BEST_AGGREGATED: "the MILP with aggregated pools only (the fleet kind's batching model)",
    SPLITWISE_GRID: f"disaggregated only; cheapest feasible (x, y) of a {GRID} x {GRID} grid, analytic pool model",
    DYNAMO_SLA: "Dynamo SLA planner: means, no queue; cheapest pair at its own counts",
    XPYD_RATIO: "xPyD ratio at fixed concurrency (aiconfigurator): means, x1.8 TTFT allowance; cheapest pair at its own counts",
}
"""A short label per method for the ``assumes`` column; the rules' full paragraphs are in their JSON (baselines.py)."""


def methods(problem: PdProblem) -> tuple[str, ...]:
    """``milp``, ``best_aggregated`` (when aggregated options exist), ``splitwise_grid``, ``dynamo_sla`` and
    ``xpyd_ratio`` (when pairs exist)."""
    pairs = (SPLITWISE_GRID, DYNAMO_SLA, XPYD_RATIO) if problem.prefill and problem.decode else ()
    return (MILP, *((BEST_AGGREGATED,) if problem.aggregated else ()), *pairs)


def run(problem: PdProblem, method: str, progress: Progress) -> list[MethodResult]:
    """Run one method and score its plan; a method without a plan is a row with the reason."""
    began = time.perf_counter()
    report = None
    sizings: tuple = ()
    try:
        if method == SPLITWISE_GRID:
            plan = splitwise_grid(problem)
        elif method in RULE_OF_METHOD:
            chosen = rule_plan(problem, method)
            plan, sizings = chosen.plan, chosen.sizings
        else:
            from optfleet.problems.pd_fleet.exact import solve_pd  # Pyomo and HiGHS only when a MILP runs

            result = solve_pd(problem, aggregated_only=method == BEST_AGGREGATED, method=method)
            plan, report = result.plan, result.report
    except InfeasibleError as exc:
        return [replace(no_plan(method, time.perf_counter() - began, str(exc), objective_unit=UNIT, sense=MINIMISE),
                        columns={"assumes": ASSUMES[method]})]
    e = evaluate(problem, plan)
    return [MethodResult(
        method, plan, e, time.perf_counter() - began, objective=e.cost_per_hour, objective_unit=UNIT, sense=MINIMISE,
        feasible=e.feasible, report=report, note="; ".join(e.violations),
        columns={"fleet": e.describe(), "gpus": sum(e.gpus.values()), "disaggregated_pools": e.disaggregated_pools,
                 "power_w": e.power_w, "assumes": ASSUMES[method],
                 **({"assumes_detail": "; ".join(f"pool {j}: {s.assumes}" for j, s in enumerate(sizings) if s is not None)}
                    if sizings else {})},
    )]


def reference(problem: PdProblem, results: Sequence[MethodResult]) -> Reference:
    """The ``milp`` method's proven bound on the cost; None, with the reason, when it gave none."""
    return exact_reference(results, MILP, lambda milp: Reference(milp.report.bound, f"the MILP's proven {proven(milp.report)} of the cost"))


def result_json(problem: PdProblem, result: MethodResult) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if result.evaluation is not None:
        e = result.evaluation
        body["plan"] = result.plan.to_dict()
        body["evaluation"] = {
            "cost_per_hour": e.cost_per_hour, "gpus": dict(e.gpus), "power_w": e.power_w, "feasible": e.feasible,
            "violations": list(e.violations), "approximations": list(e.approximations),
            "pools": [{"pool": p.index, "window_tokens": problem.pools[p.index].window_tokens, "mode": p.mode, "choice": p.choice,
                       "rate_rps": p.rate_rps, "cost_per_hour": p.cost_per_hour, "ttft_p99_ms": p.ttft_p99_ms,
                       "tpot_p99_ms": p.tpot_p99_ms, "tpot_mean_ms": p.tpot_mean_ms, "utilisation": dict(p.utilisation),
                       "binding": p.binding, "violations": list(p.violations)} for p in e.pools],
            "constraints": [{"constraint": c.label, "holds": c.holds, "detail": c.detail} for c in e.checks],
        }
    if result.report is not None:
        body["solver"] = result.report.to_dict()
    return body


def facts(problem: PdProblem) -> dict[str, Any]:
    return {"rate_rps": problem.rate_rps, "model": problem.model.name, "windows_tokens": [p.window_tokens for p in problem.pools],
            "pool_rates_rps": [p.rate_rps for p in problem.pools], "aggregated_options": [o.label for o in problem.aggregated],
            "prefill_options": [o.label for o in problem.prefill], "decode_options": [o.label for o in problem.decode],
            "performance_source": problem.performance_source, "splitwise_grid": f"{GRID} x {GRID}",
            "approximations": list(approximations_of({mode for mode, options in (("aggregated", problem.aggregated),
                                                                                 ("disaggregated", problem.prefill)) if options}))}


def describe(problem: PdProblem) -> str:
    """What ``optfleet validate`` prints about a valid pd_fleet instance."""
    return (f"valid pd_fleet instance '{problem.name}': {problem.rate_rps:g} req/s of {problem.model.name}, "
            f"{len(problem.pools)} pool(s), {len(problem.aggregated)} aggregated, {len(problem.prefill)} prefill and "
            f"{len(problem.decode)} decode option(s); solve: method {problem.method}, solver {problem.solver}")


KIND = ProblemKind(
    name="pd_fleet",
    summary="fleets of aggregated or prefill/decode-disaggregated pools (xPyD), sized at P99 TTFT and TPOT",
    schema=PdFleetSpec,
    prepare=prepare,
    methods=methods,
    default_method=lambda problem: problem.method,
    solve_methods=lambda problem, chosen: (),
    gap_methods=methods,
    run=run,
    reference=reference,
    describe=describe,
    render_solve=lazy("optfleet.problems.pd_fleet.report", "render_solve"),
    render_gap=lazy("optfleet.problems.pd_fleet.report", "render_gap"),
    facts=facts,
    result_json=result_json,
    simulate=lazy("optfleet.problems.pd_fleet.simulate.outcome", "simulate_instance"),
    explain=lazy("optfleet.problems.pd_fleet.explain", "explainer"),
    overrides={"time_limit_s": "solve.time_limit_s", "solver": "solve.solver", "mip_gap": "solve.mip_gap", "method": "solve.method"},
)
