"""Solve the capacity-plan MILP (models/capacity_plan.py) and, when it has no plan, say why.

Why, checked from the most specific to the most general (the first that applies is the answer):

1. a period in which some model fits on no type even when that type's every cap is bought for it alone
   (reserved cap + on-demand cap + the spot counted at the full availability + the reservations already held that
   it may use): names the period, the model and the caps;
2. the same MILP without the instance's ``constraints`` has a plan: the constraints whose removal alone gives a
   plan are named (each re-solved), else all of them together;
3. the first period whose models cannot all be held at once, that period solved alone without load time (a
   relaxation: a period infeasible alone is infeasible in the plan); else the load time or the reservations'
   terms and caps across periods exclude every plan.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace

import pyomo.environ as pyo

from optfleet.errors import InfeasibleError
from optfleet.models.capacity_plan import build, extract, fix_types, largest_shares, warm_start
from optfleet.problems.capacity_plan.plan import Schedule
from optfleet.problems.capacity_plan.problem import CapacityProblem
from optfleet.solvers import highs
from optfleet.solvers.report import INFEASIBLE, INFEASIBLE_OR_UNBOUNDED, OPTIMAL, SolveReport


START_SHARE = 0.4
"""The share of ``solve.time_limit_s`` the LP-guided start (:func:`lp_guided_plan`) may take; the MILP gets the rest."""
MIN_SOLVE_S = 1.0
"""The least time the full MILP gets after its start, however long the start took."""
START_MIP_GAP = 0.001
"""The relative gap the LP-guided start's restricted MILP is solved to (``solve.mip_gap`` if smaller): the full MILP
did not improve on its start in any of four 60 s runs on week_three_models, so the start should be nearly the best
plan for its assignment.  There, at 0.1 % the start was $20,268.7 and the 60 s solve's gap 2.93 %; at the instance's
1 %, $20,387.4 and 3.55-3.70 % (one core, loaded machine; docs/guide/capacity-plan.md)."""


def solve_milp(problem: CapacityProblem) -> tuple[Schedule, SolveReport]:
    """The MILP's schedule and the solver's report (status, objective, bound, gap); InfeasibleError explains a
    model without a plan (module docstring).  The MIP start is the cheaper of the practitioners' rules' best plan
    and the LP-guided plan (:func:`lp_guided_plan`, within ``START_SHARE`` of the time limit), among those the
    evaluator finds feasible, so a run stopped by its time limit returns at least that plan."""
    options = problem.spec.solve
    began = time.perf_counter()
    start = best_start(problem, [best_rule_plan(problem), lp_guided_plan(problem, START_SHARE * options.time_limit_s)])
    model = build(problem)
    if start is not None:
        warm_start(model, problem, start)
    left_s = max(options.time_limit_s - (time.perf_counter() - began), MIN_SOLVE_S)
    report = highs.solve(model, solver=options.solver, time_limit=left_s, mip_gap=options.mip_gap, warm_start=start is not None)
    if not report.has_solution:
        raise InfeasibleError(f"the capacity-plan MILP found no plan ({report.status}): {explain_infeasible(problem, report)}")
    return Schedule(**extract(model, problem), method="milp"), report


def best_start(problem: CapacityProblem, schedules: Sequence[Schedule | None]) -> Schedule | None:
    """The cheapest of ``schedules`` that the evaluator finds feasible (None when none is)."""
    from optfleet.problems.capacity_plan.evaluator import evaluate

    plans = []
    for schedule in schedules:
        if schedule is not None:
            evaluation = evaluate(problem, schedule)
            if evaluation.feasible:
                plans.append((evaluation.total_cost, schedule))
    return min(plans, key=lambda plan: plan[0])[1] if plans else None


def best_rule_plan(problem: CapacityProblem) -> Schedule | None:
    """The cheapest plan among the practitioners' rules (baselines.py) that the evaluator finds feasible."""
    from optfleet.problems.capacity_plan import baselines

    schedules = []
    for rule in (baselines.static_peak, baselines.per_period_on_demand, baselines.reserve_percentile, baselines.spot_fallback,
                 baselines.greedy_packing):
        try:
            schedules.append(rule(problem))
        except InfeasibleError:
            continue
    return best_start(problem, schedules)


def lp_guided_plan(problem: CapacityProblem, time_limit_s: float) -> Schedule | None:
    """A plan from the LP relaxation: each model in each period on the type the relaxation gives its largest share
    (``argmax_g y[m, g, t]``), and the rest of the MILP (instances, reservations, on-demand and spot GPUs) solved
    with that assignment fixed (to a relative gap of :data:`START_MIP_GAP`), all within ``time_limit_s``; None when
    either solve finds nothing in time.

    A heuristic start for the full MILP, whose own heuristics find poor plans on long horizons: on
    week_three_models (168 periods) their first incumbent came after about 50 s of root cuts at $21,525; from this
    start the 60 s solve ends at $20,222.5 against a bound of $19,352.6, a 4.5 % gap where it was 9.9 %
    (benchmarks/bench_capacity_plan.py, docs/guide/capacity-plan.md; measured before the residual-capacity rows and
    with the restricted MILP at the instance's 1 % gap; with the rows this start is $20,387.4 at 1 %, $20,268.7 at
    :data:`START_MIP_GAP`)."""
    began = time.perf_counter()
    options = problem.spec.solve
    relaxed, report = lp_relaxation(problem, time_limit_s)
    if not report.has_solution:
        return None
    restricted = build(problem)
    fix_types(restricted, largest_shares(relaxed))
    left_s = time_limit_s - (time.perf_counter() - began)
    gap = min(options.mip_gap, START_MIP_GAP)
    if left_s <= 0 or not highs.solve(restricted, solver=options.solver, time_limit=left_s, mip_gap=gap).has_solution:
        return None
    return Schedule(**extract(restricted, problem), method="milp")


