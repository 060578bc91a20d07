"""Plain-text rendering of capacity plans: the instance, the comparison of every method, the chosen method's
purchase schedule (consecutive equal periods merged) and its cost by purchase option and by model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from optfleet import numbers, tables
from optfleet.problems.capacity_plan.problem import CapacityProblem
from optfleet.tables import HIGH, KEY, LOW, MEDIUM, Column

if TYPE_CHECKING:
    from optfleet.api import GapOutcome, SolveOutcome
    from optfleet.problems.capacity_plan.evaluator import Evaluation
    from optfleet.problems.capacity_plan.plan import Schedule

EXTRA = [
    Column("reserved_cost", "reserved $", tables.fixed(2), HIGH),
    Column("on_demand_cost", "on-demand $", tables.fixed(2), HIGH),
    Column("spot_cost", "spot $", tables.fixed(2), HIGH),
    Column("expected_fallback_cost", "fallback $", tables.fixed(2), MEDIUM),
    Column("min_attainment_pct", "min SLO met %", tables.fixed(1), HIGH),
    Column("violations", "violations", tables.count, MEDIUM),
    Column("description", "assumes", tables.text, LOW),
]


def describe(problem: CapacityProblem) -> str:
    """What ``optfleet validate`` prints about a valid capacity-plan instance."""
    return f"valid capacity_plan instance '{problem.name}'\n" + render_problem(problem)


def render_problem(problem: CapacityProblem) -> str:
    """The horizon, each model's demand and peak instances per type, each type's prices."""
    spec, table = problem.spec, problem.table
    lines = [f"instance {problem.name}: {problem.periods} periods of {spec.period_hours:g} h, {len(problem.model_names)} models, "
             f"{len(problem.offers)} GPU types"]
    for m, name in enumerate(problem.model_names):
        peaks = ", ".join(f"{g} {int(table.instances[m, i].max())} x{table.tp[m, i]}" if table.usable()[m, i].all() else f"{g} unusable"
                          for i, g in enumerate(problem.type_names))
        lines.append(f"  model {name}: {problem.rates_rps[m].min():.4g}-{problem.rates_rps[m].max():.4g} req/s; peak instances {peaks}")
    for o in problem.offers:
        options = []
        if o.reserved_term_periods is not None:
            options.append(f"reserved ${o.reserved_cost_per_gpu:,.2f} per GPU for {o.reserved_term_periods} periods")
        if o.on_demand_per_gpu_period is not None:
            options.append(f"on-demand ${o.on_demand_per_gpu_period:,.2f} per GPU-period")
        if o.spot_per_gpu_period is not None:
            options.append(f"spot ${o.spot_per_gpu_period:,.2f} per GPU-period (up to {int(o.spot_cap.max())}, preempted "
                           f"{o.spot_preemption_probability:g}, counted at {o.spot_confidence:g}: k(s) = {o.spot_counted.tolist()[:9]})")
        lines.append(f"  {o.name} ({o.gpu}): " + "; ".join(options))
    return "\n".join(lines)


def _comparison(outcome: "SolveOutcome | GapOutcome") -> list[tables.Block]:
    (reference,) = outcome.references.values()
    return ["", f"gap = distance to the bound in % of the bound; bound: {reference.reason}; objective: planned cost over the horizon, $ "
            "(fallback $: expected on-demand fallback after spot preemptions, not in the objective)",
            tables.comparison_table(outcome.rows, EXTRA), *tables.notes(outcome.rows)]


def schedule_table(problem: CapacityProblem, schedule: "Schedule") -> tables.Table:
    """One row per run of periods with the same purchases and assignments: per type reserved held (bought by the
    plan and already held) / on-demand / spot GPUs, per model its type and instances."""
    held = schedule.reserved_held(problem) + problem.held.total()
    cells = []
    for t in range(problem.periods):
        row: dict[str, Any] = {}
        for g, name in enumerate(problem.type_names):
            row[f"gpus_{g}"] = f"{held[g, t]}/{schedule.on_demand_gpus[g, t]}/{schedule.spot_gpus[g, t]}"
        for m in range(len(problem.model_names)):
            g = schedule.gpu_type[m, t]
            row[f"model_{m}"] = "-" if g < 0 else f"{schedule.instances[m, t]} {problem.type_names[g]}"
        cells.append(row)
    rows: list[dict[str, Any]] = []
    for t, row in enumerate(cells):
        if rows and rows[-1]["cells"] == row:
            rows[-1]["last"] = t
        else:
            rows.append({"first": t, "last": t, "cells": row})
    flat = [{"periods": f"{r['first']}" if r["first"] == r["last"] else f"{r['first']}-{r['last']}", **r["cells"]} for r in rows]
    columns = [Column("periods", "periods", tables.text, KEY)]
    columns += [Column(f"gpus_{g}", f"{name} R/OD/spot", tables.text, KEY) for g, name in enumerate(problem.type_names)]
    columns += [Column(f"model_{m}", name, tables.text, HIGH) for m, name in enumerate(problem.model_names)]
    return tables.Table(columns, flat)


def cost_lines(problem: CapacityProblem, evaluation: "Evaluation") -> list[str]:
    """The cost by purchase option and by model, and the attainment per model."""
    by_option = ", ".join(f"{k.replace('_', '-')} {numbers.fixed(v, 2)}" for k, v in evaluation.cost_by_option.items())
    by_model = ", ".join(f"{k} {numbers.fixed(v, 2)}" for k, v in evaluation.cost_by_model.items())
    attainment = ", ".join(f"{name} min {numbers.fixed(100 * evaluation.attainment[m].min(), 1)} % / mean "
                           f"{numbers.fixed(100 * evaluation.attainment[m].mean(), 1)} %" for m, name in enumerate(problem.model_names))
    return [f"  cost by purchase option ($): {by_option}; total {numbers.fixed(evaluation.total_cost, 2)}",
            f"  cost by model ($, each type-period split by GPUs in use): {by_model}",
            f"  expected on-demand fallback after preemptions: ${numbers.fixed(evaluation.expected_fallback_cost, 2)}",
            *([f"  reservations already held: ${numbers.fixed(evaluation.sunk_cost, 2)} over the horizon (sunk, not in the total)"]
              if problem.spec.reservations else []),
            f"  SLO attainment per period over {problem.spec.evaluation.samples} preemption samples (seed "
            f"{problem.spec.evaluation.seed}, without fallback): {attainment}"]


def render_solve(outcome: "SolveOutcome") -> str:
    """The instance, the comparison, then the chosen method's schedule and cost breakdown."""
    problem = outcome.loaded.problem
    blocks: list[tables.Block] = [render_problem(problem), *_comparison(outcome)]
    for result in outcome.main:
        if result.plan is not None:
            blocks += ["", f"{result.method}: purchase schedule (GPUs per type: reserved held / on-demand / spot; per model: "
                       "instances and type)", schedule_table(problem, result.plan), *cost_lines(problem, result.evaluation)]
    return tables.page(blocks)


