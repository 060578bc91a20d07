"""The fleet kind (FleetOpt): its registry entry, its methods and their results in the common vocabulary.

Methods: the literature's heuristics (``homogeneous``, ``pool-routing``,
``retrofit``, ``sweep``; optfleet/problems/fleet/heuristics) and the exact
``milp`` (optfleet/problems/fleet/milp.py); over a multi-type GPU catalog also
``milp:<GPU type>``, the exact best fleet of that type alone.  Every plan is
scored by the one evaluator (evaluator.py) and checked against the
instance's ``constraints:`` (constraint_check.py).

Objective: the plan's cost in $/h, minimised; under a ``budget`` constraint
the share of the traffic served, maximised (the MILP then admits every class
at the same share).  The gap's bound is the ``milp`` method's proven bound on
that objective (``milp:<type>`` bounds a restricted model: not a bound on the
optimum).  Under the ``fleetsim`` TTFT rule (a pool-mean floor) the MILP's
plan comes from a restriction of its floor levels and its bound from their
relaxation (milp.py); under the batching service model its plan comes from
tables at each pool's traffic mix (approximate, verified by the evaluator) and
its bound from a relaxation valid for every plan (milp_batching.py); with
``paper`` rule and length-scaled iteration under the slot model the MILP does
not apply: its rows say so and the gaps stay empty.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from optfleet.errors import InfeasibleError, NotApplicableError
from optfleet.numbers import significant
from optfleet.problems.fleet.method_names import HEURISTICS
from optfleet.problems.fleet.assumptions import assumption_lines, assumptions
from optfleet.problems.fleet.presets import apply_defaults
from optfleet.problems.fleet.problem import FleetProblem, prepare
from optfleet.problems.fleet.schema import FleetInstanceSpec
from optfleet.progress import Progress
from optfleet.registry import ProblemKind, lazy
from optfleet.results import MAXIMISE, MINIMISE, MethodResult, Reference, exact_reference, first_result, mixed_vs_best_single, no_plan, proven

if TYPE_CHECKING:
    from optfleet.problems.fleet.evaluator import FleetEvaluation

MILP = "milp"
SINGLE_TYPE_PREFIX = "milp:"
REPORT = "optfleet.problems.fleet.report"  # the text renderers (imported when first used)
COST_UNIT = "$/h"
SERVED_UNIT = "% served"


def methods(problem: FleetProblem) -> tuple[str, ...]:
    """The heuristics, ``milp`` and, over a multi-type catalog, ``milp:<type>`` per GPU type."""
    return (*HEURISTICS, MILP, *single_type_methods(problem))


def single_type_methods(problem: FleetProblem) -> tuple[str, ...]:
    """``milp:<GPU type>`` per type of a multi-type GPU catalog: the exact best fleet of that type alone."""
    types = list(dict.fromkeys(o.gpu_name for o in problem.options))
    return tuple(f"{SINGLE_TYPE_PREFIX}{t}" for t in types) if len(types) > 1 else ()


def _unit(problem: FleetProblem) -> str:
    """What a count of the hardware block's configuration is: an instance of ``tp`` GPUs, or a GPU when ``tp`` is 1."""
    return "instance" if problem.hardware.tp > 1 else "GPU"


def _budget(problem: FleetProblem) -> float | None:
    return next((c.max_cost_per_hour for c in problem.constraints if c.kind == "budget"), None)


