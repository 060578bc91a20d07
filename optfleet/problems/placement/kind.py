"""The placement kind (request placement across model servers): registry entry and runs.

Methods: the instance's policies (by label), every other registered policy by name, ``hindsight_milp`` (when the
trace has at most ``solve.max_milp_requests`` requests), ``lookahead_milp`` and ``relaxation_bound`` (exact.py), and
``hindsight_search`` (search.py: annealing over whole-trace placements, a heuristic with hindsight).
Every plan is a placement (request -> server) scored by the one evaluator, the simulator (evaluate.py); the
objective is its mean TTFT, or its mean TTFT excess over ``slo.ttft_ms`` (``solve.objective``), in ms, minimised.

The bound the rows are compared with is the larger of the hindsight MILP's bound and the relaxation bound, both
lower bounds on the simulator's best placement (bounds.py); ``gap_summary`` adds every row's excess over the best
known schedule (the best simulated placement among the rows).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from optfleet.errors import InfeasibleError
from optfleet.numbers import significant
from optfleet.problems.placement.problem import PlacementProblem, PolicyEntry, prepare
from optfleet.problems.placement.schema import METHOD_NAMES, PlacementInstanceSpec
from optfleet.progress import Progress
from optfleet.registry import SOLVE_BLOCK_OVERRIDES, ProblemKind, lazy
from optfleet.results import MINIMISE, MethodResult, Reference, no_plan

EXACT = METHOD_NAMES
HINDSIGHT, LOOKAHEAD, RELAXATION, SEARCH = EXACT
REPORT = "optfleet.problems.placement.report"


def objective_unit(problem: PlacementProblem) -> str:
    return "ms mean TTFT excess" if problem.objective == "ttft_excess" else "ms mean TTFT"


def methods(problem: PlacementProblem) -> tuple[str, ...]:
    from optfleet.problems.placement.policies import POLICIES

    labels = [p.label for p in problem.policies]
    return (*labels, *(n for n in POLICIES if n not in labels), *EXACT)


def milp_fits(problem: PlacementProblem) -> bool:
    """Whether the hindsight MILP runs: at most ``solve.max_milp_requests`` requests, and a model small enough to
    build within ``solve.time_limit_s`` (exact.py)."""
    from optfleet.problems.placement.exact import hindsight_refusal

    return hindsight_refusal(problem) is None


def default_method(problem: PlacementProblem) -> str:
    """``solve.method``, else the hindsight MILP when the trace is small enough, else the look-ahead MILP (a plan
    either way; the relaxation bound runs beside it)."""
    if problem.solve.method is not None:
        return problem.solve.method
    return HINDSIGHT if milp_fits(problem) else LOOKAHEAD


def solve_methods(problem: PlacementProblem, chosen: str) -> tuple[str, ...]:
    """Beside an exact view: the instance's policies and the relaxation bound; beside a policy: nothing."""
    if chosen not in EXACT:
        return ()
    return (*(p.label for p in problem.policies), *((RELAXATION,) if chosen != RELAXATION else ()))


def gap_methods(problem: PlacementProblem) -> tuple[str, ...]:
    return (*(p.label for p in problem.policies), *((HINDSIGHT,) if milp_fits(problem) else ()), RELAXATION)


def _entry(problem: PlacementProblem, method: str) -> PolicyEntry:
    return next((p for p in problem.policies if p.label == method), PolicyEntry(method, method))


def run(problem: PlacementProblem, method: str, progress: Progress) -> list[MethodResult]:
    """One method's placement scored by the simulator (module docstring)."""
    from optfleet.problems.placement import exact
    from optfleet.problems.placement.evaluate import evaluate
    from optfleet.problems.placement.policies import make_policy, route
    from optfleet.problems.placement.search import STOPPED_BY, hindsight_search

    unit = objective_unit(problem)
    progress(method, 0, 1)
    start = time.perf_counter()
    report, columns = None, {}
    if method == RELAXATION:
        report, parts = exact.relaxation(problem)
        note = (f"a bound, no placement: its own {significant(report.bound)} (" + ", ".join(f"{k} {significant(v)}" for k, v in parts.items())
                + "); the bound column holds the best bound of the rows")
        return [no_plan(method, time.perf_counter() - start, note, objective_unit=unit, report=report)]
    refusal = exact.hindsight_refusal(problem) if method == HINDSIGHT else exact.lookahead_refusal(problem) if method == LOOKAHEAD else None
    if refusal is not None:
        return [no_plan(method, time.perf_counter() - start, f"not run: {refusal}", objective_unit=unit, available=False)]
    extra, summary = None, None
    try:
        if method == HINDSIGHT:
            placement, report = exact.hindsight(problem)
            columns["model_objective_ms"] = report.objective
        elif method == LOOKAHEAD:
            placement, counts = exact.lookahead(problem)
            columns.update(counts)
        elif method == SEARCH:
            placement, summary = hindsight_search(problem, lambda done, total: progress(method, done, total))
            columns.update(search_start=summary.start_method, search_start_ms=summary.start_objective_ms,
                           search_evaluations=summary.evaluations, search_accepted=summary.accepted,
                           search_stopped_by=STOPPED_BY[summary.stopped_by])
        else:
            entry = _entry(problem, method)
            policy = make_policy(problem, entry.name, entry.params, "--methods")
            placement = route(problem, policy, lambda share: progress(method, share, 1))
            extra = getattr(policy, "summary", lambda: None)()
    except InfeasibleError as exc:
        return [no_plan(method, time.perf_counter() - start, str(exc), objective_unit=unit)]
    evaluation = evaluate(problem, placement)
    if extra:
        evaluation.extra.update(extra)
        columns.update(extra)
    seconds = time.perf_counter() - start
    note = "" if summary is None else summary.note(evaluation.objective_ms)
    return [MethodResult(method, placement, evaluation, seconds, objective=evaluation.objective_ms, objective_unit=unit, sense=MINIMISE, note=note,
                         feasible=True, report=report, columns={**metric_columns(evaluation), **columns})]


