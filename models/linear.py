"""Linear expressions built as one Pyomo node (several times faster than Python's ``sum`` over Pyomo terms)."""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
from pyomo.core.expr.numeric_expr import LinearExpression, MonomialTermExpression


def total(variables: list) -> LinearExpression:
    """The sum of ``variables`` as one linear expression."""
    return LinearExpression(variables)


def weighted(var: pyo.Var, classes: list[int], j: int, coefficients: np.ndarray) -> LinearExpression:
    """``sum_k c_k var[k, j]`` over ``classes`` with a nonzero coefficient, as one linear expression."""
    values = coefficients[classes].tolist()
    return LinearExpression([MonomialTermExpression((c, var[k, j])) for k, c in zip(classes, values, strict=True) if c != 0.0])


def scaled(terms: list[tuple[float, pyo.Var]]) -> LinearExpression:
    """``sum c v`` over the pairs ``(c, v)``, as one linear expression."""
    return LinearExpression([MonomialTermExpression(term) for term in terms])
