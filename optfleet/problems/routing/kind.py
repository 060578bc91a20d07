"""The routing kind (token-budget pool routing replayed on a fleet plan): registry entry and runs.

Two questions, each a group of rows:

* **routing**: where each request of the stream is served.  Rows: the calibrator variants ``paper``, ``router``
  and ``static`` (calibrate, dispatch, spill: replay.py) and ``hindsight`` (exact.py: the placement with the
  true lengths known, least busy GPU instances within the pools' capacity).  Every placement is scored by the
  one evaluator (evaluator.py); objective = busy GPU instances; feasible = no capacity window overloaded.  The
  bound is the hindsight model's: no router, online or not, places the stream with less work within the same
  capacity rows (a mis-routed request is served long after its rejection, one of the model's options).
  Under ``exact.objective: overflow`` the objective is the work above the capacity windows (slot-seconds) and
  every placement is feasible; the hindsight model then bounds every router's overflow.
* **design**: the routing threshold, window and C&R band (design.py).  Rows: ``design_plan`` (the plan's own
  window, ``B = C_s``, the plan's gamma and GPU configurations) and ``design`` (the MILP over the grid and the fleet's
  GPU configurations, under its constraints: design_milp.py); both scored by the design evaluator; objective = fleet
  $/h, each pool at the fleet evaluator's least instance count (or the MILP's count); feasible = both pools can meet
  the SLO, the mis-route probability <= epsilon and the fleet instance's constraints hold.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from optfleet.errors import InfeasibleError
from optfleet.numbers import significant
from optfleet.problems.routing.problem import RoutingProblem, prepare
from optfleet.problems.routing.schema import RoutingInstanceSpec
from optfleet.progress import Progress
from optfleet.registry import SOLVE_BLOCK_OVERRIDES, ProblemKind, lazy
from optfleet.results import MINIMISE, MethodResult, Reference, no_plan

REPORT = "optfleet.problems.routing.report"
ROUTERS = ("paper", "router", "static")
ROUTING_METHODS = (*ROUTERS, "hindsight")
DESIGN_METHODS = ("design_plan", "design")
SPILL_METHOD = "design_spill"
EXACT = ("hindsight", "design")
BUSY = "instances"  # the unit of the routing objective: busy GPU instances (the work over the span)
OVERFLOW = "slot-s"  # the unit of the overflow objective: slot-seconds of offered load above capacity


def methods(problem: RoutingProblem) -> tuple[str, ...]:
    return (*ROUTING_METHODS, *DESIGN_METHODS, SPILL_METHOD)


def gap_methods(problem: RoutingProblem) -> tuple[str, ...]:
    """Every method; the spill design (a search by replay) only when the instance lists ``design.queue_limits``."""
    return tuple(m for m in methods(problem) if m != SPILL_METHOD or problem.spec.design.queue_limits is not None)


def default_method(problem: RoutingProblem) -> str:
    """``solve.method``, else the paper's calibrator."""
    return problem.spec.solve.method or "paper"


def solve_methods(problem: RoutingProblem, chosen: str) -> tuple[str, ...]:
    """The chosen method's question's exact method (its bound), beside the chosen one."""
    if chosen == SPILL_METHOD:
        return ()
    exact = "design" if chosen in DESIGN_METHODS else "hindsight"
    return () if chosen == exact else (exact,)


def run(problem: RoutingProblem, method: str, progress: Progress) -> list[MethodResult]:
    """One method's placement or design, scored by its question's evaluator (module docstring)."""
    progress(method, 0, 1)
    if method in DESIGN_METHODS:
        return [_run_design(problem, method)]
    if method == SPILL_METHOD:
        return [_run_spill(problem)]
    from optfleet.problems.routing.evaluator import evaluate
    from optfleet.problems.routing.replay import replay_router

    group = (("question", "routing"),)
    start = time.perf_counter()
    report = None
    if method == "hindsight":
        from optfleet.problems.routing.exact import hindsight

        try:
            routing, report = hindsight(problem)
        except InfeasibleError as exc:
            return [no_plan(method, time.perf_counter() - start, str(exc), objective_unit=BUSY, group=group)]
    else:
        routing = replay_router(problem, problem.calibrators[method])
    seconds = time.perf_counter() - start
    e = evaluate(problem, routing)
    note = "" if e.capacity_ok else f"offered load above rho_max x slots in {e.overloaded_windows[0]} short / {e.overloaded_windows[1]} long windows"
    if problem.spec.exact.objective == "overflow":
        return [MethodResult(method, routing, e, seconds, objective=e.overflow_slot_s, objective_unit=OVERFLOW, sense=MINIMISE, feasible=True,
                             report=report, note=note, group=group, columns=routing_columns(e))]
    return [MethodResult(method, routing, e, seconds, objective=e.busy_instances, objective_unit=BUSY, sense=MINIMISE, feasible=e.capacity_ok,
                         report=report, note=note, group=group, columns=routing_columns(e))]


