"""Plain-text rendering of placement comparisons: the instance, the capacity check, one table of every method's
simulated metrics with the bound, the excess over the best known schedule, and per-QPS-step tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from optfleet import tables
from optfleet.numbers import significant
from optfleet.problems.placement.capacity import capacity_rows
from optfleet.problems.placement.problem import PlacementProblem
from optfleet.problems.placement.server import Engine
from optfleet.tables import HIGH, LOW, MEDIUM, Column

if TYPE_CHECKING:
    from optfleet.api import GapOutcome, SolveOutcome

MS = tables.fixed(1)
EXTRA = [
    Column("p50_ttft_ms", "P50 TTFT ms", MS, MEDIUM), Column("p90_ttft_ms", "P90 TTFT ms", MS, LOW),
    Column("p99_ttft_ms", "P99 TTFT ms", MS, HIGH), Column("p50_tpot_ms", "P50 TPOT ms", tables.fixed(2), MEDIUM),
    Column("p99_tpot_ms", "P99 TPOT ms", tables.fixed(2), LOW), Column("p50_e2e_ms", "P50 E2E ms", tables.fixed(0), LOW),
    Column("p50_ntpot_ms", "P50 NTPOT ms", tables.fixed(2), LOW), Column("p90_ntpot_ms", "P90 NTPOT ms", tables.fixed(2), LOW),
    Column("throughput_tokens_per_s", "tokens/s", tables.count, MEDIUM), Column("prefix_hit_rate", "hit %", tables.percent(1), HIGH),
    Column("slo_attainment", "SLO met %", tables.percent(1), HIGH),
    Column("ttft_mape_pct", "MAPE TTFT %", tables.fixed(1), LOW), Column("tpot_mape_pct", "MAPE TPOT %", tables.fixed(1), LOW),  # predicted-latency policies
]


def describe(problem: PlacementProblem) -> str:
    """What ``optfleet validate`` prints about a valid placement instance."""
    return f"valid placement instance '{problem.name}'\n" + render_problem(problem) + capacity_text(problem)


def render_problem(problem: PlacementProblem) -> str:
    q = problem.requests
    kinds: dict[Any, int] = {}
    for e in problem.engines:
        kinds[e] = kinds.get(e, 0) + 1
    servers = []
    for e, n in kinds.items():
        servers.append(f"    {n:,} x {e.name}: {e.max_running_seqs:,} seqs, {e.kv_capacity_blocks:,} KV blocks, budget {e.prefill_budget_tokens:,} "
                       f"tokens; iteration {significant(e.step_base_ms)} + {significant(e.step_ms_per_seq)}/seq + "
                       f"{significant(e.step_ms_per_kv_block)}/block + {significant(e.prefill_ms_per_token)}/prefill token{_pair_text(e)} ms")
        if e.timing_source != "given":
            servers.append(f"      timing from {e.timing_source}")
        if e.timing_reduction:
            servers.append(f"      {e.timing_reduction}")
    slo = problem.slo
    slos = ", ".join(f"{name} {v:g} ms" for name, v in (("TTFT", slo.ttft_ms), ("TPOT", slo.tpot_ms)) if v is not None) or "none"
    span_s = (q.arrival_ms[-1] - q.arrival_ms[0]) / 1000.0
    ladder = "" if len(q.step_rates_rps) < 2 else f"; QPS ladder {', '.join(f'{r:g}' for r in q.step_rates_rps)}"
    return "\n".join([
        f"instance {problem.name}: {len(q):,} requests over {span_s:,.1f} s ({problem.source}{ladder})",
        f"  prompts mean {q.prompt_tokens.mean():,.0f} tokens (shared prefix {q.shared_tokens.mean():,.0f}), outputs mean {q.output_tokens.mean():,.0f}",
        "  servers:",
        *servers,
        f"  SLOs: {slos}; objective: {problem.objective}; policies: {', '.join(p.label for p in problem.policies)}",
    ])


def _pair_text(e: Engine) -> str:
    """The prefill attention term, when the server has one."""
    return "" if e.prefill_ms_per_pair == 0 else f" + {significant(e.prefill_ms_per_pair)}/query-key pair"


def capacity_text(problem: PlacementProblem) -> str:
    rows = capacity_rows(problem)
    if rows is None:
        return ""
    lines = ["", "cache capacity check (system prompts pinned first, perfect balancing):"]
    for label, row in (("blog cluster, 10 x 32,000 blocks x 16 tokens", rows["blog_cluster"]), ("this instance's servers", rows["instance_servers"])):
        lines.append(f"  {label}: capacity {row['capacity_tokens']:,} tokens, system {row['unique_sys_tokens']:,}, "
                     f"users x {row['rounds']} rounds {row['unique_user_tokens']:,}: {row['sys_fit_pct']:.2f} % of system prompts "
                     f"and {row['user_fit_pct']:.2f} % of user histories fit")
    return "\n".join(lines)


def _table(outcome: "SolveOutcome | GapOutcome") -> list[tables.Block]:
    (reference,) = outcome.references.values() if len(outcome.references) == 1 else (next(iter(outcome.references.values())),)
    blocks: list[tables.Block] = [
        f"gap = distance to the bound in % of the bound; bound: {reference.reason}",
        "objective: the simulator's score of each placement (exact views' solver figures are in their own service model)",
        tables.comparison_table(outcome.rows, EXTRA), *tables.notes(outcome.rows)]
    summary = outcome.loaded.kind.gap_summary(outcome.loaded.problem, outcome.results)
    if summary:
        best = summary["best_known_method"]
        excess = ", ".join(f"{m} {'-' if v is None else f'{v:.1f} %'}" for m, v in summary["excess_over_best_pct"].items())
        blocks.append(f"best known schedule: {best} ({summary['best_known_objective_ms']:,.1f} ms); excess over it: {excess}")
    for r in outcome.results:
        if r.report is not None:
            blocks.append(f"  {r.method} solver: {r.report.summary}")
    return blocks + _steps(outcome)


def _steps(outcome) -> list[str]:
    lines = []
    for r in outcome.results:
        if r.evaluation is None or not r.evaluation.per_step:
            continue
        lines.append(f"{r.method} per QPS step:")
        for rate, m in r.evaluation.per_step:
            p = m.percentiles_ms
            lines.append(f"  {rate:>6g} rps: {m.requests:>5} requests, TTFT p50/p90/p99 {p['ttft'][50]:,.0f}/{p['ttft'][90]:,.0f}/{p['ttft'][99]:,.0f} ms, "
                         f"NTPOT p50/p90 {p['ntpot'][50]:.1f}/{p['ntpot'][90]:.1f} ms, {m.throughput_tokens_per_s:,.0f} tok/s, hit {100 * m.prefix_hit_rate:.1f} %"
                         + ("" if m.slo_attainment is None else f", SLO met {100 * m.slo_attainment:.1f} %"))
    return lines


def render_gap(outcome: "GapOutcome") -> str:
    """The text of ``optfleet gap`` on a placement instance: the instance, then the comparison."""
    return tables.page([render_problem(outcome.loaded.problem), "", *_table(outcome)])


def render_solve(outcome: "SolveOutcome") -> str:
    """The text of ``optfleet solve`` on a placement instance: the instance, then the comparison."""
    return tables.page([render_problem(outcome.loaded.problem), "", *_table(outcome)])


def solve_files(outcome: "SolveOutcome") -> dict[str, str]:
    """``plan.json``: the chosen method's placement (request ``i`` -> server index), read back by ``simulate --plan``."""
    import json

    main = outcome.main[0]
    if main.plan is None:
        return {}
    return {"plan.json": json.dumps({"method": main.method, "placement": main.plan.tolist()})}
