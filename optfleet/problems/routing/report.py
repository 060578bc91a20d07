"""Plain-text rendering of routing comparisons: the instance, then one table per question (routing, design)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from optfleet import tables
from optfleet.problems.routing.problem import RoutingProblem

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
ROUTING_COLUMNS = {
    "misroute_pct": ("mis-route %", tables.number(3)), "wasted_long": ("wasted long", tables.text), "spills": ("spills", tables.text),
    "compressed": ("C&R", tables.text), "refused": ("C&R refused", tables.text), "short_ttft_p99_ms": ("short P99 TTFT ms", MS), "short_tpot_p50_ms": ("short P50 TPOT ms", MS),
    "long_ttft_p99_ms": ("long P99 TTFT ms", MS), "long_tpot_p50_ms": ("long P50 TPOT ms", MS), "plan_per_hour": ("plan $/h", tables.fixed(2)),
    "needed_per_hour": ("needed $/h", tables.fixed(2)),
}
DESIGN_COLUMNS = {
    "short_window_tokens": ("window", tables.text), "b_short_tokens": ("B", tables.text), "gamma": ("gamma", tables.number(3)),
    "misroute_pct": ("mis-route %", tables.number(3)), "short_gpu": ("short GPU", tables.text), "short_instances": ("short instances", tables.text),
    "long_gpu": ("long GPU", tables.text), "long_instances": ("long instances", tables.text),
}

SPILL_COLUMNS = {
    "spill_rule": ("spill rule", tables.text), "short_gpu": ("short GPU", tables.text), "short_instances": ("short instances", tables.text),
    "long_gpu": ("long GPU", tables.text), "long_instances": ("long instances", tables.text), "misroute_pct": ("mis-route %", tables.number(3)),
    "spills": ("spills", tables.text), "short_ttft_p99_ms": ("short P99 TTFT ms", MS), "long_ttft_p99_ms": ("long P99 TTFT ms", MS),
    "static_per_hour": ("static design $/h", tables.fixed(2)),
}
COLUMNS = {"routing": ROUTING_COLUMNS, "design": DESIGN_COLUMNS, "spill": SPILL_COLUMNS}


def describe(problem: RoutingProblem) -> str:
    """What ``optfleet validate`` prints about a valid routing instance."""
    return f"valid routing instance '{problem.spec.name}'\n" + render_problem(problem)


def render_problem(problem: RoutingProblem) -> str:
    """The fleet plan, the stream, the categories and the dispatcher."""
    s, r = problem.stream, problem.rule
    pools = ", ".join(f"{p.name} {p.window_tokens:,} tokens x {p.instances} instances" for p in problem.plan.pools)
    categories = ", ".join(f"{name} {ratio:.3g} B/token ({100 * (s.category == k).mean():.3g} %"
                           + (", compressible" if k in problem.compressible else "") + ")"
                           for k, (name, ratio) in enumerate(zip(s.names, s.true_ratio, strict=True)))
    spill = [f"queue > {problem.spill.queue_limit}" if problem.spill.queue_limit is not None else "",
             f"(active + queued) / instances >= {problem.spill.pressure_limit:g}" if problem.spill.pressure_limit is not None else ""]
    return "\n".join([
        f"instance {problem.spec.name}: fleet '{problem.fleet.name}' plan {problem.plan.method}: {pools}",
        f"  stream: {len(s):,} requests over {s.span_s:,.4g} s; categories: {categories}",
        f"  dispatcher: B = {r.b_short_tokens:,} tokens, short window {r.short_window_tokens:,}, C&R gamma {r.compress_gamma:g}; "
        f"spillover: {' or '.join(x for x in spill if x) or 'off'}; replay: {problem.spec.replay.mode} mode",
    ])


def _tables(outcome: "SolveOutcome | GapOutcome") -> str:
    parts = []
    for group, reference in outcome.references.items():
        question = dict(group)["question"]
        rows = [row for row, r in zip(outcome.rows, outcome.results, strict=True) if r.group == group]
        columns = COLUMNS[question]
        shown = {k: v for k, v in columns.items() if any(row.get(k) is not None for row in rows)}
        heading = QUESTIONS["overflow" if question == "routing" and outcome.loaded.problem.spec.exact.objective == "overflow" else question]
        parts.append("\n".join([f"{heading}\n  bound: {reference.reason}", tables.render(tables.core_frame(rows, shown)),
                                *tables.notes(rows)]))
        if question == "routing":
            parts.append(_calibration_text([r for r in outcome.results if r.group == group]))
    return "\n\n".join(part for part in parts if part)


def _calibration_text(results: list) -> str:
    """Each calibrator's relative error ``|c_hat_k(n) - c_k| / c_k`` (%) per category after ``n`` observations."""
    import pandas as pd

    rows = [{"method": r.method, "category": name, **{f"n={n}": f"{100 * v:.2f}" for n, v in by_n.items()}}
            for r in results if r.evaluation is not None for name, by_n in r.evaluation.calibration_error.items()]
    if not rows:
        return ""
    return "calibration error (|c_hat - c| / c, %) after n observations of the category\n" + tables.render(pd.DataFrame(rows).fillna("-"))


def render_gap(outcome: "GapOutcome") -> str:
    """The text of ``optfleet gap`` on a routing instance."""
    return render_problem(outcome.loaded.problem) + "\n\n" + _tables(outcome)


def render_solve(outcome: "SolveOutcome") -> str:
    """The text of ``optfleet solve``: the chosen method beside its question's exact method."""
    return render_problem(outcome.loaded.problem) + "\n\n" + _tables(outcome)

