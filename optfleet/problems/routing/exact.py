"""The hindsight placement (models/routing.py): the true lengths known, the least busy GPU instances within the
pools' capacity windows (or, under ``exact.objective: overflow``, the least work above them); solved by HiGHS,
scored by the evaluator like every router's placement."""

from __future__ import annotations

import numpy as np

from optfleet.errors import InfeasibleError, InputError
from optfleet.models.routing import HindsightData, hindsight_arrays, hindsight_placement
from optfleet.problems.routing.dispatcher import LONG, SHORT
from optfleet.problems.routing.evaluator import capacity_windows
from optfleet.problems.routing.problem import RoutingProblem
from optfleet.problems.routing.replay import Routing, service_s
from optfleet.solvers import highs
from optfleet.solvers.report import SolveReport

OVERFLOW_SLACK = 1e-9  # relative and absolute (slot-seconds): the second stage keeps the first's overflow to this


def check_solver(problem: RoutingProblem) -> None:
    """The routing models are arrays handed to HiGHS: another solver is refused, naming the field."""
    if problem.spec.solve.solver != "highs":
        raise InputError("solve.solver", problem.spec.solve.solver, "the routing models are built as arrays for HiGHS; use highs")


def hindsight_data(problem: RoutingProblem) -> HindsightData:
    """The options of every request (models/routing.py) on the true lengths."""
    s, rule = problem.stream, problem.rule
    total, out = s.total_tokens, s.output_tokens
    budget = rule.b_short_tokens - out
    band = (np.isin(s.category, problem.compressible) & (total > rule.b_short_tokens) & (total <= np.floor(rule.compress_gamma * rule.b_short_tokens))
            & (budget > 0)) if rule.compress_gamma > 1.0 else np.zeros(len(s), dtype=bool)
    short_s, long_s = service_s(problem, s.input_tokens)
    compressed_s, _ = service_s(problem, np.where(band, budget, s.input_tokens))
    window, width, count = capacity_windows(problem)
    short_slots, long_slots = problem.slots
    cap = problem.rho_max * width
    return HindsightData(window, np.where(total <= rule.short_window_tokens, short_s, np.nan), np.where(band, compressed_s, np.nan), long_s,
                         np.full(count, cap * short_slots), np.full(count, cap * long_slots),
                         (problem.pools[0].slots_per_instance, problem.pools[1].slots_per_instance), max(s.span_s, 1e-9))


def hindsight(problem: RoutingProblem) -> tuple[Routing, SolveReport]:
    """The hindsight model's placement and the solver's report; InfeasibleError when no placement fits."""
    check_solver(problem)
    data = hindsight_data(problem)
    objective = problem.spec.exact.objective
    args, columns = hindsight_arrays(data, objective)
    report, values = highs.solve_arrays(args, what="the hindsight routing model", time_limit=problem.spec.solve.time_limit_s)
    if objective == "overflow" and values is not None and report.objective is not None:
        # Among the placements of least overflow, the least busy one (the report stays the overflow solve's).
        cap = report.objective * (1 + OVERFLOW_SLACK) + OVERFLOW_SLACK
        _, tie_break = highs.solve_arrays(hindsight_arrays(data, "busy_instances", overflow_cap=cap)[0], what="the hindsight routing model",
                                          time_limit=problem.spec.solve.time_limit_s)
        values = values if tie_break is None else tie_break
    if values is None and report.status == "infeasible":
        raise InfeasibleError(f"hindsight routing: no placement keeps every capacity window within rho_max {problem.rho_max:g} x slots: "
                              "the plan's pools are too small for the stream even with the true lengths known")
    if values is None:
        raise InfeasibleError(f"hindsight routing: the solver found no placement ({report.summary})")
    short, compressed = hindsight_placement(values, columns, len(problem.stream))
    s = problem.stream
    pool = np.where(short | compressed, SHORT, LONG).astype(np.int64)
    budget = problem.rule.b_short_tokens - s.output_tokens
    none = np.zeros(len(s), dtype=bool)
    return Routing(pool, np.where(compressed, budget, s.input_tokens), compressed, none, none.copy()), report
