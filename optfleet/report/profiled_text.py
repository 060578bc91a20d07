"""Plain-text tables of a profiled-fleet run: the plan per GPU type and bucket, then every method side by side."""

from __future__ import annotations

from typing import Any

import pandas as pd

from optfleet.profiled.evaluator import ProfiledEvaluation
from optfleet.profiled.problem import ProfiledProblem
from optfleet.solvers import SolveReport


def render_plan(problem: ProfiledProblem, evaluation: ProfiledEvaluation, report: SolveReport | None = None) -> str:
    """Headline, one row per GPU type (GPUs, load, utilisation, $/h), one row per bucket (rate and shares)."""
    plan = evaluation.plan
    lines = [
        f"instance {problem.name}: {problem.rate_rps:g} req/s over {len(problem.demand_buckets)} buckets, "
        f"{problem.splitting}, utilisation cap {problem.max_utilisation:g}",
        f"{plan.method}: {plan.describe_gpus()}; ${evaluation.cost_per_hour:,.2f}/h; serves {evaluation.served_rps:,.4g} of "
        f"{evaluation.demand_rps:,.4g} req/s" + ("" if evaluation.feasible else "; INFEASIBLE: " + "; ".join(evaluation.violations)),
    ]
    if report is not None:
        lines.append(f"solver: {report.summary}")
    types = pd.DataFrame([
        {
            "GPU": t.name,
            "GPUs": t.gpus,
            "GPUs/instance": t.gpus_per_instance,
            "load (instances)": t.load_instances,
            "util %": 100 * t.utilisation,
            "req/s": t.served_rps,
            "$/h": t.cost_per_hour,
        }
        for t in evaluation.types
    ])
    buckets = pd.DataFrame([
        {
            "input tokens": f"{b.input_from_tokens}-{b.input_to_tokens}",
            "output tokens": f"{b.output_from_tokens}-{b.output_to_tokens}",
            "req/s": b.rate_rps,
            **{f"% {name}": 100 * share for name, share in zip(plan.gpu_names, plan.routing[b.index], strict=True)},
        }
        for b in problem.demand_buckets
    ])
    lines += ["", _table(types), "", _table(buckets)]
    if evaluation.checks:
        lines += ["", "constraints:"]
        lines += [f"  {'ok  ' if c.holds else 'FAIL'} {c.label}: {c.detail}" for c in evaluation.checks]
    return "\n".join(lines)


def render_gap(rows: list[dict[str, Any]], savings: dict[str, Any] | None = None) -> str:
    """The method table of ``optfleet.profiled.gap.gap_rows`` (and the mixed-vs-best-single line)."""
    shown = pd.DataFrame([
        {
            "method": r["method"],
            "GPUs": r["gpus"],
            "$/h": "-" if r["cost_per_hour"] is None else f"{r['cost_per_hour']:,.2f}",
            "served req/s": "-" if r["served_rps"] is None else f"{r['served_rps']:,.4g}",
            "gap to bound %": "-" if r["gap_to_bound_pct"] is None else f"{r['gap_to_bound_pct']:.2f}",
            "mixed saves %": "-" if r["mixed_savings_pct"] is None else f"{r['mixed_savings_pct']:.2f}",
            "status": r["status"],
            "time ms": f"{1000 * r['seconds']:.1f}",
        }
        for r in rows
    ])
    lines = [shown.to_string(index=False)]
    lines += [f"  {r['method']}: {r['note']}" for r in rows if r["note"]]
    if savings is not None:
        lines.append(
            f"mixed fleet ${savings['mixed_cost_per_hour']:,.2f}/h vs best single type {savings['best_single']} "
            f"${savings['best_single_cost_per_hour']:,.2f}/h: {savings['savings_pct']:.1f} % saved"
        )
    return "\n".join(lines)


def _table(frame: pd.DataFrame) -> str:
    return frame.to_string(index=False, float_format=lambda v: f"{v:,.3f}")
