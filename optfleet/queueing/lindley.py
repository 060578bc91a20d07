"""The waiting time of a single-server FIFO queue with renewal arrivals (GI/G/1), on a grid, by Lindley's recursion.

A request's wait obeys ``W' = max(0, W + S - A)`` (Lindley, 1952): ``S`` the service of the request before it and
``A`` the time between their arrivals.  With ``V = S - A`` the stationary law of ``W`` is the fixed point of
``W = max(0, W + V)``, found by iterating the law from ``W = 0`` (each step one FFT convolution with ``V``; the
iterates rise to the fixed point) until no grid point of the cumulative law moves by more than ``TOLERANCE``.

The interarrival times are gamma of shape ``k`` (squared coefficient of variation ``1/k``; Erlang for a whole
``k``): ``k = 1`` is Poisson (the M/G/1 queue), large ``k`` nearly periodic.  Everything is on a grid of ``cell_ms``
per row, services rounded to the nearest point; the law of ``W`` is kept on ``cells`` points, its mass beyond them (if any) on the last.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.special import gammainc

TOLERANCE = 1e-8
MAX_STEPS = 2000  # a row not settled by then (a load near 1) is reported unsettled, not used
QUANTILE = 0.99


def renewal_wait_pmf(service_share: NDArray, service_ms: NDArray, rate_per_ms: NDArray, phases: NDArray, cell_ms: NDArray,
                     cells: int, give_up_ms: NDArray | None = None) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Per row, the stationary law of the wait on ``cells`` points of ``cell_ms`` (``[row, k]`` = P[W ~ k cell_ms]), the
    mass the grid could not hold (put on its last point; 1 for a row not settled in ``MAX_STEPS`` steps) and whether the row was given up.  ``service_share[row, b]``
    is the share of requests with service ``service_ms[row, b]``; arrivals at ``rate_per_ms``, interarrival times gamma
    of shape ``phases``.  Each row needs load ``rate E[S] < 1``.  The iterates rise (stochastically) to the fixed point, so once an
    iterate's 0.99 point reaches ``give_up_ms[row]`` the stationary one is above it too: the row stops there (given up)."""
    rows = len(cell_ms)
    service_pos = np.rint(service_ms / cell_ms[:, None]).astype(np.int64)
    top = int(np.max(np.where(service_share > 0, service_pos, 0), initial=0)) + 1
    service = np.zeros((rows, top))
    np.add.at(service, (np.repeat(np.arange(rows), service_share.shape[-1]), np.minimum(service_pos, top - 1).ravel()), service_share.ravel())
    # the interarrival law on [0, span) cells (nearest point), the rest at "beyond": W restarts at 0 after it
    span = cells + top
    edges = (np.arange(span + 1) - 0.5).clip(min=0.0) * cell_ms[:, None]
    k = np.asarray(phases, dtype=np.float64)[:, None]
    cdf = gammainc(k, edges * k * np.asarray(rate_per_ms, dtype=np.float64)[:, None])
    gap = np.diff(cdf, axis=-1)
    beyond = 1.0 - cdf[:, -1]
    # V = S - A on indices -(span - 1) .. top - 1, stored from offset 0
    size = int(2 ** np.ceil(np.log2(cells + span + top)))
    v_hat = np.fft.rfft(service, size) * np.fft.rfft(gap[:, ::-1], size)
    wait = np.zeros((rows, cells))
    wait[:, 0] = 1.0
    lost = np.zeros(rows)
    active = np.ones(rows, dtype=bool)
    given_up = np.zeros(rows, dtype=bool)
    limit = np.full(rows, np.inf) if give_up_ms is None else np.asarray(give_up_ms, dtype=np.float64) / cell_ms
    for _ in range(MAX_STEPS):
        r = np.flatnonzero(active)
        moved = np.fft.irfft(np.fft.rfft(wait[r], size) * v_hat[r], size)
        zero = span - 1  # the index of value 0
        new = moved[:, zero : zero + cells].copy()
        new[:, 0] += moved[:, :zero].sum(axis=-1) + beyond[r]
        over = moved[:, zero + cells :].sum(axis=-1)
        new[:, -1] += over
        new = np.clip(new, 0.0, None)
        new /= new.sum(axis=-1, keepdims=True)
        cdf = np.cumsum(new, axis=-1)
        change = np.max(np.abs(cdf - np.cumsum(wait[r], axis=-1)), axis=-1)
        wait[r] = new
        lost[r] = over
        above = np.argmax(cdf >= QUANTILE, axis=-1) > limit[r] + 1.0  # a cell of margin for the rounding to the grid
        given_up[r[above]] = True
        active[r[(change <= TOLERANCE) | above]] = False
        if not active.any():
            break
    lost[active] = 1.0  # not settled in MAX_STEPS steps: not used
    return wait, lost, given_up
