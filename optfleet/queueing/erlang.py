"""Erlang B / Erlang C for M/M/c-type slot pools, stable for c up to 1e6.

Erlang B is the Poisson pmf/cdf ratio (Jagerman's identity):

    B(c, a) = P[X = c] / P[X <= c],   X ~ Poisson(a)

evaluated in log space with ``scipy.special`` (``gammaln`` for the pmf, the
regularised upper incomplete gamma ``gammaincc(c+1, a) = P[X <= c]`` for the
cdf), so no factorial or power of ``a`` is ever formed.  Erlang C follows
from B (FleetOpt, Chen et al. 2026):

    C(c, a) = c B / (c - a (1 - B))     for a < c,   C = 1 for a >= c.

All functions broadcast over numpy arrays of ``c`` and ``a``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special


def log_erlang_b(servers: ArrayLike, load_erlangs: ArrayLike) -> NDArray[np.float64]:
    """``ln B(c, a)`` = ``ln P[X=c] - ln P[X<=c]`` with X ~ Poisson(a); ``a = 0`` gives ``-inf``.

    Where ``P[X <= c]`` underflows (heavy overload, ``a`` well above ``c``) the
    series ``1/B = sum_{j=0..c} c!/((c-j)! a^j)`` is summed instead; its terms
    shrink at least by ``c/a`` per step, so it stops after a few hundred terms.
    """
    c, a = np.broadcast_arrays(np.asarray(servers, dtype=np.float64), np.asarray(load_erlangs, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pmf = c * np.log(a) - a - special.gammaln(c + 1.0)
        log_cdf = np.log(special.gammaincc(c + 1.0, a))
    result = np.where(a > 0, log_pmf - log_cdf, -np.inf)
    underflow = (a > 0) & ~np.isfinite(log_cdf)
    if underflow.any():
        result = np.array(result, dtype=np.float64)
        result[underflow] = -_log_inverse_b_series(c[underflow], a[underflow])
    return result


def _log_inverse_b_series(c: NDArray[np.float64], a: NDArray[np.float64]) -> NDArray[np.float64]:
    """``ln(1/B)`` by the series of :func:`log_erlang_b` (only called with ``a > c``)."""
    total = np.ones_like(a)
    term = np.ones_like(a)
    j = 0
    while np.any(term > 1e-17 * total):
        term = term * np.maximum(c - j, 0.0) / a
        total += term
        j += 1
    return np.log(total)


def erlang_b(servers: ArrayLike, load_erlangs: ArrayLike) -> NDArray[np.float64]:
    """Erlang B blocking probability ``B(c, a)`` (loss system M/G/c/c)."""
    return np.exp(log_erlang_b(servers, load_erlangs))


def erlang_c(servers: ArrayLike, load_erlangs: ArrayLike) -> NDArray[np.float64]:
    """Erlang C probability of waiting ``C(c, a) = cB / (c - a(1-B))``; 1 when ``a >= c``."""
    c = np.asarray(servers, dtype=np.float64)
    a = np.asarray(load_erlangs, dtype=np.float64)
    b = erlang_b(c, a)
    stable = a < c
    with np.errstate(divide="ignore", invalid="ignore"):
        value = c * b / (c - a * (1.0 - b))
    # C >= B exactly (the denominator is at most c); rounding can put C one ulp below B at tiny loads.
    return np.where(stable, np.clip(np.maximum(value, b), 0.0, 1.0), 1.0)
