"""Sensitivity of the hindsight caching LP (``optfleet explain``): binding capacity rows, the price of capacity, curves.

The plan explained is the ``optimum`` method's at the instance's first capacity ``C``: the hindsight schedule of the
interval LP of models/caching.py (Tail-Optimized Caching for LLM Inference, Zhang et al.)

    min TEL = c0 - sum_j v_j x_j   s.t.  capacity[k]: sum_{j open after event k} x_j <= C,   0 <= x_j <= u_j,

scored by the kind's evaluator (its TEL in ms).  It is an LP (no integers: its matrix is an interval matrix, so
its optimal vertex is whole), so HiGHS's duals and ranging apply to it directly, solved whole
(:func:`optfleet.solvers.sensitivity.arrays_sensitivity`):

* **binding**: the capacity rows (one per event where a kept gap ends; rows that can never bind are not in the
  LP), each with the cache occupancy after its event and its slack in tokens; the rows that bind, the largest
  prices first, up to :data:`SHOWN_ROWS`, and how many bind in a note;
* **shadow prices**: the dual of row k is ``d TEL / d C_k`` (ms per token of capacity after event k, <= 0), with
  the range of its bound over which the basis stays optimal.  Raising every row's right-hand side together is one
  more token of cache:

      d TEL / d C  =  sum_k dual_k     [ms of TEL per token of capacity; times block_tokens per block]

  (one-sided: the LP's right derivative when its basis stays optimal for a uniform raise; a row dropped as unable to
  bind at C stays so above C).  Under forced caching C also moves the forced rows' right-hand sides and the
  columns' bounds (models/caching.py (5)), so that sum is not the price of capacity and is not shown;
* **parameters**: ``capacity_tokens`` (C, rounded to whole tokens; the instance's capacities are the default
  curve) and ``xi_ms`` (the TTFT tail threshold).  A capacity curve is warm (:class:`CapacitySession`): one HiGHS
  LP, built at the smallest capacity asked so far, whose rows' right-hand sides move to each new C; dual simplex
  restarts from the previous point's basis (a right-hand side change keeps it dual feasible).  A request's arrival time does not enter the LP (only the order
  of events does), so there is no rate parameter; no default break-even (``--break-even xi_ms`` or ``capacity_tokens``
  re-solves as for every kind) and no alternatives (one schedule, no named restriction).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import highspy
import numpy as np
import pandas as pd

from optfleet.instance.shared_schema import MAX_TOKENS
from optfleet.models import caching as lp
from optfleet.problems.caching.kind import UNIT
from optfleet.problems.caching.lp_data import prepare
from optfleet.problems.caching.problem import CachingProblem
from optfleet.sensitivity.explainer import Analysis, Explainer, Parameter, Solved, plan_digest
from optfleet.solvers.highs import HIGHS_STATUS, highs_session, pass_model
from optfleet.solvers.report import OPTIMAL
from optfleet.solvers.sensitivity import LpSensitivity, arrays_sensitivity

SHOWN_ROWS = 10  # binding capacity rows listed one by one (the largest prices)
DUAL_ZERO = 1e-9  # ms per token: duals below this are not shown
SHADOW_COLUMNS = ["where", "constraint", "row", "shadow_price", "unit", "dual", "bound", "bound_low", "bound_high"]


@dataclass(frozen=True)
class Question:
    """The caching problem and the capacity (tokens) its hindsight LP is explained at."""

    problem: CachingProblem
    capacity_tokens: int


def explainer(problem: CachingProblem) -> Explainer:
    """The caching kind's sensitivity hooks for the hindsight LP at its first capacity (optfleet/sensitivity/explainer.py)."""
    question = Question(problem, problem.capacities_tokens[0])
    curves = (f"capacity_tokens={','.join(str(c) for c in problem.capacities_tokens)}",) if len(problem.capacities_tokens) > 1 else ()
    return Explainer(UNIT, solve, analyse, parameters(question), lambda question, solved: [], default_curves=curves, subject=question,
                     session=session)


