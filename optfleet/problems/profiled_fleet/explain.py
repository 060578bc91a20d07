"""Sensitivity of the profiled-fleet MILP's plan (Mélange, models/profiled.py) for ``optfleet explain``.

The plan is :func:`optfleet.problems.profiled_fleet.solve.solve_profiled`'s (cost objective; a budget's served-rate
objective is not analysed).  Loaded into the model (``warm_start``), it gives:

* **binding**: per GPU type its capacity row (4) ``sum_b L[b,g] x[b,g] <= u instances[g]`` with the slack in
  instances, and the declared ``constraints:`` rows, with their slack;
* **shadow prices** of the LP left when the slice counts are fixed at the plan and the GPU and instance counts are
  continuous (with them fixed the cost ``sum_g p_g n[g]`` is a constant and every dual 0): the capacity row's dual
  is ``-p_g k_g / u`` $/h per instance of load while it binds, and the route row of bucket b (or, with slices, the
  slice link of b on the type serving it, which then carries the dual) gives ``dual / lambda_b`` $/h per req/s of
  that bucket.  They hold for the chosen integer plan's routing;
* **price ranges**: HiGHS's cost ranging of ``n[g]`` in that LP;
* **parameters**: ``rate_growth``, ``max_utilisation`` and ``price:<GPU>`` ($/GPU-hour); the break-even of the
  second-cheapest GPU type's price (by $/GPU-hour) by re-solving; alternatives: ``no <type>`` per type used.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pyomo.environ as pyo

from optfleet.errors import InfeasibleError, InputError
from optfleet.models import profiled as model_lib
from optfleet.models.constraints import COST
from optfleet.problems.profiled_fleet.constraints import PROFILED_CONSTRAINTS
from optfleet.problems.profiled_fleet.problem import ProfiledProblem
from optfleet.sensitivity.explainer import MAX_RATE_GROWTH, Analysis, Explainer, Parameter, Solved
from optfleet.solvers.sensitivity import fixed_lp_sensitivity, row_binds, row_slack

DUAL_ZERO = 1e-9


def explainer(problem: ProfiledProblem) -> Explainer:
    """The profiled kind's sensitivity hooks (optfleet/sensitivity/explainer.py)."""
    if PROFILED_CONSTRAINTS.objective(problem.constraints) != COST:
        raise InputError("constraints", "budget", "explain analyses the cost objective; a budget's served-rate objective is not supported yet")
    prices = sorted(problem.gpus, key=lambda g: g.cost_per_gpu_hour)
    return Explainer("$/h", solve, analyse, parameters(problem), alternatives,
                     break_even=(f"price:{prices[1].name}",) if len(prices) > 1 else ())


def solve(problem: ProfiledProblem) -> Solved:
    from optfleet.problems.profiled_fleet.solve import solve_profiled

    try:
        result = solve_profiled(problem)
    except InfeasibleError as exc:
        return Solved(None, "infeasible", str(exc), None)
    label = " + ".join(f"{name}:{count}" for name, count in zip(problem.gpu_names, result.plan.gpus, strict=True) if count > 0)
    return Solved(result.evaluation.cost_per_hour, result.report.status, label, result)


def parameters(problem: ProfiledProblem) -> dict[str, Parameter]:
    found = {
        "rate_growth": Parameter("rate_growth", "x", f"request rate as a multiple of {problem.rate_rps:g} req/s", 1.0,
                                 lambda p, v: replace(p, rate_rps=p.rate_rps * v, buckets=tuple(replace(b, rate_rps=b.rate_rps * v) for b in p.buckets)),
                                 0.0, MAX_RATE_GROWTH, open_interval=False),
        "max_utilisation": Parameter("max_utilisation", "", "utilisation cap u", problem.max_utilisation,
                                     lambda p, v: replace(p, max_utilisation=v), 0.0, 1.0, open_interval=False),
    }
    for gpu in problem.gpus:
        found[f"price:{gpu.name}"] = Parameter(
            f"price:{gpu.name}", "$/GPU-h", f"price of a {gpu.name} GPU-hour", gpu.cost_per_gpu_hour,
            lambda p, v, name=gpu.name: replace(p, gpus=tuple(replace(g, cost_per_gpu_hour=v) if g.name == name else g for g in p.gpus)))
    return found


