"""Produce one caching schedule (a policy's replay, Tail-Optimized Belady, or the hindsight LP) and score it.

Each policy's schedule (an online policy replayed by
:func:`~optfleet.problems.caching.replay.replay`, or Tail-Optimized Belady
computed in hindsight by :func:`~optfleet.problems.caching.belady.tail_optimized_belady`)
and the hindsight LP's schedule (:func:`~optfleet.problems.caching.hindsight.solve_hindsight`)
are scored by the one evaluator, :func:`~optfleet.problems.caching.evaluate.evaluate_schedule`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.caching.belady import tail_optimized_belady
from optfleet.problems.caching.evaluate import CacheEvaluation, evaluate_schedule
from optfleet.problems.caching.kind import OPTIMUM
from optfleet.problems.caching.problem import CachingProblem, PolicyEntry
from optfleet.problems.caching.replay import replay

if TYPE_CHECKING:
    from optfleet.problems.caching.hindsight import HindsightResult


@dataclass(frozen=True)
class ScheduleRun:
    """One schedule's evaluation, the wall time its producer took (replay, greedy or LP solve), and the LP's
    verdict for the optimum."""

    label: str
    name: str
    description: str
    evaluation: CacheEvaluation
    seconds: float
    kept_tokens: NDArray[np.int64]
    optimum: "HindsightResult | None" = None


def run_schedule(problem: CachingProblem, entry: PolicyEntry, capacity_tokens: int) -> ScheduleRun:
    """Produce one policy's schedule at ``capacity_tokens`` and evaluate it."""
    if entry.is_hindsight:
        start = time.perf_counter()
        kept = tail_optimized_belady(problem.trace, capacity_tokens, problem.ttft, problem.xi_ms, forced=problem.forced_caching)
        seconds, description = time.perf_counter() - start, "Tail-Optimized Belady (hindsight greedy)"
    else:
        result = replay(problem.trace, entry.make(), capacity_tokens, problem.ttft, problem.xi_ms, forced_caching=problem.forced_caching)
        kept, seconds, description = result.kept_tokens, result.seconds, result.description
    evaluation = evaluate_schedule(problem.trace, kept, capacity_tokens, problem.ttft, problem.xi_ms, slo_ms=problem.slo_ms, policy=entry.label)
    return ScheduleRun(entry.label, entry.name, description, evaluation, seconds, kept)


def run_optimum(problem: CachingProblem, capacity_tokens: int) -> ScheduleRun:
    """Solve the hindsight LP at ``capacity_tokens`` and evaluate its schedule."""
    from optfleet.problems.caching.hindsight import solve_hindsight  # Pyomo and HiGHS only when the LP runs

    result = solve_hindsight(problem.trace, capacity_tokens, problem.ttft, problem.xi_ms, time_limit_s=problem.hindsight_time_limit_s,
                             forced=problem.forced_caching, solver=problem.hindsight_solver)
    evaluation = evaluate_schedule(problem.trace, result.kept_tokens, capacity_tokens, problem.ttft, problem.xi_ms,
                                   slo_ms=problem.slo_ms, policy=OPTIMUM)
    proven = "proven optimal" if result.proven_optimal else f"{result.status.replace('_', ' ')}, not proven optimal"
    return ScheduleRun(OPTIMUM, OPTIMUM, f"hindsight LP ({proven})", evaluation, result.seconds, result.kept_tokens, result)