def run(problem: FleetProblem, method: str, progress: Progress) -> list[MethodResult]:
    """Run one method and score its plan; a method without a plan is a row with the reason."""
    from optfleet.problems.fleet.constraint_check import constraint_violations
    from optfleet.problems.fleet.evaluator import evaluate
    from optfleet.problems.fleet.heuristics import FLEET_METHODS

    budget = _budget(problem)
    unit, sense = (SERVED_UNIT, MAXIMISE) if budget is not None else (COST_UNIT, MINIMISE)
    start = time.perf_counter()
    report = iterations = None
    origin = ""
    try:
        if method == MILP or method.startswith(SINGLE_TYPE_PREFIX):
            from optfleet.problems.fleet.milp import solve_milp  # Pyomo and HiGHS only when a MILP runs

            restricted = problem if method == MILP else _restricted(problem, method)
            exact = solve_milp(restricted, progress=progress)  # the instance's solve: block decides routing, K, limits and solver
            plan, report, iterations, origin = exact.plan, exact.report, exact.iterations, exact.note
        else:
            plan = FLEET_METHODS[method](problem)
    except NotApplicableError as exc:
        return [no_plan(method, time.perf_counter() - start, f"not available here: {exc}", objective_unit=unit, sense=sense, available=False)]
    except InfeasibleError as exc:  # a time limit without a plan keeps the solver's report: its bound still holds
        return [no_plan(method, time.perf_counter() - start, str(exc), objective_unit=unit, sense=sense, report=getattr(exc, "report", None))]
    seconds = time.perf_counter() - start
    if method == MILP:
        from optfleet.problems.fleet.milp import pool_limit_note

        origin = "; ".join(part for part in (origin, pool_limit_note(problem, exact, seconds)) if part)
    evaluation = evaluate(problem, plan)
    if budget is None and method in (MILP, problem.method):
        from optfleet.problems.fleet.binding_limits import limit_notes

        origin = "; ".join([*([origin] if origin else []), *limit_notes(problem, evaluation, report)])
    broken = constraint_violations(problem, evaluation)
    failing = [f"pool {p.name}: {p.binding}, P99 TTFT {p.ttft_p99_ms:,.1f} ms, utilisation {p.utilisation:.4f}" for p in evaluation.pools if not p.meets_slo]
    note = "; ".join([*([origin] if origin else []), *(f"violates the SLO ({f})" for f in failing), *(f"breaks {b}" for b in broken)])
    objective = 100 * evaluation.plan.served_share if budget is not None else evaluation.cost_per_hour
    return [MethodResult(
        method, plan, evaluation, seconds, objective=objective, objective_unit=unit, sense=sense,
        feasible=evaluation.meets_slo and not broken, report=report, note=note,
        columns={**_plan_columns(problem, evaluation), "table_iterations": iterations},
    )]


def _restricted(problem: FleetProblem, method: str) -> FleetProblem:
    gpu_type = method.removeprefix(SINGLE_TYPE_PREFIX)
    options = tuple(o for o in problem.options if o.gpu_name == gpu_type)
    return problem.with_options(options)


def _plan_columns(problem: FleetProblem, evaluation: "FleetEvaluation") -> dict[str, Any]:
    """The fleet's own row columns: pools, instances and physical GPUs counted apart, costs, served share."""
    label = (lambda p: f"{p.gpu} {p.window_tokens}:{p.instances}") if problem.heterogeneous else (lambda p: f"{p.window_tokens}:{p.instances}")
    plan = evaluation.plan
    return {
        "pools": " + ".join(label(p) for p in evaluation.pools),
        "instances": evaluation.total_instances,
        "gpus": sum(problem.configuration(p.gpu).tp * p.instances for p in plan.pools),
        "cost_per_hour": evaluation.cost_per_hour,
        "cost_per_year": evaluation.cost_per_year,
        "served_share": plan.served_share,
        "boundary_tokens": None if plan.rules is not None else plan.boundary_tokens,
        "gamma": None if plan.rules is not None else plan.gamma,
    }


def reference(problem: FleetProblem, results: Sequence[MethodResult]) -> Reference:
    """The ``milp`` method's bound (module docstring); None, with the reason, when it gave none.

    It is the bound of the model the plan was solved with: Erlang-C tables at the pools' ``R_j`` after the table
    refreshes (milp.py), exact wherever the utilisation cap binds rather than the tables."""
    return exact_reference(results, MILP, lambda milp: _phrase(problem, milp))


def _phrase(problem: FleetProblem, milp: MethodResult) -> Reference:
    budget = _budget(problem)
    if budget is not None:
        from optfleet.models.fleet_objectives import SERVED_COST_WEIGHT

        # The model maximises served - w cost with cost <= the cap, so its bound plus w x the cap bounds the served share.
        bound = min(1.0, milp.report.bound + SERVED_COST_WEIGHT * budget)
        return Reference(100 * bound, f"the MILP's proven {proven(milp.report)} of the served share (budget cap)")
    if problem.service_model == "batching":
        return Reference(milp.report.bound, f"the MILP's proven {proven(milp.report)} (a relaxation of the batching model: occupancy cap and "
                                            "prefill floor per instance; the plan comes from approximate tables, optfleet/problems/fleet/milp_batching.py)"
                                            f"{_same_model(problem)}")
    solves = milp.columns.get("table_iterations") or 1
    tables_note = f", after {solves} solves refreshing the Erlang tables" if solves > 1 else ""
    return Reference(milp.report.bound, f"the MILP's proven {proven(milp.report)}{tables_note}{_same_model(problem)}")


def _same_model(problem: FleetProblem) -> str:
    """Which model the bound belongs to: the instance's, as its header states, the one every row is scored in."""
    text = ", of this instance's model as stated below, the one every row is scored in"
    if problem.compression_enabled:
        text += " (compression on: the gaps of homogeneous and pool-routing, which never compress, include what it saves)"
    return text


