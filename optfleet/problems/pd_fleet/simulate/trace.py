"""One replication of a disaggregated pool: every request's times through the three stages of roles.py.

For request ``i`` (arrival ``A``, prompt ``L_in``, ``L_out`` output tokens):

    prefill wait = prefill start - A,   link wait = link start - prefill end,   decode wait = admission - link end,
    TTFT = first token - A  (the end of its first decode iteration: roles.py),
    TPOT = (last token - first token) / (L_out - 1)  for L_out >= 2.

Alone in the pool a request meets no wait and its first decode iteration runs it alone at context ``L_in``, so its
TTFT is :func:`ttft_floor_ms`, ``S(L_in) + tau(L_in) + step_ms(0, 1, L_in)``; with other requests around it, every
term can only grow (waits are >= 0, and the step grows with ``b`` and ``k`` when its coefficients are >= 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.errors import InputError
from optfleet.problems.fleet.simulate.run import request_tpot_ms
from optfleet.problems.pd_fleet.roles import DecodeRole, PrefillRole, TransferLink
from optfleet.problems.pd_fleet.simulate.decode import DecodeTimes, decode_step, simulate_decode
from optfleet.problems.pd_fleet.simulate.prefill import UpstreamTimes, prefill_and_transfer, prefill_service_ms
from optfleet.results import json_safe


@dataclass(frozen=True)
class PoolTrace:
    """The requests of one replication (arrival order) and what each stage did with them; times in seconds."""

    arrival_s: NDArray[np.float64]
    l_in: NDArray[np.int64]
    l_out: NDArray[np.int64]
    upstream: UpstreamTimes
    decode_instance: NDArray[np.int64]
    decode: DecodeTimes

    @property
    def ttft_ms(self) -> NDArray[np.float64]:
        return 1e3 * (self.decode.first_token_s - self.arrival_s)

    @property
    def tpot_ms(self) -> NDArray[np.float64]:
        """TPOT of every request, NaN for those with ``L_out = 1`` (no token after the first)."""
        tpot = np.full(len(self.arrival_s), np.nan)
        tpot[self.l_out >= 2] = request_tpot_ms(self.decode.first_token_s, self.decode.finish_s, self.l_out)
        return tpot

    @property
    def prefill_wait_ms(self) -> NDArray[np.float64]:
        return 1e3 * (self.upstream.prefill_start_s - self.arrival_s)

    @property
    def link_wait_ms(self) -> NDArray[np.float64]:
        return 1e3 * (self.upstream.link_start_s - self.upstream.prefill_end_s)

    @property
    def decode_wait_ms(self) -> NDArray[np.float64]:
        return 1e3 * (self.decode.admit_s - self.upstream.link_end_s)

    def to_dict(self) -> dict[str, Any]:
        """Per request: lengths, instances, the stage times (s), the waits, TTFT and TPOT (ms; TPOT null for
        ``L_out = 1``)."""
        columns = {
            "arrival_s": self.arrival_s, "l_in": self.l_in, "l_out": self.l_out, "prefill_instance": self.upstream.instance,
            "prefill_start_s": self.upstream.prefill_start_s, "prefill_end_s": self.upstream.prefill_end_s,
            "link_start_s": self.upstream.link_start_s, "link_end_s": self.upstream.link_end_s,
            "decode_instance": self.decode_instance, "decode_admit_s": self.decode.admit_s,
            "first_token_s": self.decode.first_token_s, "finish_s": self.decode.finish_s,
            "prefill_wait_ms": self.prefill_wait_ms, "link_wait_ms": self.link_wait_ms, "decode_wait_ms": self.decode_wait_ms,
            "ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms,
        }
        return json_safe({"requests": {name: values.tolist() for name, values in columns.items()},
                          "decode_tokens": self.decode.tokens})


def simulate_requests(arrival_s: ArrayLike, l_in: ArrayLike, l_out: ArrayLike, prefill: PrefillRole, link: TransferLink,
                      decode: DecodeRole, rng: np.random.Generator) -> PoolTrace:
    """Serve the requests (arrival times in s, non-decreasing; prompt and output tokens, each >= 1) by the pool's
    policy (roles.py); ``rng`` draws each request's decode instance."""
    arrival, prompt, output = _checked_requests(arrival_s, l_in, l_out)
    decode_step(decode)  # refuse a non-affine decode engine before any work
    service_s = prefill_service_ms(prefill, prompt) / 1e3
    transfer_s = link.transfer_ms(prompt) / 1e3
    upstream = prefill_and_transfer(arrival, service_s, transfer_s, prefill.instances)
    instance = rng.integers(decode.instances, size=len(arrival))
    times = simulate_decode(decode, upstream.link_end_s, prompt, output, instance)
    return PoolTrace(arrival, prompt, output, upstream, instance, times)


def ttft_floor_ms(l_in: ArrayLike, prefill: PrefillRole, link: TransferLink, decode: DecodeRole) -> NDArray[np.float64]:
    """TTFT of a request alone in the pool (module docstring): ``S(L_in) + tau(L_in) + step_ms(0, 1, L_in)`` (ms)."""
    prompt = np.asarray(l_in, dtype=np.int64)
    return prefill_service_ms(prefill, prompt) + link.transfer_ms(prompt) + decode.step.step_ms(0, 1, prompt)


def _checked_requests(arrival_s: ArrayLike, l_in: ArrayLike, l_out: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]:
    """The requests as arrays, or an error naming the first bad field."""
    arrival = np.asarray(arrival_s, dtype=np.float64)
    if arrival.ndim != 1 or len(arrival) == 0:
        raise InputError("arrival_s", arrival_s, "must be a non-empty list of arrival times")
    if not np.all(np.isfinite(arrival)) or arrival[0] < 0 or np.any(np.diff(arrival) < 0):
        raise InputError("arrival_s", arrival_s, "must be finite, >= 0 and non-decreasing (the requests in arrival order)")
    lengths = []
    for name, values in (("l_in", l_in), ("l_out", l_out)):
        raw = np.asarray(values)
        if raw.shape != arrival.shape or not np.issubdtype(raw.dtype, np.integer) or raw.min() < 1:
            raise InputError(name, values, f"must be {len(arrival)} integer token counts >= 1, one per arrival")
        lengths.append(raw.astype(np.int64))
    return arrival, lengths[0], lengths[1]
