"""Minimum instance count of one pool under a utilisation cap and a P99 wait budget.

A pool of ``n`` GPUs with ``n_max`` KV slots each is an M/G/c queue with
``c = n * n_max`` slot-servers and offered load ``a = lambda E[S]`` (FleetOpt,
Chen et al. 2026).  It is feasible when

    a / c <= rho_max                         (utilisation cap)
    W99(c) <= wait_budget_s                  (Kimura P99 wait, see kimura.py)

``W99`` is non-increasing in ``c`` (Erlang C falls and ``c - a`` grows), so the
feasible set is an up-set of ``n``: the minimum is found by doubling from the
cap's lower bound ``ceil(a / (rho_max n_max))`` until feasible, then bisection.
Every array argument broadcasts, so a whole sweep is sized in one call.  A
non-positive wait budget has no feasible ``n`` and returns ``-1`` at once:
the search never loops on it.  Neither does a pool that would need more than
``MAX_GPUS`` GPUs (a huge load, a tiny ``rho_max``, no slot per GPU): it
returns ``-1`` too, never a count that float64 or int64 cannot hold.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.queueing.kimura import wait_quantile_s

INFEASIBLE = -1
# Relative slack on "load <= rho_max c" and "TTFT <= SLO": the same load summed in a
# different order (evaluator vs MILP coefficients) differs in the last digits.
RELATIVE_TOLERANCE = 1e-9
MAX_GPUS = 2**53
"""Largest instance count a pool is sized to.  The queueing math holds ``n`` and ``c = n n_max`` in float64, whose
integers are exact only up to 2^53 (about 9e15, a million times the GPUs ever built): beyond it two counts could not
be told apart, so a pool that needs more has no count the model can state and is infeasible."""


def cap_lower_bound_gpus(load_erlangs: ArrayLike, slots_per_instance: ArrayLike, rho_max: float) -> NDArray[np.int64]:
    """``ceil(a / (rho_max n_max))``, at least 1 for a positive load and 0 for none."""
    a = np.asarray(load_erlangs, dtype=np.float64)
    n_max = np.asarray(slots_per_instance, dtype=np.float64)
    # A tiny tolerance keeps a/(rho n) that is an exact integer in floating point from rounding up.
    n = np.ceil(a / (rho_max * n_max) * (1.0 - RELATIVE_TOLERANCE))
    return np.where(a > 0, np.maximum(n, 1.0), 0.0).astype(np.int64)


def pool_is_feasible(
    gpus: ArrayLike,
    load_erlangs: ArrayLike,
    slots_per_instance: ArrayLike,
    mean_service_s: ArrayLike,
    service_scv: ArrayLike,
    wait_budget_s: ArrayLike,
    rho_max: float,
    quantile: float = 0.99,
) -> NDArray[np.bool_]:
    """Both feasibility conditions of the module docstring for ``n = gpus`` (the wait at ``quantile``)."""
    c = np.asarray(gpus, dtype=np.float64) * np.asarray(slots_per_instance, dtype=np.float64)
    a = np.asarray(load_erlangs, dtype=np.float64)
    cap_ok = a <= rho_max * c * (1.0 + RELATIVE_TOLERANCE)
    wait_ok = wait_quantile_s(c, a, mean_service_s, service_scv, quantile) <= np.asarray(wait_budget_s)
    return (cap_ok & wait_ok & (np.asarray(wait_budget_s) > 0)) | (a <= 0)


def min_instances(
    load_erlangs: ArrayLike,
    slots_per_instance: ArrayLike,
    mean_service_s: ArrayLike,
    service_scv: ArrayLike,
    wait_budget_s: ArrayLike,
    rho_max: float,
    quantile: float = 0.99,
) -> NDArray[np.int64]:
    """Smallest ``n`` meeting the cap and the wait budget at ``quantile`` (``-1`` where none exists).

    A pool with zero load needs 0 GPUs.
    """
    a, n_max, es, scv, budget = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (load_erlangs, slots_per_instance, mean_service_s, service_scv, wait_budget_s))
    )

    def feasible(n: NDArray[np.int64]) -> NDArray[np.bool_]:
        return pool_is_feasible(n, a, n_max, es, scv, budget, rho_max, quantile)

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        countable = (a <= 0) | (a / (rho_max * n_max) <= MAX_GPUS)
    a = np.where(countable, a, 0.0)  # an uncountable pool is answered -1 below; 0 keeps its arithmetic quiet
    lo = cap_lower_bound_gpus(a, n_max, rho_max)
    return smallest_feasible(lo, feasible, ((budget > 0) | (a <= 0)) & countable)


def smallest_feasible(lo: NDArray[np.int64], feasible: Callable[[NDArray[np.int64]], NDArray[np.bool_]],
                      solvable: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Per element, the smallest ``n >= lo`` with ``feasible(n)`` (an up-set in ``n``; ``lo - 1`` is known
    infeasible or below a lower bound), ``-1`` where not ``solvable`` or where no ``n <= MAX_GPUS`` is feasible:
    doubling from ``lo`` until feasible, then bisection, all elements at once."""
    solvable = solvable.copy()
    ok = feasible(lo) | ~solvable
    # Doubling: hi is feasible, lo - 1 is not; at most log2(MAX_GPUS) rounds.
    hi = lo.copy()
    while not ok.all():
        grown = np.minimum(np.maximum(hi, 1) * 2, MAX_GPUS)
        beyond = ~ok & (grown == hi)  # already at MAX_GPUS and still infeasible: no count the model can state
        solvable &= ~beyond
        ok |= beyond
        hi = np.where(ok, hi, grown)
        ok = ok | feasible(hi)
    known_bad = np.where(feasible(lo), lo - 1, np.maximum(hi // 2, lo))
    # Bisection on (known_bad, hi]: hi feasible, known_bad infeasible (or below the lower bound).
    while True:
        open_gap = (hi - known_bad > 1) & solvable
        if not open_gap.any():
            break
        mid = (hi + known_bad) // 2
        mid_ok = feasible(mid)
        hi = np.where(open_gap & mid_ok, mid, hi)
        known_bad = np.where(open_gap & ~mid_ok, mid, known_bad)
    return np.where(solvable, hi, INFEASIBLE).astype(np.int64)
