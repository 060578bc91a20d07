"""A router variant run over the stream: calibrate, dispatch, spill; the placement every request ends with.

Per request in arrival order (calibrator.py, dispatcher.py, spill.py): the calibrator's ratio gives the estimated
budget, the dispatcher a pool (and the C&R budget ``T_c`` in the band), spillover may move it on the pools' live
state.  Then, on the true token counts:

* **mis-route**: a request placed short, not compressed, whose true ``L_in + L_out`` exceeds the short window
  (a real engine preempts or rejects it).  The replay rejects it at admission and serves it in the long pool
  (an immediate retry), so it costs long-pool work and is counted;
* **compressed**: placed short by the band and, on its true budget, within it (dispatcher.py ``compression``);
  the compressor is assumed to meet its budget in true tokens, so it is served with ``T_c = B - L_out`` prompt
  tokens (``T_c + L_out = B``, FleetOpt Eq. 15).  A band request whose true budget fits ``B`` is served short as
  it is; one above ``gamma B`` is **refused** by the compressor and served long.  A band request spilled to the
  long pool is served uncompressed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.routing.calibrator import Calibrator, calibrate, observed_ratios
from optfleet.problems.routing.dispatcher import LONG, SHORT, compression, estimated_total, route
from optfleet.problems.routing.problem import RoutingProblem
from optfleet.problems.routing.spill import spill


@dataclass(frozen=True)
class Routing:
    """Where every request is served (0 short, 1 long) and with how many prompt tokens; the dispatcher's flags.

    ``route_ratio`` and ``mean_ratio`` are the calibrator's, ``refused`` the compressor's refusals (None for a
    routing made in hindsight)."""

    pool: NDArray[np.int64]
    input_tokens: NDArray[np.int64]
    compressed: NDArray[np.bool_]
    misrouted: NDArray[np.bool_]
    spilled: NDArray[np.bool_]
    route_ratio: NDArray[np.float64] | None = None
    mean_ratio: NDArray[np.float64] | None = None
    refused: NDArray[np.bool_] | None = None


def service_s(problem: RoutingProblem, input_tokens: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Every request's service time ``S = (ceil(L_in / C_chunk) + L_out) t_iter`` in the short and the long pool."""
    out = problem.stream.output_tokens
    short, long = problem.pools
    return short.service_ms(input_tokens, out) / 1000.0, long.service_ms(problem.stream.input_tokens, out) / 1000.0


def replay_router(problem: RoutingProblem, calibrator: Calibrator) -> Routing:
    """The module docstring's steps for one calibrator variant."""
    s = problem.stream
    calibration = calibrate(calibrator, s.category, observed_ratios(s.bytes, s.input_tokens))
    estimate = estimated_total(s.bytes, calibration.route_ratio, s.output_tokens)
    dispatch = route(problem.rule, estimate, s.output_tokens, s.category)
    short_input = np.where(dispatch.compressed, dispatch.compressed_input_tokens, s.input_tokens)
    pool = spill(problem.spill, s.arrival_s, dispatch.pool, estimate <= problem.rule.short_window_tokens,
                 service_s(problem, short_input), problem.slots, problem.instances)
    band = dispatch.compressed & (pool == SHORT)
    compressor = compression(problem.rule, band, s.total_tokens)
    misrouted = (pool == SHORT) & ~band & (s.total_tokens > problem.rule.short_window_tokens)
    served = np.where(misrouted | compressor.refused, LONG, pool)
    return Routing(served, np.where(compressor.compressed, dispatch.compressed_input_tokens, s.input_tokens), compressor.compressed, misrouted,
                   pool != dispatch.pool, calibration.route_ratio, calibration.mean_ratio, compressor.refused)
