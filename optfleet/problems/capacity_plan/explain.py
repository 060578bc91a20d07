"""Sensitivity of the capacity-plan MILP's schedule (models/capacity_plan.py) for ``optfleet explain``.

The plan is :func:`optfleet.problems.capacity_plan.exact.solve_milp`'s, scored by the one evaluator (its objective
is the evaluator's ``total_cost``: the purchases over the horizon, reservations already held left out).  Loaded into
the model (``warm_start``), it gives:

* **binding**, per GPU type and row family: the capacity rows (GPUs in use, load charge included, within the GPUs
  held, row (capacity)) with how many periods bind and the least slack in GPUs; the periods whose on-demand GPUs
  are at their cap and whose spot GPUs are at the period's availability; the reserved cap's rows; then each
  declared constraint (budget, GPU mix) with its slack;
* **shadow prices** of the LP left when every model's GPU type per period ``y`` and the spot staircase ``z`` are
  fixed at the plan, and the instances, reservations and on-demand GPUs are continuous.  A capacity row's dual
  (d cost / d its bound: one more GPU held free) is then minus what one more GPU of need costs in that period on that
  type: an on-demand GPU-period while on-demand covers the margin, a reservation's whole term while reservations do.  The table lists the largest ones (at most
  :data:`TOP_ROWS`) with each type's count of binding rows; a declared constraint's dual is listed when it binds.
  They hold for the chosen integer plan (its assignment and spot purchases), as the output says;
* **price ranges**: HiGHS's cost ranging of each reservation the plan starts (its whole-term price);
* **parameters**: ``rate_growth`` (every model's demand times g; the capacity tables are sized again, the sizings of
  earlier points kept: a rate between two sized rates of one instance count is looked up; a point whose table equals
  an earlier point's takes that point's proven optimum, :class:`SameTableSession`),
  ``price:<type>:reserved``, ``price:<type>:on_demand``, ``price:<type>:spot`` ($ per GPU-hour; a reservation's
  upfront payment is kept) and ``confidence:<type>`` (the spot confidence, in (0, 1]);
* **break-even**: the first reserved option's price (when is reserving no longer worth it), else the second-cheapest
  on-demand price; **alternatives**: ``no spot``, ``no new reservations`` and ``no new <type>`` (its caps at 0; the
  reservations already held stay) for each purchase kind and type the plan uses.

A solve stopped by its time limit is a plan, not an optimum: each curve point carries its status.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from optfleet.errors import InfeasibleError
from optfleet.models import capacity_plan as model_lib
from optfleet.problems.capacity_plan.capacity import SizingMemo, capacity_table
from optfleet.problems.capacity_plan.problem import CapacityProblem, TypeOffer
from optfleet.problems.capacity_plan.spot import counted_spot
from optfleet.sensitivity.explainer import MAX_RATE_GROWTH, Analysis, Explainer, Parameter, Solved, plan_digest
from optfleet.solvers.report import OPTIMAL
from optfleet.solvers.sensitivity import fixed_lp_sensitivity, row_binds, row_slack

DUAL_ZERO = 1e-9
TOP_ROWS = 10
PRICE_FIELDS = {"reserved": "reserved_cost_per_gpu", "on_demand": "on_demand_per_gpu_period", "spot": "spot_per_gpu_period"}


def explainer(problem: CapacityProblem) -> Explainer:
    """The capacity_plan kind's sensitivity hooks (optfleet/sensitivity/explainer.py)."""
    reserved = [o.name for o in problem.offers if o.reserved_cost_per_gpu is not None]
    on_demand = sorted((o for o in problem.offers if o.on_demand_per_gpu_period is not None), key=lambda o: o.on_demand_per_gpu_period)
    default = (f"price:{reserved[0]}:reserved",) if reserved else (f"price:{on_demand[1].name}:on_demand",) if len(on_demand) > 1 else ()
    return Explainer("$", solve, analyse, parameters(problem), alternatives, break_even=default, session=session)


