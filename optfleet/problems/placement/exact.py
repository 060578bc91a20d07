"""The exact views: the hindsight MILP, the look-ahead (receding-horizon) MILPs and the relaxation bound.

* ``hindsight_milp`` (models/placement.py) on the whole trace when it has at most ``solve.max_milp_requests``
  requests.  Its service model is a simplification of the simulator (FCFS prefill only, generous reuse, no
  decode, no prefill attention pairs, no batching limits), built to bound it from below (bounds.py): its report's
  objective and bound are in that model's terms, and its bound is a lower bound on the simulator's best placement
  for the instance's objective.  Its placement is re-scored by the simulator (the row's objective), which makes it
  a candidate for the best known schedule, not an optimum of the simulator.
* ``lookahead_milp``: the same MILP over windows of ``solve.lookahead_requests`` arrivals, committing the first
  ``solve.lookahead_commit`` placements of each, the next window starting from the committed requests' state in
  the model (servers busy until their model prefill ends, groups and conversations already seen).  Because the
  model sees prefill only (no decode load, no batch or KV limits), a window may place at most
  ``ceil(solve.lookahead_balance x window / servers)`` requests on one server; without that cap it packs every
  request where the prefix is cached and the simulator's decode queues explode.  A policy with a forecast of the
  next arrivals could reach its plan; it bounds nothing (no report).
* ``relaxation_bound``: bounds.relaxation_bound, solved exactly (no plan).

Work limits: ``solve.time_limit_s`` covers each MILP's build, its hand-over to HiGHS and HiGHS's run.  A MILP whose
size (rows, columns and nonzeros, known from the data before any is built: ``model_size``) makes its build and
hand-over alone take longer than its limit here is not built (:func:`size_refusal` says why and what to reduce);
a build that outlasts the limit all the same (a slower machine) stops at it (models/clock.py), and HiGHS gets what
is left of the limit once the model is handed over.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pyomo.environ as pyo
from optfleet.models.clock import BuildClock
from optfleet.models.placement import PlacementData, build, extract, model_size, model_ttft_ms
from optfleet.solvers import highs
from optfleet.solvers.report import OPTIMAL, TIME_LIMIT, SolveReport

from optfleet.errors import InfeasibleError, NoPlanInTimeError
from optfleet.problems.placement.bounds import relaxation_bound, reusable_tokens
from optfleet.problems.placement.problem import PlacementProblem


def placement_data(problem: PlacementProblem, first: int, count: int, ready_ms: np.ndarray | None = None,
                   prior_group: np.ndarray | None = None, prior_session: np.ndarray | None = None,
                   max_per_server: int | None = None) -> PlacementData:
    """The MILP's numbers for requests ``[first, first + count)``; the starting state defaults to empty servers."""
    q = problem.requests
    window = slice(first, first + count)
    group_tokens, cap = reusable_tokens(problem)
    engines = problem.engines
    classes = {e: i for i, e in enumerate(dict.fromkeys(engines))}
    k = len(engines)
    zeros = np.zeros((count, k))
    return PlacementData(
        q.arrival_ms[window], q.prompt_tokens[window], group_tokens[window], cap[window], q.group[window], q.session[window],
        np.array([e.prefill_ms_per_token for e in engines]), np.array([e.step_base_ms for e in engines]),
        np.array([classes[e] for e in engines]), np.zeros(k) if ready_ms is None else ready_ms,
        zeros if prior_group is None else prior_group, zeros if prior_session is None else prior_session,
        problem.objective, problem.slo.ttft_ms, max_per_server)


BUILD_S_PER_ROW = 3e-5
BUILD_S_PER_NONZERO = 1.5e-6
"""Seconds a row and a nonzero of the placement MILP cost to build in Pyomo and hand to HiGHS (its standard-form
compile): fitted here (one-off) on builds of 2,000 requests x 2 servers (275,042 rows, 4.4 million nonzeros: 15 s)
and of 40 requests x 200 servers (57,440 rows, 370,660 nonzeros: 1.9 s)."""


def build_seconds(size: dict[str, int]) -> float:
    """The estimated seconds to build and hand over a MILP of ``size`` (:func:`model_size`)."""
    return size["rows"] * BUILD_S_PER_ROW + size["nonzeros"] * BUILD_S_PER_NONZERO


def size_refusal(data: PlacementData, time_limit_s: float | None, what: str, limit: str) -> str | None:
    """Why the MILP of ``data`` is not built within ``time_limit_s`` (``limit`` names the limit), or None: its build
    and hand-over alone are estimated to take longer (module docstring)."""
    if time_limit_s is None:
        return None
    size = model_size(data)
    seconds = build_seconds(size)
    if seconds <= time_limit_s:
        return None
    return (f"{what} of {data.n:,} requests x {data.k:,} servers would have {size['rows']:,} rows, {size['columns']:,} columns and "
            f"{size['nonzeros']:,} nonzeros: building it and handing it to HiGHS takes about {seconds:,.3g} s here, more than {limit}; "
            "fewer requests or servers (solve.max_milp_requests, solve.lookahead_requests) or a longer solve.time_limit_s")


def hindsight_refusal(problem: PlacementProblem) -> str | None:
    """Why the hindsight MILP does not run on ``problem`` (None: it does): more requests than
    ``solve.max_milp_requests``, or a model too large to build within ``solve.time_limit_s``."""
    n, most = len(problem.requests), problem.solve.max_milp_requests
    if n > most:
        return f"{n:,} requests > solve.max_milp_requests = {most:,}"
    limit = problem.solve.time_limit_s
    return size_refusal(placement_data(problem, 0, n), limit, "the hindsight MILP", f"solve.time_limit_s = {limit:g} s")


