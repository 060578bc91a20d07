"""Text for people about profiled-fleet results: a plan per GPU type and bucket (``solve``), every method side by side (``gap``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from optfleet import tables
from optfleet.problems.profiled_fleet.evaluator import ProfiledEvaluation
from optfleet.problems.profiled_fleet.problem import ProfiledProblem
from optfleet.results import format_cost
from optfleet.solvers import SolveReport

if TYPE_CHECKING:
    from optfleet.api import GapOutcome, SolveOutcome


def render_plan(problem: ProfiledProblem, evaluation: ProfiledEvaluation, report: SolveReport | None = None) -> str:
    """Headline, one row per GPU type (GPUs, load, utilisation, $/h), one row per bucket (rate and shares)."""
    plan = evaluation.plan
    lines = [
        f"instance {problem.name}: {problem.rate_rps:g} req/s over {len(problem.demand_buckets)} buckets, "
        f"{problem.splitting}, utilisation cap {problem.max_utilisation:g}",
        f"{plan.method}: {plan.describe_gpus()}; {format_cost(evaluation.cost_per_hour)}; serves {evaluation.served_rps:,.4g} of "
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


def render_solve(outcome: "SolveOutcome") -> str:
    """The text of ``optfleet solve`` on a profiled fleet: the plan of the chosen method."""
    problem = outcome.loaded.problem
    main = outcome.main[0]
    if main.evaluation is None:
        return f"instance {problem.name}: {main.method}: no plan: {main.note}"
    return render_plan(problem, main.evaluation, main.report)


def render_gap(outcome: "GapOutcome") -> str:
    """The ``optfleet gap`` text: the core columns and the kind's own (see optfleet/tables.py)."""
    return tables.single_group_gap(outcome, {"fleet": ("fleet", tables.text), "gpus": ("GPUs", tables.text), "instances": ("instances", tables.text),
             "served_rps": ("served req/s", tables.number(4))})


def _table(frame: pd.DataFrame) -> str:
    return frame.to_string(index=False, float_format=lambda v: f"{v:,.3f}")
