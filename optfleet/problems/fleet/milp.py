"""The fleet MILP end to end: prepare data, build, warm-start from the sweep, solve, extract, re-score.

The Erlang-C table of the model (models/fleet.py) is computed at each pool's
``R_j = E[S^2]/E[S]``, which depends on the routing the model chooses.  The
driver starts from R_j of all requests a pool could hold.  After every solve
it re-scores the plan with the evaluator and refreshes R_j of the plan's pools
below their table size N_j (above it the cap alone decides and R_j does not
enter the model) from their actual traffic.  It re-solves, from the last plan,
until the plan passes the evaluator and is optimal for the model at its own
R_j (every plan the MILP returns passes the evaluator), or until the same cost comes back
(alternative optima whose R_j differ, which would only oscillate).  From the first plan that fails the
evaluator on, no R_j falls (each is the larger of its old and refreshed value): under split routing two
routings can each fit the other's R_j, and refreshing to the last plan alone swapped between them
(found on a toy under the fleetsim rule with HiGHS 1.15).  Every returned plan has passed the evaluator.

The plan's model is a restriction: another routing may give a pool a lower E[S^2]/E[S] and so a larger
table (a toy under the fleetsim rule found a one-pool plan at 12 $/h outside the refreshed model whose
optimum was 13).  The reported bound is therefore that of a relaxation solved once more: every pool's
table at the least ``m2_k / m1_k`` of a class k it can hold (plain or compressed), below any mix of whole
classes (``FleetMilpData.least_ratio_ms``), and, under the fleetsim rule, each floor level at the bottom
of its interval.  Its own plan replaces the refreshed one when it passes the evaluator at a lower cost.
On the shipped paper instances every pool is cap-bound and the bound equals the plan's cost.

When that relaxation leaves a gap, it is the moments' (``_close_moments_gap``): the model is solved again with
moment-ratio levels (models/fleet_moments.py), a grid of ``E[S^2]/E[S]`` per pool whose level binaries select a table
valid for every routing in the level's interval: at the interval's bottom a relaxation (its bound is a bound), at
its top a restriction (its plans pass the evaluator).  The grid is refined where the relaxation's plan sits
(milp_moments.py) until the relaxation's bound reaches a plan that passes the evaluator (LMSYS K = 3 split: two
refinements under the paper rule, one under the fleetsim rule).

Raising R_j only shrinks tables: ``a_max`` falls as R_j rises (``W99`` is
linear in R_j), so a model whose R_j are all at least those of a solved model
is a restriction of it, and that model's bound holds for it.  Two things
follow.  A plan that meets its refreshed tables at a cost reaching such a
bound is optimal for the refreshed model, with no re-solve (a stable plan).
Otherwise the best such bound goes to the re-solve as a known bound, and
HiGHS stops as soon as it finds a plan at that bound (on LMSYS K = 3 split
routing this cut a re-solve from about 10 s to 0.2 s).

With at most ``OPEN_SET_LIMIT`` sets of K pool options that can hold every
class, split and threshold routing are solved case by case, one set at a
time with the other pools closed (``open_set_cases``), best first by each
set's cheap bound (``optfleet.problems.fleet.open_set_bounds``) and then its LP
relaxation (``optfleet.solvers.highs.solve_cases``); the result is the same
optimum and bound.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np
import pyomo.environ as pyo

from optfleet.errors import InfeasibleError, NoPlanFoundError, NoPlanInTimeError
from optfleet.models import fleet as fleet_model
from optfleet.models.constraints import COST
from optfleet.models.fleet_constraints import LARGEST_BOUND
from optfleet.models.fleet_moments import RatioLevels
from optfleet.problems.fleet.constraints import FLEET_CONSTRAINTS, gpu_bounds
from optfleet.problems.fleet.evaluator import FleetEvaluation, evaluate
from optfleet.problems.fleet.heuristics import sweep
from optfleet.problems.fleet.heuristics.sweep import compression_hint
from optfleet.problems.fleet.milp_batching import BatchingTables, initial_traffic, relaxation_data, tabled_data
from optfleet.problems.fleet.milp_data import FleetMilpData, prepare_milp_data
from optfleet.problems.fleet.milp_moments import PoolState, initial_grid, refine
from optfleet.problems.fleet.milp_plan import extract_plan
from optfleet.problems.fleet.open_set_bounds import ThresholdCaseBound, open_set_bounds, threshold_set_bounds
from optfleet.problems.fleet.plan import Plan, PoolPlan
from optfleet.problems.fleet.plan_sizing import infeasible_pool_message
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.progress import Progress, silent
from optfleet.queueing import erlang_tables
from optfleet.queueing.load_limits import tail_probability
from optfleet.solvers import SolveReport, solve
from optfleet.solvers.highs import solve_cases
from optfleet.solvers.report import OPTIMAL, TIME_LIMIT, UNPROVEN, relative_gap

FEASIBILITY_TOLERANCE = 1e-6  # relative; HiGHS's primal feasibility tolerance is 1e-7 absolute
MOMENTS_GAP = ("optimal for the model at its own pools' E[S^2]/E[S]; the gap is what a routing with lower moments might save "
               "(the bound's tables are at the least E[S^2]/E[S] of a class each pool can hold)")
FLOOR_RESOLUTIONS = (1, 2, 4, 8)  # fleetsim floor levels per prefill chunk, refined while the relaxation leaves a gap
MOMENT_ROUNDS = 8  # E[S^2]/E[S] grids tried while the moments leave a gap (milp_moments.py)
MIN_SOLVE_S = 1.0  # a batching table model's solve gets at least this much of what is left of the time limit
TABLE_SHARE = 0.9  # of a batching table model's share of the progress, its tables' (the rest: its solve)
FIRST_MODEL_SHARE = 0.8  # of the batching MILP's progress, its first table model's
# Sets of K pool options beyond which the model is solved whole (the scale benchmark has 16,215).
OPEN_SET_LIMIT = 20_000


@dataclass(frozen=True)
class MilpResult:
    """The MILP's plan, its solve's report, the evaluator's verdict and the R_j iterations.

    ``converged`` is False when R_j did not settle: the plan then is the
    cheapest one that passed the evaluator, and its report's bound holds for
    the tables it was solved with.
    """

    plan: Plan
    report: SolveReport
    evaluation: FleetEvaluation
    iterations: int
    converged: bool
    history: list[dict] = field(default_factory=list)
    ratio_ms: np.ndarray | None = None  # R_j of the model the plan was solved with
    note: str = ""  # where the plan came from when not from the model's own solve
    # batching model: the relaxation's routing with every pool at its least count under the evaluator, scored
    relaxation_routing: FleetEvaluation | None = None


def solve_milp(
    problem: FleetProblem,
    *,
    routing: str | None = None,
    max_pools: int | None = None,
    time_limit_s: float | None = None,
    mip_gap: float | None = None,
    warm_start: bool = True,
    max_iterations: int = 6,
    customize: Callable[[pyo.ConcreteModel], None] | None = None,
    solver: str | None = None,
    progress: Progress | None = None,
) -> MilpResult:
    """Solve the fleet MILP (see the module docstring); InfeasibleError explains an infeasible instance.

    ``routing``, ``max_pools``, ``time_limit_s``, ``mip_gap`` and ``solver`` default to the instance's ``solve:``
    block, as in ``optfleet solve`` (``optfleet.solve`` is the same run with the baselines beside it).

    The instance's ``constraints:`` are added to every model built, then
    ``customize(model)`` if given: the Python hook for constraints of your own
    (e.g. ``m.cap = pyo.Constraint(expr=m.cost <= 500)``).

    Each pool option's instances are bounded by ``gpu_bounds`` (optfleet/problems/fleet/constraints.py),
    proven to keep an optimal plan under every constraint kind whose bound is proven (all but
    ``gpu_mix``).  With an unproven bound or ``customize`` (and the cost objective) the plan is certified
    afterwards: a plan beyond the bounds costs at least ``min_j c_j (gpu_bound_j + 1)``; when that is
    below the plan's cost, the model is solved once more with every plan up to that cost inside the
    bounds, which is exact.

    ``progress(label, done, total)`` (if given) follows the batching model's table building and solves
    (:func:`_solve_batching_within`).
    """
    routing = problem.milp_routing if routing is None else routing
    max_pools = problem.max_pools if max_pools is None else max_pools
    time_limit_s = problem.time_limit_s if time_limit_s is None else time_limit_s
    mip_gap = problem.mip_gap if mip_gap is None else mip_gap
    solver = problem.solver if solver is None else solver
    data = prepare_milp_data(problem)
    bounds = gpu_bounds(data, problem.constraints)
    settings = dict(routing=routing, max_pools=max_pools, time_limit_s=time_limit_s, mip_gap=mip_gap, warm_start=warm_start,
                    max_iterations=max_iterations, customize=customize, solver=solver, progress=progress)
    result = _solve_within(problem, data, bounds, **settings)
    certify = customize is not None or any(not FLEET_CONSTRAINTS[spec.kind].bound_proven for spec in problem.constraints)
    if certify and FLEET_CONSTRAINTS.objective(problem.constraints) == COST:
        # A plan with more instances than gpu_bound[j] in some pool j costs at least c_j (gpu_bound[j] + 1).
        prices = np.array([option.cost_per_instance_hour for option in data.pools])
        cost = result.evaluation.cost_per_hour
        if np.min(prices * (bounds + 1)) < cost:
            # Not certified: re-solve with every plan of cost <= this one inside the bounds, which is exact.
            bounds = np.maximum(bounds, np.minimum(np.floor(cost / prices), LARGEST_BOUND).astype(np.int64))
            result = _solve_within(problem, data, bounds, **settings)
    if problem.service_model != "batching":
        # The plan's tables were at its own pools' E[S^2]/E[S] (and, under the fleetsim rule, at the top of each floor
        # level's interval): a restriction, since another routing may give a pool lower moments.  The relaxation with
        # every pool's table at the least E[S^2]/E[S] of a class it can hold (and each level at the bottom of its
        # interval) contains every plan that meets the rule, so its bound is the bound.  While a fleetsim level grid
        # leaves a gap, both are solved again on a finer grid (more levels per prefill chunk).
        for resolution in FLOOR_RESOLUTIONS if problem.ttft_rule == "fleetsim" else (1,):
            if resolution > 1:
                result = _solve_within(problem, prepare_milp_data(problem, floor_resolution=resolution), bounds, **settings)
            relaxed_data = (prepare_milp_data(problem, floor_bound="relaxation", floor_resolution=resolution)
                            if problem.ttft_rule == "fleetsim" else data)  # the paper rule's levels are exact
            levels = (f"{resolution} fleetsim floor levels per chunk at the bottom of their intervals, "
                      if problem.ttft_rule == "fleetsim" else "")

            def relaxation(ratio_ms: np.ndarray) -> pyo.ConcreteModel:
                return _build(problem, relaxed_data, _within_cost(relaxed_data, bounds, result.evaluation.cost_per_hour, customize), ratio_ms,
                              routing=routing, max_pools=max_pools, customize=customize)

            result = _bound_by_relaxation(problem, result, relaxation(relaxed_data.least_ratio_ms),
                                          f"{levels}each pool's wait table at the least E[S^2]/E[S] of a class it can hold",
                                          time_limit_s=time_limit_s, mip_gap=mip_gap, customize=customize, solver=solver)
            if result.report.status != UNPROVEN:
                break
            if problem.ttft_rule != "fleetsim" or not _levels_leave_gap(result, relaxation(result.ratio_ms), time_limit_s, mip_gap, customize, solver):
                # The gap is the moments': close it with E[S^2]/E[S] levels in the model (models/fleet_moments.py).
                plan_data = data if resolution == 1 else prepare_milp_data(problem, floor_resolution=resolution)
                result = _close_moments_gap(problem, result, plan_data, relaxed_data, bounds, levels, routing=routing, max_pools=max_pools,
                                            time_limit_s=time_limit_s, mip_gap=mip_gap, customize=customize, solver=solver)
                break
        result = _no_worse_than_sweep(problem, result, max_pools, customize, mip_gap)
    else:
        # The relaxation without wait tables (milp_batching.py) contains every plan that meets the batching model.
        relaxed_data, relaxed_tables = relaxation_data(data)
        relaxed = _build(problem, relaxed_data, _within_cost(relaxed_data, np.maximum(gpu_bounds(relaxed_data, problem.constraints), bounds),
                                                             result.evaluation.cost_per_hour, customize),
                         data.service_ratio_ms, routing=routing, max_pools=max_pools, customize=customize, wait_tables=relaxed_tables)
        label = "batching model: occupancy cap and prefill floor, no wait table"
        result = _bound_by_relaxation(problem, result, relaxed, label, time_limit_s=time_limit_s, mip_gap=mip_gap, customize=customize,
                                      solver=solver)
        result = _relaxation_routing_resized(problem, result, relaxed, label, mip_gap, customize)
    return result


def _relaxation_routing_resized(problem: FleetProblem, result: MilpResult, relaxed: pyo.ConcreteModel, label: str, mip_gap: float | None,
                                customize: Callable[[pyo.ConcreteModel], None] | None) -> MilpResult:
    """``result`` with the solved relaxation's routing, every pool at its least instance count under the evaluator, as
    a candidate incumbent (under the cost objective without a Python hook, when it meets the instance's constraints),
    and that plan recorded (``relaxation_routing``, None when it fails the evaluator): what the bound would be if
    each pool the relaxation opens were sized by the full batching model at its routed traffic, so the gap splits
    into the bound's part (bound to this cost) and the incumbent's (this cost to the incumbent, when positive)."""
    solved = all(v.value is not None for v in relaxed.n.values())  # the relaxation's solve loaded a plan
    if not solved or customize is not None or FLEET_CONSTRAINTS.objective(problem.constraints) != COST:
        return result
    resized = _resized(problem, evaluate(problem, extract_plan(relaxed)))
    if resized is None:
        return result
    note = f"the routing of the relaxation's plan ({label}) with every pool at its least instance count under the evaluator"
    return replace(_with_incumbent(result, resized.plan, resized, note, mip_gap), relaxation_routing=resized)


def _close_moments_gap(problem: FleetProblem, result: MilpResult, plan_data: FleetMilpData, relaxed_data: FleetMilpData, bounds: np.ndarray,
                       floor_label: str, *, routing: str, max_pools: int, time_limit_s: float | None, mip_gap: float | None,
                       customize: Callable[[pyo.ConcreteModel], None] | None, solver: str) -> MilpResult:
    """Close the gap the moments leave (``result``'s tables at its own pools' E[S^2]/E[S], its bound at each pool's least
    class ratio) with moment-ratio levels (models/fleet_moments.py), for at most ``MOMENT_ROUNDS`` grids
    (milp_moments.py): per grid, the relaxation (tables at the bottom of each interval, ``relaxed_data``'s floor levels)
    gives the bound and its plan if that passes the evaluator; a candidate plan comes from the relaxation's routing with
    every pool at its least instance count under the evaluator (under the cost objective without a Python hook), else
    from the restriction (tables at the top, ``plan_data``'s floor levels: every plan of it passes the evaluator's wait
    rule); then the grid is refined where the relaxation's plan sits.  Stops when the gap
    is within the MIP gap, a solve is not proven optimal, or nothing is left to refine; the note then says what is
    left.  Each refinement only splits intervals, so no bound falls."""
    own = {_pool_index(plan_data, p.name): (1.0 + p.service_scv) * p.mean_service_ms for p in result.evaluation.pools if p.share > 0}
    grid = initial_grid(relaxed_data, own)
    repairable = not customize and FLEET_CONSTRAINTS.objective(problem.constraints) == COST
    settings = dict(routing=routing, max_pools=max_pools, customize=customize)
    for _ in range(MOMENT_ROUNDS):
        points = sum(len(edges) for edges in grid if edges is not None)
        label = f"{floor_label}each pool's wait table at the bottom of its E[S^2]/E[S] interval ({points} grid points)"
        relaxation = _build(problem, relaxed_data, _within_cost(relaxed_data, bounds, result.evaluation.cost_per_hour, customize),
                            relaxed_data.least_ratio_ms, ratio_levels=RatioLevels(grid, "bottom"), **settings)
        bounded = _bound_by_relaxation(problem, result, relaxation, label, time_limit_s=time_limit_s, mip_gap=mip_gap, customize=customize, solver=solver)
        if bounded.report.bound is None or (result.report.bound is not None and bounded.report.bound < result.report.bound - 1e-9 * abs(result.report.bound)):
            break  # a relaxation not solved to optimality: the last proven bound stands
        result = bounded
        if result.report.status != UNPROVEN:
            return result
        resized = _resized(problem, evaluate(problem, extract_plan(relaxation))) if repairable else None
        if resized is not None:
            result = _with_incumbent(result, resized.plan, resized,
                                     f"the routing of the relaxation's plan ({label}) with every pool at its least instance count", mip_gap)
        else:
            restriction = _build(problem, plan_data, _within_cost(plan_data, bounds, result.evaluation.cost_per_hour, customize),
                                 plan_data.service_ratio_ms, ratio_levels=RatioLevels(grid, "top"), **settings)
            restricted = _runner(restriction, solver, customize)(restriction, time_limit=time_limit_s, mip_gap=mip_gap)
            result = replace(result, report=replace(result.report, seconds=result.report.seconds + restricted.seconds))
            if restricted.has_solution:
                plan = extract_plan(restriction)
                result = _with_incumbent(result, plan, evaluate(problem, plan), f"the restriction's plan ({points} E[S^2]/E[S] grid points)", mip_gap)
        if result.report.status != UNPROVEN:
            return result
        grid, added = refine(relaxed_data, grid, _tabled_pools(relaxation))
        if not added:
            break
    return replace(result, note=result.note or MOMENTS_GAP)


def _tabled_pools(model: pyo.ConcreteModel) -> list[PoolState]:
    """The open pools of a solved model below their table size, with their load and own E[S^2]/E[S]."""
    data = model.data
    states = []
    for j in model.ratio_levels.graded():
        instances = int(round(pyo.value(model.n[j]))) if pyo.value(model.open[j]) > 0.5 else 0
        if not 0 < instances < data.pools[j].table_instances:
            continue
        x, z = fleet_model.pool_shares(model, j)
        first = float(np.dot(data.load[:, j], x) + np.dot(data.compressed_load[:, j], z))
        second = float(np.dot(data.second_load[:, j], x) + np.dot(data.compressed_second_load[:, j], z))
        if first > 0:
            states.append(PoolState(j, instances, first, 1000.0 * second / first))
    return states


def _with_incumbent(result: MilpResult, plan: Plan, evaluation: FleetEvaluation, note: str, mip_gap: float | None) -> MilpResult:
    """``result`` with ``plan`` as its incumbent when it passes the evaluator at a lower cost, against ``result``'s bound
    (optimal when that gap is within the MIP gap); else ``result`` unchanged."""
    if not evaluation.meets_slo or evaluation.cost_per_hour >= result.evaluation.cost_per_hour - 1e-9:
        return result
    report, cost = result.report, evaluation.cost_per_hour
    gap = relative_gap(cost, report.bound) if report.bound is not None else None
    status = report.status
    if status in (OPTIMAL, UNPROVEN):
        status = OPTIMAL if gap is not None and gap <= max(mip_gap or 0.0, 1e-9) + 1e-9 else UNPROVEN
    return MilpResult(plan, replace(report, status=status, objective=cost, gap=gap), evaluation, result.iterations, result.converged,
                      result.history, result.ratio_ms, note)


def _within_cost(data: FleetMilpData, bounds: np.ndarray, cost_per_hour: float | None, customize: Callable[[pyo.ConcreteModel], None] | None) -> np.ndarray:
    """``bounds`` cut to ``floor(cost / price_j)`` instances per option when the model minimises cost and a plan feasible in
    it costs ``cost_per_hour``: every cheaper plan has no more (a tighter big-M than the level caps' service bounds)."""
    if cost_per_hour is None or customize is not None or FLEET_CONSTRAINTS.objective(data.problem.constraints) != COST:
        return bounds
    prices = np.array([option.cost_per_instance_hour for option in data.pools])
    return np.minimum(bounds, np.floor(cost_per_hour / prices * (1 + 1e-9)).astype(np.int64))


def _bound_by_relaxation(problem: FleetProblem, result: MilpResult, model: pyo.ConcreteModel, label: str, *, time_limit_s: float | None,
                         mip_gap: float | None, customize: Callable[[pyo.ConcreteModel], None] | None, solver: str) -> MilpResult:
    """The bound of a restriction's plan: ``result`` solved a restriction (the fleetsim rule's floor levels at the top of
    their intervals; the batching model's tables at a traffic mix) and ``model`` is a relaxation that contains every
    plan meeting the rule, so its bound is the bound.  Its own plan, if it passes the evaluator at a better objective,
    replaces ``result``'s.  The report is the plan's incumbent against the relaxation's bound: ``optimal`` when that
    gap is within the MIP gap (whatever either solve's own status), ``unproven`` when more is left and both models
    were solved to optimality, else the status of the one that was not (e.g. its time limit)."""
    warm = fleet_model.can_warm_start(model, result.plan)
    if warm:
        fleet_model.warm_start(model, result.plan)
    relaxed = _runner(model, solver, customize)(model, time_limit=time_limit_s, mip_gap=mip_gap, warm_start=warm)
    minimising = next(model.component_data_objects(pyo.Objective, active=True)).sense == pyo.minimize
    best, objective = result, result.report.objective
    if relaxed.has_solution:
        plan = extract_plan(model)
        evaluation = evaluate(problem, plan)
        better = relaxed.objective < objective - 1e-9 if minimising else relaxed.objective > objective + 1e-9
        if evaluation.meets_slo and better:
            best, objective = MilpResult(plan, relaxed, evaluation, result.iterations, result.converged, result.history, result.ratio_ms,
                                         f"the relaxation's plan ({label}), which passes the evaluator"), relaxed.objective
    gap = relative_gap(objective, relaxed.bound)
    tolerance = max(mip_gap or 0.0, 1e-9) + 1e-9
    if gap is not None and gap <= tolerance:
        status = OPTIMAL  # a plan that passes the evaluator at a proven bound, however either was found
    elif not relaxed.proven_optimal or not result.report.proven_optimal:
        status = relaxed.status if not relaxed.proven_optimal else result.report.status
    else:
        status = UNPROVEN
    report = SolveReport(
        status, objective, relaxed.bound, gap, result.report.seconds + relaxed.seconds, relaxed.solver,
        log=f"{result.report.log}\n-- the relaxation ({label}) --\n{relaxed.log}",
        counts={key: result.report.counts.get(key, 0) + relaxed.counts.get(key, 0) for key in {*result.report.counts, *relaxed.counts}},
    )
    return MilpResult(best.plan, report, best.evaluation, best.iterations, best.converged, best.history, best.ratio_ms, best.note)


def _levels_leave_gap(result: MilpResult, at_own_moments: pyo.ConcreteModel, time_limit_s: float | None, mip_gap: float | None,
                      customize: Callable[[pyo.ConcreteModel], None] | None, solver: str) -> bool:
    """Whether a finer floor-level grid could close ``result``'s gap: the relaxation of its levels at the plan's own
    pools' moments (``at_own_moments``) leaves one too.  When that relaxation reaches the plan's cost, the gap left
    is the moments' alone (the R_j another routing could give), which no finer grid narrows."""
    relaxed = _runner(at_own_moments, solver, customize)(at_own_moments, time_limit=time_limit_s, mip_gap=mip_gap)
    gap = relative_gap(result.report.objective, relaxed.bound) if relaxed.proven_optimal else None
    return gap is None or gap > max(mip_gap or 0.0, 1e-9) + 1e-9


def _solve_within(
    problem: FleetProblem,
    data,
    bounds: np.ndarray,
    *,
    routing: str,
    max_pools: int,
    time_limit_s: float | None,
    mip_gap: float | None,
    warm_start: bool,
    max_iterations: int,
    customize: Callable[[pyo.ConcreteModel], None] | None,
    solver: str,
    progress: Progress | None = None,
) -> MilpResult:
    """:func:`solve_milp` with the instances of pool option j at most ``bounds[j]``."""
    if problem.service_model == "batching":
        return _solve_batching_within(problem, data, bounds, routing=routing, max_pools=max_pools, time_limit_s=time_limit_s, mip_gap=mip_gap,
                                      warm_start=warm_start, max_iterations=max_iterations, customize=customize, solver=solver,
                                      progress=progress)
    ratio = data.service_ratio_ms.copy()
    sweep_plan = _sweep_plan(problem)
    start = sweep_plan if warm_start else None
    history: list[dict] = []

    def model_at(ratio_ms: np.ndarray, skip: int | None = None) -> pyo.ConcreteModel:
        return _build(problem, data, bounds, ratio_ms, routing=routing, max_pools=max_pools, customize=customize, skip=skip)

    previous: pyo.ConcreteModel | None = None
    best: MilpResult | None = None
    solved: list[tuple[np.ndarray, float]] = []  # (R_j of a solved model, its proven bound)
    known_bound: float | None = None  # the best bound of a solved model the next one restricts
    raising = False  # after a plan that fails the evaluator, R_j only rise
    for iteration in range(1, max_iterations + 1):
        model = model_at(ratio)
        report = _solve_from(model, start, previous, known_bound, solver=solver, customize=customize, time_limit_s=time_limit_s, mip_gap=mip_gap)
        if not report.has_solution:
            if best is not None:
                break
            _no_plan(problem, data, max_pools, report, time_limit_s, lambda skip: solve(model_at(ratio, skip), time_limit=time_limit_s, solver=solver).has_solution,
                     customize is not None)
        if report.bound is not None:
            solved.append((ratio.copy(), report.bound))
        plan = extract_plan(model)
        evaluation = evaluate(problem, plan)
        updated = ratio.copy()
        tabled = []  # pools below their table size: only there does R_j enter the model
        for pool in evaluation.pools:
            j = _pool_index(data, pool.name)
            if pool.share > 0 and pool.instances < data.pools[j].table_instances:
                updated[j] = (1.0 + pool.service_scv) * pool.mean_service_ms
                tabled.append(j)
        # The plan is optimal for the refreshed model too if it meets its tables and a model that one
        # restricts has a bound the plan's cost reaches; else that bound helps the re-solve.
        minimising = next(model.component_data_objects(pyo.Objective, active=True)).sense == pyo.minimize
        known_bound = _restricted_bound(updated, solved, minimising)
        reaches = known_bound is not None and (
            relative_gap(report.objective, known_bound) <= (mip_gap or 0.0) + 1e-9
            or (report.objective <= known_bound if minimising else report.objective >= known_bound)
        )
        stable = np.allclose(updated[tabled], ratio[tabled], rtol=1e-6) or (
            evaluation.meets_slo and reaches and _meets_tables(model, updated, tabled)
        )
        repeated = bool(history) and history[-1]["passes_evaluator"] and np.isclose(history[-1]["cost_per_hour"], report.objective, rtol=1e-9)
        history.append({"iteration": iteration, "cost_per_hour": report.objective, "status": report.status, "passes_evaluator": evaluation.meets_slo})
        if evaluation.meets_slo:
            result = MilpResult(plan, report, evaluation, iteration, stable, history, ratio.copy())
            if best is None or evaluation.cost_per_hour < best.evaluation.cost_per_hour - 1e-9:
                best = result
            if stable or repeated or not report.proven_optimal:
                # Stable tables; or the same cost again (alternative optima whose R_j differ, which
                # would only oscillate); or a time-limited incumbent, which re-solving under the
                # same limit would not prove better.
                return result
        raising |= not evaluation.meets_slo
        if raising:
            # A plan broke a table whose R_j was below its own: from then on no R_j falls, so each model restricts
            # the last and the refreshes cannot swap two routings that each fit the other's R_j.
            updated = np.maximum(updated, ratio)
        previous, start, ratio = model, None, updated
    if best is None:
        # No refreshed model's plan passed: the sweep's plan stands when the MILP may return it (the relaxation that
        # follows gives the bound); else no plan, which is not proof of infeasibility.
        swept = _sweep_incumbent(problem, sweep_plan, max_pools, customize)
        if swept is None:
            raise _still_failing(evaluation, max_iterations)
        incumbent = SolveReport(UNPROVEN, swept.cost_per_hour, None, None, report.seconds, report.solver, log=report.log, counts=report.counts)
        return MilpResult(swept.plan, incumbent, swept, max_iterations, False, history, ratio.copy(),
                          f"the sweep's plan: no plan of the MILP's {max_iterations} refreshed models passed the evaluator")
    return MilpResult(best.plan, best.report, best.evaluation, best.iterations, False, history, best.ratio_ms)


def _solve_batching_within(problem: FleetProblem, data: FleetMilpData, bounds: np.ndarray, *, routing: str, max_pools: int,
                           time_limit_s: float | None, mip_gap: float | None, warm_start: bool, max_iterations: int,
                           customize: Callable[[pyo.ConcreteModel], None] | None, solver: str, progress: Progress | None = None) -> MilpResult:
    """:func:`_solve_within` under the batching model (milp_batching.py): each option's tables at a traffic mix (at
    first the sweep plan's, else every request its window holds), refreshed from each plan's routed mix and re-solved
    from the last plan until a plan passes the evaluator and its pools' tables no longer change (``converged``), the
    same cost comes back, or ``max_iterations`` models have been solved (then the cheapest plan that passed).  Under
    the cost objective and without a Python hook, each model's routing with every pool at its least instance count under
    the evaluator is a candidate too, and the sweep's plan the incumbent, each when it meets the instance's
    constraints: the cheapest of them all is the result (its ``note`` says where it came from; status ``unproven``):
    the tables hold only at the mix they were computed for.  No passing plan at all raises ``NoPlanFoundError``
    (not proof of infeasibility).  ``progress`` is told each model's table building (which options, which search)
    and solve as a share of the run (:func:`_model_progress`)."""
    tell = progress or silent
    sweep_plan = _sweep_plan(problem)
    # Outside the model's plans only under the cost objective and without a Python hook, each checked against the
    # instance's constraints (a resized plan may break one the model held)
    repairable = not customize and FLEET_CONSTRAINTS.objective(problem.constraints) == COST
    repaired: tuple[int, FleetEvaluation] | None = None
    swept = _sweep_incumbent(problem, sweep_plan, max_pools, customize)  # the sweep's plan also starts the tables
    tables = BatchingTables.start(data, initial_traffic(data, sweep_plan), _model_progress(tell, 1, max_iterations))
    start = sweep_plan if warm_start else None
    previous: pyo.ConcreteModel | None = None
    best: MilpResult | None = None
    history: list[dict] = []
    started = time.perf_counter()
    for iteration in range(1, max_iterations + 1):
        spent = time.perf_counter() - started
        if iteration > 1 and time_limit_s is not None and spent >= time_limit_s:
            break  # the time limit bounds the refreshes too: the best so far (or a resized or the sweep's plan) stands
        remaining = None if time_limit_s is None else max(time_limit_s - spent, MIN_SOLVE_S)
        tabled, wait_tables = tabled_data(data, tables.capacity)
        caps = _within_cost(tabled, np.maximum(gpu_bounds(tabled, problem.constraints), bounds), swept and swept.cost_per_hour, customize)

        def model_at(skip: int | None = None) -> pyo.ConcreteModel:
            return _build(problem, tabled, caps, data.service_ratio_ms, routing=routing, max_pools=max_pools, customize=customize,
                          skip=skip, wait_tables=wait_tables)

        model = model_at()
        _model_progress(tell, iteration, max_iterations)("HiGHS solve", 1.0, 1.0)
        report = _solve_from(model, start, previous, None, solver=solver, customize=customize, time_limit_s=remaining, mip_gap=mip_gap)
        if not report.has_solution:
            if iteration > 1:
                break  # a refresh left no plan: the best so far (or the sweep's plan) stands
            _no_plan(problem, tabled, max_pools, report, time_limit_s, lambda skip: solve(model_at(skip), time_limit=time_limit_s, solver=solver).has_solution,
                     customize is not None)
        plan = extract_plan(model)
        evaluation = evaluate(problem, plan)
        tables, changed = tables.refreshed(data, plan, failed=not evaluation.meets_slo,
                                           progress=_model_progress(tell, min(iteration + 1, max_iterations), max_iterations))
        repeated = bool(history) and history[-1]["passes_evaluator"] and np.isclose(history[-1]["cost_per_hour"], report.objective, rtol=1e-9)
        history.append({"iteration": iteration, "cost_per_hour": report.objective, "status": report.status, "passes_evaluator": evaluation.meets_slo})
        resized = _resized(problem, evaluation) if repairable else None
        if resized is not None and (repaired is None or resized.cost_per_hour < repaired[1].cost_per_hour - 1e-9):
            repaired = (iteration, resized)
        if evaluation.meets_slo:
            result = MilpResult(plan, report, evaluation, iteration, not changed, history)
            if best is None or evaluation.cost_per_hour < best.evaluation.cost_per_hour - 1e-9:
                best = result
            if not changed or repeated or not report.proven_optimal:
                break
        previous, start = model, None
    if repaired is not None and (best is None or repaired[1].cost_per_hour < best.evaluation.cost_per_hour - 1e-9):
        iteration, resized = repaired
        best = MilpResult(resized.plan, SolveReport(UNPROVEN, resized.cost_per_hour, None, None, report.seconds, report.solver, log=report.log),
                          resized, iteration, False, history,
                          note=f"the routing of the batching tables' model {iteration} with every pool at its least instance count under the evaluator")
    if swept is not None and (best is None or swept.cost_per_hour < best.evaluation.cost_per_hour - 1e-9):
        cost = swept.cost_per_hour
        incumbent = SolveReport(UNPROVEN, cost, None, None, report.seconds, report.solver,
                                log=f"{report.log}\n-- no plan of the tables' models passed the evaluator below the sweep's plan ({cost:,.2f} $/h): it is the result --")
        return MilpResult(sweep_plan, incumbent, swept, len(history), False, history,
                          note=f"the sweep's plan: no plan of the batching tables' {len(history)} models passed the evaluator at a lower cost")
    if best is None:
        raise _still_failing(evaluation, max_iterations)
    return replace(best, history=history)


def _model_progress(progress: Progress, model: int, models: int) -> Progress:
    """``progress`` for model ``model`` of at most ``models``, as a share of the run: the first model (whose tables
    cover every option, the bulk of the time) spans ``[0, FIRST_MODEL_SHARE)``, each next one half the rest; its
    tables' searches fill ``TABLE_SHARE`` of its span (``done == total``: its solve)."""
    def start(i: int) -> float:
        return 0.0 if i == 1 else 1.0 - (1.0 - FIRST_MODEL_SHARE) * 0.5 ** (i - 2)

    span = start(model + 1) - start(model)
    return lambda label, done, total: progress(f"model {model} of at most {models}: {label}",
                                               start(model) + span * TABLE_SHARE * min(done / total, 1.0), 1.0)


def _sweep_incumbent(problem: FleetProblem, sweep_plan: Plan | None, max_pools: int,
                     customize: Callable[[pyo.ConcreteModel], None] | None) -> FleetEvaluation | None:
    """The sweep's plan, scored, when the MILP may return it: under the cost objective without a Python hook, on the
    instance's own hardware within K pools, meeting the SLO and the instance's constraints; else None."""
    if (sweep_plan is None or customize is not None or FLEET_CONSTRAINTS.objective(problem.constraints) != COST or problem.heterogeneous
            or sum(p.instances > 0 for p in sweep_plan.pools) > max_pools):
        return None
    swept = evaluate(problem, sweep_plan)
    return swept if _passes(problem, swept) else None


def _no_worse_than_sweep(problem: FleetProblem, result: MilpResult, max_pools: int, customize: Callable[[pyo.ConcreteModel], None] | None,
                         mip_gap: float | None) -> MilpResult:
    """DESIGN's requirement that the unrestricted MILP is never worse than the sweep, kept where the refreshed models
    missed the sweep's plan (their tables sit at their own pools' moments, and the relaxation's plan may fail the
    evaluator): the sweep's plan is then the result, against the relaxation's bound."""
    swept = _sweep_incumbent(problem, _sweep_plan(problem), max_pools, customize)
    if swept is None:
        return result
    return _with_incumbent(result, swept.plan, swept, "the sweep's plan: cheaper than the plans of the MILP's refreshed models", mip_gap)


def _resized(problem: FleetProblem, evaluation: FleetEvaluation) -> FleetEvaluation | None:
    """``evaluation``'s routing with every pool at its least instance count under the evaluator, scored, when that plan
    meets the SLO and the instance's constraints; else None.  Only a candidate under the cost objective without a Python
    hook (a hook may need more instances than the evaluator's least)."""
    if any(p.min_instances < 0 for p in evaluation.pools):
        return None
    resized = evaluate(problem, evaluation.plan.with_instances([p.min_instances for p in evaluation.pools]))
    return resized if _passes(problem, resized) else None


def _passes(problem: FleetProblem, evaluation: FleetEvaluation) -> bool:
    """Whether a plan from outside the model meets the SLO and every constraint of the instance."""
    from optfleet.problems.fleet.constraint_check import constraint_violations

    return evaluation.meets_slo and not constraint_violations(problem, evaluation)


def _solve_from(model: pyo.ConcreteModel, start: Plan | None, previous: pyo.ConcreteModel | None, known_bound: float | None, *, solver: str,
                customize: Callable[[pyo.ConcreteModel], None] | None, time_limit_s: float | None, mip_gap: float | None) -> SolveReport:
    """Solve ``model`` from ``start`` (a plan, as a MIP start) if it loads, else from the ``previous`` model's solution
    (HiGHS keeps it if still feasible, with ``known_bound`` if any), else cold."""
    run = _runner(model, solver, customize)
    if start is not None and fleet_model.can_warm_start(model, start):
        fleet_model.warm_start(model, start)
        return run(model, time_limit=time_limit_s, mip_gap=mip_gap, warm_start=True)
    if previous is not None:
        _carry_over(previous, model)
        return run(model, time_limit=time_limit_s, mip_gap=mip_gap, warm_start=True,
                   **({"known_bound": known_bound} if solver == "highs" and known_bound is not None else {}))
    return run(model, time_limit=time_limit_s, mip_gap=mip_gap)


def _no_plan(problem: FleetProblem, data: FleetMilpData, max_pools: int, report: SolveReport, time_limit_s: float | None,
             feasible_without: Callable[[int], bool], customized: bool) -> None:
    """Raise why the first model has no plan: the time limit (not proof of infeasibility), or :func:`_explain` and, with
    compression off, whether compression would help (sweep.compression_hint)."""
    if report.status == TIME_LIMIT:
        bound = "no lower bound yet" if report.bound is None else f"a lower bound of {report.bound:,.2f}"
        raise NoPlanInTimeError(
            f"MILP: no plan found within the time limit of {time_limit_s} s ({bound}); this is not proof of "
            "infeasibility: raise solve.time_limit_s", report,
        )
    raise InfeasibleError(_explain(problem, data, max_pools, report, feasible_without, customized=customized) + compression_hint(problem))


def _still_failing(evaluation: FleetEvaluation, refreshes: int) -> NoPlanFoundError:
    failing = "; ".join(f"pool {p.name}: {p.binding}, P99 TTFT {p.ttft_p99_ms:.1f} ms, utilisation {p.utilisation:.4f}"
                        for p in evaluation.pools if not p.meets_slo)
    return NoPlanFoundError(f"the MILP's plan still fails the evaluator after {refreshes} table refreshes ({failing}); "
                            "this is not proof that no plan exists")


def _build(problem: FleetProblem, data: FleetMilpData, bounds: np.ndarray, ratio_ms: np.ndarray, *, routing: str, max_pools: int,
           customize: Callable[[pyo.ConcreteModel], None] | None, skip: int | None = None,
           wait_tables: list[np.ndarray] | None = None, ratio_levels: RatioLevels | None = None) -> pyo.ConcreteModel:
    """The model of ``data`` at ``R_j = ratio_ms`` (or with ``wait_tables``, or ``ratio_levels``) with the instance's
    constraints (all but ``skip``) and ``customize``."""
    constraints = problem.constraints if skip is None else tuple(c for i, c in enumerate(problem.constraints) if i != skip)
    model = fleet_model.build(data, ratio_ms, routing=routing, max_pools=max_pools,
                              gpu_bounds=bounds if skip is None else gpu_bounds(data, constraints),
                              objective=FLEET_CONSTRAINTS.objective(constraints), wait_tables=wait_tables, ratio_levels=ratio_levels)
    FLEET_CONSTRAINTS.declare_all(model, problem.constraints, skip=skip)
    if customize is not None:
        customize(model)
    return model


def plan_model(problem: FleetProblem, result: MilpResult) -> tuple[pyo.ConcreteModel, SolveReport]:
    """The model ``result``'s plan was solved in (tables at ``result.ratio_ms``, the instance's constraints), holding
    that plan: every pool option's count and opening fixed at the plan's, the rest (routing, floor levels, count
    binaries) solved again.  What sensitivity analysis reads (optfleet/problems/fleet/explain.py).  The report is
    not optimal when the plan does not fit that model (a plan taken from the relaxation, see the module docstring)."""
    data = prepare_milp_data(problem)
    model = _build(problem, data, gpu_bounds(data, problem.constraints), result.ratio_ms, routing=problem.milp_routing, max_pools=problem.max_pools, customize=None)
    fleet_model.fix_plan_counts(model, result.plan)
    return model, solve(model, solver="highs", time_limit=problem.time_limit_s, mip_gap=problem.mip_gap)


def _runner(model: pyo.ConcreteModel, solver: str, customize: Callable[[pyo.ConcreteModel], None] | None) -> Callable[..., SolveReport]:
    """How ``model`` is solved: case by case over its open pool sets with HiGHS when it can be (``open_set_cases``),
    else whole."""
    by_case = open_set_cases(model, cost_objective=customize is None) if solver == "highs" else None
    if by_case is None:
        return partial(solve, solver=solver)
    return partial(solve_cases, groups=by_case.groups, cases=by_case.cases, case_bounds=by_case.bounds, case_refine=by_case.refine)


@dataclass(frozen=True)
class OpenSetCases:
    """The fleet MILP as cases (``optfleet.solvers.highs.solve_cases``): ``groups[j]`` are the variables pool
    option j has at 0 when closed, case c closes the options ``cases[c]``, ``bounds[c]`` (or None) is a
    lower bound on case c's cost and ``refine(c)`` (or None) a stronger one, computed only for the cases the
    search reaches."""

    groups: list[list]
    cases: list[list[int]]
    bounds: np.ndarray | None
    refine: Callable[[int], float] | None = None


def open_set_cases(model: pyo.ConcreteModel, cost_objective: bool = True) -> OpenSetCases | None:
    """One case per set of K usable pool options that can hold every class: the other options are closed
    (their ``closed_pool_variables``, fixed at 0 and left out of what HiGHS gets).  Every plan opens at
    most K pools, all inside some such set, so solving every case is solving the model.  With
    ``cost_objective`` (the model's objective is its cost, as built) each case gets the cheap bound of
    ``open_set_bounds``, which lets the best-first search prune most sets unsolved.

    None (solve the model whole) for the sweep's policy space, a maximised objective (a budget), a
    deactivated ``max_pools`` row or closing row, or more than ``OPEN_SET_LIMIT`` sets of K options.
    A case is a model of at most K pools: HiGHS solves its LP relaxation in milliseconds, and most
    cases end there, pruned by that bound.  The whole model spends seconds in presolve (LMSYS
    threshold routing: about 4 s probing the segment binaries of 18 windows) and, with several GPU
    types, in branching on which pools open (scale benchmark: LP bound 480.8 against 562.4).
    """
    objective = next(model.component_data_objects(pyo.Objective, active=True))
    if model.routing == "sweep" or objective.sense != pyo.minimize or not model.max_pools.active:
        return None
    if not all(row.active for component in fleet_model.closing_rows(model) for row in component.values()):
        return None  # a customisation lifted a row that closes a pool's variables
    data = model.data
    open_sets = covering_sets(data, int(pyo.value(model.max_pools.upper)))
    if open_sets is None or open_sets.shape[1] == 0:
        return None
    groups = [fleet_model.closed_pool_variables(model, j) for j in range(len(data.pools))]
    cases = [sorted(set(range(len(data.pools))) - set(chosen.tolist())) for chosen in open_sets]
    if not cost_objective:
        return OpenSetCases(groups, cases, None)
    bounds = open_set_bounds(data, open_sets)
    if model.routing != "threshold":
        return OpenSetCases(groups, cases, bounds)
    caps = np.array([pyo.value(model.gpu_bound[j]) for j in range(len(data.pools))], dtype=np.float64)
    bounds = np.maximum(bounds, threshold_set_bounds(data, open_sets, model.wait_tables, caps))
    inflow_bound = ThresholdCaseBound(data, model.wait_tables, caps)
    return OpenSetCases(groups, cases, bounds, lambda c: inflow_bound(open_sets[c]))


def covering_sets(data: FleetMilpData, max_pools: int) -> np.ndarray | None:
    """Every set of ``min(max_pools, usable)`` usable pool options (a TTFT floor level under the SLO) that together hold
    every class with traffic, one row per set (no column when no option is usable); None when there are more than
    ``OPEN_SET_LIMIT`` sets to try."""
    usable = [j for j, option in enumerate(data.pools) if option.levels > 0]
    size = min(max_pools, len(usable))
    if size < 1:
        return np.zeros((0, 0), dtype=np.int64)
    if math.comb(len(usable), size) > OPEN_SET_LIMIT:
        return None
    holds = _holding(data)[data.mass > 0]
    combos = np.array(list(itertools.combinations(usable, size)), dtype=np.int64).reshape(-1, size)
    return combos[holds[:, combos].any(axis=2).all(axis=0)]


def _holding(data: FleetMilpData) -> np.ndarray:
    """``[class, option]``: the option can serve the class on its own (compressed service counts only when every
    request of the band may be compressed, p_c = 1)."""
    return data.fits if data.problem.compressible_fraction < 1 else data.fits | data.can_compress


def _restricted_bound(ratio_ms: np.ndarray, solved: list[tuple[np.ndarray, float]], minimising: bool = True) -> float | None:
    """The best bound proven for a model that the model at ``ratio_ms`` restricts (every R_j at least as high:
    every table ``a_max`` at most as large); None if there is none.  The highest lower bound when minimising
    (cost), the lowest upper bound when maximising (the served rate under a budget)."""
    bounds = [bound for solved_ms, bound in solved if np.all(ratio_ms >= solved_ms)]
    if not bounds:
        return None
    return max(bounds) if minimising else min(bounds)


def _meets_tables(model: pyo.ConcreteModel, ratio_ms: np.ndarray, tabled: list[int]) -> bool:
    """Whether ``model``'s solution meets the model at ``ratio_ms``: every pool below its table size meets the
    wait row (7) of its lowest floor level (the solution with that level is as cheap), within the solver's
    feasibility tolerance; R_j does not enter the other rows."""
    data, problem = model.data, model.data.problem
    tables = erlang_tables(tuple(data.pools[j] for j in tabled), ratio_ms[tabled], problem.ttft_p99_ms, problem.rho_max, problem.ttft_quantile)
    for j, table in zip(tabled, tables, strict=True):
        level = fleet_model.lowest_floor_level(data, j, *fleet_model.pool_shares(model, j))
        gpus = int(round(pyo.value(model.n[j])))
        if level is None:  # the floor rows hold only to the solver's tolerance: no certificate, re-solve
            return False
        if pyo.value(model.load_erlangs[j]) > table[gpus, level] + FEASIBILITY_TOLERANCE * max(1.0, table[gpus, level]):
            return False
    return True


def _carry_over(previous: pyo.ConcreteModel, model: pyo.ConcreteModel) -> None:
    """Copy every variable value of ``previous`` into the same-named variable of ``model``; a variable ``previous``
    lacks (a refreshed table may be longer) starts at 0 within its bounds.  HiGHS checks the start either way and
    drops or repairs it when infeasible."""
    for var in model.component_data_objects(pyo.Var):
        old = previous.find_component(var.name)
        if old is not None and old.value is not None:
            var.set_value(old.value, skip_validation=True)
        else:
            var.set_value(min(max(0.0, var.lb if var.lb is not None else 0.0), var.ub if var.ub is not None else np.inf), skip_validation=True)


def _pool_index(data, name: str) -> int:
    return next(j for j, o in enumerate(data.pools) if o.name == name)


def _sweep_plan(problem: FleetProblem) -> Plan | None:
    try:
        return sweep(problem).plan
    except InfeasibleError:
        return None


def _explain(problem: FleetProblem, data: FleetMilpData, max_pools: int, report: SolveReport, feasible_without: Callable[[int], bool],
             customized: bool = False) -> str:
    """Why no plan exists: requests that no pool option can serve within the TTFT floor, the TTFT floor of the
    homogeneous pool, or the user constraints whose removal helps (with a Python hook, which can only be judged
    within the model's ``gpu_bound``).  The homogeneous pool is checked first when the instance has one GPU
    configuration (its message names the pool and the prefill it needs)."""
    closed = _closed_by_tpot(problem, data)
    if closed is not None:
        return f"MILP {report.status}: TPOT targets: {closed}"
    if not problem.heterogeneous:
        evaluation = evaluate(problem, Plan((PoolPlan("long", problem.long_window_tokens, 0),)))
        if evaluation.pools[0].min_instances < 0:
            rows = "TPOT targets" if evaluation.pools[0].binding == "tpot" else "TTFT floor constraints (4) cannot hold"
            return f"MILP {report.status}: {rows}; {infeasible_pool_message(problem, evaluation, 'long')}"
    floor = _stranded_class(data) or _floor_tail(data)
    if floor is not None:
        return f"MILP {report.status}: TTFT floor constraints (4) cannot hold; {floor}"
    open_sets = covering_sets(data, max_pools)
    if open_sets is not None and len(open_sets) == 0:
        return (f"MILP {report.status}: pool limit (8): no {max_pools} pool options that meet the TTFT floor hold every request length "
                f"together (solve.max_pools = {max_pools}; raise it, or offer more windows)")
    culprits = [f"constraints[{i}] ({spec.kind})" for i, spec in enumerate(problem.constraints) if feasible_without(i)]
    if culprits:
        return f"MILP {report.status}: the user constraints exclude every plan; dropping any one of {', '.join(culprits)} makes the instance feasible"
    if customized:
        return (f"MILP {report.status} ({report.summary}): the constraints added in Python (customize) exclude every plan with at most "
                "gpu_bound[j] instances in pool option j; a constraint that needs more raises m.gpu_bound[j] in the same hook")
    if problem.constraints:
        return f"MILP {report.status} ({report.summary}); every request length has a pool option that meets the TTFT floor, so the user constraints together exclude every plan"
    chunk = problem.pool(problem.long_window_tokens).chunk_tokens
    return (f"MILP {report.status} ({report.summary}): TTFT floor constraints (4): every request length has a pool option whose floor "
            f"meets the SLO, but no routing over at most {max_pools} pool options keeps the P99 TTFT floor of each open pool within "
            f"{problem.ttft_p99_ms:g} ms (prefill in chunks of {chunk} tokens; a larger chunk, more windows or a looser SLO may help)")


def _closed_by_tpot(problem: FleetProblem, data: FleetMilpData) -> str | None:
    """Why no pool option can open when the TPOT targets close every one of them (milp_data.py), or None."""
    targets = problem.tpot_targets
    if not targets.any:
        return None
    configs = [problem.pool(o.window_tokens, o.gpu if problem.heterogeneous else None) for o in data.pools]
    if any(o.levels > 0 for o in data.pools):
        return None
    if targets.percentile_ms is not None and not targets.bound_fits(np.array([c.tpot_bound_ms for c in configs])).any():
        best = min(configs, key=lambda c: c.tpot_bound_ms)
        return (f"every pool option's longest iteration is above the TPOT target {targets.percentile_ms:g} ms (the least, "
                f"{best.tpot_bound_ms:.1f} ms, is {best.gpu} at {best.window_tokens} tokens); "
                + ("a smaller chunk or smaller windows lower it" if problem.charges_prefill else "the paper's t_iter does not depend on the chunk"))
    if targets.mean_ms is not None:
        best = min(configs, key=lambda c: c.window_step_ms)
        return (f"every pool option's decode step at its window is at or above the mean TPOT target {targets.mean_ms:g} ms "
                f"(the least, {best.window_step_ms:.1f} ms, is {best.gpu} at {best.window_tokens} tokens)")
    return None


def _stranded_class(data: FleetMilpData) -> str | None:
    """The first length class with traffic that no pool option can serve, in words: every option whose window holds
    it has no TTFT floor level under the SLO (its one-chunk prefill plus an iteration already exceeds it); None if
    every class has such an option (:func:`_holding`)."""
    usable = np.array([option.levels > 0 for option in data.pools])
    holds = _holding(data)
    for k in np.flatnonzero(data.mass > 0):
        if not (holds[k] & usable).any():
            fitting = [data.pools[j] for j in np.flatnonzero(holds[k])]
            where = ", ".join(f"{o.gpu} w{o.window_tokens}" for o in fitting[:4]) + (" ..." if len(fitting) > 4 else "")
            return (f"requests of {int(data.class_total_above[k]) + 1:,}-{int(data.class_total_to[k]):,} tokens fit only pool options "
                    f"({where}) whose P99 prefill floor exceeds the SLO of {data.problem.ttft_p99_ms:g} ms")
    return None


def _floor_tail(data: FleetMilpData) -> str | None:
    """The traffic whose prefill floor exceeds the SLO on every pool option that holds it, in words, when it is more
    than the 1 % tail a P99 allows (each pool may have 1 % of its traffic above its top floor level, so all pools
    together 1 % of all traffic; ``1 - q`` at the problem's percentile ``ttft_quantile``); None otherwise.  Per class the least such share over the usable options holding
    it, compressed service counted for the compressible share ``p_c`` of the band.  Always None under the fleetsim
    rule, whose floor is a pool mean: other traffic can dilute any class."""
    if data.problem.ttft_rule == "fleetsim":
        return None
    pc = data.problem.compressible_fraction
    usable = np.array([option.levels > 0 for option in data.pools])
    top = np.array([max(option.levels - 1, 0) for option in data.pools])
    options = np.arange(len(data.pools))
    plain = np.where(data.fits & usable, data.floor_measure[:, top], np.inf).min(axis=1)
    compressed = np.where(data.can_compress & usable, data.compressed_floor_measure[:, options, top], np.inf).min(axis=1)
    tail = (1 - pc) * plain + pc * np.minimum(plain, compressed) if pc > 0 else plain
    tail = np.where(np.isfinite(tail), tail, data.mass)  # a class no usable option holds is all tail
    total = float(data.mass.sum())
    if tail.sum() <= tail_probability(data.problem.ttft_quantile) * total * (1 + 1e-9):
        return None
    worst = int(np.argmax(tail))
    return (f"{100 * tail.sum() / total:.2f} % of the traffic has a prefill floor above the SLO of {data.problem.ttft_p99_ms:g} ms on "
            f"every pool option that holds it (most of it requests of {int(data.class_total_above[worst]) + 1:,}-"
            f"{int(data.class_total_to[worst]):,} tokens), more than the {100 * tail_probability(data.problem.ttft_quantile):g} % "
            f"a P{100 * data.problem.ttft_quantile:g} leaves out")


CHEAP_RESOLVE_S = 10.0
"""A MILP solved within this many seconds is solved again with one more pool allowed when it uses every pool it may
(:func:`pool_limit_note`): cheap enough to tell the user whether K decides the plan."""


def pool_limit_note(problem: FleetProblem, result: MilpResult, seconds: float) -> str:
    """When the plan opens all ``solve.max_pools`` pools (K) and more pool options exist, whether K decides it: the MILP
    solved again at K + 1 (when the first solve took at most :data:`CHEAP_RESOLVE_S`), and its cost if lower; empty when
    K does not bind, or under a budget (whose objective is the served share)."""
    k = problem.max_pools
    opened = sum(1 for pool in result.plan.pools if pool.instances > 0)
    options = len(prepare_milp_data(problem).pools) if opened == k else 0
    if opened < k or options <= k or FLEET_CONSTRAINTS.objective(problem.constraints) != COST:
        return ""
    if seconds > CHEAP_RESOLVE_S:
        return f"the plan uses all K = {k} pools allowed (solve.max_pools); K = {k + 1} was not tried (the solve took {seconds:,.0f} s)"
    try:
        wider = solve_milp(problem, max_pools=k + 1)
    except InfeasibleError:
        return ""
    cost, wider_cost = result.evaluation.cost_per_hour, wider.evaluation.cost_per_hour
    if wider_cost < cost * (1 - max(problem.mip_gap, 1e-9)):
        return (f"K = {k} (solve.max_pools) decides the plan: with K = {k + 1} the MILP finds ${wider_cost:,.2f}/h "
                f"({100 * (wider_cost / cost - 1):+.1f} %); set solve.max_pools: {k + 1}")
    if wider.report.status != OPTIMAL:
        return (f"the plan uses all K = {k} pools allowed (solve.max_pools); at K = {k + 1} the MILP found nothing cheaper, "
                f"without proof ({wider.report.summary})")
    return f"the plan uses all K = {k} pools allowed (solve.max_pools); K = {k + 1} is no cheaper"
