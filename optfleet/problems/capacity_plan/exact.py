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
from optfleet.models.capacity_plan import build, extract, fix_integral_assignments, fix_types, largest_shares, relax_counts, warm_start
from optfleet.problems.capacity_plan.plan import Schedule
from optfleet.problems.capacity_plan.problem import CapacityProblem
from optfleet.progress import Progress, silent
from optfleet.solvers import highs
from optfleet.solvers.report import INFEASIBLE, INFEASIBLE_OR_UNBOUNDED, OPTIMAL, TIME_LIMIT, SolveReport, relative_gap


RENS_SHARE = 0.4
"""The share of ``solve.time_limit_s`` by whose end the search for an assignment (:func:`assignment_plan`, its
first part) stops."""
PLAN_SHARE = 0.55
"""The share by whose end the MILP with that assignment fixed (:func:`assignment_plan`, its second part) stops."""
BOUND_SHARE = 0.85
"""The share by whose end the assignment relaxation's bound (:func:`assignment_bound`) stops when the full MILP gets
the rest; it gets the rest itself when that rest is under :data:`FULL_MILP_MIN_S`."""
SEARCH_HEURISTIC_EFFORT = 0.3
"""HiGHS's ``mip_heuristic_effort`` in the assignment search (its default 0.05): on week_three_models, with 20 s, the
search's plan is $19,924.1 in relaxed counts and the plan $20,008.6 at 0.3, 0.6 and 1.0, where at 0.05 they were
$19,962.3 and $20,034.1."""
FULL_MILP_MIN_S = 30.0
"""The least share of the time limit, in seconds, kept for the full MILP: with less, the assignment relaxation gets
the whole limit.  On week_three_models HiGHS spends 25 s in the full MILP's root cuts without looking at its time
limit (a run given 8 s took 29 s), and a shorter run cannot improve on its start."""
BOUND_TOLERANCE = 1e-6
"""Relative: a bound above a plan's cost by more than this is a bug (an invalid row), never rounding."""
MIN_SOLVE_S = 1.0
"""The least time left for which the full MILP is run when the steps before it end early without proving the plan."""
PLAN_MIP_GAP = 0.001
"""The relative gap both parts of :func:`assignment_plan` and :func:`assignment_bound` are solved to
(``solve.mip_gap`` if smaller): the full MILP rarely improves on its start within the time limit, so the start
should be nearly the best plan near the assignment, and the bound as high as its time allows."""


def solve_milp(problem: CapacityProblem, progress: Progress = silent) -> tuple[Schedule, SolveReport]:
    """The MILP's schedule and the solver's report (status, objective, bound, gap); InfeasibleError explains a
    model without a plan (module docstring).

    Four steps, each within its share of ``solve.time_limit_s`` (``*_SHARE``): the LP relaxation; a plan near it
    (:func:`assignment_plan`); a bound from the assignment relaxation (:func:`assignment_bound`), started from the
    cheaper of that plan and the practitioners' rules' best plan the evaluator accepts; and, unless that plan is
    already within ``solve.mip_gap`` of that bound (then the report says optimal, with that gap) or less than
    :data:`MIN_SOLVE_S` is left (the report says time_limit), the full MILP from that plan with that bound known.
    The report's bound is the best of the LP's, the assignment relaxation's and the full MILP's: each bounds the
    MILP's optimum from below.  A run stopped by its time limit returns at least the start.  ``progress(step, share,
    1)`` is told each step as it starts, with the share of the time limit spent."""
    options = problem.spec.solve
    began = time.perf_counter()

    def by(share: float) -> float:
        return began + share * options.time_limit_s

    def step(label: str) -> None:
        progress(label, min(1.0, (time.perf_counter() - began) / options.time_limit_s), 1)

    step("LP relaxation")
    relaxed, lp = lp_relaxation(problem, options.time_limit_s)
    step("assignment search")
    plan = assignment_plan(problem, relaxed, by(RENS_SHARE), by(PLAN_SHARE)) if lp.status == OPTIMAL else None
    start = best_start(problem, [best_rule_plan(problem), plan])
    kept = (1 - BOUND_SHARE) * options.time_limit_s >= FULL_MILP_MIN_S
    step("assignment relaxation's bound")
    relaxation = assignment_bound(problem, start, by(BOUND_SHARE if kept else 1.0))
    known = max((b for b in (lp.objective if lp.status == OPTIMAL else None, relaxation.bound) if b is not None), default=None)
    model = build(problem)
    left_s = options.time_limit_s - (time.perf_counter() - began)
    if start is not None:
        warm_start(model, problem, start)
        cost = float(pyo.value(model.cost))
        if known is not None and known > cost + BOUND_TOLERANCE * max(1.0, abs(cost)):
            raise RuntimeError(f"internal error: a lower bound ({known}) above a plan the evaluator accepts ({cost}): "
                               "a row of the capacity-plan MILP cuts off a plan")
        gap = None if known is None else relative_gap(cost, known)
        proven = gap is not None and gap <= options.mip_gap
        if proven or left_s < MIN_SOLVE_S:
            origin = "the assignment search's plan" if start is plan else f"the {start.method} rule's plan (the assignment search found none cheaper)"
            bounded = "the assignment relaxation's bound" if relaxation.bound is not None and relaxation.bound >= known else "the LP relaxation's bound"
            text = f"optfleet: {origin}, with {bounded}" if known is not None else f"optfleet: {origin}, without a bound (out of time)"
            return start, SolveReport(OPTIMAL if proven else TIME_LIMIT, cost, known, gap, time.perf_counter() - began, options.solver,
                                      f"{text}\n{relaxation.log}", {"mip_starts": 1, "feasible_mip_starts": 1})
    left_s = max(left_s, MIN_SOLVE_S)
    step("full MILP")
    highs_solver = options.solver == "highs"
    report = highs.solve(model, solver=options.solver, time_limit=left_s, mip_gap=options.mip_gap, warm_start=start is not None,
                         known_bound=known if highs_solver else None)
    if not highs_solver and known is not None and report.has_solution and (report.bound is None or report.bound < known):
        report = replace(report, bound=known, gap=relative_gap(report.objective, known))  # HiGHS does this itself (known_bound)
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