def routing_columns(e: Any) -> dict[str, Any]:
    """The routing question's own columns (evaluator.RoutingEvaluation)."""
    columns: dict[str, Any] = {"misroutes": e.misroutes, "misroute_pct": 100.0 * e.misroutes / e.requests, "wasted_long": e.wasted_long,
                               "spills": e.spills, "compressed": e.compressed, "refused": e.refused, "short_share_pct": 100.0 * e.short_share,
                               "overflow_slot_s": e.overflow_slot_s}
    for tag, pool in zip(("short", "long"), e.pools, strict=True):
        columns.update({f"{tag}_requests": pool.requests, f"{tag}_ttft_p50_ms": pool.ttft_p50_ms, f"{tag}_ttft_p99_ms": pool.ttft_p99_ms,
                        f"{tag}_tpot_p50_ms": pool.tpot_p50_ms, f"{tag}_tpot_p99_ms": pool.tpot_p99_ms, f"{tag}_instances": pool.instances,
                        f"{tag}_needed_instances": pool.needed_instances})
    columns.update(plan_per_hour=e.plan_cost_per_hour, needed_per_hour=e.needed_cost_per_hour)
    for name, ratio in e.ratio_at_50.items():
        columns[f"c_hat_50_{name}"] = ratio
    return columns


def _run_design(problem: RoutingProblem, method: str) -> MethodResult:
    from optfleet.problems.routing.design import evaluate_design, plan_design

    group = (("question", "design"),)
    start = time.perf_counter()
    report = None
    if method == "design":
        from optfleet.problems.routing.design_milp import solve_design

        try:
            candidate, report = solve_design(problem)
        except InfeasibleError as exc:
            return no_plan(method, time.perf_counter() - start, str(exc), objective_unit="$/h", group=group)
    else:
        candidate = plan_design(problem)
    seconds = time.perf_counter() - start
    e = evaluate_design(problem, candidate)
    eps = problem.spec.design.epsilon
    reasons = [] if min(e.fewest) >= 0 else [f"a pool cannot meet the P99 TTFT SLO of {problem.fleet.ttft_p99_ms:g} ms at any size"]
    if e.misroute_probability > eps + 1e-12:
        reasons.append(f"mis-route probability {significant(100 * e.misroute_probability, 3)} % > epsilon {significant(100 * eps, 3)} %")
    reasons.extend(e.violations)
    return MethodResult(method, candidate, e, seconds, objective=e.cost_per_hour if np.isfinite(e.cost_per_hour) else None, objective_unit="$/h",
                        sense=MINIMISE, feasible=e.feasible,
                        report=report, note="; ".join(reasons), group=group, columns=design_columns(e))


def design_columns(e: Any) -> dict[str, Any]:
    """The design question's own columns (design.DesignEvaluation)."""
    c = e.candidate
    return {"short_window_tokens": c.short_window_tokens, "b_short_tokens": c.b_short_tokens, "gamma": c.gamma,
            "misroute_pct": 100.0 * e.misroute_probability, "short_share_pct": 100.0 * e.short_share, "short_gpu": c.short_gpu,
            "short_instances": e.short_instances, "long_gpu": c.long_gpu, "long_instances": e.long_instances}


