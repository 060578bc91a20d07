"""Sensitivity of the fleet MILP's plan (``optfleet explain``): binding rows, shadow prices, price ranges, what-ifs.

The plan is the MILP's (optfleet/problems/fleet/milp.py).  Its model, with the plan's counts fixed
(:func:`optfleet.problems.fleet.milp.plan_model`), gives the **binding** table: per open pool the rows the plan meets
with its slack, read in the units of the row (erlangs of load for the utilisation cap (3) and the Erlang-C wait
row (7) of the chosen floor level; traffic share for the prefill floor row (4)), and the fleet-wide rows (K, the
declared ``constraints:``).

**Shadow prices** come from the LP left when the plan's binary choices are fixed (open pools, floor levels, the
small-count binaries of the Erlang table) and the GPU counts ``n[j]`` are continuous
(:func:`optfleet.solvers.sensitivity.fixed_lp_sensitivity`).  With the counts fixed too the cost
``sum_j c_j n[j]`` would be a constant and every dual 0; with them continuous, a dual is the marginal cost of the
chosen plan's structure with fractional GPUs, e.g. for the route row of length class k

    d(cost) / d(rate of class k)  =  dual(route[k]) / (lambda p_k)     [$/h per req/s]

and for pool j's utilisation cap ``-dual = c_j / (rho_max n_max_j)`` [$/h per erlang] while the cap binds.  These
hold for the chosen integer plan's structure, not for the MILP: the output says so.  **Price ranges** are HiGHS's
cost ranging of ``n[j]`` in that LP: the prices over which its basis stays optimal.  Whether the MILP's plan
changes with a GPU price is answered by re-solving the MILP: the **break-even** price (optfleet/sensitivity/run.py).

Under the batching service model the plan comes from tables at each pool's traffic mix (milp_batching.py), which
this analysis does not rebuild: ``explain`` says so (exit 2).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd
import pyomo.environ as pyo

from optfleet.errors import InputError
from optfleet.models.constraints import COST
from optfleet.problems.fleet.constraints import FLEET_CONSTRAINTS
from optfleet.sensitivity.explainer import MAX_RATE_GROWTH, Analysis, Explainer, Parameter, Solved
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.solvers.report import OPTIMAL
from optfleet.solvers.sensitivity import fixed_lp_sensitivity, row_binds, row_slack

COST_UNIT = "$/h"
P95_TO_P99 = "percentile=0.95,0.99"  # the cost of moving the TTFT target from P95 to P99, in every report
DUAL_ZERO = 1e-9  # $/h: duals below this are not shown
MEANING = {  # row family -> (what it means to a planner, the unit of its slack and of its bound)
    "utilisation_cap": ("utilisation cap (slo.rho_max)", "erlang"),
    "wait": ("TTFT queueing wait (Erlang-C table, slo.ttft_p99_ms)", "erlang"),
    "floor": ("TTFT prefill floor (slo.ttft_p99_ms)", "share of traffic"),
    "mean_tpot": ("mean TPOT (slo.tpot_mean_ms)", "instance-second/s"),
    "route": ("serve every request of the class", "share"),
    "compress_share": ("compressible share p_c (compression.compressible_fraction)", "share"),
    "max_pools": ("K (solve.max_pools)", "pool"),
}


def explainer(problem: FleetProblem) -> Explainer:
    """The fleet kind's sensitivity hooks (optfleet/sensitivity/explainer.py)."""
    if problem.service_model == "batching":
        raise InputError("slo.service_model", problem.service_model, "explain analyses the slot model's MILP; the batching model's is not supported yet")
    if FLEET_CONSTRAINTS.objective(problem.constraints) != COST:
        raise InputError("constraints", "budget", "explain analyses the cost objective; a budget's served-share objective is not supported yet")
    return Explainer(COST_UNIT, solve, analyse, parameters(problem), alternatives, break_even=default_break_even(problem),
                     default_curves=(P95_TO_P99,))


def solve(problem: FleetProblem) -> Solved:
    """The MILP's plan (cost in $/h) and its label, e.g. ``H100-SXM x8 w8192:18 + H200 x4 w4096:61``."""
    from optfleet.errors import InfeasibleError
    from optfleet.problems.fleet.milp import solve_milp

    try:
        result = solve_milp(problem)
    except InfeasibleError as exc:
        return Solved(None, getattr(getattr(exc, "report", None), "status", "infeasible"), "", None)
    return Solved(result.evaluation.cost_per_hour, result.report.status, plan_label(problem, result.plan), result)


def plan_label(problem: FleetProblem, plan: Any) -> str:
    """The plan's pools with instances, sorted: equal labels are equal plans (routing aside)."""
    pools = sorted((p.gpu or problem.hardware.label, p.window_tokens, p.instances) for p in plan.pools if p.instances > 0)
    return " + ".join(f"{gpu} w{window}:{count}" for gpu, window, count in pools)