def build_clock(time_limit_s: float | None) -> BuildClock | None:
    """The clock of a placement MILP's build under ``time_limit_s`` (None without a limit)."""
    return None if time_limit_s is None else BuildClock(time_limit_s, "the placement MILP")


def _solve(problem: PlacementProblem, data: PlacementData, time_limit_s: float | None) -> tuple[np.ndarray, SolveReport]:
    """Build (under the clock of ``time_limit_s``), solve with what is left of it, and extract."""
    clock = build_clock(time_limit_s)
    return solve_built(problem, build(data, clock), data, time_limit_s, clock)


def solve_built(problem: PlacementProblem, model: pyo.ConcreteModel, data: PlacementData, time_limit_s: float | None,
                clock: BuildClock | None) -> tuple[np.ndarray, SolveReport]:
    """Solve ``model``, the MILP of ``data`` built under ``clock``, with what is left of ``time_limit_s``, and extract
    the placement (an error without one: NoPlanInTimeError when the limit passed first, else InfeasibleError)."""
    report = highs.solve(model, solver=problem.solve.solver, time_limit=time_limit_s, deadline=None if clock is None else clock.deadline)
    if not report.has_solution and report.status == TIME_LIMIT:
        raise NoPlanInTimeError(f"the time limit of {time_limit_s:g} s (build, hand-over and solve) passed before the placement MILP found a "
                                f"placement ({report.summary}{'; ' + report.log if report.counts.get('solver_runs') == 0 else ''})", report)
    if not report.has_solution:
        raise InfeasibleError(f"the placement MILP found no placement ({report.summary})")
    return extract(model, data), report


def hindsight(problem: PlacementProblem) -> tuple[np.ndarray, SolveReport]:
    """The hindsight MILP's placement and report (module docstring)."""
    return _solve(problem, placement_data(problem, 0, len(problem.requests)), problem.solve.time_limit_s)


def lookahead_refusal(problem: PlacementProblem) -> str | None:
    """Why the look-ahead MILPs do not run (None: they do): a window's MILP too large to build within its share of
    the time limit (module docstring)."""
    n = len(problem.requests)
    horizon = min(problem.solve.lookahead_requests, n)
    per_window_s = _per_window_s(problem)
    return size_refusal(placement_data(problem, 0, horizon), per_window_s, "a look-ahead window's MILP",
                        f"its share of solve.time_limit_s, {per_window_s:,.3g} s")


def _per_window_s(problem: PlacementProblem) -> float | None:
    """Each look-ahead window's time limit: an equal share of ``solve.time_limit_s``, at least a second."""
    if problem.solve.time_limit_s is None:
        return None
    commit = min(problem.solve.lookahead_commit, problem.solve.lookahead_requests)
    return max(1.0, problem.solve.time_limit_s / -(-len(problem.requests) // commit))


def lookahead(problem: PlacementProblem) -> tuple[np.ndarray, dict[str, int]]:
    """The receding-horizon placement (module docstring) and counts: windows, windows proven optimal."""
    n, k = len(problem.requests), len(problem.engines)
    horizon, commit = problem.solve.lookahead_requests, min(problem.solve.lookahead_commit, problem.solve.lookahead_requests)
    q = problem.requests
    placement = np.full(n, -1, dtype=np.int64)
    ready = np.zeros(k)
    groups: list[set[int]] = [set() for _ in range(k)]
    sessions: list[set[int]] = [set() for _ in range(k)]
    windows = proven = 0
    per_window_s = _per_window_s(problem)
    for first in range(0, n, commit):
        count = min(horizon, n - first)
        rows = range(first, first + count)
        prior_session = np.array([[float(int(q.session[r]) in sessions[j]) for j in range(k)] for r in rows])
        prior_group = np.array([[float((q.group[r] >= 0 and int(q.group[r]) in groups[j]) or int(q.session[r]) in sessions[j])
                                 for j in range(k)] for r in rows])
        cap = math.ceil(problem.solve.lookahead_balance * count / k)
        data = placement_data(problem, first, count, ready.copy(), prior_group, prior_session, cap)
        chosen, report = _solve(problem, data, per_window_s)
        windows += 1
        proven += int(report.status == OPTIMAL)
        kept = min(commit, count)
        placement[first:first + kept] = chosen[:kept]
        kept_data = placement_data(problem, first, kept, ready.copy(), prior_group[:kept], prior_session[:kept])
        ttft = model_ttft_ms(kept_data, chosen[:kept])
        for j, r in enumerate(range(first, first + kept)):
            server = int(chosen[j])
            ready[server] = max(ready[server], float(q.arrival_ms[r]) + ttft[j] - float(kept_data.beta_ms[server]))
            groups[server].add(int(q.group[r]))
            sessions[server].add(int(q.session[r]))
    return placement, {"windows": windows, "windows_optimal": proven}


def relaxation(problem: PlacementProblem) -> tuple[SolveReport, dict[str, float]]:
    """The relaxation bound as a report (solved exactly: objective = bound, gap 0) and its parts."""
    start = time.perf_counter()
    value, parts = relaxation_bound(problem)
    return SolveReport(OPTIMAL, value, value, 0.0, time.perf_counter() - start, "srpt-relaxation"), parts
