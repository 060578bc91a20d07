"""``optfleet gap`` for caching instances: every policy and the hindsight optimum, per capacity.

For each capacity ``C`` of the problem, each policy's schedule (an online
policy replayed by :func:`~optfleet.caching.replay.replay`, or Tail-Optimized
Belady computed in hindsight by :func:`~optfleet.caching.belady.tail_optimized_belady`)
and the hindsight LP's schedule (:func:`~optfleet.caching.hindsight.solve_hindsight`)
are scored by the one evaluator, :func:`~optfleet.caching.evaluate.evaluate_schedule`.
The TEL gap of a policy is ``100 (TEL - TEL*) / TEL*`` against the reference
``TEL*``: the LP optimum when it is proven; else the LP's lower bound (the gap
is then an upper bound on the true gap); else, with the LP switched off,
Tail-Optimized Belady's TEL (optimal for unit weights and whole
``xi_tokens``, Theorem 1 of Tail-Optimized Caching for LLM Inference).

This module returns results; printing is optfleet.report.caching_text's job.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from optfleet.caching.belady import tail_optimized_belady
from optfleet.caching.evaluate import CacheEvaluation, evaluate_schedule
from optfleet.caching.hindsight import HindsightResult, solve_hindsight
from optfleet.caching.problem import HINDSIGHT_POLICIES, CachingProblem, PolicyEntry
from optfleet.caching.replay import replay

OPTIMUM_LABEL = "optimum"

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class ScheduleRun:
    """One schedule's evaluation and the wall time its producer took (replay, greedy or LP solve)."""

    label: str
    name: str
    description: str
    evaluation: CacheEvaluation
    seconds: float


