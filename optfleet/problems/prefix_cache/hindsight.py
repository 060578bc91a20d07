"""The hindsight optimum of a prefix-tree cache: prepare the MILP's numbers, build, solve, extract, re-score.

The formulation is models/prefix_cache.py.  :func:`solve_hindsight` solves
the MILP (or, with ``relax=True``, its LP relaxation) through
optfleet.solvers (HiGHS) and re-scores the schedule with the one evaluator
(optfleet.problems.prefix_cache.evaluate).  The report's ``objective`` is the
schedule's value by the evaluator (hit tokens, TEL ms or violations), its
``bound`` the solver's proven bound (an upper bound on hit tokens, a lower
bound on TEL or violations) and ``gap`` the relative gap between the two.  A
relaxation's schedule is its point rounded down (``y > 1/2`` kept, then
repaired: see :func:`repair`), so its objective is a feasible value and its
bound the LP optimum; its gap is an upper bound on how far that rounding is
from the optimum.

With ``fcfs_server`` (one FCFS prefill server, optfleet.problems.prefix_cache.evaluate) the models add the wait rows
(9) of models/prefix_cache.py: the optimum is still exact for the server's semantics (the running request's path
pinned over its prefill, hits found at the start of service), not a relaxation of them, and the LP relaxation still a
bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo
from pyomo.core.expr.numvalue import is_fixed
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.models import caching as interval_lp
from optfleet.models import prefix_cache as milp
from optfleet.problems.caching.evaluate import TtftModel
from optfleet.problems.caching.hindsight import HIGHS_INFINITY
from optfleet.problems.prefix_cache.evaluate import PrefixEvaluation, evaluate_schedule, fcfs_wait_ms, occupancy_blocks, orphaned
from optfleet.problems.prefix_cache.trace import BlockTrace
from optfleet.solvers import SolveReport, solve
from optfleet.solvers.highs import HIGHS_STATUS, highs_session, pass_model
from optfleet.solvers.report import ERROR, OPTIMAL, FromSolveReport, relative_gap

SENSE = {"hit_tokens": "max", "tel": "min", "violations": "min"}

MAX_MILP_COEFFICIENT_MS = 1e12
"""The largest prefill time (ms, some 30 years) the hindsight MILP takes as a coefficient: HiGHS refuses a matrix value at
or above 1e15 (its ``large_matrix_value``), and at 9.6e14 it reported a 14-request FCFS trace infeasible."""


def check_model_range(trace: BlockTrace, ttft: TtftModel, objective: str, worst_ms: NDArray[np.float64],
                      max_wait_ms: NDArray[np.float64], threshold_ms: float) -> None:
    """Refuse a TTFT model whose MILP HiGHS would refuse (an exit 3 before): a hit's coefficient, ``alpha`` x the
    block's tokens, and (objectives ``tel`` and ``violations``) a request's worst excess (its big-M, and the scale of the
    wait rows) must stay below :data:`MAX_MILP_COEFFICIENT_MS`; (objective ``tel``) the TEL with nothing cached below :data:`HIGHS_INFINITY` ms.  The field named is ``alpha``
    or ``beta_ms``, whichever makes up more of the prefill time with nothing cached."""
    alpha, beta = ttft.alpha_ms_per_token, ttft.beta_ms
    block_tokens = float(trace.occ_tokens.max()) if len(trace.occ_tokens) else 0.0
    if alpha * block_tokens >= MAX_MILP_COEFFICIENT_MS:
        raise InputError(
            "ttft.alpha_ms_per_token", alpha,
            f"a block's prefill time ({alpha * block_tokens:.3g} ms) reaches {MAX_MILP_COEFFICIENT_MS:g} ms, the largest coefficient the "
            f"hindsight MILP takes")
    excess_ms = np.maximum(worst_ms + max_wait_ms - threshold_ms, 0.0)
    field, value = ("ttft.beta_ms", beta) if beta * len(trace) >= alpha * float(trace.input_tokens.sum()) else ("ttft.alpha_ms_per_token", alpha)
    if objective == "tel" and float(excess_ms.sum()) >= HIGHS_INFINITY:
        raise InputError(field, value, f"the hindsight MILP's TEL with nothing cached reaches {float(excess_ms.sum()):.3g} ms, above the "
                                       f"limit of {HIGHS_INFINITY:g} ms that HiGHS reads as infinite")
    if objective != "hit_tokens" and len(excess_ms) and float(excess_ms.max()) >= MAX_MILP_COEFFICIENT_MS:
        raise InputError(field, value, f"a request's TTFT with nothing cached exceeds the SLO by {float(excess_ms.max()):.3g} ms, at or above "
                                       f"{MAX_MILP_COEFFICIENT_MS:g} ms, the largest coefficient the hindsight MILP takes")


def objective_threshold_ms(objective: str, xi_ms: float, slo_ms: float | None) -> float:
    """The TTFT threshold ``objective`` counts from: ``xi`` for TEL, the SLO (``xi`` when none is given) otherwise."""
    return xi_ms if objective == "tel" or slo_ms is None else slo_ms


def objective_value(evaluation: PrefixEvaluation, objective: str) -> float:
    """The evaluator's number for ``objective``: total hit tokens, TEL (ms) or SLO violations."""
    return float({"hit_tokens": evaluation.hit_tokens_total, "tel": evaluation.tel_ms, "violations": evaluation.violations}[objective])


