"""Route the request mix through a plan: which requests each pool serves, exactly.

Implements the threshold + Compress-and-Route rule stated in ``plan.py``.  The
result per pool is a weighted set of ``(l_in, l_out)`` atoms whose weights are
probability masses of the whole workload (they sum to 1 over all pools).
Compressed atoms carry their compressed input length ``C_j - L_out``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.fleet.plan import Plan
from optfleet.workload.mix import RequestMix


@dataclass(frozen=True)
class PoolTraffic:
    """The atoms one pool serves; ``compressed_share`` is the mass that arrived compressed."""

    l_in: NDArray[np.int64]
    l_out: NDArray[np.int64]
    weight: NDArray[np.float64]
    compressed_share: float

    @property
    def share(self) -> float:
        return float(self.weight.sum())


def route(mix: RequestMix, plan: Plan, compressible_fraction: float) -> list[PoolTraffic]:
    """Split ``mix`` over ``plan.pools`` (same order)."""
    windows = np.array([p.window_tokens for p in plan.pools], dtype=np.int64)
    l_total = mix.l_total
    if l_total[-1] > windows[-1]:
        raise InputError("plan.pools", windows.tolist(), f"the largest window {windows[-1]} is below the longest request ({l_total[-1]} tokens)")
    home = np.searchsorted(windows, l_total, side="left")
    below = np.maximum(home - 1, 0)
    lower_window = windows[below]
    compressible = (
        (home > 0)
        & (l_total <= plan.gamma * lower_window)
        & (mix.l_out < lower_window)
    ) * compressible_fraction
    stay = mix.prob * (1.0 - compressible)
    moved = mix.prob * compressible
    traffic = []
    for j in range(len(windows)):
        mine = (home == j) & (stay > 0)
        into = (below == j) & (home == j + 1) & (moved > 0)
        traffic.append(
            PoolTraffic(
                l_in=np.concatenate([mix.l_in[mine], windows[j] - mix.l_out[into]]),
                l_out=np.concatenate([mix.l_out[mine], mix.l_out[into]]),
                weight=np.concatenate([stay[mine], moved[into]]),
                compressed_share=float(moved[into].sum()),
            )
        )
    return traffic
