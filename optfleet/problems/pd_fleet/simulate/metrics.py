"""The measured figures of one replication, after the warm-up.

Like the fleet simulator's slot mode (fleet/simulate/run.py), the first ``floor(warmup_share (N - 1))`` arrivals are
the warm-up: the measured window runs from the next arrival, ``t0``, to the last, ``t1``; latencies are measured on
the requests arriving in it, busy shares on the time inside it:

* ``prefill_busy_share`` = prefill busy time in the window / (x (t1 - t0)); ``link_busy_share`` the same for the
  ``x`` links (for Poisson arrivals at ``lambda`` it tends to ``lambda E[tau] / x``);
* ``decode_busy_share`` = time the decode instances run an iteration / (y (t1 - t0)); ``decode_mean_occupancy`` =
  the time average of the running sequences per decode instance, ``integral b dt / (y (t1 - t0))``, and
  ``decode_occupancy_share`` = that / max_batch;
* TTFT and each stage's wait (prefill, link, decode admission): mean and P50/P90/P99 (ms); TPOT: mean, P50/P90/P99
  and largest (fleet/simulate/run.py ``tpot_summary``);
* with targets: ``ttft_attainment`` = share of measured requests with TTFT <= the TTFT target, ``tpot_attainment``
  = share of those with ``L_out >= 2`` with TPOT <= the TPOT target, and ``attainment`` = share meeting every given
  target (a request with ``L_out = 1`` has no TPOT and meets a TPOT target).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.fleet.simulate.run import PERCENTILES, tpot_summary
from optfleet.problems.pd_fleet.roles import DecodeRole, PrefillRole
from optfleet.problems.pd_fleet.simulate.trace import PoolTrace


def busy_seconds(start_s: NDArray[np.float64], end_s: NDArray[np.float64], window: tuple[float, float],
                 weight: NDArray[np.float64] | float = 1.0) -> float:
    """``sum weight x |[start, end] cap [t0, t1]|``: the busy time (weighted, e.g. by batch size) inside the window."""
    t0, t1 = window
    return float((weight * np.clip(np.minimum(end_s, t1) - np.maximum(start_s, t0), 0.0, None)).sum())


def measure(trace: PoolTrace, prefill: PrefillRole, decode: DecodeRole, *, warmup_share: float,
            ttft_target_ms: float | None = None, tpot_target_ms: float | None = None) -> dict[str, float]:
    """The figures of the module docstring for one replication (busy shares are NaN for a window of no length)."""
    arrival = trace.arrival_s
    t0, t1 = float(arrival[int(warmup_share * (len(arrival) - 1))]), float(arrival[-1])
    keep = arrival >= t0
    out: dict[str, float] = {"requests": float(keep.sum())}
    ttft = trace.ttft_ms[keep]
    stages = {"ttft": ttft, "prefill_wait": trace.prefill_wait_ms[keep], "link_wait": trace.link_wait_ms[keep],
              "decode_wait": trace.decode_wait_ms[keep]}
    for name, values in stages.items():
        out[f"{name}_mean_ms"] = float(values.mean())
        out.update({f"{name}_p{p}_ms": float(np.percentile(values, p)) for p in PERCENTILES})
    tpot = trace.tpot_ms[keep]
    out.update(tpot_summary(tpot[~np.isnan(tpot)], tpot_target_ms))
    out.update(_attainment(ttft, tpot, ttft_target_ms, tpot_target_ms))
    times, up, span = trace.decode, trace.upstream, t1 - t0
    with np.errstate(invalid="ignore", divide="ignore"):
        out["prefill_busy_share"] = busy_seconds(up.prefill_start_s, up.prefill_end_s, (t0, t1)) / (prefill.instances * span)
        out["link_busy_share"] = busy_seconds(up.link_start_s, up.link_end_s, (t0, t1)) / (prefill.instances * span)
        out["decode_busy_share"] = busy_seconds(times.run_start_s, times.run_end_s, (t0, t1)) / (decode.instances * span)
        occupancy = busy_seconds(times.run_start_s, times.run_end_s, (t0, t1), times.run_batch) / (decode.instances * span)
    out["decode_mean_occupancy"] = occupancy
    out["decode_occupancy_share"] = occupancy / decode.max_batch
    return {name: float(value) for name, value in out.items()}


def _attainment(ttft_ms: NDArray[np.float64], tpot_ms: NDArray[np.float64], ttft_target_ms: float | None,
                tpot_target_ms: float | None) -> dict[str, float]:
    """``ttft_attainment`` and ``attainment`` (module docstring); ``tpot_ms`` per request, NaN for ``L_out = 1``."""
    if ttft_target_ms is None and tpot_target_ms is None:
        return {}
    met = np.ones(len(ttft_ms), dtype=bool)
    out = {}
    if ttft_target_ms is not None:
        out["ttft_attainment"] = float(np.mean(ttft_ms <= ttft_target_ms))
        met &= ttft_ms <= ttft_target_ms
    if tpot_target_ms is not None:
        met &= ~(tpot_ms > tpot_target_ms)  # NaN (L_out = 1) meets it
    out["attainment"] = float(met.mean())
    return out
