"""Sensitivity of the routing kind's threshold design (``optfleet explain``): binding rows, shadow prices, what-ifs.

The plan explained is the ``design`` method's: the MILP of models/routing_design.py (one rule ``z_c``, one GPU
configuration per pool ``open_j``, instance counts ``n_j``) solved by design_milp.py.  Its model, rebuilt with the
plan's values loaded, gives:

* **binding**: the mis-route row ``sum_c p_c z_c <= epsilon`` (slack: the probability left under ``design.epsilon``),
  per pool of the design its sizing row ``N_j open_j <= n_j`` (slack: instances above the fewest that meet the TTFT
  SLO and the utilisation cap) and the fleet instance's declared ``constraints:`` rows;
* **shadow prices** of the LP left when the rule and the configurations (``z``, ``open``) are fixed at the plan and
  the counts ``n_j`` are continuous (:func:`optfleet.solvers.sensitivity.fixed_lp_sensitivity`).  With the counts
  fixed too the cost ``sum_j pi_j n_j`` is a constant and every dual 0.  In that LP the sizing row of a pool whose
  count is its fewest binds with

      d(cost) / d(N_j)  =  pi_j     [$/h per instance the SLO asks for],

  and a declared constraint that lifts a count above its fewest (whole nodes, a GPU mix) carries the dual instead.
  The mis-route row has no dual there (the rule is fixed): what epsilon is worth comes from re-solving the MILP (the
  ``epsilon`` curve and break-even).  These duals hold for the chosen integer plan; the output says so;
* **price ranges**: HiGHS's cost ranging of each chosen ``n_j`` in that LP;
* **parameters**: ``rate_growth`` (the stream's arrivals compressed by g: every pool's rate times g),
  ``ttft_ms`` (the fleet's P99 TTFT target), ``percentile`` (the TTFT target's percentile, slot model only),
  ``epsilon`` (design.epsilon) and ``price:<GPU>`` ($/GPU-hour); the P95 -> P99 curve (slot model) and the
  break-even of the second-cheapest GPU type's price by default;
* **warm points**: a GPU price's curve and break-even reprice the options of one computed grid
  (:class:`PriceSession`) instead of computing the grid again at every price;
* **alternatives**: ``no <type>`` (an availability cap of 0 GPUs) per GPU type the design uses, and ``one GPU
  type`` (``max_types: 1``) when it uses two.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd
import pyomo.environ as pyo
from pyomo.core.expr.visitor import identify_variables

from optfleet.errors import InfeasibleError
from optfleet.instance.shared_schema import AvailabilityConstraint, MaxTypesConstraint
from optfleet.models.routing_design import build_design
from optfleet.problems.fleet.explain import gpu_prices, with_gpu_price
from optfleet.problems.routing.design import POOL_NAMES, DesignCandidate
from optfleet.problems.routing.problem import RoutingProblem
from optfleet.sensitivity.explainer import MAX_RATE_GROWTH, Analysis, Explainer, Parameter, Solved
from optfleet.solvers.sensitivity import fixed_lp_sensitivity, row_binds, row_slack

COST_UNIT = "$/h"
P95_TO_P99 = "percentile=0.95,0.99"
DUAL_ZERO = 1e-9  # $/h: duals below this are not shown
SHADOW_COLUMNS = ["where", "constraint", "row", "shadow_price", "unit", "dual", "bound", "bound_low", "bound_high"]


def explainer(problem: RoutingProblem) -> Explainer:
    """The routing kind's sensitivity hooks for its threshold design (optfleet/sensitivity/explainer.py)."""
    slots = problem.fleet.service_model == "slots"
    return Explainer(COST_UNIT, solve, analyse, parameters(problem), alternatives, break_even=default_break_even(problem),
                     default_curves=(P95_TO_P99,) if slots else (), session=session)