def assignment_plan(problem: CapacityProblem, relaxed: pyo.ConcreteModel, search_by: float, plan_by: float) -> Schedule | None:
    """A plan near the LP relaxation ``relaxed`` (solved): first the assignment relaxation (models/capacity_plan.py
    ``relax_counts``) with every assignment the LP makes integral fixed to it (``fix_integral_assignments``, a RENS
    neighbourhood), solved until ``search_by`` (a ``time.perf_counter()`` value), which chooses each model's type in
    every period; then the MILP with those types fixed, until ``plan_by``.  Each to a relative gap of
    :data:`PLAN_MIP_GAP`.  None when either finds nothing in time.

    A heuristic: on week_three_models the full MILP's own heuristics found their first plan after about 50 s of
    root cuts ($21,525), rounding the LP's largest shares gave $20,268.7 (the start before this one; $20,454.5
    with the load-rounding rows), and this search $19,987.3-20,035.3 depending on how far it gets ($20,008.6 in
    the published run, docs/guide/capacity-plan.md)."""
    options = problem.spec.solve
    gap = min(options.mip_gap, PLAN_MIP_GAP)
    search = build(problem)
    relax_counts(search)
    fix_integral_assignments(search, relaxed)
    effort = {"mip_heuristic_effort": SEARCH_HEURISTIC_EFFORT} if options.solver == "highs" else None
    if not highs.solve(search, solver=options.solver, mip_gap=gap, deadline=search_by, options=effort).has_solution:
        return None
    restricted = build(problem)
    fix_types(restricted, largest_shares(search))
    if not highs.solve(restricted, solver=options.solver, mip_gap=gap, deadline=plan_by).has_solution:
        return None
    return Schedule(**extract(restricted, problem), method="milp")


def assignment_bound(problem: CapacityProblem, start: Schedule | None, by: float) -> SolveReport:
    """The assignment relaxation (models/capacity_plan.py ``relax_counts``: only the types ``y`` integer) solved until
    ``by`` (a ``time.perf_counter()`` value) from ``start``, to :data:`PLAN_MIP_GAP` (``solve.mip_gap`` if smaller), so
    that it raises its bound for as long as it may: its report's bound is a lower bound on the MILP's optimum.

    On week_three_models it is the better bound within a minute: its root cuts reach about $19,810 in 15-20 s,
    where the full MILP's reached $19,676 in 60 s; with every count integer HiGHS's cuts stall lower."""
    model = build(problem)
    relax_counts(model)
    if start is not None:
        warm_start(model, problem, start)
    gap = min(problem.spec.solve.mip_gap, PLAN_MIP_GAP)
    return highs.solve(model, solver=problem.spec.solve.solver, mip_gap=gap, warm_start=start is not None, deadline=by)


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
    relaxation splits a model across types: $19,683.5 on week_three_models against plans of about $20,000 (1.6 %;
    $19,487.5 without the load-rounding rows of models/capacity_plan.py, $18,863.8 without the residual-capacity
    rows too)."""
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
