"""Plain-text rendering of routing comparisons: the instance, then one table per question (routing, design)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from optfleet import numbers, tables
from optfleet.problems.routing.problem import RoutingProblem
from optfleet.tables import HIGH, KEY, LOW, MEDIUM, Column, Table

if TYPE_CHECKING:
    from optfleet.api import GapOutcome, SolveOutcome

QUESTIONS = {
    "routing": "routing: where each request is served (calibrator variants replayed; hindsight = true lengths known); "
               "objective = busy GPU instances, feasible = offered load within rho_max x slots in every capacity window",
    "overflow": "routing: where each request is served (calibrator variants replayed; hindsight = true lengths known); "
                "objective = slot-seconds of offered load above rho_max x slots, summed over the capacity windows and pools",
    "design": "design: short window, threshold, C&R band and each pool's GPU configuration of least fleet $/h (each pool sized by the fleet "
              "evaluator: TTFT SLO and utilisation cap) with mis-route probability <= epsilon, under the fleet instance's constraints",
    "spill": "spill: the design's rule and GPU configurations with the queue limit and pool counts of least fleet $/h whose replay (spillover on the live "
             "slot state) meets the P99 TTFT SLO, the utilisation cap and epsilon; searched by replay",
}

MS = tables.number(4)
MISROUTE = Column("misroute_pct", "mis-route %", tables.number(3), HIGH)
SHORT_TTFT = Column("short_ttft_p99_ms", "short P99 TTFT ms", MS, HIGH)
LONG_TTFT = Column("long_ttft_p99_ms", "long P99 TTFT ms", MS, HIGH)
POOLS = [Column("short_gpu", "short GPU", tables.text, MEDIUM), Column("short_instances", "short instances", tables.count, HIGH),
         Column("long_gpu", "long GPU", tables.text, MEDIUM), Column("long_instances", "long instances", tables.count, HIGH)]
ROUTING_COLUMNS = [
    MISROUTE, Column("wasted_long", "wasted long", tables.count, MEDIUM), Column("spills", "spills", tables.count, MEDIUM),
    Column("compressed", "C&R", tables.count, MEDIUM), Column("refused", "C&R refused", tables.count, LOW),
    SHORT_TTFT, Column("short_tpot_p50_ms", "short P50 TPOT ms", MS, LOW), LONG_TTFT,
    Column("long_tpot_p50_ms", "long P50 TPOT ms", MS, LOW), Column("plan_per_hour", "plan $/h", tables.fixed(2), MEDIUM),
    Column("needed_per_hour", "needed $/h", tables.fixed(2), MEDIUM),
]
DESIGN_COLUMNS = [
    Column("short_window_tokens", "window tokens", tables.count, HIGH), Column("b_short_tokens", "B tokens", tables.count, HIGH),
    Column("gamma", "gamma", tables.number(3), HIGH), MISROUTE, *POOLS,
]
SPILL_COLUMNS = [
    Column("spill_rule", "spill rule", tables.text, HIGH), *POOLS, MISROUTE, Column("spills", "spills", tables.count, MEDIUM),
    SHORT_TTFT, LONG_TTFT, Column("static_per_hour", "static design $/h", tables.fixed(2), MEDIUM),
]
COLUMNS = {"routing": ROUTING_COLUMNS, "design": DESIGN_COLUMNS, "spill": SPILL_COLUMNS}


def describe(problem: RoutingProblem) -> str:
    """What ``optfleet validate`` prints about a valid routing instance."""
    return f"valid routing instance '{problem.spec.name}'\n" + render_problem(problem)


def render_problem(problem: RoutingProblem) -> str:
    """The fleet plan, the stream, the categories and the dispatcher."""
    s, r = problem.stream, problem.rule
    pools = ", ".join(f"{p.name} {p.window_tokens:,} tokens x {p.instances} instances" for p in problem.plan.pools)
    categories = ", ".join(f"{name} {numbers.significant(ratio, 3)} B/token ({numbers.significant(100 * (s.category == k).mean(), 3)} %"
                           + (", compressible" if k in problem.compressible else "") + ")"
                           for k, (name, ratio) in enumerate(zip(s.names, s.true_ratio, strict=True)))
    spill = [f"queue > {problem.spill.queue_limit}" if problem.spill.queue_limit is not None else "",
             f"(active + queued) / instances >= {problem.spill.pressure_limit:g}" if problem.spill.pressure_limit is not None else ""]
    return "\n".join([
        f"instance {problem.spec.name}: fleet '{problem.fleet.name}' plan {problem.plan.method}: {pools}",
        f"  stream: {len(s):,} requests over {numbers.duration(s.span_s)}; categories: {categories}",
        f"  dispatcher: B = {r.b_short_tokens:,} tokens, short window {r.short_window_tokens:,}, C&R gamma {r.compress_gamma:g}; "
        f"spillover: {' or '.join(x for x in spill if x) or 'off'}; replay: {problem.spec.replay.mode} mode",
    ])


def _tables(outcome: "SolveOutcome | GapOutcome") -> list[tables.Block]:
    """One table per question (with its heading and bound), the routing question's calibration table after it."""
    blocks: list[tables.Block] = []
    for group, reference in outcome.references.items():
        question = dict(group)["question"]
        rows = [row for row, r in zip(outcome.rows, outcome.results, strict=True) if r.group == group]
        shown = [c for c in COLUMNS[question] if any(row.get(c.key) is not None for row in rows)]
        heading = QUESTIONS["overflow" if question == "routing" and outcome.loaded.problem.spec.exact.objective == "overflow" else question]
        blocks += ["", heading, f"  bound: {reference.reason}", tables.comparison_table(rows, shown), *tables.notes(rows)]
        if question == "routing":
            blocks += _calibration([r for r in outcome.results if r.group == group])
    return blocks[1:]


def _calibration(results: list) -> list[tables.Block]:
    """Each calibrator's relative error ``|c_hat_k(n) - c_k| / c_k`` (%) per category after ``n`` observations."""
    rows = [{"method": r.method, "category": name, **{f"n={n}": 100 * v for n, v in by_n.items()}}
            for r in results if r.evaluation is not None for name, by_n in r.evaluation.calibration_error.items()]
    if not rows:
        return []
    counts = list(dict.fromkeys(key for row in rows for key in row if key.startswith("n=")))
    columns = [Column("method", "method", tables.text, KEY), Column("category", "category", tables.text, KEY),
               *(Column(key, f"{key} %", tables.fixed(2), MEDIUM) for key in counts)]
    return ["", "calibration error (|c_hat - c| / c, %) after n observations of the category", Table(columns, rows)]


def render_gap(outcome: "GapOutcome") -> str:
    """The text of ``optfleet gap`` on a routing instance."""
    return tables.page([render_problem(outcome.loaded.problem), "", *_tables(outcome)])


def render_solve(outcome: "SolveOutcome") -> str:
    """The text of ``optfleet solve``: the chosen method beside its question's exact method."""
    return tables.page([render_problem(outcome.loaded.problem), "", *_tables(outcome)])