def solve(problem: RoutingProblem, prepared: tuple | None = None) -> Solved:
    """The design MILP's plan, its $/h as the kind's design evaluator scores it (design.py ``evaluate_design``, the
    one that scores every design method) and its label, e.g. ``C=2000 B=1400 gamma=1: short A100-80GB x7 + long
    A100-80GB x13``.  ``prepared``: the design grid and data of ``problem`` when already computed."""
    from optfleet.problems.routing.design import evaluate_design
    from optfleet.problems.routing.design_milp import solve_design

    try:
        candidate, report = solve_design(problem, prepared)
    except InfeasibleError:
        return Solved(None, "infeasible", "", None)
    scored = evaluate_design(problem, candidate)
    status = report.status if scored.feasible else f"{report.status}, but the evaluator finds it infeasible"
    return Solved(scored.cost_per_hour, status, plan_label(candidate), candidate)


def session(problem: RoutingProblem, parameter: str) -> PriceSession | None:
    """The warm path of a GPU price's curve or break-even (:class:`PriceSession`); none for the other parameters
    (they change the pools' sizing, which is the grid's work)."""
    return PriceSession(parameter.removeprefix("price:")) if parameter.startswith("price:") else None


class PriceSession:
    """The design at one price of GPU type ``gpu`` after another, from one computed grid.

    The grid (every rule's traffic and every option's fewest instances, design_milp.py ``design_data``: most of a
    solve on a large stream) does not depend on prices.  Each point reprices the options of ``gpu``
    (``price x tp`` per instance-hour, as the changed fleet prices its configurations), recomputes the instance
    bounds the constraints derive from prices (a budget's), and solves the design MILP: only its cost
    coefficients and those bounds differ from point to point."""

    def __init__(self, gpu: str) -> None:
        self.gpu = gpu
        self.prepared: tuple | None = None

    def __call__(self, problem: RoutingProblem) -> Solved:
        from optfleet.problems.routing.design_milp import design_data, with_constraints

        if self.prepared is None:
            self.prepared = design_data(problem)
        grid, data = self.prepared
        price = design_prices(problem)[self.gpu]
        pools = tuple(replace(o, cost_per_instance_hour=price * o.tp) if o.gpu_type == self.gpu else o for o in data.pools)
        return solve(problem, (grid, with_constraints(replace(data, pools=pools), data.constraints)))


def plan_label(candidate: DesignCandidate) -> str:
    """The rule and each pool's configuration and count: equal labels are equal designs."""
    counts = candidate.instances or (0, 0)
    pools = " + ".join(f"{name} {gpu} x{n}" for name, gpu, n in zip(POOL_NAMES, (candidate.short_gpu, candidate.long_gpu), counts, strict=True))
    return f"C={candidate.short_window_tokens} B={candidate.b_short_tokens} gamma={candidate.gamma:g}: {pools}"


def _with_fleet(problem: RoutingProblem, **changes: Any) -> RoutingProblem:
    return replace(problem, fleet=replace(problem.fleet, **changes))


def _with_epsilon(problem: RoutingProblem, epsilon: float) -> RoutingProblem:
    design = problem.spec.design.model_copy(update={"epsilon": epsilon})
    return replace(problem, spec=problem.spec.model_copy(update={"design": design}))


def _with_rate_growth(problem: RoutingProblem, growth: float) -> RoutingProblem:
    """Every pool's rate times ``growth``: the stream's arrival times divided by it (the pools' rates are requests / span)."""
    return replace(problem, stream=replace(problem.stream, arrival_s=problem.stream.arrival_s / growth))


def design_prices(problem: RoutingProblem) -> dict[str, float]:
    """$/GPU-hour of each GPU type the design may use, cheapest first (the fleet's catalog)."""
    return gpu_prices(problem.fleet)


def parameters(problem: RoutingProblem) -> dict[str, Any]:
    """``rate_growth``, ``ttft_ms``, ``percentile`` (slot model), ``epsilon`` and ``price:<GPU>`` per type (module docstring)."""
    fleet = problem.fleet
    found = {
        "rate_growth": Parameter("rate_growth", "x", f"request rate as a multiple of the stream's {len(problem.stream) / problem.stream.span_s:.4g} req/s",
                                 1.0, _with_rate_growth, 0.0, MAX_RATE_GROWTH, open_interval=False),
        "ttft_ms": Parameter("ttft_ms", "ms", "P99 TTFT target of the pools (fleet.ttft_p99_ms)", fleet.ttft_p99_ms,
                             lambda p, v: _with_fleet(p, ttft_p99_ms=v)),
        "epsilon": Parameter("epsilon", "", "mis-route probability allowed (design.epsilon)", problem.spec.design.epsilon, _with_epsilon, 0.0, 1.0),
    }
    if fleet.service_model == "slots":
        found["percentile"] = Parameter("percentile", "", "TTFT percentile of the target (P99 in the instance)", fleet.ttft_quantile,
                                        lambda p, v: _with_fleet(p, ttft_quantile=v), 0.0, 1.0)
    for gpu, price in design_prices(problem).items():
        found[f"price:{gpu}"] = Parameter(f"price:{gpu}", "$/GPU-h", f"price of a {gpu} GPU-hour", price,
                                          lambda p, v, gpu=gpu: replace(p, fleet=with_gpu_price(p.fleet, gpu, v)))
    return found


