"""Produce one method's schedules at every capacity and score each with the one evaluator.

``lru`` is computed for all capacities from one pass of stack distances
(optfleet.problems.prefix_cache.curve: the same schedule as its replay at each
capacity, proven there and tested); the other policies are replayed once per
capacity; ``optimum`` solves the hindsight MILP (Pyomo) and ``lp-bound`` its LP
relaxation from arrays, which scales to full traces
(optfleet.problems.prefix_cache.hindsight).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.progress import Progress
from optfleet.problems.prefix_cache.curve import stack_distances
from optfleet.problems.prefix_cache.evaluate import PrefixEvaluation, evaluate_schedule
from optfleet.problems.prefix_cache.hindsight import PrefixHindsight, solve_hindsight, solve_lp_bound
from optfleet.problems.prefix_cache.problem import PolicyEntry, PrefixCacheProblem
from optfleet.problems.prefix_cache.replay import replay
from optfleet.problems.prefix_cache.schema import LP_BOUND_METHOD, OPTIMUM_METHOD


@dataclass(frozen=True)
class ScheduleRun:
    """One schedule at one capacity: its evaluation, the producer's wall time and description, the solver's verdict."""

    capacity_blocks: int
    kept: NDArray[np.bool_]
    evaluation: PrefixEvaluation
    seconds: float
    description: str
    hindsight: PrefixHindsight | None = None


def run_method(problem: PrefixCacheProblem, method: str, progress: Progress) -> list[ScheduleRun]:
    """``method``'s schedule at every capacity of ``problem``, each scored."""
    capacities = problem.capacities_blocks
    if method in (OPTIMUM_METHOD, LP_BOUND_METHOD):
        runs = []
        for i, c in enumerate(capacities):
            progress(f"{method} at {c:,} blocks", i, len(capacities))
            solver = solve_lp_bound if method == LP_BOUND_METHOD else solve_hindsight
            h = solver(problem.trace, c, problem.eviction, problem.objective, problem.ttft, problem.xi_ms, problem.slo_ms,
                       time_limit_s=problem.time_limit_s, fcfs_server=problem.fcfs_server)
            verdict = "proven optimal" if h.proven_optimal else f"{h.report.status.replace('_', ' ')}"
            what = "LP relaxation (bound; its point rounded to a schedule)" if h.relaxed else "hindsight MILP"
            runs.append(ScheduleRun(c, h.kept, h.evaluation, h.report.seconds, f"{what}, {verdict}", h))
        return runs
    entry = next((p for p in problem.policies if p.label == method), None) or PolicyEntry(method, method)
    if entry.name == "lru":
        start = time.perf_counter()
        distances = stack_distances(problem.trace)
        seconds = time.perf_counter() - start
        return [_scored(problem, c, distances.kept(c), seconds, f"lru (vLLM), all {len(capacities)} capacities from one stack-distance pass",
                        entry.label) for c in capacities]
    runs = []
    for i, c in enumerate(capacities):
        progress(f"{method} at {c:,} blocks", i, len(capacities))
        result = replay(problem.trace, entry.make(), c, problem.eviction, problem.ttft, problem.xi_ms)
        runs.append(_scored(problem, c, result.kept, result.seconds, result.description, entry.label))
    return runs


def _scored(problem: PrefixCacheProblem, capacity: int, kept: NDArray[np.bool_], seconds: float, description: str, label: str) -> ScheduleRun:
    evaluation = evaluate_schedule(problem.trace, kept, capacity, problem.eviction, problem.ttft, problem.xi_ms, problem.slo_ms, policy=label,
                                   fcfs_server=problem.fcfs_server)
    return ScheduleRun(capacity, kept, evaluation, seconds, description)
