"""Sensitivity of the placement kind's hindsight MILP (``optfleet explain``): queueing rows, prefill prices, curves.

The plan explained is the ``hindsight_milp`` method's placement (exact.py, models/placement.py): which server
prefills each request, knowing every arrival, in the MILP's service model (FCFS prefill at ``alpha_k`` ms per
uncached token, generous prefix reuse, no decode).  Its objective is the model's mean TTFT, or mean TTFT excess
over ``slo.ttft_ms`` (``solve.objective``), in ms; its bound is a lower bound on the simulator's best placement.  A
note gives the MILP's status, bound and gap and the simulator's score of the placement (evaluate.py, the kind's one
evaluator); the curves and alternatives give the MILP's objective.  The look-ahead MILPs (no bound) and the
relaxation bound (no placement) are not explained; a trace the hindsight MILP does not run on is refused (exit 2,
naming ``solve.max_milp_requests`` or ``solve.time_limit_s``).

* **binding**, read off the fixed-integer LP below: per server, the FCFS rows of the pairs it serves (binding: the
  request starts the moment its predecessor's prefill ends, i.e. it queued; slack: the server's idle gap, ms), the
  arrival bounds ``s[r] >= a[r]`` (binding: started on arrival; slack: the wait, ms), the reuse rows of its
  requests (binding: the request reuses its group's prompt or its conversation), and with ``ttft_excess`` the
  excess rows (binding: the request's TTFT is above the SLO; slack: ms under the SLO).  The MILP has no KV-block,
  batch-size or prefill-budget rows (``kv_capacity_blocks``, ``max_running_seqs``, ``prefill_budget_tokens``: the
  service model leaves them out so that its optimum bounds the simulator from below): they bind only in the
  simulator and are not priced here.
* **shadow prices**, of the LP left when the placement ``x`` is fixed (optfleet/solvers/sensitivity.py).  With
  ``x`` fixed the FCFS rows of two requests on one server lose their big-M term (``M (2 - 1 - 1) = 0``) and the
  rows of requests on two servers are slack by ``M`` or ``2M``: the LP is the Lindley recursion of that placement
  (``models.placement.model_ttft_ms``), and its duals are its derivatives, **for the chosen placement only** (a
  change large enough moves requests to other servers: see the curves and break-even).  Row ``prefill[r]``
  (``c_r = s_r + work_r``) has the dual

      d objective / d (prefill ms of request r)  =  (1 + the requests queued behind r, until its server idles) / n

  for ``total_ttft`` (with ``ttft_excess``: counting only those above the SLO), with the HiGHS range of extra
  prefill over which that queue stays the same.  Per server type ``T`` (servers of one ``name``):

      d objective / d alpha_T  =  sum_{r on a server of T} dual_r x uncached_tokens_r      [ms per (ms/token)]

  The big-M rows of pairs on two servers carry no price (slack), and the objective has no prices, so there is no
  price-ranges table.
* **parameters**: ``rate_growth`` (arrival times divided by it: the same trace, denser; from 1e-6, below which the
  stretched arrival times were refused by HiGHS or solved as infeasible), the prefill speed
  ``prefill_ms_per_token:<server name>`` and, with ``ttft_excess``, ``slo_ttft_ms``.  Each point is a hindsight MILP
  solve within ``solve.time_limit_s`` (its status is shown).  A ``rate_growth`` curve keeps one model
  (:class:`ArrivalSession`): the rows that do not read the arrival times are built once, the others at each point;
  HiGHS solves each point from scratch (a MIP start from the previous point's placement did not shorten its runs on
  tiny.yaml: they are spent proving the optimum, not finding it).  No default curve or break-even.
* **alternatives**: one server of a name fewer, and no server of a name (when there are two names or more), each
  solved by the hindsight MILP.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from optfleet.errors import InfeasibleError, InputError, NoPlanInTimeError
from optfleet.models.placement import build, rearrive
from optfleet.problems.placement.evaluate import evaluate
from optfleet.problems.placement.exact import build_clock, hindsight, hindsight_refusal, placement_data, solve_built
from optfleet.problems.placement.kind import objective_unit
from optfleet.problems.placement.problem import PlacementProblem
from optfleet.problems.placement.schema import MAX_PREFILL_MS_PER_TOKEN
from optfleet.sensitivity.explainer import MAX_RATE_GROWTH, Analysis, Explainer, Parameter, Solved, plan_digest
from optfleet.solvers.report import TIME_LIMIT, SolveReport
from optfleet.solvers.sensitivity import LpSensitivity, fixed_lp_sensitivity, row_binds, row_slack

SHOWN_ROWS = 10  # requests whose prefill price is listed one by one (the largest first)
DUAL_ZERO = 1e-9
SHADOW_COLUMNS = ["where", "constraint", "shadow_price", "unit", "bound", "bound_low", "bound_high", "row"]
BINDING_COLUMNS = ["server", "rows", "count", "binding", "least_slack", "slack_unit"]


def explainer(problem: PlacementProblem) -> Explainer:
    """The placement kind's sensitivity hooks (optfleet/sensitivity/explainer.py); an InputError naming the limit when
    the hindsight MILP does not run on this instance."""
    refusal = hindsight_refusal(problem)
    if refusal is not None:
        field = "solve.max_milp_requests" if len(problem.requests) > problem.solve.max_milp_requests else "solve.time_limit_s"
        limit = problem.solve.max_milp_requests if field == "solve.max_milp_requests" else problem.solve.time_limit_s
        raise InputError(field, limit, f"explain needs the hindsight MILP, which does not run on this instance: {refusal}")
    return Explainer(objective_unit(problem), solve, analyse, parameters(problem), alternatives, session=session)


def server_names(problem: PlacementProblem) -> list[str]:
    """The servers' names, each once, in the instance's order."""
    return list(dict.fromkeys(e.name for e in problem.engines))


def solve(problem: PlacementProblem) -> Solved:
    """The hindsight MILP's placement: its model objective, status and a label (requests per server, a digest)."""
    return solved_by(problem, lambda: hindsight(problem))