def prepare(trace: BlockTrace, capacity_blocks: int, eviction: str, objective: str, ttft: TtftModel, threshold_ms: float,
            closure: str = "full", fcfs_server: bool = False) -> milp.PrefixMilpData:
    """The numbers of models/prefix_cache.py (1)-(8); capacity rows that can never bind are dropped
    (:func:`optfleet.models.caching.binding_rows`, the caching kind's interval LP's rule).

    ``closure="parent_gap"`` keeps, of the ``leaves`` rows (3), only each gap's pair with the parent's gap that
    ends in the same request (the pairs of (5)): a relaxation of (3), so its optimum is a bound on the ``leaves``
    optimum, with far fewer rows (3.5 million pairs become 94 thousand on the Mooncake conversation trace).

    When every pair joins gaps that end in the same request (``any``, or ``parent_gap``) and the objective is
    ``tel`` or ``violations``, the gaps ending at a request that meets the threshold with nothing cached
    (``alpha input + beta <= threshold``) are left out: they take space and change no term, so some optimum
    keeps none of them and the optimum is unchanged.  With ``fcfs_server`` (models/prefix_cache.py (9)) a hit also
    shortens the waits after it, so this is done only when no request waits even with nothing cached (``W0 = 0``).
    """
    occurrence = np.flatnonzero(trace.occ_next >= 0)
    same_request_pairs = eviction != "leaves" or closure != "full"
    worst_ms = ttft.ttft_ms(trace.input_tokens)
    max_wait_ms = fcfs_wait_ms(trace.arrival_s, worst_ms) if fcfs_server else np.zeros(len(trace))
    check_model_range(trace, ttft, objective, worst_ms, max_wait_ms, threshold_ms)
    if same_request_pairs and objective != "hit_tokens" and not max_wait_ms.any():
        occurrence = occurrence[worst_ms[trace.occ_request[trace.occ_next[occurrence]]] > threshold_ms]
    following = trace.occ_next[occurrence]
    first_event, hit_request = trace.occ_request[occurrence], trace.occ_request[following]
    events = np.arange(len(trace), dtype=np.int64)
    row_event, row_capacity, first_row, end_row = interval_lp.binding_rows(
        events, np.full(len(trace), capacity_blocks, dtype=np.int64), first_event, hit_request - 1, np.ones(len(occurrence), dtype=np.int64))
    column_of = np.full(len(trace.occ_block), -1, dtype=np.int64)
    column_of[occurrence] = np.arange(len(occurrence))
    child, parent = (_prefix_pairs if same_request_pairs else _closure_pairs)(trace, occurrence, column_of)
    return milp.PrefixMilpData(
        n_requests=len(trace), eviction=eviction, objective=objective, capacity_blocks=capacity_blocks,
        col_occurrence=occurrence, col_first_event=first_event, col_hit_request=hit_request, col_tokens=trace.occ_tokens[following],
        col_first_row=first_row, col_end_row=end_row, row_event=row_event, row_capacity=row_capacity,
        pair_child=child, pair_parent=parent, input_tokens=trace.input_tokens,
        alpha_ms_per_token=ttft.alpha_ms_per_token, beta_ms=ttft.beta_ms, threshold_ms=threshold_ms,
        arrival_gap_ms=1000.0 * np.diff(trace.arrival_s, prepend=trace.arrival_s[0]) if fcfs_server else None,
        max_wait_ms=max_wait_ms if fcfs_server else None)


