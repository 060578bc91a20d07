"""The exact sentence selection of the extractive compressor: a 0-1 knapsack MILP as ``Highs.passModel`` arrays.

Over the candidate sentences ``i`` with composite scores ``s_i`` and tokens ``t_i``
(``optfleet.compress.selection`` states the value and the rules):

    maximise   sum_i s_i x_i + mu sum_i z_i - lambda sum_{(i,j) in R} sim_ij y_ij
    subject to sum_i t_i x_i <= T_c                         (budget: T_c = B - L_out)
               x_i = 1 for the first 3 and last 2 sentences  (keep rules, as lower bounds; other fixings too)
               z_i <= x_i,  z_i <= x_{i+1}                    (contiguity, only when mu > 0)
               x_i + x_j - y_ij <= 1     for (i, j) in R      (redundancy, only when lambda > 0)
               x binary;  z, y in [0, 1]

``R`` is the set of pairs at least ``theta`` alike.  With ``mu >= 0`` maximised, ``z_i = x_i x_{i+1}`` at an
optimum; with ``lambda >= 0``, ``y_ij = x_i x_j``: the linearisation is exact, so the optimum is the best
selection under the evaluator's value.  Columns: ``x`` (n), then ``z`` (n - 1 when mu > 0), then ``y`` (|R|).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import coo_matrix


def knapsack_arrays(scores: NDArray[np.float64], tokens: NDArray[np.int64], keep: NDArray[np.bool_], budget_tokens: int,
                    contiguity_bonus: float = 0.0, pairs: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None,
                    pair_penalties: NDArray[np.float64] | None = None, excluded: NDArray[np.bool_] | None = None) -> tuple:
    """The module docstring's MILP as ``passModel`` arguments (column-wise, maximising); ``pairs`` are ``R``
    and ``pair_penalties`` their ``lambda sim_ij``; ``keep`` are the sentences fixed at 1 (lower bound 1), the
    ``excluded`` ones are fixed at 0 (upper bound 0)."""
    n = len(scores)
    first, second = pairs if pairs is not None else (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    penalties = np.zeros(0) if pair_penalties is None else np.asarray(pair_penalties, dtype=np.float64)
    z_count = n - 1 if contiguity_bonus > 0 else 0
    y_count = len(first)
    rows, cols, values = [np.zeros(n, dtype=np.int64)], [np.arange(n)], [np.asarray(tokens, dtype=np.float64)]
    z = n + np.arange(z_count)
    if z_count:
        left, right = 1 + 2 * np.arange(z_count), 2 + 2 * np.arange(z_count)
        rows += [left, left, right, right]
        cols += [z, np.arange(z_count), z, np.arange(1, n)]
        values += [np.ones(z_count), -np.ones(z_count), np.ones(z_count), -np.ones(z_count)]
    y = n + z_count + np.arange(y_count)
    pair_rows = 1 + 2 * z_count + np.arange(y_count)
    rows += [pair_rows, pair_rows, pair_rows]
    cols += [first, second, y]
    values += [np.ones(y_count), np.ones(y_count), -np.ones(y_count)]
    n_rows, n_cols = 1 + 2 * z_count + y_count, n + z_count + y_count
    matrix = coo_matrix((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))), shape=(n_rows, n_cols)).tocsc()
    cost = np.concatenate([np.asarray(scores, dtype=np.float64), np.full(z_count, float(contiguity_bonus)), -penalties])
    lower = np.concatenate([keep.astype(np.float64), np.zeros(z_count + y_count)])
    row_upper = np.concatenate([[float(budget_tokens)], np.zeros(2 * z_count), np.ones(y_count)])
    integer = np.concatenate([np.ones(n, dtype=np.int32), np.zeros(z_count + y_count, dtype=np.int32)])
    upper = np.ones(n_cols)
    if excluded is not None:
        upper[:n][excluded] = 0.0
    return (n_cols, n_rows, int(matrix.nnz), 1, -1, 0.0, cost, lower, upper, np.full(n_rows, -np.inf), row_upper,
            matrix.indptr[:-1].astype(np.int32), matrix.indices.astype(np.int32), matrix.data.astype(np.float64), integer)