def solved_by(problem: PlacementProblem, placed: Callable[[], tuple[np.ndarray, SolveReport]]) -> Solved:
    """What :func:`solve` gives for the placement and report ``placed()`` returns (its errors: no placement)."""
    try:
        placement, report = placed()
    except NoPlanInTimeError:
        return Solved(None, TIME_LIMIT, "no placement in the time limit")
    except InfeasibleError as exc:
        return Solved(None, "infeasible", str(exc))
    counts = " + ".join(f"{int((placement == k).sum())} on {e.name}" for k, e in enumerate(problem.engines))
    return Solved(report.objective, report.status, f"{counts} #{plan_digest(placement)}", (placement, report))


def session(problem: PlacementProblem, parameter: str) -> ArrivalSession | None:
    """The warm path of a ``rate_growth`` curve or break-even (:class:`ArrivalSession`); None for the other
    parameters (each point built and solved)."""
    return ArrivalSession() if parameter == "rate_growth" else None


class ArrivalSession:
    """The hindsight MILP at one ``rate_growth`` after another in one Pyomo model (module docstring): the growth
    divides the arrival times only, so the assignment, reuse and prefill rows, which do not read them, are built once
    and each point declares again the rest (models.placement.rearrive), in the order a build gives, so each point's
    HiGHS run is that of a fresh build.  Each point is built and solved under ``solve.time_limit_s``; a build
    stopped by it leaves no model (the next point builds one)."""

    def __init__(self) -> None:
        self.model: pyo.ConcreteModel | None = None

    def __call__(self, problem: PlacementProblem) -> Solved:
        return solved_by(problem, lambda: self.placed(problem))

    def placed(self, problem: PlacementProblem) -> tuple[np.ndarray, SolveReport]:
        """The hindsight placement and report of ``problem`` (this session's instance at another ``rate_growth``)."""
        data, time_limit_s = placement_data(problem, 0, len(problem.requests)), problem.solve.time_limit_s
        clock = build_clock(time_limit_s)
        model, self.model = self.model, None
        if model is None:
            model = build(data, clock)
        else:
            rearrive(model, data, clock)
        self.model = model
        return solve_built(problem, model, data, time_limit_s, clock)


def servers_named(problem: PlacementProblem, name: str) -> np.ndarray:
    """The indices of the servers called ``name``."""
    return np.array([k for k, e in enumerate(problem.engines) if e.name == name], dtype=np.int64)