class SameTableSession:
    """The points of a demand curve or break-even (``rate_growth``): a point whose capacity table equals an earlier
    point's has that point's plan, not solved again.  The MILP and the evaluator read the demand only through the table
    (instances per model, type and period; the rates appear in messages only), so equal tables give the same MILP,
    whose optimum the earlier point found (only proven optima are reused: a solve stopped by its time limit is run
    again, as an infeasible one whose message quotes the rates)."""

    def __init__(self) -> None:
        self.solved: dict[str, Solved] = {}

    def __call__(self, problem: CapacityProblem) -> Solved:
        key = plan_digest(problem.table.instances, problem.table.tp)
        if key not in self.solved:
            found = solve(problem)
            if found.status != OPTIMAL:
                return found
            self.solved[key] = found
        return self.solved[key]


def session(problem: CapacityProblem, parameter: str) -> SameTableSession | None:
    """The demand curve's session (:class:`SameTableSession`); None for the other parameters (each point solved)."""
    return SameTableSession() if parameter == "rate_growth" else None


def solve(problem: CapacityProblem) -> Solved:
    from optfleet.problems.capacity_plan.evaluator import evaluate
    from optfleet.problems.capacity_plan.exact import solve_milp

    try:
        schedule, report = solve_milp(problem)
    except InfeasibleError as exc:
        return Solved(None, "infeasible", str(exc), None)
    evaluation = evaluate(problem, schedule)
    return Solved(evaluation.total_cost, report.status, _label(problem, schedule), schedule)


def _label(problem: CapacityProblem, schedule) -> str:
    """Each type's purchases in totals, and a digest of the whole schedule (two plans share it exactly when equal)."""
    digest = plan_digest(schedule.gpu_type, schedule.instances, schedule.reserved_starts, schedule.on_demand_gpus, schedule.spot_gpus)
    parts = []
    for g, name in enumerate(problem.type_names):
        bought = [(schedule.reserved_starts[g].sum(), "R"), (schedule.on_demand_gpus[g].sum(), "O"), (schedule.spot_gpus[g].sum(), "S")]
        text = " ".join(f"{kind}{int(count)}" for count, kind in bought if count > 0)
        if text:
            parts.append(f"{name} {text}")
    return f"{'; '.join(parts) or 'nothing bought'} #{digest}"


def parameters(problem: CapacityProblem) -> dict[str, Parameter]:
    hours = problem.spec.period_hours
    memo: SizingMemo = {}  # the capacity tables' sizings, shared by the points of a demand curve or break-even
    found = {"rate_growth": Parameter("rate_growth", "x", "every model's demand as a multiple of the instance's", 1.0,
                                      lambda p, v: _grown(p, v, memo), 0.0, MAX_RATE_GROWTH, open_interval=False)}
    for g, offer in enumerate(problem.offers):
        spec = problem.spec.gpus[g]
        for kind, field in PRICE_FIELDS.items():
            if getattr(offer, field) is None:
                continue
            paid = getattr(offer, field)  # per GPU-period, or a reservation's whole term (the catalog's price where the file gives none)
            current = (paid - spec.reserved.upfront_per_gpu) / (hours * offer.reserved_term_periods) if kind == "reserved" else paid / hours
            found[f"price:{offer.name}:{kind}"] = Parameter(
                f"price:{offer.name}:{kind}", "$/GPU-h", f"{kind.replace('_', '-')} price of a {offer.name} GPU-hour", float(current),
                lambda p, v, g=g, kind=kind: _priced(p, g, kind, v))
        if offer.spot_per_gpu_period is not None:
            found[f"confidence:{offer.name}"] = Parameter(
                f"confidence:{offer.name}", "", f"the confidence at which {offer.name} spot GPUs count", offer.spot_confidence,
                lambda p, v, g=g: _confident(p, g, v), 0.0, 1.0, open_interval=False)
    return found