def default_break_even(problem: RoutingProblem) -> tuple[str, ...]:
    """The second-cheapest GPU type's price, over a multi-type catalog."""
    prices = list(design_prices(problem))
    return (f"price:{prices[1]}",) if len(prices) > 1 else ()


def _gpu_types(problem: RoutingProblem, candidate: DesignCandidate) -> list[str]:
    counts = candidate.instances or (0, 0)
    labels = [label for label, n in zip((candidate.short_gpu, candidate.long_gpu), counts, strict=True) if n > 0]
    return list(dict.fromkeys(problem.fleet.configuration(label, "design").gpu_name for label in labels))


def alternatives(problem: RoutingProblem, solved: Solved) -> list[tuple[str, RoutingProblem]]:
    """``no <type>`` for each GPU type the design uses (when it may choose among two or more types) and ``one GPU
    type`` when it uses two (module docstring)."""
    if len(design_prices(problem)) < 2:
        return []
    used = _gpu_types(problem, solved.detail)
    constraints = problem.fleet.constraints
    found = [(f"no {gpu}", _with_fleet(problem, constraints=(*constraints, AvailabilityConstraint(kind="availability", gpu=gpu, max_gpus=0))))
             for gpu in used]
    if len(used) > 1:
        found.append(("one GPU type", _with_fleet(problem, constraints=(*constraints, MaxTypesConstraint(kind="max_types", count=1)))))
    return found


def plan_model(problem: RoutingProblem, candidate: DesignCandidate) -> tuple[pyo.ConcreteModel, dict[int, int]]:
    """The design model (models/routing_design.py) holding ``candidate``: every ``z``, ``open`` and ``n`` set to the
    plan's value; the bounds ``U_j`` widened to the plan's counts where a certified solve (GPU mix) went beyond them.
    Returns the model and the chosen option of each pool that has instances (pool -> option index)."""
    from optfleet.problems.routing.design_milp import DESIGN_CONSTRAINTS, design_data, with_constraints

    grid, data = design_data(problem)
    c = grid.index(candidate.rule)
    counts = candidate.instances or (0, 0)
    picked: dict[int, int] = {}
    for pool, (label, count) in enumerate(zip((candidate.short_gpu, candidate.long_gpu), counts, strict=True)):
        if count > 0:
            picked[pool] = next(j for j, o in enumerate(data.pools) if (o.candidate, o.pool, o.gpu) == (c, pool, label))
    base = data.upper.copy()
    for pool, j in picked.items():
        base[j] = max(int(base[j]), counts[pool])
    data = with_constraints(data, data.constraints, base=base)
    model = build_design(data, DESIGN_CONSTRAINTS)
    for cc in model.z:
        model.z[cc].set_value(1 if cc == c else 0)
    chosen = {j: counts[pool] for pool, j in picked.items()}
    for j in model.open:
        model.open[j].set_value(1 if j in chosen else 0)
        model.n[j].set_value(chosen.get(j, 0))
    _complete(problem, model)
    return model, picked


def _complete(problem: RoutingProblem, model: pyo.ConcreteModel) -> None:
    """Give the declared constraints' own integer variables (node counts, type indicators) values at the plan: the
    model solved with ``z``, ``open`` and ``n`` fixed (a feasibility solve over those few variables), then unfixed."""
    from optfleet.solvers import highs

    decided = [v for component in (model.z, model.open, model.n) for v in component.values()]
    for var in decided:
        var.fix()
    try:
        highs.solve(model, solver=problem.spec.solve.solver, time_limit=problem.spec.solve.time_limit_s)
    finally:
        for var in decided:
            var.unfix()