def gap_summary(problem: FleetProblem, results: Sequence[MethodResult]) -> dict[str, Any] | None:
    """Savings against the homogeneous fleet (closed forms beside), and the mixed catalog fleet against the
    cheapest single-type fleet."""
    from optfleet.problems.fleet.heuristics.closed_forms import savings_forecast

    homogeneous = first_result(results, "homogeneous")
    base = homogeneous.evaluation if homogeneous is not None else None
    summary: dict[str, Any] = {}
    if base is not None and _budget(problem) is None:
        savings = {}
        for r in results:
            if r.evaluation is None:
                continue
            forecast = savings_forecast(r.evaluation, base)
            savings[r.method] = {
                "evaluated_pct": 100 * (1 - r.evaluation.cost_per_hour / base.cost_per_hour),
                "naive_pct": None if forecast is None else 100 * forecast.naive,
                "corrected_pct": None if forecast is None else 100 * forecast.corrected,
            }
        summary["savings_vs_homogeneous"] = savings
    mixed = mixed_vs_best_single(results, MILP, SINGLE_TYPE_PREFIX)
    if mixed is not None:
        summary["mixed_vs_best_single_type"] = mixed
    return summary or None


def result_json(problem: FleetProblem, result: MethodResult) -> dict[str, Any]:
    """The plan (in the instance's vocabulary, so ``simulate --plan`` reads it back), the evaluator's pools and
    the solver's report."""
    body: dict[str, Any] = {}
    if result.evaluation is not None:
        body["plan"] = result.plan.to_dict()
        body["evaluation"] = result.evaluation.to_dict()
    if result.report is not None:
        body["solver"] = {**result.report.to_dict(), "table_iterations": result.columns.get("table_iterations")}
    return body


def facts(problem: FleetProblem) -> dict[str, Any]:
    return {"rate_rps": problem.rate_rps, "ttft_p99_slo_ms": problem.ttft_p99_ms, "rho_max": problem.rho_max, "ttft_rule": problem.ttft_rule,
            "service_model": problem.service_model, "assumptions": assumptions(problem)}


def describe(problem: FleetProblem) -> str:
    """What ``optfleet validate`` prints about a valid fleet instance."""
    mix = problem.mix
    long_pool = problem.pool(problem.long_window_tokens)
    lines = [
        f"valid fleet instance '{problem.name}'",
        f"  workload: {significant(problem.rate_rps, 6)} req/s, {len(mix.prob)} exact (L_in, L_out) atoms, "
        f"mean L_total {mix.mean_total_tokens():,.0f}, max {mix.max_total_tokens:,} tokens",
        f"  hardware: {long_pool.gpu}, {long_pool.slots_per_instance} slots per {_unit(problem)} at the long window {problem.long_window_tokens}, "
        f"${long_pool.cost_per_instance_hour:g}/{_unit(problem)}-hour",
        f"  SLO: P{100 * problem.ttft_quantile:g} TTFT {significant(problem.ttft_p99_ms, 6)} ms (rule {problem.ttft_rule}, service model {problem.service_model}), rho_max {problem.rho_max:g}",
        f"  sweep: {len(problem.boundary_candidates)} boundaries x {len(problem.gammas)} gammas; "
        f"boundaries {', '.join(str(b) for b in problem.boundary_candidates)}",
        f"  solve: method {problem.method}, MILP routing {problem.milp_routing}, K = {problem.max_pools}, solver {problem.solver}",
        *assumption_lines(problem),
    ]
    if problem.heterogeneous:
        lines.append(f"  gpu catalog: {len(problem.options)} configurations ({', '.join(o.label for o in problem.options)}) "
                     f"at windows {', '.join(str(w) for w in problem.option_windows)}")
        lines += [f"    left out: {reason}" for reason in problem.skipped_options]
    return "\n".join(lines)


KIND = ProblemKind(
    name="fleet",
    summary="fleet provisioning (FleetOpt): M/G/c pools by context window, Compress-and-Route, the sweep and the exact MILP",
    schema=FleetInstanceSpec,
    prepare=prepare,
    methods=methods,
    default_method=lambda problem: problem.method,
    solve_methods=lambda problem, chosen: HEURISTICS,
    gap_methods=lambda problem: methods(problem),
    run=run,
    reference=reference,
    describe=describe,
    render_solve=lazy(REPORT, "render_solve"),
    render_gap=lazy(REPORT, "render_gap"),
    facts=facts,
    result_json=result_json,
    overrides={"preset": "preset", "time_limit_s": "solve.time_limit_s", "solver": "solve.solver", "mip_gap": "solve.mip_gap",
               "method": "solve.method"},
    preprocess=apply_defaults,
    simulate=lazy("optfleet.problems.fleet.simulate.outcome", "simulate_instance"),
    gap_summary=gap_summary,
    solve_files=lazy(REPORT, "solve_files"),
    explain=lazy("optfleet.problems.fleet.explain", "explainer"),
)
