"""The dispatcher: token budget -> pool, vectorised (token-budget pool routing, Algorithm 1; Compress-and-Route).

Per request with estimated budget ``L = ceil(bytes / c_route) + L_out`` (Eq. 3), short-pool window ``C_s`` and
routing threshold ``B <= C_s`` (:func:`route`), in this order:

1. **Compress-and-Route band** (FleetOpt, Chen et al. 2026, section 5.1): a request of a compressible category
   with ``B < L <= gamma B`` and ``L_out < B`` goes short, its prompt compressed to ``T_c = B - L_out`` tokens,
   so ``T_c + L_out = B <= C_s`` (Eq. 15): it fits by construction.
2. **Hard rule** (Algorithm 1, line 7): ``L > C_s`` goes long.
3. **Budget rule** (lines 10-14): short if ``L <= B``, else long.

Load-aware spillover (lines 16-17) needs the pools' live state; it is applied while the pools are simulated
(spill.py).  A request the dispatcher may spill to the short pool must fit it: ``L <= C_s`` by the estimate.

The band is decided on the estimate; the compressor then counts the prompt's true tokens (:func:`compression`):
a request whose true budget is within ``B`` needs no compression and is served as it is; one within the band is
cut to ``T_c``; one above ``gamma B`` would be cut by more than the band allows, so the compressor refuses it and
it is served long (the band's fidelity limit holds on the true lengths, as in the hindsight model).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError

SHORT, LONG = 0, 1


@dataclass(frozen=True)
class DispatchRule:
    """Threshold ``B`` (``b_short_tokens``), short window ``C_s``, the C&R multiplier and compressible codes."""

    b_short_tokens: int
    short_window_tokens: int
    compress_gamma: float = 1.0
    compressible: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.b_short_tokens < 1:
            raise InputError("dispatcher.b_short_tokens", self.b_short_tokens, "must be >= 1 token")
        if self.b_short_tokens > self.short_window_tokens:
            raise InputError("dispatcher.b_short_tokens", self.b_short_tokens,
                             f"above the short pool's window of {self.short_window_tokens} tokens: a request routed short "
                             "could not fit it")
        if not 1.0 <= self.compress_gamma < np.inf:
            raise InputError("dispatcher.compress_gamma", self.compress_gamma, "the C&R band multiplier must be a finite number >= 1")


@dataclass(frozen=True)
class Dispatch:
    """Per request: the pool chosen before spillover, the estimated budget, the C&R flag and budget ``T_c``."""

    pool: NDArray[np.int64]
    estimated_total_tokens: NDArray[np.int64]
    compressed: NDArray[np.bool_]
    compressed_input_tokens: NDArray[np.int64]


def estimated_total(bytes_: NDArray[np.int64], route_ratio: NDArray[np.float64], max_output_tokens: NDArray[np.int64]) -> NDArray[np.int64]:
    """``L_total = ceil(bytes / c_route) + max_output_tokens`` (Eq. 3)."""
    return np.ceil(np.asarray(bytes_, dtype=np.float64) / route_ratio).astype(np.int64) + max_output_tokens


def route(rule: DispatchRule, estimated_total_tokens: NDArray[np.int64], max_output_tokens: NDArray[np.int64],
          category: NDArray[np.int64]) -> Dispatch:
    """Steps 1-3 of the module docstring for every request at once."""
    b = rule.b_short_tokens
    est = estimated_total_tokens
    band = np.zeros(len(est), dtype=bool)
    if rule.compressible and rule.compress_gamma > 1.0:
        band = (np.isin(category, rule.compressible) & (est > b) & (est <= np.floor(rule.compress_gamma * b))
                & (max_output_tokens < b))
    short = band | ((est <= rule.short_window_tokens) & (est <= b))
    pool = np.where(short, SHORT, LONG).astype(np.int64)
    budget = np.where(band, b - max_output_tokens, 0).astype(np.int64)
    return Dispatch(pool, est, band, budget)


@dataclass(frozen=True)
class Compression:
    """What the compressor does with the requests the band sends it, on their true budgets: ``compressed`` (cut to
    ``T_c``) and ``refused`` (above ``gamma B``: served long); the rest of the band needs no compression."""

    compressed: NDArray[np.bool_]
    refused: NDArray[np.bool_]


def compression(rule: DispatchRule, band: NDArray[np.bool_], true_total_tokens: NDArray[np.int64]) -> Compression:
    """The module docstring's rule for the band requests ``band`` placed short."""
    b = rule.b_short_tokens
    refused = band & (true_total_tokens > np.floor(rule.compress_gamma * b))
    return Compression(band & (true_total_tokens > b) & ~refused, refused)