def lp_relaxation(problem: CapacityProblem, time_limit_s: float | None = None) -> tuple[pyo.ConcreteModel, SolveReport]:
    """The MILP (models/capacity_plan.py, with the instance's constraints) with every integer variable relaxed to its
    bounds, solved within ``time_limit_s``: the solved model and HiGHS's report."""
    relaxed = build(problem)
    pyo.TransformationFactory("core.relax_integer_vars").apply_to(relaxed)
    return relaxed, highs.solve(relaxed, solver=problem.spec.solve.solver, time_limit=time_limit_s)


def lp_bound(problem: CapacityProblem, time_limit_s: float | None = None) -> float | None:
    """A lower bound on the cost of every plan the evaluator accepts: the optimum of the MILP's LP relaxation
    (:func:`lp_relaxation`); None when the LP is not solved to optimality within ``time_limit_s``.

    Valid because the MILP's optimum is the least evaluator cost over the schedules the evaluator finds feasible
    (models/capacity_plan.py, checked by brute force in tests/test_capacity_plan.py) and the relaxation's feasible
    set holds every MILP solution: ``LP* <= MILP* <= cost(plan)``.  For plans that no full MILP can be run on in
    time (the month study's rolling horizon, benchmarks/bench_capacity_plan_study.py).  It is weak where the
    relaxation splits a model across types: 19,487.5 on week_three_models against plans of about $20,200 (3.6 %;
    18,863.8 and 6.7 % without the residual-capacity rows of models/capacity_plan.py)."""
    _, report = lp_relaxation(problem, time_limit_s)
    return report.objective if report.status == OPTIMAL else None


def type_capacity(problem: CapacityProblem, g: int, t: int, model: int | None = None) -> float:
    """The most GPUs type ``g`` can hold in period ``t`` with every cap bought (inf without a cap), with the
    reservations already held: those pinned to ``model`` (every model's when None) and the unpinned ones."""
    offer = problem.offers[g]
    pinned = problem.held.pinned[:, g, t].sum() if model is None else problem.held.pinned[model, g, t]
    reserved = 0.0 if offer.reserved_term_periods is None else (math.inf if offer.reserved_max_gpus is None else offer.reserved_max_gpus)
    on_demand = 0.0 if offer.on_demand_per_gpu_period is None else (math.inf if offer.on_demand_max_gpus is None else offer.on_demand_max_gpus)
    return reserved + on_demand + float(offer.spot_counted[int(offer.spot_cap[t])]) + float(problem.held.pool[g, t] + pinned)


def explain_infeasible(problem: CapacityProblem, report: SolveReport) -> str:
    """The reason (module docstring)."""
    if report.status not in (INFEASIBLE, INFEASIBLE_OR_UNBOUNDED):
        return f"stopped before finding one ({report.summary}); a longer solve.time_limit_s may find one"
    gpus = problem.table.gpus()
    for t in range(problem.periods):
        for m, name in enumerate(problem.model_names):
            fits = [g for g in range(len(problem.offers)) if 0 <= gpus[m, g, t] <= type_capacity(problem, g, t, m)]
            if not fits and (gpus[m, :, t] > 0).any():
                caps = ", ".join(f"{o.name} needs {gpus[m, g, t]} GPUs, holds at most {type_capacity(problem, g, t, m):g}"
                                 for g, o in enumerate(problem.offers) if gpus[m, g, t] >= 0)
                return f"period {t}, model {name}: no GPU type can hold it ({caps}; the rate is {problem.rates_rps[m, t]:.4g} req/s)"
    constraints = problem.spec.constraints
    if constraints and _has_plan(problem, constraints=False):
        culprits = [f"constraints[{i}] ({c.kind})" for i, c in enumerate(constraints) if _has_plan(problem, drop=i)]
        if culprits:
            return (f"{' or '.join(culprits)} excludes every plan; without {'it' if len(culprits) == 1 else 'any one of them'} "
                    "the instance has one")
        return f"the constraints ({', '.join(f'constraints[{i}] ({c.kind})' for i, c in enumerate(constraints))}) exclude every plan together"
    for t in range(problem.periods):
        if not _has_plan(_period_alone(problem, t), constraints=False):
            needs = ", ".join(f"{name} {int(gpus[m, gpus[m, :, t] >= 0, t].min())}" for m, name in enumerate(problem.model_names))
            caps = ", ".join(f"{o.name} {type_capacity(problem, g, t):g}" for g, o in enumerate(problem.offers))
            return (f"period {t}: the models together need more GPUs than the types' caps hold (least GPUs per model: {needs}; "
                    f"most GPUs per type: {caps}); raise an on-demand or reserved max_gpus, or the spot availability")
    return ("every period fits alone without load time: the load time of GPUs that start serving a model (models[].load_time_s) "
            "or the reservation caps across periods exclude every plan")


def _period_alone(problem: CapacityProblem, t: int) -> CapacityProblem:
    """Period ``t`` as a one-period problem without load time or constraints (explain_infeasible's relaxation)."""
    alone = problem.window(t, t + 1)
    return replace(alone, spec=alone.spec.model_copy(update={"constraints": []}), load_fraction=0.0 * problem.load_fraction)


def _has_plan(problem: CapacityProblem, constraints: bool = True, drop: int | None = None) -> bool:
    if drop is not None:
        kept = [c for i, c in enumerate(problem.spec.constraints) if i != drop]
        problem = replace(problem, spec=problem.spec.model_copy(update={"constraints": kept}))
    model = build(problem, constraints=constraints)
    return highs.solve(model, solver=problem.spec.solve.solver, time_limit=problem.spec.solve.time_limit_s).has_solution