def solve(question: Question) -> Solved:
    """The ``optimum`` method's schedule at the question's capacity, its TEL by the kind's evaluator, and its label."""
    from optfleet.problems.caching.runs import run_optimum

    run = run_optimum(question.problem, question.capacity_tokens)
    return Solved(run.evaluation.tel_ms, run.optimum.report.status, schedule_label(run.kept_tokens), run.evaluation)


def session(question: Question, parameter: str) -> CapacitySession | None:
    """The warm path of a capacity curve (:class:`CapacitySession`); none for ``xi_ms`` (it changes every column's
    bound and value) or under forced caching (C moves the forced rows and the columns' bounds)."""
    if parameter != "capacity_tokens" or question.problem.forced_caching:
        return None
    return CapacitySession()


class CapacitySession:
    """The hindsight LP at one capacity after another in one HiGHS model (module docstring).

    Without forced caching the columns and their bounds do not depend on C, and a row dropped at C as unable to
    bind (its columns' bounds sum to at most C) cannot bind at a larger C either: the LP built at the smallest C
    asked holds every row any larger C needs, each with right-hand side C.  A smaller C than the model's builds it
    again.  Each point's schedule is scored by the kind's evaluator; a point whose LP is not optimal, whose vertex
    is not whole, or whose evaluated TEL differs from the LP optimum is solved by :func:`solve` instead."""

    def __init__(self) -> None:
        self.data: lp.CacheLpData | None = None
        self.highs: highspy.Highs | None = None

    def __call__(self, question: Question) -> Solved:
        from optfleet.problems.caching.evaluate import evaluate_schedule
        from optfleet.problems.caching.hindsight import TEL_MATCH_RELATIVE

        problem, capacity = question.problem, question.capacity_tokens
        if self.data is None or capacity < self.data.capacity_tokens:
            self.data = prepare(problem.trace, capacity, problem.ttft, problem.xi_ms)
            with highs_session(keep_log=False) as (h, _):
                h.setOptionValue("presolve", "off")  # as the kind's own LP path: presolve costs more than it saves here
                pass_model(h, lp.highs_whole(self.data).pass_model_args, "the hindsight caching LP")
            self.highs = h
        data, h = self.data, self.highs
        rows = np.arange(data.n_rows, dtype=np.int32)
        h.changeRowsBounds(data.n_rows, rows, np.full(data.n_rows, -highspy.kHighsInf), np.full(data.n_rows, float(capacity)))
        h.run()
        if HIGHS_STATUS.get(h.getModelStatus()) != OPTIMAL:
            return solve(question)
        kept, integral = lp.kept_from_columns(data, np.asarray(h.getSolution().col_value, dtype=float))
        evaluation = evaluate_schedule(problem.trace, kept, capacity, problem.ttft, problem.xi_ms, slo_ms=problem.slo_ms, policy="optimum")
        lp_tel_ms = data.tel_constant_ms + float(h.getInfo().objective_function_value)
        if not integral or abs(evaluation.tel_ms - lp_tel_ms) > TEL_MATCH_RELATIVE * max(1.0, abs(evaluation.tel_ms)):
            return solve(question)
        return Solved(evaluation.tel_ms, OPTIMAL, schedule_label(kept), evaluation)


def schedule_label(kept_tokens: np.ndarray) -> str:
    """The gaps kept, the tokens kept and a digest of the whole schedule: equal labels are equal schedules."""
    digest = plan_digest(np.asarray(kept_tokens, dtype=np.int64))
    gaps = int(np.count_nonzero(kept_tokens))
    return f"{gaps:,} {'gap keeps' if gaps == 1 else 'gaps keep'} {int(kept_tokens.sum()):,} tokens (schedule {digest})"


def parameters(question: Question) -> dict[str, Parameter]:
    """``capacity_tokens`` and ``xi_ms`` (module docstring)."""
    problem = question.problem
    return {
        "capacity_tokens": Parameter("capacity_tokens", "tokens", "cache capacity C (rounded to whole tokens; at most 2**53, as in an instance)", question.capacity_tokens,
                                     lambda q, v: replace(q, capacity_tokens=int(round(v))), 0.0, MAX_TOKENS, open_interval=False, integral=True),
        "xi_ms": Parameter("xi_ms", "ms", "TTFT tail threshold xi (TEL counts TTFT above it)", problem.xi_ms,
                           lambda q, v: replace(q, problem=replace(q.problem, xi_ms=v)), low_included=True),
    }