def _run_spill(problem: RoutingProblem) -> MethodResult:
    """The threshold design's rule and GPU configurations, then the queue limit and counts searched by replay (spill_design.py)."""
    from optfleet.problems.routing.design_milp import solve_design
    from optfleet.problems.routing.spill_design import GROWTH, SpillSearch, design_spill

    group = (("question", "spill"),)
    start = time.perf_counter()
    try:
        design, report = solve_design(problem)
    except InfeasibleError as exc:
        return no_plan(SPILL_METHOD, time.perf_counter() - start, f"no threshold design to spill from: {exc}", objective_unit="$/h", group=group)
    best, searched = design_spill(problem, design)
    seconds = time.perf_counter() - start
    tried = "; ".join(f"{_limit_text(o.spill.queue_limit)}: " + (f"${o.cost_per_hour:,.2f}/h {o.spill.instances}" if o.meets
                                                                 else f"none up to {GROWTH}x the static counts (at {o.spill.instances}: {'; '.join(o.reasons)})")
                      for o in searched)
    if best is None:
        return no_plan(SPILL_METHOD, seconds, f"no queue limit's fleet meets the SLO, the utilisation cap, epsilon and the constraints by replay: {tried}",
                       objective_unit="$/h", group=group)
    e = best.evaluation
    columns = {"queue_limit": best.spill.queue_limit, "spill_rule": _limit_text(best.spill.queue_limit), **routing_columns(e), "short_gpu": best.spill.design.short_gpu,
               "long_gpu": best.spill.design.long_gpu, "static_per_hour": report.objective}
    return MethodResult(SPILL_METHOD, SpillSearch(best, tuple(searched)), e, seconds, objective=best.cost_per_hour, objective_unit="$/h",
                        sense=MINIMISE, feasible=True, note=f"a search by replay, no bound; queue limits tried: {tried}", group=group, columns=columns)


def _limit_text(limit: int | None) -> str:
    return "no spill" if limit is None else f"queue > {limit}"


def reference(problem: RoutingProblem, results: Sequence[MethodResult]) -> Reference:
    """The question's exact method's bound (module docstring); the spill question has none."""
    if any(r.method == SPILL_METHOD for r in results):
        return Reference(None, "no bound: the spill limit and the counts are searched by replay (spill_design.py), not modelled")
    exact = next((r for r in results if r.method in EXACT), None)
    if exact is None:
        return Reference(None, "no bound: the question's exact method did not run")
    if exact.report is None or exact.report.bound is None:
        return Reference(None, f"no bound: {exact.method} found none ({exact.note})")
    proven = exact.report.status == "optimal"
    overflow = problem.spec.exact.objective == "overflow"
    what = ("the hindsight placement's least work above the pools' capacity (slot-seconds)" if exact.method == "hindsight" and overflow
            else "the hindsight placement's fewest busy GPU instances (its work over the span) within the pools' capacity"
            if exact.method == "hindsight"
            else "the least-cost design over the grid and the GPU configurations meeting epsilon and the constraints")
    return Reference(exact.report.bound, f"{exact.method}: {what}" + ("" if proven else " (not proven optimal: its lower bound)"))


def result_json(problem: RoutingProblem, result: MethodResult) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if result.report is not None:
        body["solver"] = result.report.to_dict()
    e = result.evaluation
    if e is not None and hasattr(e, "calibration_error"):
        body["calibration_error"] = {name: {str(n): v for n, v in errors.items()} for name, errors in e.calibration_error.items()}
        body["misroute_rate_by_category"] = dict(e.misroute_rate_by_category)
    if e is not None and result.group != (("question", "routing"),):
        body["design"] = result.plan.to_dict()
    return body


def facts(problem: RoutingProblem) -> dict[str, Any]:
    s = problem.stream
    return {
        "fleet_instance": problem.fleet.name, "plan": problem.plan.to_dict(), "requests": len(s), "span_s": s.span_s,
        "categories": {name: float(r) for name, r in zip(s.names, s.true_ratio, strict=True)},
        "compressible": [s.names[k] for k in problem.compressible],
        "dispatcher": {"b_short_tokens": problem.rule.b_short_tokens, "short_window_tokens": problem.rule.short_window_tokens,
                       "compress_gamma": problem.rule.compress_gamma, "queue_limit": problem.spill.queue_limit,
                       "pressure_limit": problem.spill.pressure_limit},
        "replay_mode": problem.spec.replay.mode, "rho_max": problem.rho_max,
    }


KIND = ProblemKind(
    name="routing",
    summary="token-budget pool routing: calibrator variants and dispatcher replayed on a fleet plan, against hindsight routing "
            "and an exact threshold design",
    schema=RoutingInstanceSpec,
    prepare=prepare,
    methods=methods,
    default_method=default_method,
    solve_methods=solve_methods,
    gap_methods=gap_methods,
    run=run,
    reference=reference,
    describe=lazy(REPORT, "describe"),
    render_solve=lazy(REPORT, "render_solve"),
    render_gap=lazy(REPORT, "render_gap"),
    facts=facts,
    result_json=result_json,
    overrides=SOLVE_BLOCK_OVERRIDES,
    explain=lazy("optfleet.problems.routing.explain", "explainer"),
)
