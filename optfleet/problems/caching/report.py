"""Plain-text rendering of caching comparisons: the instance in one paragraph, then one table per capacity."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from optfleet import numbers, tables
from optfleet.problems.caching.kind import OPTIMUM
from optfleet.problems.caching.problem import CachingProblem
from optfleet.results import MethodResult, Reference
from optfleet.tables import HIGH, LOW, MEDIUM, Column

if TYPE_CHECKING:
    from optfleet.api import GapOutcome, SolveOutcome


def describe(problem: CachingProblem) -> str:
    """What ``optfleet validate`` prints about a valid caching instance."""
    return f"valid caching instance '{problem.name}'\n" + render_problem(problem)


def render_problem(problem: CachingProblem) -> str:
    """What the instance is: trace, TTFT model, threshold, caching mode, capacities, policies."""
    trace = problem.trace
    capacities = ", ".join(_capacity(c, problem.block_tokens) for c in problem.capacities_tokens)
    mode = "forced caching (the served conversation's whole history is inserted)" if problem.forced_caching else "optional caching"
    return "\n".join([
        f"instance {problem.name}: {len(trace):,} turns in {trace.n_conversations:,} conversations ({problem.trace_source})",
        f"  lengths: mean prompt {trace.prompt_tokens.mean():,.1f}, mean answer {trace.answer_tokens.mean():,.1f}, "
        f"mean context {trace.context_tokens.mean():,.1f}, max context {int(trace.context_tokens.max()):,} tokens",
        f"  TTFT = {problem.ttft.alpha_ms_per_token:g} ms/token x uncached + {problem.ttft.beta_ms:g} ms; "
        f"xi {problem.xi_ms:g} ms ({numbers.significant(problem.safe_uncached_tokens)} uncached tokens within xi), SLO {problem.slo_ms:g} ms; {mode}",
        f"  capacities: {capacities}",
        f"  policies: {', '.join(p.label for p in problem.policies)}"
        + ("" if problem.hindsight else "; hindsight LP off"),
    ])


EXTRA = [
    Column("p90_ttft_ms", "P90 TTFT ms", tables.fixed(1), MEDIUM), Column("p95_ttft_ms", "P95 TTFT ms", tables.fixed(1), LOW),
    Column("p99_ttft_ms", "P99 TTFT ms", tables.fixed(1), HIGH), Column("violations", "violations", tables.count, HIGH),
    Column("hit_rate", "hit %", tables.percent(1), HIGH),
]


def _capacity_table(problem: CachingProblem, capacity: int, rows: list[dict[str, Any]], reference: Reference,
                    results: list[MethodResult]) -> list[tables.Block]:
    """One capacity's table: the core columns (objective = TEL), then tail percentiles, violations and hit rate."""
    head = f"capacity {_capacity(capacity, problem.block_tokens)}"
    optimum = next((r for r in results if r.method == OPTIMUM and r.report is not None), None)
    if optimum is not None:
        o = optimum.report
        bound = "-" if o.bound is None else f"{o.bound:,.1f} ms"
        verdict = "optimal" if o.proven_optimal and o.gap == 0.0 else f"{o.status.replace('_', ' ')} (not proven optimal)"
        head += f"; hindsight LP: {verdict}, objective {o.objective:,.1f} ms, bound {bound}, {numbers.duration(o.seconds)}"
    head += f"; bound: {reference.reason}"
    return [head, tables.comparison_table(rows, EXTRA), *tables.notes(rows)]


GroupTable = Callable[[Any, dict[str, Any], list[dict[str, Any]], Reference, list[MethodResult]], list[tables.Block]]


def group_tables(outcome: "SolveOutcome | GapOutcome", table: GroupTable) -> list[tables.Block]:
    """One block per group of rows (e.g. per cache capacity), each ``table(problem, group, rows, reference, results)``
    after a blank line; also used by the prefix_cache kind's report."""
    problem = outcome.loaded.problem
    blocks: list[tables.Block] = []
    for group, reference in outcome.references.items():
        pairs = [(row, r) for row, r in zip(outcome.rows, outcome.results, strict=True) if r.group == group]
        blocks += ["", *table(problem, dict(group), [row for row, _ in pairs], reference, [r for _, r in pairs])]
    return blocks


def _by_capacity(outcome: "SolveOutcome | GapOutcome") -> list[tables.Block]:
    return group_tables(outcome, lambda problem, group, rows, reference, results:
                        _capacity_table(problem, group["capacity_tokens"], rows, reference, results))


def render_gap(outcome: "GapOutcome") -> str:
    """The text of ``optfleet gap`` on a caching instance: the instance, then one table per capacity."""
    return tables.page([render_problem(outcome.loaded.problem), *_by_capacity(outcome)])


def render_solve(outcome: "SolveOutcome") -> str:
    """The text of ``optfleet solve`` on a caching instance: the chosen schedule at every capacity."""
    return tables.page([render_problem(outcome.loaded.problem), *_by_capacity(outcome)])


def _capacity(tokens: int, block_tokens: int) -> str:
    blocks = tokens / block_tokens
    return f"{tokens:,} tokens ({numbers.significant(blocks)} blocks of {block_tokens})"