def alternatives(problem: ProfiledProblem, solved: Solved) -> list[tuple[str, ProfiledProblem]]:
    """``no <type>`` for each GPU type the plan uses, when it uses two or more."""
    used = [name for name, count in zip(problem.gpu_names, solved.detail.plan.gpus, strict=True) if count > 0]
    if len(used) < 2:
        return []
    return [(f"no {name}", replace(problem, gpus=tuple(g for g in problem.gpus if g.name != name))) for name in used]


def analyse(problem: ProfiledProblem, solved: Solved) -> Analysis:
    model = model_lib.build(problem, gpu_bounds={g.name: max(n, bound) for g, n, bound in
                                                 zip(problem.gpus, solved.detail.plan.gpus, problem.gpu_upper_bounds().values(), strict=True)})
    PROFILED_CONSTRAINTS.declare_all(model, problem.constraints)
    model_lib.warm_start(model, solved.detail.plan)
    records = [{"gpu": g, "constraint": "capacity (4): load within u x instances", "row": model.capacity[g].name,
                "slack": row_slack(model.capacity[g]), "slack_unit": "instances", "binds": row_binds(model.capacity[g])} for g in model.G]
    for declared in model.user_constraints:
        for row in declared.block.component_data_objects(pyo.Constraint, active=True):
            records.append({"gpu": "fleet", "constraint": f"{declared.block.local_name} ({declared.kind.name}: {row.local_name})", "row": row.name,
                            "slack": row_slack(row), "slack_unit": "", "binds": row_binds(row)})
    lp = fixed_lp_sensitivity(model, continuous=[model.n, model.instances])
    rates = {b.index: b.rate_rps for b in problem.buckets}
    duals = []
    for row in lp.rows:
        family = row.name.split("[", 1)[0]
        if abs(row.dual) <= DUAL_ZERO or family not in ("route", "slice_link", "capacity") and not row.name.startswith("user_"):
            continue
        if family in ("route", "slice_link"):
            b, *on = row.name[len(family) + 1:-1].split(",")
            where = f"bucket {b}" + (f" on {on[0]}" if on else "")
            what = "serve the bucket's requests" + (" (its slices on this type fixed)" if on else "")
            price, unit = row.dual / rates[int(b)], "$/h per req/s"
        else:
            where, what, price, unit = row.name, "capacity (4)" if family == "capacity" else row.name, row.dual, "$/h per unit of the row"
        duals.append({"where": where, "constraint": what, "row": row.name, "shadow_price": price, "unit": unit, "dual": row.dual,
                      "bound": row.bound, "bound_low": row.bound_low, "bound_high": row.bound_high})
    ranges = [{"gpu": g, "gpus": lp.column(model.n[g].name).value, "price_per_gpu_hour": lp.column(model.n[g].name).cost,
               "price_low": lp.column(model.n[g].name).cost_low, "price_high": lp.column(model.n[g].name).cost_high}
              for g in model.G if solved.detail.plan.gpus_of(g) > 0]
    note = ("shadow prices and price ranges hold for the chosen integer plan: the LP with its slice counts fixed and the GPU "
            f"counts continuous (LP cost ${lp.report.objective:,.2f}/h against the plan's ${solved.objective:,.2f}/h)")
    return Analysis({"binding": pd.DataFrame(records), "shadow_prices": pd.DataFrame(duals, columns=["where", "constraint", "row", "shadow_price", "unit",
                                                                                                    "dual", "bound", "bound_low", "bound_high"]),
                     "price_ranges": pd.DataFrame(ranges)}, (note,))
