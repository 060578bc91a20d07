"""The prefix_cache kind (prefix-tree KV caching): registry entry and methods.

Methods: every policy of the instance (by its label) and every built-in
policy by name, ``optimum`` (the hindsight MILP, models/prefix_cache.py) and
``lp-bound`` (its LP relaxation).  Each runs at every capacity: one result per
capacity, the group its rows are compared in.  Every row's objective is the
instance's ``objective`` by the one evaluator: total hit tokens (maximised),
TEL in ms or SLO violations (minimised).

The bound of a capacity's rows: the MILP's objective when proven optimal;
otherwise the best proven bound of the MILP and of the LP relaxation (the gaps
are then upper bounds); none when neither ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from optfleet.problems.prefix_cache.hindsight import SENSE, objective_value
from optfleet.problems.prefix_cache.problem import PrefixCacheProblem, prepare
from optfleet.problems.prefix_cache.schema import BUILT_IN_POLICIES, LP_BOUND_METHOD, OPTIMUM_METHOD, PrefixCacheInstanceSpec
from optfleet.progress import Progress
from optfleet.registry import ProblemKind, lazy
from optfleet.results import MAXIMISE, MINIMISE, MethodResult, Reference, first_result

UNITS = {"hit_tokens": "hit tokens", "tel": "TEL ms", "violations": "violations"}
REPORT = "optfleet.problems.prefix_cache.report"


def methods(problem: PrefixCacheProblem) -> tuple[str, ...]:
    labels = [p.label for p in problem.policies]
    return (*labels, *(n for n in BUILT_IN_POLICIES if n not in labels), OPTIMUM_METHOD, LP_BOUND_METHOD)


def run(problem: PrefixCacheProblem, method: str, progress: Progress) -> list[MethodResult]:
    """The method's schedule at every capacity, each scored by the evaluator (one result per capacity)."""
    from optfleet.problems.prefix_cache.runs import run_method  # Pyomo and HiGHS only when schedules run

    results = []
    sense = MAXIMISE if SENSE[problem.objective] == "max" else MINIMISE
    for schedule in run_method(problem, method, progress):
        e = schedule.evaluation
        columns: dict[str, Any] = {"description": schedule.description, "hit_rate": e.hit_rate, "mean_ttft_ms": e.mean_ttft_ms,
                                   "p90_ttft_ms": e.percentile_ttft_ms[90], "p99_ttft_ms": e.percentile_ttft_ms[99], "tel_ms": e.tel_ms,
                                   "mean_wait_ms": float(e.wait_ms.mean()),
                                   "violations": e.violations, "peak_occupancy_blocks": e.peak_occupancy_blocks}
        report = None if schedule.hindsight is None else schedule.hindsight.report
        results.append(MethodResult(method, schedule.kept, e, schedule.seconds, objective=objective_value(e, problem.objective),
                                    objective_unit=UNITS[problem.objective], sense=sense, feasible=True, report=report,
                                    group=(("capacity_blocks", schedule.capacity_blocks),), columns=columns))
    return results


def reference(problem: PrefixCacheProblem, results: Sequence[MethodResult]) -> Reference:
    """The capacity's bound (module docstring)."""
    optimum = first_result(results, OPTIMUM_METHOD)
    if optimum is not None and optimum.report is not None and optimum.report.status == "optimal" and optimum.report.gap is not None \
            and optimum.report.gap <= 1e-9:
        return Reference(optimum.objective, "the hindsight optimum (MILP, proven)")
    bounds = [r.report.bound for r in (optimum, first_result(results, LP_BOUND_METHOD)) if r is not None and r.report is not None
              and r.report.bound is not None]
    if not bounds:
        return Reference(None, "no bound: neither the hindsight MILP (optimum) nor its LP relaxation (lp-bound) ran")
    best = min(bounds) if SENSE[problem.objective] == "max" else max(bounds)
    return Reference(best, "the best proven bound of the hindsight MILP and its LP relaxation (not proven optimal: gaps are upper bounds)")


def result_json(problem: PrefixCacheProblem, result: MethodResult) -> dict[str, Any]:
    return {} if result.report is None else {"solver": result.report.to_dict()}


def facts(problem: PrefixCacheProblem) -> dict[str, Any]:
    trace = problem.trace
    return {
        "trace": {"source": problem.trace_source, "requests": len(trace), "blocks": trace.n_blocks, "block_tokens": trace.block_tokens,
                  "reused_block_occurrences": trace.reuse_occurrences},
        "ttft": {"alpha_ms_per_token": problem.ttft.alpha_ms_per_token, "beta_ms": problem.ttft.beta_ms},
        "prefill_server": "fcfs" if problem.fcfs_server else "none", "xi_ms": problem.xi_ms, "slo_ms": problem.slo_ms, "objective": problem.objective, "eviction": problem.eviction,
        "capacities_blocks": list(problem.capacities_blocks),
    }


def gap_methods(problem: PrefixCacheProblem) -> tuple[str, ...]:
    """The instance's policies, the MILP and its LP relaxation unless the instance switches them off."""
    exact = (*((OPTIMUM_METHOD,) if problem.hindsight else ()), *((LP_BOUND_METHOD,) if problem.lp_bound else ()))
    return (*(p.label for p in problem.policies), *exact)


KIND = ProblemKind(
    name="prefix_cache",
    summary="prefix-tree (radix) KV caching: vLLM/SGLang eviction policies and T-LRU on block-hash traces against the hindsight MILP",
    schema=PrefixCacheInstanceSpec,
    prepare=prepare,
    methods=methods,
    default_method=lambda problem: OPTIMUM_METHOD,
    solve_methods=lambda problem, chosen: (),
    gap_methods=gap_methods,
    run=run,
    reference=reference,
    describe=lazy(REPORT, "describe"),
    render_solve=lazy(REPORT, "render_solve"),
    render_gap=lazy(REPORT, "render_gap"),
    facts=facts,
    result_json=result_json,
    overrides={"time_limit_s": "hindsight.time_limit_s"},
    plot=lazy("optfleet.problems.prefix_cache.plot", "plot_capacity_curves"),
    explain=lazy("optfleet.problems.prefix_cache.explain", "explainer"),
)