def metric_columns(evaluation) -> dict[str, Any]:
    m = evaluation.overall
    columns: dict[str, Any] = {}
    for name in ("ttft", "tpot", "e2e", "ntpot"):
        for p, value in m.percentiles_ms[name].items():
            columns[f"p{p}_{name}_ms"] = value
    columns.update(mean_ttft_ms=m.means_ms["ttft"], throughput_tokens_per_s=m.throughput_tokens_per_s, prefix_hit_rate=m.prefix_hit_rate,
                   slo_attainment=m.slo_attainment, ttft_excess_ms=evaluation.ttft_excess_ms)
    return columns


def reference(problem: PlacementProblem, results: Sequence[MethodResult]) -> Reference:
    """The larger proven lower bound of the hindsight MILP and the relaxation (module docstring)."""
    bounds = []
    for r in results:
        if r.method in (HINDSIGHT, RELAXATION) and r.report is not None and r.report.bound is not None:
            bounds.append((r.report.bound, r))
    if not bounds:
        return Reference(None, f"no bound: neither {HINDSIGHT} nor {RELAXATION} ran")
    value, best = max(bounds, key=lambda pair: pair[0])
    if best.method == HINDSIGHT:
        what = "the hindsight MILP's optimum" if best.report.proven_optimal else f"the hindsight MILP's bound ({best.report.status.replace('_', ' ')})"
        why = f"{what}, in its FCFS-prefill service model, a lower bound on the simulator's best placement"
    else:
        why = "the relaxation bound (per-request prefill, fast single machine), a lower bound on the simulator's best placement"
    return Reference(value, why)


def gap_summary(problem: PlacementProblem, results: Sequence[MethodResult]) -> dict[str, Any] | None:
    """The best known schedule (the best simulated placement) and every row's excess over it, in %."""
    planned = [r for r in results if r.has_plan]
    if not planned:
        return None
    best = min(planned, key=lambda r: r.objective)
    excess = {r.method: (100.0 * (r.objective - best.objective) / best.objective if best.objective > 0 else None) for r in planned}
    return {"best_known_method": best.method, "best_known_objective_ms": best.objective, "excess_over_best_pct": excess}


def result_json(problem: PlacementProblem, result: MethodResult) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if result.report is not None:
        body["solver"] = result.report.to_dict()
    e = result.evaluation
    if e is not None:
        body["per_step"] = [{"rate_rps": rate, **step_json(m)} for rate, m in e.per_step]
        body["placement_counts"] = [int((result.plan == k).sum()) for k in range(len(problem.engines))]
        body["placement"] = result.plan.tolist()  # request i -> server; what simulate --plan reads back
    return body


def step_json(m) -> dict[str, Any]:
    return {"requests": m.requests, "percentiles_ms": {k: {str(p): v for p, v in d.items()} for k, d in m.percentiles_ms.items()},
            "throughput_tokens_per_s": m.throughput_tokens_per_s, "prefix_hit_rate": m.prefix_hit_rate, "slo_attainment": m.slo_attainment}


def facts(problem: PlacementProblem) -> dict[str, Any]:
    from optfleet.problems.placement.capacity import capacity_rows

    q = problem.requests
    return {
        "requests": len(q), "source": problem.source, "servers": [e.__dict__ for e in problem.engines],
        "block_tokens": problem.block_tokens, "objective": problem.objective,
        "slo": problem.slo.model_dump(), "policies": [p.label for p in problem.policies],
        "mean_prompt_tokens": float(q.prompt_tokens.mean()), "mean_output_tokens": float(q.output_tokens.mean()),
        "step_rates_rps": list(q.step_rates_rps),
        "cache_capacity": capacity_rows(problem),
    }


KIND = ProblemKind(
    name="placement",
    summary="request placement across model servers: routing policies (llm-d scorers, predicted latency) against hindsight MILP bounds",
    schema=PlacementInstanceSpec,
    prepare=prepare,
    methods=methods,
    default_method=default_method,
    solve_methods=solve_methods,
    gap_methods=gap_methods,
    run=run,
    reference=reference,
    describe=lazy(REPORT, "describe"),
    render_solve=lazy(REPORT, "render_solve"),
    render_gap=lazy(REPORT, "render_gap"),
    facts=facts,
    result_json=result_json,
    overrides=SOLVE_BLOCK_OVERRIDES,
    gap_summary=gap_summary,
    simulate=lazy("optfleet.problems.placement.simulate", "simulate_instance"),
    solve_files=lazy(REPORT, "solve_files"),
    explain=lazy("optfleet.problems.placement.explain", "explainer"),
)
