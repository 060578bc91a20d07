"""How many spot GPUs a plan may count on: the binomial quantile of the survivors.

Each of ``s`` spot GPUs bought for a period survives it independently with probability ``1 - p``, so the survivors
are ``S ~ Binomial(s, 1 - p)``.  At confidence ``c`` a plan may count

    k(s) = max { k : P(S >= k) >= c } = s - F_D^{-1}(c),   D = s - S ~ Binomial(s, p),

with ``F_D^{-1}(c)`` the smallest ``j`` such that ``P(D <= j) >= c``: the spot GPUs that survive with probability at
least ``c``.  ``k`` is non-decreasing in ``s`` (adding a GPU makes ``S`` stochastically larger), ``k(0) = 0``, and
at ``c = 1`` every spot GPU with ``p > 0`` counts nothing.  The chance is per GPU type and period: each type's spot
GPUs in each period meet it, independently of the other types and periods.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.stats import binom

CDF_TOLERANCE = 1e-12
"""``P(D <= j) >= c`` is tested to this tolerance: the binomial CDF is summed in floating point, and a quantile at
exactly ``c`` must not be missed by round-off."""


def counted_spot(max_gpus: int, preemption_probability: float, confidence: float) -> NDArray[np.int64]:
    """``k(s)`` for ``s = 0..max_gpus`` (module docstring)."""
    counts = np.arange(max_gpus + 1)
    if preemption_probability == 0.0:
        return counts
    if confidence >= 1.0:
        return np.zeros(max_gpus + 1, dtype=np.int64)
    out = np.zeros(max_gpus + 1, dtype=np.int64)
    for s in counts[1:]:
        cdf = binom.cdf(np.arange(s + 1), s, preemption_probability)
        lost = int(np.argmax(cdf >= confidence - CDF_TOLERANCE))
        out[s] = s - lost
    return out


def survival_probability(spot_gpus: int, needed_gpus: int, preemption_probability: float) -> float:
    """``P(S >= needed)`` for ``S ~ Binomial(spot_gpus, 1 - p)`` (1 when nothing is needed)."""
    if needed_gpus <= 0:
        return 1.0
    if needed_gpus > spot_gpus:
        return 0.0
    return float(binom.sf(needed_gpus - 1, spot_gpus, 1.0 - preemption_probability))