def gpu_prices(problem: FleetProblem) -> dict[str, float]:
    """$/GPU-hour of each GPU type the MILP may use, cheapest first."""
    factories = problem.options or (problem.hardware,)
    prices = {f.gpu_name: f.cost_per_instance_hour / f.tp for f in factories}
    return dict(sorted(prices.items(), key=lambda kv: kv[1]))


def with_gpu_price(problem: FleetProblem, gpu: str, per_gpu_hour: float) -> FleetProblem:
    """``problem`` with every configuration of GPU type ``gpu`` at ``per_gpu_hour`` $/GPU-hour (an instance: ``tp`` times)."""
    def priced(factory):
        if factory.gpu_name != gpu:
            return factory
        return replace(factory, cost_per_instance_hour=per_gpu_hour * factory.tp, _cache={})  # its pools are priced again

    return replace(problem, hardware=priced(problem.hardware), options=tuple(priced(o) for o in problem.options))


def parameters(problem: FleetProblem) -> dict[str, Parameter]:
    """``rate_growth`` (x the instance's rate), ``ttft_ms`` (the TTFT target), ``percentile`` (the target's percentile, in
    (0, 1)), ``rho_max`` and ``price:<GPU>`` per type."""
    found = {
        "rate_growth": Parameter("rate_growth", "x", f"request rate as a multiple of {problem.rate_rps:g} req/s", 1.0,
                                 lambda p, v: replace(p, rate_rps=problem.rate_rps * v), 0.0, MAX_RATE_GROWTH, open_interval=False),
        "ttft_ms": Parameter("ttft_ms", "ms", "TTFT target (slo.ttft_p99_ms)", problem.ttft_p99_ms, lambda p, v: replace(p, ttft_p99_ms=v)),
        "percentile": Parameter("percentile", "", "TTFT percentile of the target (P99 in the instance)", problem.ttft_quantile,
                                lambda p, v: replace(p, ttft_quantile=v), 0.0, 1.0),
        "rho_max": Parameter("rho_max", "", "utilisation cap (slo.rho_max)", problem.rho_max, lambda p, v: replace(p, rho_max=v), 0.0, 1.0,
                             open_interval=False),
    }
    for gpu, price in gpu_prices(problem).items():
        found[f"price:{gpu}"] = Parameter(f"price:{gpu}", "$/GPU-h", f"price of a {gpu} GPU-hour", price,
                                          lambda p, v, gpu=gpu: with_gpu_price(p, gpu, v))
    return found


def default_break_even(problem: FleetProblem) -> tuple[str, ...]:
    """The second-cheapest GPU type's price, over a multi-type catalog (one type: no price changes the plan's types)."""
    prices = list(gpu_prices(problem))
    return (f"price:{prices[1]}",) if len(prices) > 1 else ()


def alternatives(problem: FleetProblem, solved: Solved) -> list[tuple[str, FleetProblem]]:
    """Restrictions of ``problem`` a planner names: ``no <type>`` for each GPU type the plan uses (when it uses two or
    more: the cheapest of them is the best plan with one type fewer) and ``K = <open pools - 1>`` (one pool fewer)."""
    plan = solved.detail.plan
    used = list(dict.fromkeys(problem.configuration(p.gpu).gpu_name for p in plan.pools if p.instances > 0))
    found = []
    if len(used) > 1:
        for gpu in used:
            kept = tuple(o for o in problem.options if o.gpu_name != gpu)
            found.append((f"no {gpu}", problem.with_options(kept)))
    opened = sum(1 for p in plan.pools if p.instances > 0)
    if opened > 1:
        found.append((f"one pool fewer (K = {opened - 1})", replace(problem, max_pools=opened - 1)))
    return found


def analyse(problem: FleetProblem, solved: Solved) -> Analysis:
    """The binding, shadow-price and price-range tables of the MILP's plan (module docstring)."""
    from optfleet.problems.fleet.milp import plan_model

    model, report = plan_model(problem, solved.detail)
    if report.status != OPTIMAL:
        return Analysis({}, (f"the plan does not fit the model it was solved in ({report.summary}): "
                             "it came from the MILP's relaxation, whose model this analysis does not rebuild",))
    binding = binding_frame(model)
    for var in model.n.values():
        var.unfix()  # the counts stay continuous in the LP; the binaries are fixed by fixed_lp_sensitivity
    lp = fixed_lp_sensitivity(model, continuous=[model.n, model.nbig])
    notes = (
        "shadow prices and price ranges hold for the chosen integer plan: the LP with its open pools, floor levels and "
        f"small GPU counts fixed and the other GPU counts continuous (LP cost ${lp.report.objective:,.2f}/h against the "
        f"plan's ${solved.objective:,.2f}/h)",
    )
    return Analysis({"binding": binding, "shadow_prices": dual_frame(model, lp), "price_ranges": price_frame(model, lp)}, notes)


