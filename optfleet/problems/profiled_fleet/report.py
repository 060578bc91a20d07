"""Text for people about profiled-fleet results: a plan per GPU type and bucket (``solve``), every method side by side (``gap``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from optfleet import numbers, tables
from optfleet.problems.profiled_fleet.evaluator import ProfiledEvaluation
from optfleet.problems.profiled_fleet.problem import ProfiledProblem
from optfleet.results import format_cost
from optfleet.solvers import SolveReport
from optfleet.tables import HIGH, KEY, LOW, MEDIUM, Column, Table

if TYPE_CHECKING:
    from optfleet.api import GapOutcome, SolveOutcome


TYPE_COLUMNS = [
    Column("gpu", "GPU", tables.text, KEY), Column("gpus", "GPUs", tables.count, KEY),
    Column("per_instance", "GPUs/instance", tables.count, MEDIUM), Column("load", "load instances", tables.fixed(3), MEDIUM),
    Column("util", "util %", tables.percent(1), HIGH), Column("rate", "req/s", tables.number(4), HIGH),
    Column("cost", "cost $/h", tables.fixed(2), KEY),
]


def render_plan(problem: ProfiledProblem, evaluation: ProfiledEvaluation, report: SolveReport | None = None) -> str:
    """Headline, one row per GPU type (GPUs, load, utilisation, $/h), one row per bucket (rate and shares)."""
    plan = evaluation.plan
    blocks: list[tables.Block] = [
        f"instance {problem.name}: {numbers.significant(problem.rate_rps, 6)} req/s over {len(problem.demand_buckets)} buckets, "
        f"{problem.splitting}, utilisation cap {problem.max_utilisation:g}",
        f"{plan.method}: {plan.describe_gpus()}; {format_cost(evaluation.cost_per_hour)}; serves {numbers.significant(evaluation.served_rps)} of "
        f"{numbers.significant(evaluation.demand_rps)} req/s" + ("" if evaluation.feasible else "; INFEASIBLE: " + "; ".join(evaluation.violations)),
    ]
    if report is not None:
        blocks.append(f"solver: {report.summary}")
    types = Table(TYPE_COLUMNS, [{"gpu": t.name, "gpus": t.gpus, "per_instance": t.gpus_per_instance, "load": t.load_instances,
                                  "util": t.utilisation, "rate": t.served_rps, "cost": t.cost_per_hour} for t in evaluation.types])
    bucket_columns = [Column("input", "input tokens", tables.text, KEY), Column("output", "output tokens", tables.text, KEY),
                      Column("rate", "req/s", tables.number(4), KEY),
                      *(Column(name, f"% {name}", tables.fixed(1), HIGH) for name in plan.gpu_names)]
    buckets = Table(bucket_columns, [{
        "input": f"{b.input_from_tokens:,}-{b.input_to_tokens:,}", "output": f"{b.output_from_tokens:,}-{b.output_to_tokens:,}",
        "rate": b.rate_rps, **{name: 100 * share for name, share in zip(plan.gpu_names, plan.routing[b.index], strict=True)},
    } for b in problem.demand_buckets])
    blocks += ["", types, "", buckets]
    if evaluation.checks:
        blocks += ["", "constraints:"]
        blocks += [f"  {'ok  ' if c.holds else 'FAIL'} {c.label}: {c.detail}" for c in evaluation.checks]
    return tables.page(blocks)


def render_solve(outcome: "SolveOutcome") -> str:
    """The text of ``optfleet solve`` on a profiled fleet: the plan of the chosen method."""
    problem = outcome.loaded.problem
    main = outcome.main[0]
    if main.evaluation is None:
        return tables.page([f"instance {problem.name}: {main.method}: no plan: {main.note}"])
    return render_plan(problem, main.evaluation, main.report)


GAP_COLUMNS = [Column("fleet", "fleet", tables.text, MEDIUM), Column("gpus", "GPUs", tables.count, HIGH),
               Column("instances", "instances", tables.count, LOW), Column("served_rps", "served req/s", tables.number(4), HIGH)]


def render_gap(outcome: "GapOutcome") -> str:
    """The ``optfleet gap`` text: the core columns and the kind's own (see optfleet/tables.py)."""
    return tables.single_group_gap(outcome, GAP_COLUMNS)
