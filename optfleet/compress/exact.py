"""The exact selection: the knapsack MILP of ``optfleet.models.compress`` solved by HiGHS, with status, bound and gap.

The greedy fill is a heuristic for that MILP (the paper's compressor); the MILP's optimum and its proven
bound give each greedy selection its optimality gap ``100 (bound - greedy) / bound`` under the one
evaluator (:func:`optfleet.compress.selection.selection_value`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from optfleet.compress.selection import Objective

EXACT_MIP_GAP = 1e-9  # HiGHS's default relative gap (1e-4) would hide greedy gaps below 0.01 %
# HiGHS's presolve (probing 500 binaries) took 60 ms of a 70 ms solve on 500-sentence prompts; the knapsack needs
# none: without it the same optima take 6-80 ms (benchmarks/bench_compress.py)
HIGHS_OPTIONS = {"presolve": "off"}


def exact_selection(scores: NDArray[np.float64], tokens: NDArray[np.int64], keep: NDArray[np.bool_], budget_tokens: int,
                    similarity: NDArray[np.float64], objective: Objective, *, time_limit_s: float | None = 10.0,
                    start: NDArray[np.bool_] | None = None):
    """The best selection and HiGHS's :class:`~optfleet.solvers.report.SolveReport` (``start``: a MIP start,
    e.g. the greedy selection); the selection is None when HiGHS found none (see the report's status)."""
    from optfleet.models.compress import knapsack_arrays
    from optfleet.solvers.highs import solve_arrays

    pairs = objective.redundant_pairs(similarity)
    args = knapsack_arrays(scores, tokens, keep, budget_tokens, objective.contiguity_bonus, pairs,
                           objective.redundancy_penalty * similarity[pairs])
    start_values = None if start is None else _start_columns(start, objective, pairs)
    report, values = solve_arrays(args, what="the sentence knapsack", time_limit=time_limit_s, mip_gap=EXACT_MIP_GAP,
                                  start_values=start_values, options=HIGHS_OPTIONS)
    chosen = None if values is None else values[: len(scores)] > 0.5
    return chosen, report


def _start_columns(start: NDArray[np.bool_], objective: Objective, pairs: tuple[NDArray[np.int64], NDArray[np.int64]]) -> NDArray[np.float64]:
    """Every column's value at the selection ``start``: ``x``, then ``z_i = x_i x_{i+1}``, then ``y_ij = x_i x_j``."""
    x = start.astype(np.float64)
    z = x[:-1] * x[1:] if objective.contiguity_bonus > 0 else np.zeros(0)
    return np.concatenate([x, z, x[pairs[0]] * x[pairs[1]]])
