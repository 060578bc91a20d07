"""Sensitivity of the reserved-capacity plans (``optfleet explain``): binding rows, shadow prices, what-ifs.

The question explained is the hybrid one (least $/h of units plus pay-as-you-go spill, models/reserved.py) when the
instance has prices, else the overload question at its first percentile (least units with ``P(X_n > G) <= 1 - p``).
Every plan, whichever question made it, is scored by the kind's one evaluator (evaluator.py): its objective is the
evaluator's ``$/h`` (units and spill) with prices, else its units.

* **binding**: the rows of the solved model grouped by family (``spill_beyond_units``: the windows whose need
  exceeds the units; ``overload_count``: the windows allowed to overload, ``floor(eps N)``), with how many bind
  and the least slack;
* **shadow prices** (hybrid): the LP left when the integer purchase ``G`` is fixed at the plan,
  ``min sum_n pi_n o_n  s.t.  o_n >= X_n - G``, whose dual on window n's row is ``pi_n / H`` $/h per unit-window
  of extra need while ``X_n > G`` (0 below): they hold for the chosen integer plan.  Reported per window for the
  busiest windows and summed: ``sum_n dual_n`` is the $/h of one more unit needed in every window;
* **parameters**: ``percentile`` (0 < p < 1, the overload question at p: the cost of P95 -> P99 is its default
  curve), ``unit_price`` ($ per unit-hour), ``rate_growth`` (every request's work times g);
* the **break-even** of the unit price: where the hybrid plan's units change (one unit type: the fleet's
  "second-cheapest GPU type" has no counterpart here).
"""

from __future__ import annotations

import re

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from optfleet.errors import InfeasibleError, InputError
from optfleet.models.reserved import PYOMO_WINDOW_LIMIT, build_chance, build_hybrid
from optfleet.problems.reserved import exact
from optfleet.problems.reserved.evaluator import evaluate
from optfleet.problems.reserved.problem import ReservedProblem
from optfleet.problems.reserved.schema import MAX_PRICE, percentile_label
from optfleet.sensitivity.explainer import MAX_RATE_GROWTH, Analysis, Explainer, Parameter, Solved
from optfleet.solvers import highs
from optfleet.solvers.sensitivity import fixed_lp_sensitivity, row_binds, row_slack

SHOWN_WINDOWS = 10  # the windows with the largest shadow prices listed one by one
P95_TO_P99 = "percentile=0.95,0.99"


@dataclass(frozen=True)
class Question:
    """The problem and the question explained: ``percentile`` None is the hybrid question, else the overload one at p."""

    problem: ReservedProblem
    percentile: float | None


def explainer(problem: ReservedProblem) -> Explainer:
    """The reserved kind's sensitivity hooks (optfleet/sensitivity/explainer.py)."""
    if question_is_hybrid(problem):
        question = Question(problem, None)
    elif problem.plans.percentiles:
        question = Question(problem, problem.plans.percentiles[0])
    else:
        raise InputError("plans", "no hybrid or percentile question", "explain analyses the hybrid question (with prices) or an overload percentile")
    unit = "$/h" if problem.prices is not None else f"{problem.unit_name}s"
    return Explainer(unit, solve, analyse, parameters(problem), lambda q, s: [],
                     break_even=("unit_price",) if problem.prices is not None else (), default_curves=(P95_TO_P99,), subject=question)


def solve(question: Question) -> Solved:
    """The question's exact plan, scored by the evaluator."""
    problem = question.problem
    try:
        plan, report = exact.hybrid(problem) if question.percentile is None else exact.chance(problem, question.percentile)
    except InfeasibleError as exc:
        return Solved(None, getattr(getattr(exc, "report", None), "status", "infeasible"), "", None)
    evaluation = evaluate(problem, plan)
    objective = evaluation.total_per_hour if problem.prices is not None else float(plan.units)
    asked = "hybrid" if question.percentile is None else f"overload {percentile_label(question.percentile)}"
    return Solved(objective, report.status, f"{plan.units:,} {problem.unit_name}{'' if plan.units == 1 else 's'}", (plan, report, asked))


def question_is_hybrid(problem: ReservedProblem) -> bool:
    """Whether explain analyses the hybrid question (prices given and asked), else the overload one at the first
    percentile."""
    return problem.prices is not None and problem.plans.hybrid


def parameters(problem: ReservedProblem) -> dict[str, Parameter]:
    found = {
        "percentile": Parameter("percentile", "", "the overload question's percentile p: P(X_n > G) <= 1 - p", problem.plans.percentiles[0]
                                if problem.plans.percentiles else 0.99, lambda q, v: replace(q, percentile=v), 0.0, 1.0,
                                another_question=question_is_hybrid(problem)),
        "rate_growth": Parameter("rate_growth", "x", "every request's work (and pay-as-you-go cost) times g", 1.0,
                                 lambda q, v: replace(q, problem=scaled_work(q.problem, v)), 0.0, MAX_RATE_GROWTH, open_interval=False),
    }
    if problem.prices is not None:
        found["unit_price"] = Parameter("unit_price", "$/unit-h", "price of a reserved unit-hour (prices.unit_per_hour)",
                                        problem.prices.unit_per_hour,
                                        lambda q, v: replace(q, problem=replace(q.problem, prices=replace(q.problem.prices, unit_per_hour=v))),
                                        0.0, MAX_PRICE, open_interval=False)  # the instance file's own bound on a price
    return found


