"""Plain-text rendering of caching comparisons: the instance in one paragraph, then one table per capacity."""

from __future__ import annotations

import pandas as pd

from optfleet.caching.gap import CapacityComparison
from optfleet.caching.problem import CachingProblem


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
        f"xi {problem.xi_ms:g} ms ({problem.safe_uncached_tokens:,.4g} uncached tokens within xi), SLO {problem.slo_ms:g} ms; {mode}",
        f"  capacities: {capacities}",
        f"  policies: {', '.join(p.label for p in problem.policies)}"
        + ("" if problem.hindsight else "; hindsight LP off"),
    ])


def render_comparison(comparison: CapacityComparison, block_tokens: int) -> str:
    """One capacity's table: every policy, then the hindsight optimum, with the reference of the gaps."""
    head = f"capacity {_capacity(comparison.capacity_tokens, block_tokens)}"
    if comparison.optimum is not None:
        o = comparison.optimum
        bound = "-" if o.bound is None else f"{o.bound:,.1f} ms"
        verdict = "optimal" if o.proven_optimal else f"{o.status.replace('_', ' ')} (not proven optimal)"
        head += f"; hindsight LP: {verdict}, objective {o.objective:,.1f} ms, bound {bound}, {o.seconds:.2f} s"
    head += f"; TEL gap vs {comparison.reference}"
    rows = []
    for row in comparison.rows():
        gap = row["tel_gap_pct"]
        rows.append({
            "policy": row["policy"],
            "TEL ms": f"{row['tel_ms']:,.1f}",
            "gap %": "inf" if gap is None and comparison.reference_tel_ms is not None else ("-" if gap is None else f"{gap:.2f}"),
            "P90 ms": f"{row['p90_ttft_ms']:,.1f}",
            "P95 ms": f"{row['p95_ttft_ms']:,.1f}",
            "P99 ms": f"{row['p99_ttft_ms']:,.1f}",
            "violations": row["violations"],
            "hit %": f"{100 * row['hit_rate']:.1f}",
            "time s": f"{row['seconds']:.3f}",
        })
    return head + "\n" + pd.DataFrame(rows).to_string(index=False)


def render_gap(problem: CachingProblem, comparisons: list[CapacityComparison]) -> str:
    """The text of ``optfleet gap`` on a caching instance."""
    parts = [render_problem(problem)]
    parts += [render_comparison(c, problem.block_tokens) for c in comparisons]
    return "\n\n".join(parts)


def _capacity(tokens: int, block_tokens: int) -> str:
    blocks = tokens / block_tokens
    return f"{tokens:,} tokens ({blocks:,.4g} blocks of {block_tokens})"