def _pool_name(model: pyo.ConcreteModel, j: int) -> str:
    option = model.data.pools[j]
    return f"{option.gpu} w{option.window_tokens}"


def binding_frame(model: pyo.ConcreteModel) -> pd.DataFrame:
    """Per open pool its cap, the wait and floor rows of its chosen level (and the mean TPOT row), then K and the
    declared constraints, each with its slack in the row's unit and whether it binds."""
    records = []

    def add(pool: str, family: str, row, detail: str = "") -> None:
        meaning, unit = MEANING.get(family, (detail, ""))
        records.append({"pool": pool, "constraint": meaning if not detail or family in MEANING else detail, "row": row.name,
                        "slack": row_slack(row), "slack_unit": unit, "binds": row_binds(row)})

    for j in range(len(model.data.pools)):
        if pyo.value(model.open[j]) < 0.5:
            continue
        level = next(lv for (jj, lv) in model.level if jj == j and pyo.value(model.level[jj, lv]) > 0.5)
        add(_pool_name(model, j), "utilisation_cap", model.utilisation_cap[j])
        if (j, level) in model.wait:
            add(_pool_name(model, j), "wait", model.wait[j, level])
        if (j, level) in model.floor:
            add(_pool_name(model, j), "floor", model.floor[j, level])
        if hasattr(model, "mean_tpot"):
            add(_pool_name(model, j), "mean_tpot", model.mean_tpot[j])
    add("fleet", "max_pools", model.max_pools)
    for declared in model.user_constraints:
        for row in declared.block.component_data_objects(pyo.Constraint, active=True):
            index = row.parent_block().name.rsplit("_", 1)[-1]
            add("fleet", declared.kind.name, row, f"constraints[{index}] ({declared.kind.name}: {row.local_name})")
    return pd.DataFrame(records)


def _family(name: str) -> str:
    return name.split("[", 1)[0]


def _row_label(model: pyo.ConcreteModel, name: str) -> tuple[str, str, str, float]:
    """(where, what, unit of the dual, divisor to a per-req/s price or 1) of an LP row named ``name``."""
    data = model.data
    family = _family(name)
    index = [int(i) for i in name[len(family) + 1:-1].split(",")] if "[" in name else []
    if family == "route":
        k = index[0]
        what = f"serve requests of {int(data.class_total_above[k]) + 1:,}-{int(data.class_total_to[k]):,} tokens"
        return f"class {k}", what, "$/h per req/s", data.problem.rate_rps * float(data.mass[k])
    if family in ("utilisation_cap", "wait", "floor", "mean_tpot"):
        meaning, unit = MEANING[family]
        return _pool_name(model, index[0]), meaning, f"$/h per {unit}", 1.0
    if family in MEANING:
        meaning, unit = MEANING[family]
        return "fleet", meaning, f"$/h per {unit}", 1.0
    return "fleet", name, "$/h per unit", 1.0


SHOWN_FAMILIES = ("route", "compress_share", "utilisation_cap", "wait", "floor", "mean_tpot", "max_pools")


def dual_frame(model: pyo.ConcreteModel, lp) -> pd.DataFrame:
    """The LP rows with a nonzero dual among the planner's rows (routing, caps, SLO rows, K, declared constraints):
    ``shadow_price`` = d(cost)/d(the row's bound) per unit of the row (per req/s for a class), and the bound's range."""
    records = []
    for row in lp.rows:
        family = _family(row.name)
        if abs(row.dual) <= DUAL_ZERO or not (family in SHOWN_FAMILIES or row.name.startswith("user_")):
            continue
        where, what, unit, per = _row_label(model, row.name)
        records.append({"where": where, "constraint": what, "row": row.name, "shadow_price": row.dual / per, "unit": unit,
                        "dual": row.dual, "bound": row.bound, "bound_low": row.bound_low, "bound_high": row.bound_high})
    return pd.DataFrame(records, columns=["where", "constraint", "row", "shadow_price", "unit", "dual", "bound", "bound_low", "bound_high"])


def price_frame(model: pyo.ConcreteModel, lp) -> pd.DataFrame:
    """Per open pool the price range ($/instance-hour) of ``n[j]`` over which the fixed-structure LP's basis stays optimal."""
    records = []
    for j in range(len(model.data.pools)):
        if pyo.value(model.open[j]) < 0.5:
            continue
        column = lp.column(model.n[j].name)
        records.append({"pool": _pool_name(model, j), "instances": column.value, "price_per_instance_hour": column.cost,
                        "price_low": column.cost_low, "price_high": column.cost_high})
    return pd.DataFrame(records)