def _grown(problem: CapacityProblem, factor: float, memo: SizingMemo) -> CapacityProblem:
    """``problem`` with every model's demand times ``factor`` and its capacity tables sized again; ``memo`` keeps the
    fleet problems and the counts sized at earlier factors, so a rate between two sized rates of one count is looked
    up, not sized (capacity.py ``instances_needed``: the instance count is non-decreasing in the rate)."""
    rates = problem.rates_rps * factor
    table = capacity_table(list(problem.spec.models), list(problem.spec.gpus), rates, problem.base_dir, memo)
    return replace(problem, rates_rps=rates, table=table)


def _priced(problem: CapacityProblem, g: int, kind: str, price_per_gpu_hour: float) -> CapacityProblem:
    """``problem`` with type ``g``'s ``kind`` price at ``price_per_gpu_hour`` (a reservation: over its whole term, its
    upfront payment kept)."""
    offer, spec = problem.offers[g], problem.spec.gpus[g]
    hours = problem.spec.period_hours
    if kind == "reserved":
        value = spec.reserved.upfront_per_gpu + price_per_gpu_hour * hours * offer.reserved_term_periods
    else:
        value = price_per_gpu_hour * hours
    return _with_offer(problem, g, replace(offer, **{PRICE_FIELDS[kind]: value}))


def _confident(problem: CapacityProblem, g: int, confidence: float) -> CapacityProblem:
    offer = problem.offers[g]
    counted = counted_spot(int(offer.spot_cap.max(initial=0)), offer.spot_preemption_probability, confidence)
    return _with_offer(problem, g, replace(offer, spot_confidence=confidence, spot_counted=counted))


def _with_offer(problem: CapacityProblem, g: int, offer: TypeOffer) -> CapacityProblem:
    return replace(problem, offers=tuple(offer if h == g else o for h, o in enumerate(problem.offers)))


def alternatives(problem: CapacityProblem, solved: Solved) -> list[tuple[str, CapacityProblem]]:
    """``no spot``, ``no new reservations`` and ``no new <type>`` for what the plan buys."""
    schedule = solved.detail
    found = []
    if schedule.spot_gpus.sum() > 0:
        found.append(("no spot", replace(problem, offers=tuple(replace(o, spot_cap=np.zeros_like(o.spot_cap)) for o in problem.offers))))
    if schedule.reserved_starts.sum() > 0:
        found.append(("no new reservations", replace(problem, offers=tuple(replace(o, reserved_max_gpus=0) if o.reserved_cost_per_gpu is not None
                                                                                 else o for o in problem.offers))))
    used = [g for g in range(len(problem.offers))
            if schedule.reserved_starts[g].sum() + schedule.on_demand_gpus[g].sum() + schedule.spot_gpus[g].sum() > 0]
    if len(used) > 1:
        for g in used:
            offer = problem.offers[g]
            closed = replace(offer, reserved_max_gpus=0 if offer.reserved_cost_per_gpu is not None else None,
                             on_demand_max_gpus=0 if offer.on_demand_per_gpu_period is not None else None, spot_cap=np.zeros_like(offer.spot_cap))
            found.append((f"no new {offer.name}", _with_offer(problem, g, closed)))
    return found