def scaled_work(problem: ReservedProblem, growth: float) -> ReservedProblem:
    """``problem`` with every window's work and pay-as-you-go cost times ``growth`` (the purchase grid widened to the
    busiest window's new need)."""
    def grown(series):
        return replace(series, work=series.work * growth, paygo_cost=series.paygo_cost * growth)

    windows, cost_windows = tuple(grown(s) for s in problem.windows), grown(problem.cost_windows)
    peak = max(float(s.units_needed.max()) for s in (*windows, cost_windows))
    max_units = max(problem.max_units, problem.profile.round_up(peak))
    return replace(problem, work=problem.work * growth, windows=windows, cost_windows=cost_windows, max_units=max_units)


def solved_model(question: Question, units: int) -> pyo.ConcreteModel:
    """The question's model holding the plan: built, its purchase fixed at ``units`` and solved (the spill or the
    overload binaries follow)."""
    problem = question.problem
    grid = exact.purchase_grid(problem)
    if question.percentile is None:
        model = build_hybrid(exact.spill_windows(problem.cost_windows), grid, problem.prices.unit_per_hour)
    else:
        model = build_chance(exact.overload_limits(problem.windows, question.percentile), grid)
    model.buy.fix(1 if units > 0 else 0)
    model.steps.fix((units - grid.min_units) // grid.increment_units if units > 0 else 0)
    highs.solve(model)
    return model


def analyse(question: Question, solved: Solved) -> Analysis:
    """The binding table of the plan's model and, for the hybrid question, its fixed-integer LP's shadow prices."""
    plan, _, asked = solved.detail
    windows = max(s.n_windows for s in (*question.problem.windows, question.problem.cost_windows))
    if windows > PYOMO_WINDOW_LIMIT:
        return Analysis({}, (f"the {asked} question explained; its rows are not analysed beyond {PYOMO_WINDOW_LIMIT:,} windows "
                             f"(this trace has {windows:,}): the curves and break-even below are exact re-solves",))
    model = solved_model(question, plan.units)
    tables = {"binding": family_frame(model)}
    notes = [f"the {asked} question explained"]
    if question.percentile is None:
        hours = question.problem.cost_windows.hours
        lp = fixed_lp_sensitivity(model)
        spill = [row for row in lp.rows if row.name.startswith("spill_beyond_units") and abs(row.dual) > 1e-12]
        spill.sort(key=lambda row: -row.dual)
        records = [{"where": "every window", "constraint": "one more unit needed in every window", "shadow_price": sum(r.dual for r in spill) / hours,
                    "unit": "$/h per unit", "bound_low": None, "bound_high": None}]
        records += [{"where": row.name, "constraint": "spill beyond the units", "shadow_price": row.dual / hours, "unit": "$/h per unit",
                     "bound_low": row.bound_low, "bound_high": row.bound_high} for row in spill[:SHOWN_WINDOWS]]
        tables["shadow_prices"] = pd.DataFrame(records)
        notes.append(f"shadow prices hold for the chosen integer plan ({solved.plan}): the LP with the purchase fixed at it; "
                     f"windows that spill: {len(spill):,}")
    return Analysis(tables, tuple(notes))


# what each row family of models/reserved.py says, with the unit of its slack (the family names are the model's)
FAMILY_MEANINGS = {
    "steps_need_buy": ("purchase steps only with a purchase", "steps"),
    "spill_beyond_units": ("need above the units spills (per window)", "units"),
    "overload_or_cover": ("a busiest window: covered or overloaded", "units"),
    "overload_count": ("at most floor((1 - p) N) windows overload", "windows"),
    "cover_rest": ("the units cover the other windows", "units"),
}


def family_frame(model: pyo.ConcreteModel) -> pd.DataFrame:
    """Per row family of the model: what it says, rows, rows that bind, the least slack and its unit."""
    families: dict[str, list] = {}
    for row in model.component_data_objects(pyo.Constraint, active=True):
        families.setdefault(row.parent_component().local_name, []).append(row)
    meanings = {name: FAMILY_MEANINGS.get(re.sub(r"_\d+$", "", name), ("", "")) for name in families}  # overload rows: one family per width
    records = [{"constraint": name, "meaning": meanings[name][0], "rows": len(rows), "binding_rows": sum(row_binds(r) for r in rows),
                "least_slack": float(np.min([row_slack(r) for r in rows])), "slack_unit": meanings[name][1]}
               for name, rows in families.items()]
    return pd.DataFrame(records)
