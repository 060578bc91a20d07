"""Plain-text rendering of prefix-cache comparisons: the instance in one paragraph, then one table per capacity."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from optfleet import numbers, tables
from optfleet.problems.caching.report import group_tables
from optfleet.problems.prefix_cache.problem import PrefixCacheProblem
from optfleet.problems.prefix_cache.schema import LP_BOUND_METHOD
from optfleet.results import MethodResult, Reference
from optfleet.tables import HIGH, LOW, MEDIUM, Column

if TYPE_CHECKING:
    from optfleet.api import GapOutcome, SolveOutcome


def describe(problem: PrefixCacheProblem) -> str:
    """What ``optfleet validate`` prints about a valid prefix-cache instance."""
    return f"valid prefix_cache instance '{problem.name}'\n" + render_problem(problem)


def render_problem(problem: PrefixCacheProblem) -> str:
    """What the instance is: trace, TTFT model, threshold, eviction setting, capacities, policies, objective."""
    trace = problem.trace
    capacities = ", ".join(_capacity(c, trace.block_tokens) for c in problem.capacities_blocks)
    return "\n".join([
        f"instance {problem.name}: {len(trace):,} requests, {trace.n_blocks:,} distinct blocks, {trace.reuse_occurrences:,} block reuses "
        f"({problem.trace_source})",
        f"  mean input {trace.input_tokens.mean():,.1f} tokens; prefill = {problem.ttft.alpha_ms_per_token:g} ms/token x missed prompt "
        f"tokens + {problem.ttft.beta_ms:g} ms; TTFT = {'FCFS wait + prefill (one prefill server)' if problem.fcfs_server else 'prefill'}; "
        f"TEL threshold xi {problem.xi_ms:g} ms, SLO {problem.slo_ms:g} ms",
        f"  eviction: {problem.eviction}; capacities: {capacities}",
        f"  objective: {problem.objective}; policies: {', '.join(p.label for p in problem.policies)}",
    ])


EXTRA = [
    Column("hit_rate", "hit %", tables.percent(1), HIGH), Column("mean_ttft_ms", "mean TTFT ms", tables.fixed(1), MEDIUM),
    Column("p90_ttft_ms", "P90 TTFT ms", tables.fixed(1), LOW), Column("p99_ttft_ms", "P99 TTFT ms", tables.fixed(1), HIGH),
    Column("tel_ms", "TEL ms", tables.fixed(1), HIGH), Column("violations", "violations", tables.count, MEDIUM),
]


def _by_capacity(outcome: "SolveOutcome | GapOutcome") -> list[tables.Block]:
    return group_tables(outcome, lambda problem, group, rows, reference, results:
                        _capacity_table(problem, group["capacity_blocks"], rows, reference, results))


def _capacity_table(problem: PrefixCacheProblem, capacity: int, rows: list[dict[str, Any]], reference: Reference,
                    results: list[MethodResult]) -> list[tables.Block]:
    """One capacity's table; the head names the bound and, when it ran, the LP relaxation's own bound (its row's
    objective is its point rounded to a schedule)."""
    head = f"capacity {_capacity(capacity, problem.trace.block_tokens)}; bound: {reference.reason}"
    relaxation = next((r for r in results if r.method == LP_BOUND_METHOD and r.report is not None and r.report.bound is not None), None)
    if relaxation is not None:
        head += (f"; LP relaxation bound {tables.objective(relaxation.report.bound, relaxation.objective_unit)} (row {LP_BOUND_METHOD}: "
                 f"status {relaxation.status.replace('_', ' ')} is the LP's; its objective is the LP's point rounded to a schedule)")
    extra = [c for c in EXTRA if not (c.key == "tel_ms" and problem.objective == "tel")]  # the objective column shows it
    if problem.fcfs_server:
        extra.append(Column("mean_wait_ms", "mean wait ms", tables.fixed(1), MEDIUM))
    return [head, tables.comparison_table(rows, extra), *tables.notes(rows)]


def render_gap(outcome: "GapOutcome") -> str:
    """The text of ``optfleet gap`` on a prefix-cache instance: the instance, then one table per capacity."""
    return tables.page([render_problem(outcome.loaded.problem), *_by_capacity(outcome)])


def render_solve(outcome: "SolveOutcome") -> str:
    """The text of ``optfleet solve`` on a prefix-cache instance: the chosen method at every capacity."""
    return tables.page([render_problem(outcome.loaded.problem), *_by_capacity(outcome)])


def _capacity(blocks: int, block_tokens: int) -> str:
    return f"{blocks:,} blocks ({numbers.significant(blocks * block_tokens)} tokens)"