def _closure_pairs(trace: BlockTrace, occurrence: NDArray[np.int64], column_of: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(3): for each child gap, every parent gap from the parent's occurrence in ``r1`` to the one before ``r2``."""
    child, parent = [], []
    nxt = trace.occ_next.tolist()
    for j, o in enumerate(occurrence.tolist()):
        if trace.occ_depth[o] == 1:
            continue
        q, stop = o - 1, nxt[o] - 1
        while q != stop:
            child.append(j)
            parent.append(int(column_of[q]))
            q = nxt[q]
    return np.asarray(child, dtype=np.int64), np.asarray(parent, dtype=np.int64)


def _prefix_pairs(trace: BlockTrace, occurrence: NDArray[np.int64], column_of: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(5): each gap's hit needs the hit of the parent's gap ending in the same request."""
    following = trace.occ_next[occurrence]
    deep = trace.occ_depth[following] > 1
    return np.flatnonzero(deep).astype(np.int64), column_of[trace.occ_prev[following[deep] - 1]]


def repair(trace: BlockTrace, kept: NDArray[np.bool_], capacity_blocks: int, eviction: str) -> NDArray[np.bool_]:
    """A feasible schedule from a rounded point: drop orphans (``leaves``) until none is left, then, after each event
    over capacity, the open gaps that end last (deepest first), and orphans again."""
    kept = kept.copy()
    while True:
        if eviction == "leaves":
            while (bad := orphaned(trace, kept)).any():
                kept &= ~bad
        occupancy = occupancy_blocks(trace, kept)
        over = np.flatnonzero(occupancy > capacity_blocks)
        if not over.size:
            return kept
        k = int(over[0])
        open_gaps = np.flatnonzero(kept & (trace.occ_request <= k) & (trace.occ_request[np.maximum(trace.occ_next, 0)] > k))
        order = np.lexsort((-trace.occ_depth[open_gaps], -trace.occ_next[open_gaps]))
        kept[open_gaps[order[: int(occupancy[k]) - capacity_blocks]]] = False


@dataclass(frozen=True)
class PrefixHindsight(FromSolveReport):
    """The hindsight schedule, its evaluation and the solver's verdict (``report``; module docstring)."""

    kept: NDArray[np.bool_]
    evaluation: PrefixEvaluation
    report: SolveReport
    relaxed: bool
    n_columns: int
    n_pairs: int

    @property
    def proven_optimal(self) -> bool:
        return not self.relaxed and self.report.status == OPTIMAL and self.report.gap is not None and self.report.gap <= 1e-9


def solve_hindsight(trace: BlockTrace, capacity_blocks: int, eviction: str, objective: str, ttft: TtftModel, xi_ms: float,
                    slo_ms: float | None = None, *, relax: bool = False, time_limit_s: float | None = None, mip_gap: float = 0.0,
                    customize: Callable[[pyo.ConcreteModel], None] | None = None, fcfs_server: bool = False) -> PrefixHindsight:
    """Solve models/prefix_cache.py for ``objective`` at ``capacity_blocks`` (module docstring); ``fcfs_server`` adds
    the FCFS prefill server's waits, (9) there (exact, not a relaxation)."""
    start = time.perf_counter()
    slo = xi_ms if slo_ms is None else slo_ms
    data = prepare(trace, capacity_blocks, eviction, objective, ttft, objective_threshold_ms(objective, xi_ms, slo_ms), fcfs_server=fcfs_server)
    label = "hindsight LP relaxation" if relax else "hindsight MILP"
    model = milp.build(data, relax=relax) if data.n_columns else None
    if customize is not None and model is not None:
        customize(model)
    if model is None or is_fixed(model.objective.expr):
        # Nothing to decide (no block is used twice, or no schedule changes the objective): keeping nothing is optimal.
        kept = np.zeros(len(trace.occ_block), dtype=bool)
        evaluation = evaluate_schedule(trace, kept, capacity_blocks, eviction, ttft, xi_ms, slo, policy=label, fcfs_server=fcfs_server)
        value = objective_value(evaluation, objective)
        report = SolveReport(OPTIMAL, value, value, 0.0, time.perf_counter() - start, "none")
        return PrefixHindsight(kept, evaluation, report, relax, 0, 0)
    solved = solve(model, time_limit=time_limit_s, mip_gap=None if relax else mip_gap)
    if not solved.has_solution:
        raise RuntimeError(f"the {label} returned no schedule (status {solved.status}), but keeping nothing is always feasible")
    kept = milp.extract(model, data, len(trace.occ_block))
    if relax:
        kept = repair(trace, kept, capacity_blocks, eviction)
    evaluation = evaluate_schedule(trace, kept, capacity_blocks, eviction, ttft, xi_ms, slo, policy=label, fcfs_server=fcfs_server)
    value = objective_value(evaluation, objective)
    bound = solved.objective if relax and solved.status == OPTIMAL else solved.bound
    if SENSE[objective] == "max" and bound is not None:
        bound = max(bound, value)  # the evaluator may find more hits than the model credited (``any``: h_j <= y_j)
    report = SolveReport(solved.status, value, bound, relative_gap(value, bound), time.perf_counter() - start, solved.solver,
                         solved.log, solved.counts)
    return PrefixHindsight(kept, evaluation, report, relax, data.n_columns, len(data.pair_child))


@dataclass(frozen=True)
class LpBound:
    """The LP relaxation's verdict from the array path: status, bound (None unless solved), sizes and times (s), and
    its point rounded to a feasible schedule (``kept``: ``y > 1/2``, then :func:`repair`; None unless solved)."""

    status: str
    bound: float | None
    n_columns: int
    n_rows: int
    n_nonzeros: int
    build_seconds: float
    solve_seconds: float
    kept: NDArray[np.bool_] | None = None


def lp_bound(trace: BlockTrace, capacity_blocks: int, eviction: str, objective: str, ttft: TtftModel, xi_ms: float,
             slo_ms: float | None = None, *, closure: str = "parent_gap", time_limit_s: float | None = None, fcfs_server: bool = False) -> LpBound:
    """The LP relaxation of models/prefix_cache.py solved from arrays (:func:`optfleet.models.prefix_cache.highs_lp_arrays`)
    by HiGHS: a bound on the hindsight optimum (upper on hit tokens, lower on TEL and violations).  With the
    default ``closure="parent_gap"`` the ``leaves`` closure is relaxed further (:func:`prepare`): still a bound."""
    start = time.perf_counter()
    data = prepare(trace, capacity_blocks, eviction, objective, ttft, objective_threshold_ms(objective, xi_ms, slo_ms), closure=closure,
                   fcfs_server=fcfs_server)
    args = milp.highs_lp_arrays(data)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    with highs_session(keep_log=False, time_limit=time_limit_s) as (h, _):
        pass_model(h, args, "the prefix-cache LP relaxation")
        h.run()
        status = HIGHS_STATUS.get(h.getModelStatus(), ERROR)
        value = float(h.getInfo().objective_function_value) if status == OPTIMAL else None
        y = np.asarray(h.getSolution().col_value[:data.n_columns]) if status == OPTIMAL else None
    solve_s = time.perf_counter() - start
    kept = None
    if y is not None:
        kept = np.zeros(len(trace.occ_block), dtype=bool)
        kept[data.col_occurrence[y > 0.5]] = True
        kept = repair(trace, kept, capacity_blocks, eviction)
    return LpBound(status, value, int(args[0]), int(args[1]), int(args[2]), build_s, solve_s, kept)


def solve_lp_bound(trace: BlockTrace, capacity_blocks: int, eviction: str, objective: str, ttft: TtftModel, xi_ms: float,
                   slo_ms: float | None = None, *, time_limit_s: float | None = None, fcfs_server: bool = False) -> PrefixHindsight:
    """:func:`lp_bound` as a method's result: the LP optimum as ``bound``, and as the schedule the better (by the
    evaluator's ``objective``) of its rounded point and, for ``tel`` and ``violations``, the hit-token LP's rounded
    point (a TEL LP's point is often fractional, so rounding it loses much: on the full Mooncake traces the rounded
    hit-token schedule had the lower TEL at most capacities, benchmarks/results/prefix_cache.md).  Without a solved
    LP the schedule keeps nothing and there is no bound."""
    start = time.perf_counter()
    result = lp_bound(trace, capacity_blocks, eviction, objective, ttft, xi_ms, slo_ms, time_limit_s=time_limit_s, fcfs_server=fcfs_server)
    candidates = [result.kept if result.kept is not None else np.zeros(len(trace.occ_block), dtype=bool)]
    if objective != "hit_tokens":
        hits = lp_bound(trace, capacity_blocks, eviction, "hit_tokens", ttft, xi_ms, slo_ms, time_limit_s=time_limit_s, fcfs_server=fcfs_server)
        candidates += [] if hits.kept is None else [hits.kept]
    scored = [evaluate_schedule(trace, kept, capacity_blocks, eviction, ttft, xi_ms, slo_ms, policy="hindsight LP relaxation",
                                fcfs_server=fcfs_server)
              for kept in candidates]
    sign = -1.0 if SENSE[objective] == "max" else 1.0
    best = min(range(len(scored)), key=lambda i: sign * objective_value(scored[i], objective))
    kept, evaluation = candidates[best], scored[best]
    value = objective_value(evaluation, objective)
    report = SolveReport(result.status, value, result.bound, relative_gap(value, result.bound), time.perf_counter() - start, "highs")
    return PrefixHindsight(kept, evaluation, report, True, result.n_columns, 0)
