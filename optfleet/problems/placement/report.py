"""Plain-text rendering of placement comparisons: the instance, the capacity check, one table of every method's
simulated metrics with the bound, the excess over the best known schedule, and per-QPS-step tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from optfleet import tables
from optfleet.problems.placement.capacity import capacity_rows
from optfleet.problems.placement.problem import PlacementProblem
from optfleet.problems.placement.server import Engine

if TYPE_CHECKING:
    from optfleet.api import GapOutcome, SolveOutcome

PCT = (lambda v: "-" if v is None else f"{100 * v:.1f}")
EXTRA = {
    "p50_ttft_ms": ("TTFT p50", tables.fixed(1)), "p90_ttft_ms": ("TTFT p90", tables.fixed(1)), "p99_ttft_ms": ("TTFT p99", tables.fixed(1)),
    "p50_tpot_ms": ("TPOT p50", tables.fixed(2)), "p99_tpot_ms": ("TPOT p99", tables.fixed(2)),
    "p50_e2e_ms": ("E2E p50", tables.fixed(0)), "p50_ntpot_ms": ("NTPOT p50", tables.fixed(2)), "p90_ntpot_ms": ("NTPOT p90", tables.fixed(2)),
    "throughput_tokens_per_s": ("tok/s", tables.fixed(0)), "prefix_hit_rate": ("hit %", PCT), "slo_attainment": ("SLO %", PCT),
    "ttft_mape_pct": ("MAPE TTFT %", tables.fixed(1)), "tpot_mape_pct": ("MAPE TPOT %", tables.fixed(1)),  # predicted-latency policies
}


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
                       f"tokens; iteration {e.step_base_ms:.4g} + {e.step_ms_per_seq:.4g}/seq + {e.step_ms_per_kv_block:.4g}/block + "
                       f"{e.prefill_ms_per_token:.4g}/prefill token{_pair_text(e)} ms")
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
    return "" if e.prefill_ms_per_pair == 0 else f" + {e.prefill_ms_per_pair:.4g}/query-key pair"


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


def _table(outcome: "SolveOutcome | GapOutcome") -> str:
    (reference,) = outcome.references.values() if len(outcome.references) == 1 else (next(iter(outcome.references.values())),)
    lines = [f"gap = distance to the bound in % of the bound; bound: {reference.reason}",
             "objective: the simulator's score of each placement (exact views' solver figures are in their own service model)",
             tables.render(tables.core_frame(outcome.rows, EXTRA)), *tables.notes(outcome.rows)]
    summary = outcome.loaded.kind.gap_summary(outcome.loaded.problem, outcome.results)
    if summary:
        best = summary["best_known_method"]
        excess = ", ".join(f"{m} {'-' if v is None else f'{v:.1f} %'}" for m, v in summary["excess_over_best_pct"].items())
        lines.append(f"best known schedule: {best} ({summary['best_known_objective_ms']:,.1f} ms); excess over it: {excess}")
    for r in outcome.results:
        if r.report is not None:
            lines.append(f"  {r.method} solver: {r.report.summary}")
    lines += _steps(outcome)
    return "\n".join(lines)


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
    return render_problem(outcome.loaded.problem) + "\n\n" + _table(outcome)


def render_solve(outcome: "SolveOutcome") -> str:
    return render_problem(outcome.loaded.problem) + "\n\n" + _table(outcome)


def solve_files(outcome: "SolveOutcome") -> dict[str, str]:
    """``plan.json``: the chosen method's placement (request ``i`` -> server index), read back by ``simulate --plan``."""
    import json

    main = outcome.main[0]
    if main.plan is None:
        return {}
    return {"plan.json": json.dumps({"method": main.method, "placement": main.plan.tolist()})}