def render_gap(outcome: "GapOutcome") -> str:
    """The instance, then every method's row."""
    return tables.page([render_problem(outcome.loaded.problem), *_comparison(outcome)])


def solve_files(outcome: "SolveOutcome") -> dict[str, str]:
    """``schedule.csv``: the chosen method's schedule, one row per period, model and type (what a planner loads)."""
    import pandas as pd

    problem = outcome.loaded.problem
    rows = []
    for result in outcome.main:
        if result.plan is None:
            continue
        s = result.plan
        held = s.reserved_held(problem)
        use = result.evaluation.gpus_in_use
        for t in range(problem.periods):
            for g, name in enumerate(problem.type_names):
                models = [problem.model_names[m] for m in range(len(problem.model_names)) if s.gpu_type[m, t] == g]
                rows.append({"period": t, "gpu_type": name, "reserved_starts": int(s.reserved_starts[g, t]), "reserved_held": int(held[g, t]),
                             "already_held": int(problem.held.total()[g, t]),
                             "on_demand_gpus": int(s.on_demand_gpus[g, t]), "spot_gpus": int(s.spot_gpus[g, t]),
                             "gpus_in_use": float(np.round(use[g, t], 6)),
                             "models": ";".join(f"{n}:{s.instances[problem.model_names.index(n), t]}" for n in models)})
    return {"schedule.csv": pd.DataFrame(rows).to_csv(index=False)} if rows else {}