def parameters(problem: PlacementProblem) -> dict[str, Parameter]:
    """``rate_growth``, ``prefill_ms_per_token:<server name>`` and, with ``ttft_excess``, ``slo_ttft_ms`` (module docstring)."""
    found = {"rate_growth": Parameter("rate_growth", "x", "x the arrival rate (arrival times divided by it)", 1.0, grown,
                                        low=1.0 / MAX_RATE_GROWTH, high=MAX_RATE_GROWTH, low_included=True)}
    for name in server_names(problem):
        key = f"prefill_ms_per_token:{name}"
        found[key] = Parameter(key, "ms/token", f"prefill time per uncached token of the {name} servers",
                               problem.engines[int(servers_named(problem, name)[0])].prefill_ms_per_token,
                               lambda p, v, name=name: with_prefill(p, name, v), 0.0, MAX_PREFILL_MS_PER_TOKEN, open_interval=False)
    if problem.objective == "ttft_excess":
        found["slo_ttft_ms"] = Parameter("slo_ttft_ms", "ms", "the TTFT SLO the excess is measured from (slo.ttft_ms)", float(problem.slo.ttft_ms),
                                         lambda p, v: replace(p, slo=p.slo.model_copy(update={"ttft_ms": v})))
    return found


def grown(problem: PlacementProblem, growth: float) -> PlacementProblem:
    """The same requests arriving ``growth`` times as fast (arrival times and step rates scaled)."""
    q = problem.requests
    return replace(problem, requests=replace(q, arrival_ms=q.arrival_ms / growth, step_rates_rps=tuple(r * growth for r in q.step_rates_rps)))


def with_prefill(problem: PlacementProblem, name: str, ms_per_token: float) -> PlacementProblem:
    """The servers called ``name`` prefilling at ``ms_per_token``."""
    return replace(problem, engines=tuple(replace(e, prefill_ms_per_token=ms_per_token) if e.name == name else e for e in problem.engines))


def without_server(problem: PlacementProblem, drop: np.ndarray) -> PlacementProblem:
    """The instance without the servers ``drop`` (indices); the requests, and their blocks ``total_blocks``, stay."""
    keep = [k for k in range(len(problem.engines)) if k not in set(drop.tolist())]
    return replace(problem, engines=tuple(problem.engines[k] for k in keep))


def alternatives(problem: PlacementProblem, solved: Solved) -> list[tuple[str, PlacementProblem]]:
    """One server of a name fewer (its last) where that leaves one of the name, and with two names or more no server
    of each name; nothing for a single server."""
    if len(problem.engines) < 2:
        return []
    names = server_names(problem)
    found = [(f"one {name} server fewer", without_server(problem, servers_named(problem, name)[-1:])) for name in names
             if len(servers_named(problem, name)) > 1]
    if len(names) > 1:
        found += [(f"no {name} server", without_server(problem, servers_named(problem, name))) for name in names]
    return found


def fixed_placement_lp(problem: PlacementProblem, placement: np.ndarray) -> tuple[pyo.ConcreteModel, LpSensitivity]:
    """The hindsight MILP of ``problem`` with ``x`` set to ``placement`` and its fixed-integer LP solved (module
    docstring): the model holds the LP's values."""
    data = placement_data(problem, 0, len(problem.requests))
    model = build(data)
    for (r, k), var in model.x.items():
        var.set_value(float(placement[r] == k))
    return model, fixed_lp_sensitivity(model)


def prefill_price_per_alpha(problem: PlacementProblem, model: pyo.ConcreteModel, placement: np.ndarray, lp: LpSensitivity) -> dict[str, float]:
    """``d objective / d alpha_T`` per server name ``T`` for the fixed placement: each prefill row's dual times its
    request's uncached tokens ``P_r - G_r y_rk - (H_r - G_r) z_rk`` (read off the LP's values), summed over the
    requests on servers of ``T`` (module docstring)."""
    data = placement_data(problem, 0, len(problem.requests))
    uncached = np.array([data.prompt_tokens[r] - data.group_tokens[r] * pyo.value(model.y[r, k])
                         - (data.reusable_tokens[r] - data.group_tokens[r]) * pyo.value(model.z[r, k]) for r, k in enumerate(placement.tolist())])
    duals = np.array([lp.row(f"prefill[{r}]").dual for r in range(data.n)])
    return {name: float((duals * uncached)[np.isin(placement, servers_named(problem, name))].sum()) for name in server_names(problem)}


