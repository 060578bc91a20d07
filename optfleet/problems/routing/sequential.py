"""Algorithm 1 of the token-budget routing paper one request at a time, in plain Python.

The per-request form of calibrator.py and dispatcher.py (without spillover): the benchmark's baseline
(benchmarks/bench_routing.py) and the tests' oracle for the vectorised code.  Per request: the routing ratio from
the category's state, ``L_total = ceil(bytes / ratio) + L_out`` (Eq. 3), the C&R band, the hard rule, the budget
rule; then ``OnResponse`` updates the state with ``c_obs = bytes / prompt_tokens`` (Eq. 4-5, or the public
router's trackers).
"""

from __future__ import annotations

import math

from optfleet.problems.routing.calibrator import Calibrator, PaperCalibrator, RouterCalibrator
from optfleet.problems.routing.dispatcher import LONG, SHORT, DispatchRule


def route_one_by_one(calibrator: Calibrator, rule: DispatchRule, bytes_: list[int], prompt_tokens: list[int], output_tokens: list[int],
                     category: list[int]) -> tuple[list[float], list[int], list[bool]]:
    """Routing ratio, pool and C&R flag of every request, one request after the other."""
    state: dict[int, list[float]] = {}
    ratios, pools, compressed = [], [], []
    seen_categories: dict[int, None] = {}
    for size, tokens, out, k in zip(bytes_, prompt_tokens, output_tokens, category, strict=True):
        tracker = k
        if isinstance(calibrator, RouterCalibrator):
            if k not in seen_categories and len(seen_categories) < calibrator.max_categories:
                seen_categories[k] = None
            tracker = k if k in seen_categories else -1
        ratio = _ratio(calibrator, state.get(tracker))
        estimate = math.ceil(size / ratio) + out
        band = (rule.compress_gamma > 1.0 and k in rule.compressible and rule.b_short_tokens < estimate
                <= math.floor(rule.compress_gamma * rule.b_short_tokens) and out < rule.b_short_tokens)
        short = band or (estimate <= rule.short_window_tokens and estimate <= rule.b_short_tokens)
        ratios.append(ratio)
        pools.append(SHORT if short else LONG)
        compressed.append(band)
        state[tracker] = _observe(calibrator, state.get(tracker), size / tokens)
    return ratios, pools, compressed


def _ratio(calibrator: Calibrator, state: list[float] | None) -> float:
    if isinstance(calibrator, PaperCalibrator):
        c, sigma = (calibrator.cold_start, 0.0) if state is None else state
        return max(c - calibrator.gamma * sigma, calibrator.min_ratio)
    if isinstance(calibrator, RouterCalibrator):
        if state is None or state[2] < calibrator.warmup_samples:
            return calibrator.cold_start
        return max(state[1], calibrator.min_ratio)
    return calibrator.ratio


def _observe(calibrator: Calibrator, state: list[float] | None, observed: float) -> list[float]:
    if isinstance(calibrator, PaperCalibrator):
        c, sigma = (calibrator.cold_start, 0.0) if state is None else state
        beta = calibrator.beta
        c = beta * c + (1 - beta) * observed
        return [c, beta * sigma + (1 - beta) * abs(observed - c)]
    if isinstance(calibrator, RouterCalibrator):
        if state is None:
            return [observed, observed, 1]
        mean, tracked, count = state
        step = calibrator.below if observed < tracked else calibrator.above
        return [calibrator.decay * mean + (1 - calibrator.decay) * observed, tracked + step * (observed - tracked), count + 1]
    return []
