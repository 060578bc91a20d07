"""The caching kind (tail-optimal prompt caching): registry entry and methods.

Methods: every policy of the instance (by its label), every registered policy
by name (with its default parameters), ``belady`` (Tail-Optimized Belady, the
hindsight greedy) and ``optimum`` (the hindsight LP).  Each runs at every
cache capacity of the instance: one result per capacity, the group its rows
are compared in.  The objective is the schedule's TEL (tail excess latency,
ms) by the one evaluator, minimised.

The bound of a capacity's rows is the hindsight LP's: its optimum when
proven, else its lower bound (the gaps are then upper bounds).  Without the
LP, Tail-Optimized Belady's TEL is the optimum when the paper's Theorem 1
applies (unit weights, which caching instances have, and a whole number of
uncached tokens within ``xi``); otherwise there is no bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from optfleet.problems.caching.policies import POLICIES
from optfleet.problems.caching.problem import HINDSIGHT_POLICIES, CachingProblem, PolicyEntry, prepare
from optfleet.problems.caching.schema import OPTIMUM_METHOD as OPTIMUM
from optfleet.problems.caching.schema import CachingInstanceSpec
from optfleet.progress import Progress
from optfleet.registry import ProblemKind, lazy
from optfleet.results import MINIMISE, MethodResult, Reference, first_result

if TYPE_CHECKING:
    from optfleet.problems.caching.runs import ScheduleRun

UNIT = "TEL ms"
REPORT = "optfleet.problems.caching.report"  # the text renderers (imported when first used)


def methods(problem: CachingProblem) -> tuple[str, ...]:
    """The instance's policy labels, the other registered policies and ``belady`` by name, and ``optimum``."""
    labels = [p.label for p in problem.policies]
    return (*labels, *(n for n in (*POLICIES, *HINDSIGHT_POLICIES) if n not in labels), OPTIMUM)


def _entry(problem: CachingProblem, method: str) -> PolicyEntry:
    by_label = {p.label: p for p in problem.policies}
    return by_label.get(method) or PolicyEntry(method, method)


def run(problem: CachingProblem, method: str, progress: Progress) -> list[MethodResult]:
    """The method's schedule at every capacity, each scored by the evaluator (one result per capacity)."""
    from optfleet.problems.caching.runs import run_optimum, run_schedule  # Pyomo and HiGHS only when schedules run

    results = []
    for i, capacity in enumerate(problem.capacities_tokens):
        progress(f"{method} at {capacity:,} tokens", i, len(problem.capacities_tokens))
        schedule = run_optimum(problem, capacity) if method == OPTIMUM else run_schedule(problem, _entry(problem, method), capacity)
        results.append(_result(method, capacity, schedule))
    return results


def _result(method: str, capacity: int, schedule: "ScheduleRun") -> MethodResult:
    e = schedule.evaluation
    columns: dict[str, Any] = {"policy": schedule.name, "description": schedule.description, "tel_ms": e.tel_ms, "mean_ttft_ms": e.mean_ttft_ms}
    columns.update({f"p{p}_ttft_ms": v for p, v in e.percentile_ttft_ms.items()})
    columns.update(violations=e.violations, hit_rate=e.hit_rate, peak_occupancy_tokens=e.peak_occupancy_tokens)
    report = None if schedule.optimum is None else schedule.optimum.report
    return MethodResult(method, schedule.kept_tokens, e, schedule.seconds, objective=e.tel_ms, objective_unit=UNIT, sense=MINIMISE, feasible=True,
                        report=report, group=(("capacity_tokens", capacity),), columns=columns)


def reference(problem: CachingProblem, results: Sequence[MethodResult]) -> Reference:
    """The capacity's bound (module docstring)."""
    optimum = first_result(results, OPTIMUM)
    if optimum is not None and optimum.report is not None:
        report = optimum.report
        if report.status == "optimal" and report.gap == 0.0:
            return Reference(optimum.objective, "the hindsight optimum")
        if report.bound is not None:
            return Reference(report.bound, "the hindsight LP's lower bound (optimum not proven: the gaps are upper bounds)")
    belady = next((r for r in results if r.columns.get("policy") in HINDSIGHT_POLICIES), None)
    whole = float(problem.safe_uncached_tokens).is_integer()
    if belady is not None and whole:
        return Reference(belady.objective, "Tail-Optimized Belady's TEL, optimal here (Theorem 1: unit weights, whole xi tokens)")
    if belady is not None:
        return Reference(None, "no bound: the hindsight LP did not run, and Tail-Optimized Belady is not proven optimal here "
                               f"({problem.safe_uncached_tokens:,.4g} uncached tokens within xi is not whole)")
    return Reference(None, "no bound: neither the hindsight LP (optimum) nor belady ran")


def result_json(problem: CachingProblem, result: MethodResult) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if result.report is not None:
        body["solver"] = result.report.to_dict()
    return body


def facts(problem: CachingProblem) -> dict[str, Any]:
    trace = problem.trace
    return {
        "trace": {"source": problem.trace_source, "turns": len(trace), "conversations": trace.n_conversations},
        "ttft": {"alpha_ms_per_token": problem.ttft.alpha_ms_per_token, "beta_ms": problem.ttft.beta_ms},
        "xi_ms": problem.xi_ms, "safe_uncached_tokens": problem.safe_uncached_tokens, "slo_ms": problem.slo_ms,
        "forced_caching": problem.forced_caching, "block_tokens": problem.block_tokens,
        "capacities_tokens": list(problem.capacities_tokens),
    }


def gap_methods(problem: CachingProblem) -> tuple[str, ...]:
    """The instance's policies, and the hindsight LP unless the instance switches it off."""
    return (*(p.label for p in problem.policies), *((OPTIMUM,) if problem.hindsight else ()))


KIND = ProblemKind(
    name="caching",
    summary="tail-optimal prompt caching: online policies (LRU, T-LRU, ...) against the hindsight-optimal schedule",
    schema=CachingInstanceSpec,
    prepare=prepare,
    methods=methods,
    default_method=lambda problem: OPTIMUM,
    solve_methods=lambda problem, chosen: (),
    gap_methods=gap_methods,
    run=run,
    reference=reference,
    describe=lazy(REPORT, "describe"),
    render_solve=lazy(REPORT, "render_solve"),
    render_gap=lazy(REPORT, "render_gap"),
    facts=facts,
    result_json=result_json,
    overrides={"time_limit_s": "hindsight.time_limit_s", "solver": "hindsight.solver"},
    plot=lazy("optfleet.problems.caching.plot", "plot_ttft_cdf"),
    explain=lazy("optfleet.problems.caching.explain", "explainer"),
)
