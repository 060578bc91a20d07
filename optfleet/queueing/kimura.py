"""Kimura's two-moment approximation of the M/G/c waiting-time quantile.

The waiting time of an M/G/c queue is approximated as
``P[W > t] = C(c, a) exp(-2 (c mu - lambda) t / (1 + Cs^2))`` (Kimura 1994's
two-moment scaling of the M/M/c tail, as used by the FleetOpt paper), so the
q-quantile is

    W_q = ln(C / (1 - q)) (1 + Cs^2) / (2 (c mu - lambda))   if C > 1 - q, else 0.

With ``mu = 1/E[S]`` and ``lambda = a mu`` this is
``W_q = ln(C / (1-q)) (1 + Cs^2) E[S] / (2 (c - a))``.  Infinite when ``a >= c``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.queueing.erlang import erlang_c


def wait_quantile_s(
    servers: ArrayLike,
    load_erlangs: ArrayLike,
    mean_service_s: ArrayLike,
    service_scv: ArrayLike,
    quantile: float = 0.99,
) -> NDArray[np.float64]:
    """Kimura's ``W_q`` in seconds for ``c`` servers, offered load ``a``, ``E[S]`` and ``Cs^2``."""
    c = np.asarray(servers, dtype=np.float64)
    a = np.asarray(load_erlangs, dtype=np.float64)
    es = np.asarray(mean_service_s, dtype=np.float64)
    scv = np.asarray(service_scv, dtype=np.float64)
    tail = 1.0 - quantile
    prob_wait = erlang_c(c, a)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        w = np.log(prob_wait / tail) * (1.0 + scv) * es / (2.0 * (c - a))
    w = np.where(prob_wait > tail, w, 0.0)
    return np.where(a < c, w, np.inf)
