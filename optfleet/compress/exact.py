"""The exact selection: the knapsack MILP of ``optfleet.models.compress`` solved by HiGHS, with status, bound and gap.

The greedy fill is a heuristic for that MILP (the paper's compressor); the MILP's optimum and its proven
bound give each greedy selection its optimality gap ``100 (bound - greedy) / bound`` under the one
evaluator (:func:`optfleet.compress.selection.selection_value`).

Reduced-cost fixing (Dembo and Hammer, 1980), for the plain objective (no contiguity or redundancy term) with
a MIP start of value ``L``: the knapsack's LP relaxation takes the free sentences by falling ``s_i / t_i`` up to
the critical one, of ratio ``r``, with value ``U``; forcing sentence ``i`` away from its LP value costs at
least ``|s_i - r t_i|`` (its reduced cost), so no selection doing so is worth more than ``U - |s_i - r t_i|``.
Where that is below ``L`` the sentence is fixed at its LP value before HiGHS runs.  Only selections worth less
than the start are cut off, so the optimum and HiGHS's bound remain those of the full MILP.  The report's
``counts["fixed_by_reduced_cost"]`` says how many sentences were fixed.

The dynamic program (Bellman 1957; the 0-1 knapsack's, Martello and Toth 1990, ch. 2.6), for the plain objective:
token counts are integers, so over the free sentences in order and every room ``c`` left by the kept ones,
``best_i(c) = max(best_{i-1}(c), best_{i-1}(c - t_i) + s_i)`` is the best value within ``c`` tokens, and
``max_c best_n(c)`` the optimum; a table of the choices gives the selection.  It takes ``n x (room + 1)`` steps
(about 8 ms on a 500-sentence prompt, against HiGHS's own proof's 14-300 ms).  Its selection is HiGHS's MIP start
and its value HiGHS's known bound (``objective_target``), so HiGHS stops as soon as it has checked the start:
the optimality proof is the dynamic program's, and the report counts ``bound_by_dynamic_program``.  Without it
(``dynamic_program=False``, a contiguity or redundancy term, or a table above ``DP_CELLS_LIMIT``) HiGHS proves
the optimum itself, by branching.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from optfleet.compress.selection import Objective, selection_value

EXACT_MIP_GAP = 1e-9  # HiGHS's default relative gap (1e-4) would hide greedy gaps below 0.01 %
# HiGHS's presolve (probing 500 binaries) took 60 ms of a 70 ms solve on 500-sentence prompts; the knapsack needs
# none: without it the same optima take 6-80 ms (benchmarks/bench_compress.py)
HIGHS_OPTIONS = {"presolve": "off"}
SAFETY = 1e-9  # relative: a sentence is fixed only when its bound is this far below the incumbent (round-off)
DP_CELLS_LIMIT = 50_000_000  # free sentences x (room + 1): the dynamic program's choice table in bytes


def exact_selection(scores: NDArray[np.float64], tokens: NDArray[np.int64], keep: NDArray[np.bool_], budget_tokens: int,
                    similarity: NDArray[np.float64], objective: Objective, *, time_limit_s: float | None = 10.0,
                    start: NDArray[np.bool_] | None = None, dynamic_program: bool = True):
    """The best selection and HiGHS's :class:`~optfleet.solvers.report.SolveReport` (``start``: a MIP start,
    e.g. the greedy selection; ``dynamic_program``: the module docstring's proof for the plain objective); the
    selection is None when HiGHS found none (see the report's status)."""
    from optfleet.models.compress import knapsack_arrays
    from optfleet.solvers.highs import solve_arrays

    pairs = objective.redundant_pairs(similarity)
    plain = objective.contiguity_bonus <= 0 and len(pairs[0]) == 0
    optimum = knapsack_optimum(scores, tokens, keep, budget_tokens) if plain and dynamic_program else None
    known_bound = None
    if optimum is not None:
        start, known_bound = optimum, selection_value(optimum, scores, similarity, objective)
    fix_in, fix_out = (reduced_cost_fixing(scores, tokens, keep, budget_tokens, selection_value(start, scores, similarity, objective))
                       if plain and start is not None and optimum is None else (keep, np.zeros_like(keep)))
    args = knapsack_arrays(scores, tokens, fix_in, budget_tokens, objective.contiguity_bonus, pairs,
                           objective.redundancy_penalty * similarity[pairs], excluded=fix_out)
    start_values = None if start is None else _start_columns(start, objective, pairs)
    report, values = solve_arrays(args, what="the sentence knapsack", time_limit=time_limit_s, mip_gap=EXACT_MIP_GAP,
                                  start_values=start_values, options=HIGHS_OPTIONS, known_bound=known_bound)
    report = replace(report, counts={**report.counts, "fixed_by_reduced_cost": int((fix_in & ~keep).sum() + fix_out.sum()),
                                     "bound_by_dynamic_program": int(optimum is not None)})
    chosen = None if values is None else values[: len(scores)] > 0.5
    return chosen, report


def knapsack_optimum(scores: NDArray[np.float64], tokens: NDArray[np.int64], keep: NDArray[np.bool_],
                     budget_tokens: int) -> NDArray[np.bool_] | None:
    """The best selection of the plain objective by the module docstring's dynamic program; None when the kept
    sentences alone overflow ``budget_tokens`` or the choice table would pass ``DP_CELLS_LIMIT``."""
    free = np.flatnonzero(~keep)
    room = budget_tokens - int(tokens[keep].sum())
    if room < 0 or len(free) * (room + 1) > DP_CELLS_LIMIT:
        return None
    best = np.zeros(room + 1)  # best[c]: the best value of the sentences so far within c tokens
    took = np.zeros((len(free), room + 1), dtype=bool)
    for row, i in enumerate(free):
        weight = int(tokens[i])
        if weight > room:
            continue
        with_it = best[: room + 1 - weight] + scores[i]  # a copy: every c reads best_{i-1}
        better = with_it > best[weight:]
        took[row, weight:] = better
        best[weight:] = np.where(better, with_it, best[weight:])
    chosen, c = keep.copy(), room
    for row in range(len(free) - 1, -1, -1):
        if took[row, c]:
            chosen[free[row]] = True
            c -= int(tokens[free[row]])
    return chosen


def reduced_cost_fixing(scores: NDArray[np.float64], tokens: NDArray[np.int64], keep: NDArray[np.bool_], budget_tokens: int,
                        incumbent: float) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """``(fixed at 1, fixed at 0)``: the kept sentences and those the module docstring's test fixes, given a
    selection worth ``incumbent``."""
    free = np.flatnonzero(~keep)
    fix_in, fix_out = keep.copy(), np.zeros_like(keep)
    room = budget_tokens - int(tokens[keep].sum())
    weights, values = tokens[free].astype(np.float64), scores[free]
    order = np.argsort(-np.divide(values, weights, out=np.full_like(values, np.inf), where=weights > 0), kind="stable")
    filled = np.cumsum(weights[order])
    critical = int(np.searchsorted(filled, room, side="right"))  # the first sentence in ratio order that does not fit whole
    if critical >= len(order) or room < 0:
        return fix_in, fix_out  # every free sentence fits (the LP is integral) or none can: nothing to fix
    ratio = values[order[critical]] / weights[order[critical]]
    taken = filled[critical - 1] if critical else 0.0
    bound = float(scores[keep].sum() + values[order[:critical]].sum() + (room - taken) * ratio)
    reduced = values - ratio * weights
    cut = bound - np.abs(reduced) < incumbent - SAFETY * max(1.0, abs(incumbent))
    fix_in[free[cut & (reduced > 0)]] = True
    fix_out[free[cut & (reduced < 0)]] = True
    return fix_in, fix_out


def _start_columns(start: NDArray[np.bool_], objective: Objective, pairs: tuple[NDArray[np.int64], NDArray[np.int64]]) -> NDArray[np.float64]:
    """Every column's value at the selection ``start``: ``x``, then ``z_i = x_i x_{i+1}``, then ``y_ij = x_i x_j``."""
    x = start.astype(np.float64)
    z = x[:-1] * x[1:] if objective.contiguity_bonus > 0 else np.zeros(0)
    return np.concatenate([x, z, x[pairs[0]] * x[pairs[1]]])
