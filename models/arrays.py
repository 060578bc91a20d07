"""Array models: the arguments of ``Highs.passModel`` from coordinate triplets (the models built without Pyomo)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.sparse import coo_matrix


def pass_model_args(cost: ArrayLike, lower: ArrayLike, upper: ArrayLike, integer: ArrayLike, rows: NDArray, cols: NDArray, values: NDArray,
                    row_lower: ArrayLike, row_upper: ArrayLike) -> tuple:
    """``Highs.passModel`` arguments (column-wise, minimising) of ``min cost x`` subject to
    ``row_lower <= A x <= row_upper``, ``lower <= x <= upper``, ``x_i`` integer where ``integer[i]``, with ``A``
    given by its triplets ``A[rows, cols] = values`` (repeated entries add up)."""
    matrix = coo_matrix((values, (rows, cols)), shape=(len(row_lower), len(cost))).tocsc()
    return (len(cost), len(row_lower), int(matrix.nnz), 1, 1, 0.0, np.asarray(cost, dtype=np.float64), np.asarray(lower, dtype=np.float64),
            np.asarray(upper, dtype=np.float64), np.asarray(row_lower, dtype=np.float64), np.asarray(row_upper, dtype=np.float64),
            matrix.indptr[:-1].astype(np.int32), matrix.indices.astype(np.int32), matrix.data.astype(np.float64),
            np.asarray(integer, dtype=np.int32))
