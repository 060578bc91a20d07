"""The pd_fleet MILP end to end: candidates, build, solve, certify the count bounds, extract, re-score.

``solve_pd(problem)`` sizes every pool's candidates (sizing.py: the aggregated options' least counts, the pairs'
frontiers), builds models/pd_fleet.py's MILP with the instance's constraints, loads every pool's cheapest candidate
as the MIP start (:func:`cheapest_per_pool`), solves it with HiGHS
(optfleet/solvers) and scores the plan with the one evaluator.  ``aggregated_only=True`` is the ``best_aggregated``
method: the same MILP over the aggregated candidates alone.

* **Count bounds.**  Each candidate's count is bounded by ``U`` (its largest frontier value, or ``n_a``, times
  :data:`SLACK`).  Without ``gpu_mix`` or ``fixed`` an optimal plan never holds more than its chosen point (extra
  instances only cost), so the bounds cut nothing off.  With them the driver certifies by cost, as the profiled kind
  does: a plan with more than ``U`` instances of a candidate costs at least ``(U + 1) c``, so when that is at least the
  optimum found for every candidate the plan is optimal; otherwise it re-solves with ``U = floor(cost / c)``, which
  holds every plan up to that cost (exact).  An infeasible model under those constraints is retried once at
  :data:`WIDEST` times the bounds; an infeasible verdict then holds for plans within those.
* **Infeasible instances** raise :class:`InfeasibleError` in words: the pool that no option serves and why each option
  fails, or the constraints whose removal makes the instance feasible.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyomo.environ as pyo

from optfleet.errors import InfeasibleError
from optfleet.models import pd_fleet as model_lib
from optfleet.models.pd_fleet import PdCandidates, PdSolution
from optfleet.problems.pd_fleet.constraints import PD_CONSTRAINTS, describe_constraint
from optfleet.problems.pd_fleet.evaluator import PdEvaluation, evaluate
from optfleet.problems.pd_fleet.plan import AggregatedPoolPlan, DisaggregatedPoolPlan, PdPlan, PoolPlan
from optfleet.problems.pd_fleet.problem import Config, PdProblem
from optfleet.problems.pd_fleet.sizing import (AggregatedCandidate, PairCandidate, aggregated_candidates,
                                               disaggregated_pool, pair_candidates)
from optfleet.solvers import SolveReport, solve

SLACK = 4  # count bound = SLACK x the candidate's largest least count, under gpu_mix or fixed (certified afterwards)
WIDEST = 64
FEASIBILITY_TIME_LIMIT_S = 10.0

_CANDIDATES: dict[tuple, tuple[PdProblem, tuple[AggregatedCandidate, ...], tuple[PairCandidate, ...]]] = {}
_CANDIDATES_KEPT = 16


@dataclass(frozen=True)
class PdSolveResult:
    """The MILP's plan, its evaluation, the solver's report (status, bound, gap) and the wall time of everything."""

    plan: PdPlan
    evaluation: PdEvaluation
    report: SolveReport
    seconds: float
    candidates: PdCandidates
    solution: PdSolution


def candidates(problem: PdProblem) -> tuple[tuple[AggregatedCandidate, ...], tuple[PairCandidate, ...]]:
    """Every pool's candidates (sizing.py), computed once for a problem's pools, options, links and SLO: they do not
    depend on the constraints, so ``problem.with_constraints(...)`` reuses them."""
    key = (id(problem.pools), _sizing_key(problem.aggregated), _sizing_key(problem.prefill), _sizing_key(problem.decode),
           problem.link_default_gb_per_s, tuple(sorted(problem.link_pairs_gb_per_s.items())), problem.ttft_p99_ms,
           problem.tpot_p99_ms, problem.rho_max)
    cached = _CANDIDATES.get(key)
    if cached is None:
        if len(_CANDIDATES) >= _CANDIDATES_KEPT:
            _CANDIDATES.clear()
        cached = _CANDIDATES[key] = (problem, tuple(aggregated_candidates(problem)), tuple(pair_candidates(problem)))
    return cached[1], cached[2]


def _sizing_key(options: tuple[Config, ...]) -> tuple:
    """What of ``options`` the sizing reads: each option's label (GPU, TP, budget or batch) and its engine -- not its
    price, so a problem with other prices (``optfleet explain``'s price curves) reuses the sizing.  The cache holds
    the problem it sized, so the engines' ids stay unique while their entries live."""
    return tuple((o.label, id(o.engine), id(getattr(o, "factory", None))) for o in options)


def solve_pd(problem: PdProblem, *, aggregated_only: bool = False, method: str = "milp", time_limit_s: float | None = None,
             mip_gap: float | None = None, customize: Callable[[pyo.ConcreteModel], None] | None = None) -> PdSolveResult:
    """Solve ``problem`` exactly (module docstring); ``customize(model)`` adds constraints of your own before the solve."""
    began = time.perf_counter()
    aggs, pairs = candidates(problem)
    if aggregated_only:
        pairs = ()
    _require_every_pool_served(problem, aggs, pairs, aggregated_only)
    time_limit_s = problem.time_limit_s if time_limit_s is None else time_limit_s
    mip_gap = problem.mip_gap if mip_gap is None else mip_gap
    may_need_more = customize is not None or any(not PD_CONSTRAINTS[c.kind].bound_proven for c in problem.constraints)
    slack = SLACK if may_need_more else 1
    bounds = (tuple(slack * a.min_instances for a in aggs), tuple(slack * max(max(xy) for xy in p.frontier) for p in pairs))
    widened = False
    while True:
        cands = PdCandidates(aggs, pairs, *bounds)
        model = _model(problem, cands, customize)
        model_lib.warm_start(model, cheapest_per_pool(problem, cands))
        report = solve(model, time_limit=time_limit_s, mip_gap=mip_gap, solver=problem.solver, warm_start=True)
        if not report.has_solution:
            if report.status.startswith("infeasible") and may_need_more and not widened:
                bounds, widened = (tuple(WIDEST * u for u in bounds[0]), tuple(WIDEST * u for u in bounds[1])), True
                continue
            if report.status.startswith("infeasible"):
                raise InfeasibleError(f"no feasible plan: {_explain(problem, cands, customize)}")
            raise InfeasibleError(f"no plan found: {report.summary}")
        wider = _uncertified(problem, cands, float(report.objective)) if may_need_more else None
        if wider is None:
            break
        bounds = wider
    solution = model_lib.extract(model)
    plan = to_plan(problem, cands, solution, method)
    evaluation = evaluate(problem, plan)
    if not evaluation.feasible:
        raise RuntimeError(f"internal error: the MILP's plan fails the evaluator: {'; '.join(evaluation.violations)}")
    return PdSolveResult(plan, evaluation, report, time.perf_counter() - began, cands, solution)


def cheapest_per_pool(problem: PdProblem, cands: PdCandidates) -> PdSolution:
    """The MIP start: every pool's cheapest candidate at its least counts, constraints ignored (optimal when no
    constraint couples the pools; HiGHS drops a start that breaks one)."""
    agg_costs = [(problem.aggregated[a.option].cost_per_instance_hour * a.min_instances, a.pool, ("aggregated", i, a.min_instances))
                 for i, a in enumerate(cands.aggregated)]
    pair_costs = [(problem.prefill[p.prefill].cost_per_instance_hour * x + problem.decode[p.decode].cost_per_instance_hour * y, p.pool,
                   ("pair", d, x, y)) for d, p in enumerate(cands.pairs) for x, y in p.frontier]
    choices: dict[int, tuple] = {}
    for cost, pool, choice in sorted(agg_costs + pair_costs, key=lambda item: item[0], reverse=True):
        choices[pool] = choice  # the cheapest is written last
    return PdSolution(choices)


def solved_model(problem: PdProblem, result: PdSolveResult) -> pyo.ConcreteModel:
    """The MILP of ``result`` (its candidates and count bounds, the instance's constraints) with its solution loaded,
    for sensitivity (optfleet/problems/pd_fleet/explain.py); a ``customize`` hook of the solve is not replayed."""
    model = _model(problem, result.candidates, None)
    model_lib.warm_start(model, result.solution)
    return model


def _model(problem: PdProblem, cands: PdCandidates, customize, skip: int | None = None) -> pyo.ConcreteModel:
    model = model_lib.build(problem, cands)
    PD_CONSTRAINTS.declare_all(model, problem.constraints, skip=skip)
    if customize is not None:
        customize(model)
    return model


def _prices(problem: PdProblem, cands: PdCandidates) -> tuple[list[float], list[float]]:
    """Per aggregated candidate its instance price; per pair the cheaper of its two roles' prices."""
    agg = [problem.aggregated[a.option].cost_per_instance_hour for a in cands.aggregated]
    pair = [min(problem.prefill[p.prefill].cost_per_instance_hour, problem.decode[p.decode].cost_per_instance_hour) for p in cands.pairs]
    return agg, pair


def _uncertified(problem: PdProblem, cands: PdCandidates, cost: float) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """None when no plan beyond the count bounds can cost less than ``cost``; else bounds that hold every such plan."""
    agg_price, pair_price = _prices(problem, cands)
    bounds = (cands.aggregated_bound, cands.pair_bound)
    prices = (agg_price, pair_price)
    if all(c * (u + 1) >= cost for b, ps in zip(bounds, prices) for u, c in zip(b, ps)):
        return None
    return tuple(tuple(max(u, math.floor(cost / c)) for u, c in zip(b, ps)) for b, ps in zip(bounds, prices))  # type: ignore[return-value]


def to_plan(problem: PdProblem, cands: PdCandidates, solution: PdSolution, method: str) -> PdPlan:
    """The plan of a solution (candidate indices -> option labels)."""
    pools: list[PoolPlan] = [None] * len(problem.pools)
    for pool, choice in solution.choices.items():
        if choice[0] == "aggregated":
            _, a, n = choice
            pools[pool] = AggregatedPoolPlan(problem.aggregated[cands.aggregated[a].option].label, n)
        else:
            _, d, x, y = choice
            pair = cands.pairs[d]
            pools[pool] = DisaggregatedPoolPlan(problem.prefill[pair.prefill].label, x, problem.decode[pair.decode].label, y)
    return PdPlan(method, tuple(pools))


def _require_every_pool_served(problem: PdProblem, aggs, pairs, aggregated_only: bool) -> None:
    """InfeasibleError naming the first busy pool no candidate serves, and why each option fails."""
    for pool in problem.busy_pools:
        if any(a.pool == pool.index for a in aggs) or any(p.pool == pool.index for p in pairs):
            continue
        reasons = []
        for option in problem.aggregated:
            reasons.append(f"{option.label}: " + ("holds no sequence of the window" if option.pool(pool.window_tokens) is None else
                                                  "no instance count meets P99 TTFT, P99 TPOT and rho_max under the batching model"))
        if not aggregated_only:
            for prefill in problem.prefill:
                for decode in problem.decode:
                    model = disaggregated_pool(problem, pool, prefill, decode)
                    idle = model.decode_state(math.inf)
                    why = model.decode_violations(idle) or model.prefill_violations(1_000_000, idle)
                    reasons.append(f"{prefill.label} + {decode.label}: even with idle servers, {'; '.join(why)}")
        raise InfeasibleError(f"{pool.label} ({pool.rate_rps:.4g} req/s) has no option that meets the SLO: " + "; ".join(reasons))


def _explain(problem: PdProblem, cands: PdCandidates, customize) -> str:
    """The constraints whose removal alone makes the instance feasible (or all of them together)."""
    def feasible(skip: int | None, hook) -> bool:
        model = _model(problem, cands, hook, skip)
        return solve(model, time_limit=FEASIBILITY_TIME_LIMIT_S, mip_gap=1.0, solver=problem.solver).has_solution

    if customize is not None and feasible(None, None):
        return "the constraints added in Python (customize) exclude every plan; without them the instance is feasible"
    culprits = [describe_constraint(i, c).removesuffix(")") + _whole_instances(problem, c) + ")"
                for i, c in enumerate(problem.constraints) if feasible(i, customize)]
    if culprits:
        return (f"every pool has options that meet the SLO, but {' or '.join(culprits)} excludes every plan (without "
                f"{'it' if len(culprits) == 1 else 'any one of them'} the instance is feasible)")
    return "every pool has options that meet the SLO, but the constraints together exclude every plan: " + \
        "; ".join(describe_constraint(i, c) for i, c in enumerate(problem.constraints))


def _whole_instances(problem: PdProblem, constraint) -> str:
    """Why a ``fixed`` count no plan can reach is unreachable: every option of its GPU type holds a multiple of some
    GPUs (the TP degrees' gcd), and the count is not one; "" otherwise."""
    if constraint.kind != "fixed" or constraint.gpus == 0:
        return ""
    step = math.gcd(*(o.tp for o in (*problem.aggregated, *problem.prefill, *problem.decode) if o.gpu == constraint.gpu))
    if step > 1 and constraint.gpus % step:
        return f"; every {constraint.gpu} option holds a multiple of {step} GPUs, and {constraint.gpus:,} is not one"
    return ""