def lp_of(question: Question) -> tuple[lp.CacheLpData, LpSensitivity]:
    """The question's LP arrays and its duals and ranges (solved whole; rows ``capacity[event]``, columns ``y[gap]``
    and ``y_part[gap]``).  The LP's objective is ``TEL - c0``."""
    problem = question.problem
    data = prepare(problem.trace, question.capacity_tokens, problem.ttft, problem.xi_ms, forced=problem.forced_caching)
    rows = [f"capacity[{int(k)}]" for k in data.row_event]
    columns = [f"{'y' if j < data.n_full else 'y_part'}[{int(r)}]" for j, r in enumerate(data.col_gap)]
    return data, arrays_sensitivity(lp.highs_whole(data).pass_model_args, rows, columns, "the hindsight caching LP")


def capacity_price_ms_per_token(data: lp.CacheLpData, sensitivity: LpSensitivity) -> float | None:
    """``d TEL / d C = sum_k dual_k`` (module docstring); None under forced caching."""
    return None if data.forced else float(sum(row.dual for row in sensitivity.rows))


def analyse(question: Question, solved: Solved) -> Analysis:
    """The binding rows and shadow prices of the hindsight LP (module docstring)."""
    problem = question.problem
    trace = problem.trace
    data, sensitivity = lp_of(question)
    lp_tel_ms = data.tel_constant_ms + (sensitivity.report.objective or 0.0)
    binds = [row for row in sensitivity.rows if row.slack <= 1e-6 * max(1.0, abs(row.bound))]
    shown = sorted(binds, key=lambda row: row.dual)[:SHOWN_ROWS]
    binding = []
    for row in shown:
        k = int(row.name[len("capacity["):-1])
        binding.append({"row": row.name, "after_turn": k, "time_s": float(trace.arrival_s[k]),
                        "conversation": trace.conversation_labels[int(trace.conversation[k])], "occupancy_tokens": row.activity,
                        "capacity_tokens": row.bound, "slack": row.slack, "slack_unit": "token", "binds": True})
    duals = []
    price = capacity_price_ms_per_token(data, sensitivity)
    if price is not None:
        duals.append({"where": "every row", "constraint": f"cache capacity C = {question.capacity_tokens:,} tokens", "row": "capacity[*]",
                      "shadow_price": price, "unit": "TEL ms per token", "dual": price, "bound": question.capacity_tokens,
                      "bound_low": None, "bound_high": None})
        duals.append({"where": "every row", "constraint": f"one block of {problem.block_tokens} tokens more", "row": "capacity[*]",
                      "shadow_price": price * problem.block_tokens, "unit": "TEL ms per block", "dual": price,
                      "bound": question.capacity_tokens, "bound_low": None, "bound_high": None})
    for row in shown:
        if abs(row.dual) > DUAL_ZERO:
            duals.append({"where": f"after turn {row.name[len('capacity['):-1]}", "constraint": "capacity after the event", "row": row.name,
                          "shadow_price": row.dual, "unit": "TEL ms per token", "dual": row.dual, "bound": row.bound,
                          "bound_low": row.bound_low, "bound_high": row.bound_high})
    notes = (
        f"the hindsight LP at C = {question.capacity_tokens:,} tokens: {len(binds):,} of its {data.n_rows:,} capacity rows bind "
        f"(rows that can never bind are not in it); LP optimum {lp_tel_ms:,.6g} ms against the schedule's evaluated TEL "
        f"{solved.objective:,.6g} ms (an LP: the duals are exact, no integer is fixed)",
        *(() if price is not None else ("under forced caching C also moves the forced rows and the columns' bounds: the price of capacity "
                                        "is not the sum of row duals and is not shown; see the capacity_tokens curve",)),
    )
    return Analysis({"binding": pd.DataFrame(binding, columns=["row", "after_turn", "time_s", "conversation", "occupancy_tokens",
                                                               "capacity_tokens", "slack", "slack_unit", "binds"]),
                     "shadow_prices": pd.DataFrame(duals, columns=SHADOW_COLUMNS)}, notes)
