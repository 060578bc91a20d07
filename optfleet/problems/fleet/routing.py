"""Route the request mix through a plan: which requests each pool serves, exactly.

Implements the threshold + Compress-and-Route rule and the split rules stated
in ``plan.py``.  The
result per pool is a weighted set of ``(l_in, l_out)`` atoms whose weights are
probability masses of the whole workload (they sum to 1 over all pools).
Compressed atoms carry their compressed input length ``C_j - L_out``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.problems.fleet.plan import Plan
from optfleet.problems.fleet.workload.mix import RequestMix


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
    if plan.served_share < 1.0:
        mix = RequestMix(mix.l_in, mix.l_out, mix.prob * plan.served_share)
    if plan.rules is not None:
        return _route_by_rules(mix, plan, compressible_fraction)
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


def _route_by_rules(mix: RequestMix, plan: Plan, compressible_fraction: float) -> list[PoolTraffic]:
    """Split routing: every atom is covered by exactly one rule, whose shares it follows."""
    index = {p.name: j for j, p in enumerate(plan.pools)}
    windows = [p.window_tokens for p in plan.pools]
    l_total, l_out = mix.l_total, mix.l_out
    covered = np.zeros(len(mix.prob), dtype=np.int64)
    parts: list[list[tuple[NDArray, NDArray, NDArray, bool]]] = [[] for _ in plan.pools]
    for i, rule in enumerate(plan.rules or ()):
        mine = rule.covers(l_total, l_out)
        covered += mine
        if sum(share for _, share in rule.compressed) > compressible_fraction + 1e-6:  # solver tolerance
            raise InputError(f"plan.rules[{i}].compressed", dict(rule.compressed), f"compresses more than p_c = {compressible_fraction}")
        for name, share in rule.shares:
            j = index[name]
            if share > 0 and (l_total[mine] > windows[j]).any():
                raise InputError(f"plan.rules[{i}].shares", name, f"sends requests longer than the pool's window {windows[j]}")
            parts[j].append((mix.l_in[mine], l_out[mine], mix.prob[mine] * share, False))
        for name, share in rule.compressed:
            j = index[name]
            if share > 0 and ((l_out[mine] >= windows[j]) | (l_total[mine] <= windows[j])).any():
                raise InputError(f"plan.rules[{i}].compressed", name, f"compresses requests that need no compression or cannot be cut to {windows[j]} tokens")
            parts[j].append((windows[j] - l_out[mine], l_out[mine], mix.prob[mine] * share, True))
    if (covered != 1).any():
        bad = int(np.flatnonzero(covered != 1)[0])
        raise InputError("plan.rules", f"L_total {l_total[bad]}, L_out {l_out[bad]}", f"covered by {covered[bad]} rules; every request needs exactly one")
    traffic = []
    for pieces in parts:
        if not pieces:
            empty_i = np.zeros(0, dtype=np.int64)
            traffic.append(PoolTraffic(empty_i, empty_i, np.zeros(0), 0.0))
            continue
        weight = np.concatenate([p[2] for p in pieces])
        traffic.append(PoolTraffic(
            l_in=np.concatenate([p[0] for p in pieces]),
            l_out=np.concatenate([p[1] for p in pieces]),
            weight=weight,
            compressed_share=float(sum(p[2].sum() for p in pieces if p[3])),
        ))
    return traffic
