"""Text for people about pd_fleet results: a plan per pool (``solve``), every method side by side (``gap``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from optfleet import numbers, tables
from optfleet.problems.pd_fleet.evaluator import PdEvaluation
from optfleet.problems.pd_fleet.problem import PdProblem
from optfleet.results import format_cost
from optfleet.solvers import SolveReport
from optfleet.tables import HIGH, KEY, LOW, MEDIUM, Column, Table

if TYPE_CHECKING:
    from optfleet.api import GapOutcome, SolveOutcome

POOL_COLUMNS = [
    Column("pool", "pool tokens", tables.text, KEY), Column("rate", "req/s", tables.number(4), KEY), Column("mode", "mode", tables.text, KEY),
    Column("choice", "instances", tables.text, KEY), Column("cost", "$/h", tables.fixed(2), KEY),
    Column("ttft", "TTFT99 ms", tables.number(4), KEY), Column("tpot", "TPOT99 ms", tables.number(3), KEY),
    Column("util", "utilisation", tables.text, MEDIUM),
]
MODES = {"aggregated": "agg", "disaggregated": "disagg", "idle": "idle"}


def render_plan(problem: PdProblem, evaluation: PdEvaluation, report: SolveReport | None = None) -> str:
    """Headline, one row per pool, what binds, the constraints and the model's approximations."""
    plan = evaluation.plan
    power = "" if evaluation.power_w is None else f", {numbers.significant(evaluation.power_w)} W"
    gpus = " + ".join(f"{n:,} {g}" for g, n in evaluation.gpus.items() if n) or "no GPUs"
    blocks: list[tables.Block] = [
        f"instance {problem.name}: {numbers.significant(problem.rate_rps, 6)} req/s of {problem.model.name}, P99 TTFT <= "
        f"{problem.ttft_p99_ms:g} ms, P99 TPOT <= {problem.tpot_p99_ms:g} ms, rho_max {problem.rho_max:g}",
        f"  iteration times: {problem.performance_source}, at every option's GPU and TP",
        f"{plan.method}: {format_cost(evaluation.cost_per_hour)}; {gpus}{power}"
        + ("" if evaluation.feasible else "; INFEASIBLE: " + "; ".join(evaluation.violations)),
    ]
    if report is not None:
        blocks.append(f"solver: {report.summary}")
    rows = [{"pool": f"{problem.pools[p.index].lower_tokens:,}-{problem.pools[p.index].window_tokens:,}", "rate": p.rate_rps,
             "mode": MODES[p.mode], "choice": p.choice, "cost": p.cost_per_hour,
             "ttft": p.ttft_p99_ms, "tpot": p.tpot_p99_ms,
             "util": ", ".join(f"{k} {100 * v:.0f}%" for k, v in p.utilisation.items())} for p in evaluation.pools]
    blocks += ["", Table(POOL_COLUMNS, rows), ""]
    blocks += [f"{p.label} binds: {p.binding}" for p in evaluation.pools if p.binding]
    if evaluation.checks:
        blocks += ["", "constraints:"]
        blocks += [f"  {'ok  ' if c.holds else 'FAIL'} {c.label}: {c.detail}" for c in evaluation.checks]
    if evaluation.approximations:
        blocks += ["", "approximate: " + "; ".join(evaluation.approximations)]
    return tables.page(blocks)


def render_solve(outcome: "SolveOutcome") -> str:
    """The text of ``optfleet solve`` on a pd_fleet instance: the plan of the chosen method."""
    problem = outcome.loaded.problem
    main = outcome.main[0]
    if main.evaluation is None:
        return tables.page([f"instance {problem.name}: {main.method}: no plan: {main.note}"])
    return render_plan(problem, main.evaluation, main.report)


GAP_COLUMNS = [Column("fleet", "fleet", tables.text, MEDIUM), Column("gpus", "GPUs", tables.count, HIGH),
               Column("disaggregated_pools", "disagg. pools", tables.count, LOW), Column("power_w", "power W", tables.number(4), LOW),
               Column("assumes", "assumes", tables.text, MEDIUM)]


def render_gap(outcome: "GapOutcome") -> str:
    """The ``optfleet gap`` text: the core columns and the kind's own (see optfleet/tables.py)."""
    return tables.single_group_gap(outcome, GAP_COLUMNS)