@dataclass(frozen=True)
class CapacityComparison:
    """Every schedule at one capacity, the hindsight LP's verdict and the TEL reference of the gaps."""

    capacity_tokens: int
    runs: tuple[ScheduleRun, ...]
    optimum: HindsightResult | None
    optimum_run: ScheduleRun | None
    reference: str
    reference_tel_ms: float | None

    def gap_pct(self, tel_ms: float) -> float | None:
        """``100 (TEL - TEL*) / TEL*``; 0 when both are 0, None when only the reference is 0."""
        ref = self.reference_tel_ms
        if ref is None:
            return None
        if ref <= 0.0:
            return 0.0 if tel_ms <= 0.0 else None
        return 100.0 * (tel_ms - ref) / ref

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per schedule (policies first, then the optimum)."""
        runs = [*self.runs, *([self.optimum_run] if self.optimum_run is not None else [])]
        rows = []
        for run in runs:
            e = run.evaluation
            row: dict[str, Any] = {"capacity_tokens": self.capacity_tokens, "policy": run.label, "description": run.description,
                                   "tel_ms": e.tel_ms, "tel_gap_pct": self.gap_pct(e.tel_ms), "mean_ttft_ms": e.mean_ttft_ms}
            row.update({f"p{p}_ttft_ms": v for p, v in e.percentile_ttft_ms.items()})
            row.update(violations=e.violations, hit_rate=e.hit_rate, peak_occupancy_tokens=e.peak_occupancy_tokens, seconds=run.seconds)
            is_optimum = run is self.optimum_run and self.optimum is not None
            row["status"] = self.optimum.status if is_optimum else ""
            row["bound_ms"] = self.optimum.bound if is_optimum else None
            rows.append(row)
        return rows


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
    return ScheduleRun(entry.label, entry.name, description, evaluation, seconds)


def run_optimum(problem: CachingProblem, capacity_tokens: int) -> tuple[HindsightResult, ScheduleRun]:
    """Solve the hindsight LP at ``capacity_tokens`` and evaluate its schedule."""
    result = solve_hindsight(problem.trace, capacity_tokens, problem.ttft, problem.xi_ms,
                             time_limit_s=problem.hindsight_time_limit_s, forced=problem.forced_caching)
    evaluation = evaluate_schedule(problem.trace, result.kept_tokens, capacity_tokens, problem.ttft, problem.xi_ms,
                                   slo_ms=problem.slo_ms, policy=OPTIMUM_LABEL)
    proven = "proven optimal" if result.proven_optimal else f"{result.status.replace('_', ' ')}, not proven optimal"
    return result, ScheduleRun(OPTIMUM_LABEL, OPTIMUM_LABEL, f"hindsight LP ({proven})", evaluation, result.seconds)


def run_caching_gap(
    problem: CachingProblem,
    policies: tuple[PolicyEntry, ...] | None = None,
    *,
    hindsight: bool | None = None,
    progress: Progress | None = None,
) -> list[CapacityComparison]:
    """Every policy (default: the problem's) and, unless switched off, the hindsight LP at every capacity.

    ``progress(label, done, total)`` is called before each schedule is
    produced (``total`` counts policies x capacities, plus the LP solves).
    """
    entries = problem.policies if policies is None else policies
    with_lp = problem.hindsight if hindsight is None else hindsight
    total = len(problem.capacities_tokens) * (len(entries) + int(with_lp))
    done = 0
    comparisons = []
    for capacity in problem.capacities_tokens:
        runs = []
        for entry in entries:
            if progress is not None:
                progress(f"capacity {capacity:,} tokens: {entry.label}", done, total)
            runs.append(run_schedule(problem, entry, capacity))
            done += 1
        optimum = optimum_run = None
        if with_lp:
            if progress is not None:
                progress(f"capacity {capacity:,} tokens: hindsight LP", done, total)
            optimum, optimum_run = run_optimum(problem, capacity)
            done += 1
        reference, reference_tel = _reference(optimum, optimum_run, runs)
        comparisons.append(CapacityComparison(capacity, tuple(runs), optimum, optimum_run, reference, reference_tel))
    if progress is not None:
        progress("done", done, total)
    return comparisons


def _reference(optimum: HindsightResult | None, optimum_run: ScheduleRun | None, runs: list[ScheduleRun]) -> tuple[str, float | None]:
    if optimum is not None and optimum_run is not None:
        if optimum.proven_optimal:
            return "hindsight optimum", optimum_run.evaluation.tel_ms
        if optimum.bound is not None:
            return "hindsight LP lower bound (optimum not proven; gaps are upper bounds)", optimum.bound
    belady = [r for r in runs if r.name in HINDSIGHT_POLICIES]
    if belady:
        return "Tail-Optimized Belady (hindsight LP not run)", belady[0].evaluation.tel_ms
    return "none (no hindsight schedule run)", None


def gap_rows(comparisons: list[CapacityComparison]) -> list[dict[str, Any]]:
    """All rows of all capacities, flat (for CSV)."""
    return [row for c in comparisons for row in c.rows()]


def gap_to_dict(problem: CachingProblem, comparisons: list[CapacityComparison]) -> dict[str, Any]:
    """The machine-readable result of ``optfleet gap`` on a caching instance."""
    trace = problem.trace
    return {
        "instance": problem.name,
        "kind": "caching",
        "trace": {"source": problem.trace_source, "turns": len(trace), "conversations": trace.n_conversations},
        "ttft": {"alpha_ms_per_token": problem.ttft.alpha_ms_per_token, "beta_ms": problem.ttft.beta_ms},
        "xi_ms": problem.xi_ms,
        "safe_uncached_tokens": problem.safe_uncached_tokens,
        "slo_ms": problem.slo_ms,
        "forced_caching": problem.forced_caching,
        "block_tokens": problem.block_tokens,
        "capacities": [
            {
                "capacity_tokens": c.capacity_tokens,
                "reference": c.reference,
                "reference_tel_ms": c.reference_tel_ms,
                "optimum": None if c.optimum is None else {
                    "status": c.optimum.status, "proven_optimal": c.optimum.proven_optimal, "objective_ms": c.optimum.objective,
                    "bound_ms": c.optimum.bound, "gap": c.optimum.gap, "seconds": c.optimum.seconds, "path": c.optimum.path,
                },
                "rows": c.rows(),
            }
            for c in comparisons
        ],
    }