def _pool_name(model: pyo.ConcreteModel, j: int) -> str:
    option = model.data.pools[j]
    return f"{POOL_NAMES[option.pool]} {option.gpu} w{option.window_tokens}"


def binding_frame(model: pyo.ConcreteModel, picked: dict[int, int]) -> pd.DataFrame:
    """The mis-route row, each pool's sizing row and the declared constraints' rows on the design's options (or on no
    option: fleet-wide rows), each with its slack and whether it binds."""
    records = [{"pool": "design", "constraint": "mis-route probability within design.epsilon", "row": model.misroute.name,
                "slack": row_slack(model.misroute), "slack_unit": "probability", "binds": row_binds(model.misroute)}]
    for j in picked.values():
        row = model.fewest[j]
        records.append({"pool": _pool_name(model, j), "constraint": "SLO sizing: at least the fewest instances meeting the TTFT SLO and rho_max",
                        "row": row.name, "slack": row_slack(row), "slack_unit": "instance", "binds": row_binds(row)})
    chosen = {id(var) for j in picked.values() for var in (model.n[j], model.open[j])}
    options = {id(var) for j in model.open for var in (model.n[j], model.open[j])}
    for declared in model.user_constraints:
        for row in declared.block.component_data_objects(pyo.Constraint, active=True):
            touched = {id(var) for var in identify_variables(row.body)} & options
            if touched and not touched & chosen:
                continue  # a row of options the design does not use (e.g. a type indicator's link per option)
            index = row.parent_block().name.rsplit("_", 1)[-1]
            records.append({"pool": "fleet", "constraint": f"constraints[{index}] ({declared.kind.name}: {row.local_name})", "row": row.name,
                            "slack": row_slack(row), "slack_unit": "", "binds": row_binds(row)})
    return pd.DataFrame(records)


def dual_frame(model: pyo.ConcreteModel, lp: Any) -> pd.DataFrame:
    """The LP rows with a nonzero dual among the sizing rows and the declared constraints: ``shadow_price`` is
    d(cost)/d(the row's bound) per unit of it; a sizing row's, per instance the SLO asks for (``-dual``: the row reads
    ``-n_j <= -N_j`` once ``open_j`` is fixed)."""
    records = []
    for row in lp.rows:
        family = row.name.split("[", 1)[0]
        if abs(row.dual) <= DUAL_ZERO or not (family == "fewest" or row.name.startswith("user_")):
            continue
        if family == "fewest":
            j = int(row.name[len("fewest["):-1])
            where, what, price, unit = _pool_name(model, j), "SLO sizing (fewest instances N_j)", -row.dual, "$/h per instance"
        else:
            where, what, price, unit = "fleet", row.name, row.dual, "$/h per unit of the row"
        records.append({"where": where, "constraint": what, "row": row.name, "shadow_price": price, "unit": unit, "dual": row.dual,
                        "bound": row.bound, "bound_low": row.bound_low, "bound_high": row.bound_high})
    return pd.DataFrame(records, columns=SHADOW_COLUMNS)


def analyse(problem: RoutingProblem, solved: Solved) -> Analysis:
    """The binding, shadow-price and price-range tables of the design (module docstring)."""
    model, picked = plan_model(problem, solved.detail)
    binding = binding_frame(model, picked)
    lp = fixed_lp_sensitivity(model, continuous=[model.n])
    ranges = []
    for pool, j in sorted(picked.items()):
        column = lp.column(model.n[j].name)
        ranges.append({"pool": _pool_name(model, j), "instances": column.value, "price_per_instance_hour": column.cost,
                       "price_low": column.cost_low, "price_high": column.cost_high})
    note = ("shadow prices and price ranges hold for the chosen integer plan: the LP with the design's rule and GPU configurations "
            f"fixed and the instance counts continuous (LP cost ${lp.report.objective:,.2f}/h against the plan's ${solved.objective:,.2f}/h); "
            "epsilon has no dual there (the rule is fixed): see its curve or break-even")
    return Analysis({"binding": binding, "shadow_prices": dual_frame(model, lp), "price_ranges": pd.DataFrame(ranges)}, (note,))