def analyse(problem: CapacityProblem, solved: Solved) -> Analysis:
    schedule = solved.detail
    model = model_lib.build(problem)
    model_lib.warm_start(model, problem, schedule)
    records = []
    for g, offer in enumerate(problem.offers):
        rows = [model.capacity[g, t] for t in range(problem.periods) if (g, t) in model.capacity]
        if rows:
            slacks = [row_slack(row) for row in rows]
            records.append({"type": offer.name, "rows": "capacity: GPUs in use within the GPUs held", "periods": len(rows),
                            "binding": sum(row_binds(row) for row in rows), "least_slack": min(slacks), "slack_unit": "GPUs"})
        if offer.on_demand_max_gpus is not None:
            at_cap = int((schedule.on_demand_gpus[g] >= offer.on_demand_max_gpus).sum())
            records.append({"type": offer.name, "rows": f"on-demand cap ({offer.on_demand_max_gpus} GPUs)", "periods": problem.periods,
                            "binding": at_cap, "least_slack": float(offer.on_demand_max_gpus - schedule.on_demand_gpus[g].max()), "slack_unit": "GPUs"})
        if offer.spot_per_gpu_period is not None:
            records.append({"type": offer.name, "rows": "spot availability", "periods": problem.periods,
                            "binding": int((schedule.spot_gpus[g] >= offer.spot_cap).sum()),
                            "least_slack": float((offer.spot_cap - schedule.spot_gpus[g]).min()), "slack_unit": "GPUs"})
        capped = [model.reserved_cap[g, t] for t in range(problem.periods) if (g, t) in model.reserved_cap]
        if capped:
            records.append({"type": offer.name, "rows": f"reserved cap ({offer.reserved_max_gpus} GPUs)", "periods": len(capped),
                            "binding": sum(row_binds(row) for row in capped), "least_slack": min(row_slack(row) for row in capped),
                            "slack_unit": "GPUs"})
    declared = [c for c in model.component_objects(pyo.Constraint, active=True) if c.local_name.startswith(("budget_", "gpu_mix_"))]
    for block in declared:
        rows = list(block.values())
        records.append({"type": "plan", "rows": block.local_name, "periods": len(rows), "binding": sum(row_binds(row) for row in rows),
                        "least_slack": min(row_slack(row) for row in rows), "slack_unit": "$" if block.local_name.startswith("budget") else "GPUs"})
    continuous = [model.x, model.r, model.o, model.l, model.w]
    lp = fixed_lp_sensitivity(model, continuous=continuous)
    duals, binding_per_type = [], {}
    for row in lp.rows:
        family = row.name.split("[", 1)[0]
        if abs(row.dual) <= DUAL_ZERO:
            continue
        if family == "capacity":
            g, t = (int(v) for v in row.name[len(family) + 1:-1].split(","))
            binding_per_type[g] = binding_per_type.get(g, 0) + 1
            duals.append({"where": f"{problem.offers[g].name}, period {t}", "constraint": "GPUs in use <= GPUs held", "shadow_price": row.dual,
                          "unit": "$ per GPU held", "bound": row.bound, "bound_low": row.bound_low, "bound_high": row.bound_high, "row": row.name})
        elif family.startswith(("budget_", "gpu_mix_")):
            duals.append({"where": "plan", "constraint": family, "shadow_price": row.dual, "unit": "$ per unit of the row", "bound": row.bound,
                          "bound_low": row.bound_low, "bound_high": row.bound_high, "row": row.name})
    duals.sort(key=lambda d: -abs(d["shadow_price"]))
    shown = [d for d in duals if d["where"] == "plan"] + [d for d in duals if d["where"] != "plan"][:TOP_ROWS]
    ranges = []
    for (g, t), var in model.r.items():
        column = lp.column(var.name)
        if schedule.reserved_starts[g, t] > 0:
            ranges.append({"type": problem.offers[g].name, "start_period": t, "reserved_gpus": int(schedule.reserved_starts[g, t]),
                           "price_per_gpu_term": column.cost, "price_low": column.cost_low, "price_high": column.cost_high})
    notes = ("shadow prices and price ranges hold for the chosen integer plan: the LP with every model's GPU type per period and the spot "
             f"purchases fixed, instances, reservations and on-demand GPUs continuous (LP cost ${lp.report.objective:,.2f} against the "
             f"plan's ${solved.objective:,.2f}); a capacity row's dual is minus what one more GPU of need costs on its type in its period",
             "capacity rows with a price, per type: " + (", ".join(f"{problem.offers[g].name} {n}" for g, n in sorted(binding_per_type.items())) or "none")
             + f"; the {TOP_ROWS} largest are listed")
    return Analysis({"binding": pd.DataFrame(records),
                     "shadow_prices": pd.DataFrame(shown, columns=["where", "constraint", "shadow_price", "unit", "bound", "bound_low", "bound_high", "row"]),
                     "price_ranges": pd.DataFrame(ranges)}, notes)