def analyse(problem: PlacementProblem, solved: Solved) -> Analysis:
    placement, report = solved.detail
    model, lp = fixed_placement_lp(problem, placement)
    bound = "no bound" if report.bound is None else f"bound {report.bound:,.4g}, gap {100 * (report.gap or 0):.3g} %"
    simulated = evaluate(problem, placement).objective_ms
    notes = [f"the hindsight MILP's objective is in its service model (FCFS prefill, generous reuse, no decode): {report.status}, {bound}; "
             f"its bound is a lower bound on the simulator's best placement; the simulator (the kind's evaluator) scores this placement "
             f"{simulated:,.4g} {objective_unit(problem)}; the curves and alternatives give the MILP's objective",
             "the MILP has no KV-block, batch-size or prefill-budget rows (the simulator applies them): none of them binds or is priced here"]
    duals = pd.DataFrame(columns=SHADOW_COLUMNS)
    if lp.report.objective is None:
        notes.append(f"the fixed-placement LP did not solve ({lp.report.status}): no shadow prices")
    else:
        duals = dual_frame(problem, model, placement, lp)
        notes.append(f"shadow prices hold for the chosen placement only (x fixed: the LP is its Lindley recursion, value {lp.report.objective:,.4g} "
                     f"ms); {len(queue_heads(lp, len(placement)))} requests hold others' prefill up (dual above 1/n); the big-M rows of requests "
                     "on two servers are slack and carry no price, and the objective has no prices to range")
    return Analysis({"binding": binding_frame(problem, model, placement), "shadow_prices": duals}, tuple(notes))


def binding_frame(problem: PlacementProblem, model: pyo.ConcreteModel, placement: np.ndarray) -> pd.DataFrame:
    """Per server, the row families of its requests with how many bind and the least slack (module docstring)."""
    records = []
    for k, engine in enumerate(problem.engines):
        mine = [int(r) for r in np.flatnonzero(placement == k)]
        where = f"{engine.name} #{k}"
        families = [
            ("fcfs: starts when the request before it ends",
             [model.fcfs[q, r, k] for q, r in model.PAIRS if placement[q] == k and placement[r] == k], "ms idle"),
            ("group_held: y <= x (binds: reuses its group's prompt)", [model.group_held[r, k] for r in mine], ""),
            ("session_held: z <= y, of those (binds: and its conversation)",
             [model.session_held[r, k] for r in mine if pyo.value(model.y[r, k]) > 0.5], ""),
        ]
        if hasattr(model, "excess"):
            families.append(("excess: TTFT above slo.ttft_ms", [model.excess[r] for r in mine], "ms under SLO"))
        for meaning, rows, unit in families:
            if rows:
                records.append({"server": where, "rows": meaning, "count": len(rows), "binding": sum(row_binds(row) for row in rows),
                                "least_slack": min(row_slack(row) for row in rows), "slack_unit": unit})
        if mine:
            waits = np.array([pyo.value(model.s[r]) - float(problem.requests.arrival_ms[r]) for r in mine])
            records.append({"server": where, "rows": "arrival: s[r] >= a[r] (starts on arrival)", "count": len(mine),
                            "binding": int((waits <= 1e-6 * np.maximum(1.0, problem.requests.arrival_ms[mine])).sum()),
                            "least_slack": float(max(waits.min(), 0.0)), "slack_unit": "ms wait"})
    return pd.DataFrame(records, columns=BINDING_COLUMNS)


def queue_heads(lp: LpSensitivity, n: int) -> list:
    """The prefill rows whose dual exceeds ``1/n`` (more TTFTs than the request's own move with its prefill: others
    queue behind it), the largest first."""
    rows = [row for row in lp.rows if row.name.startswith("prefill[") and row.dual * n > 1 + DUAL_ZERO * n]
    return sorted(rows, key=lambda row: -row.dual)


def dual_frame(problem: PlacementProblem, model: pyo.ConcreteModel, placement: np.ndarray, lp: LpSensitivity) -> pd.DataFrame:
    """The price of each server name's prefill speed, then the requests whose extra prefill costs the most."""
    unit = objective_unit(problem)
    records = [{"where": f"{name} servers", "constraint": "prefill_ms_per_token (every prefill row of their requests)", "shadow_price": price,
                "unit": f"{unit} per ms/token", "bound": problem.engines[int(servers_named(problem, name)[0])].prefill_ms_per_token,
                "bound_low": np.nan, "bound_high": np.nan, "row": "prefill[*]"}
               for name, price in prefill_price_per_alpha(problem, model, placement, lp).items()]
    for row in queue_heads(lp, len(placement))[:SHOWN_ROWS]:
        r = int(row.name[len("prefill["):-1])
        records.append({"where": f"request {r} on {problem.engines[int(placement[r])].name} #{int(placement[r])}",
                        "constraint": f"its prefill ms: {row.dual * len(placement):.3g} TTFTs move with it", "shadow_price": row.dual,
                        "unit": f"{unit} per ms", "bound": row.bound, "bound_low": row.bound_low, "bound_high": row.bound_high, "row": row.name})
    return pd.DataFrame(records, columns=SHADOW_COLUMNS)
