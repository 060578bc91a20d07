"""Per-category bytes-per-token calibration: the ratio each request is routed with.

Token budget (token-budget pool routing, Chen et al. 2026, Eq. 3)::

    L_total = ceil(bytes / c_route) + max_output_tokens

Each variant turns the observations ``c_obs = bytes / usage.prompt_tokens`` of a category ``k``, in arrival
order, into the ratio ``c_route`` the *next* request of that category is routed with.  The replay assumes the
feedback of a request arrives before the next request of its category is routed (immediate feedback).

* :class:`PaperCalibrator` (Eq. 4-5, Algorithm 1 lines 22-24): ``c_k <- beta c_k + (1 - beta) c_obs``;
  ``sigma_k <- beta sigma_k + (1 - beta) |c_obs - c_k|`` (with the updated ``c_k``, line 24); routing ratio
  ``c_k - gamma sigma_k``; ``c_k`` starts at the cold-start ratio (4.0), ``sigma_k`` at 0.  Both recurrences
  are linear, so each category's sequence is one ``scipy.signal.lfilter`` call.  The paper states no floor;
  the routing ratio is clamped at ``min_ratio`` (1 byte/token) so that ``L_in`` stays defined.
* :class:`RouterCalibrator` (the public semantic router's rule): a mean EMA ``m_k <- d m_k + (1 - d) c_obs``
  (decay ``d = 0.995``) and an asymmetric conservative tracker ``q_k <- q_k + a (c_obs - q_k)`` with
  ``a = 0.90`` when ``c_obs < q_k`` and ``a = 0.10`` otherwise; both start at the category's first observation.
  A category routes with the cold-start ratio (4.0) until it has ``warmup_samples`` (10) observations, then
  with ``max(q_k, min_ratio)`` (estimates at least 1).  At most ``max_categories`` (256) categories are tracked,
  the first seen; the others share one default tracker.  The asymmetric step is not linear: it runs as one tight
  loop per category over plain floats.
* :class:`StaticCalibrator`: one global ratio (the paper's "global static c = 4" row of Table 4).

:func:`calibrate` returns, per request, the routing ratio and the mean estimate before its own observation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError

COLD_START_BYTES_PER_TOKEN = 4.0


@dataclass(frozen=True)
class PaperCalibrator:
    """Eq. 4-5 of the token-budget routing paper (module docstring)."""

    beta: float = 0.95
    gamma: float = 1.0
    cold_start: float = COLD_START_BYTES_PER_TOKEN
    min_ratio: float = 1.0
    name: str = "paper"

    def __post_init__(self) -> None:
        _in_open_unit("calibrator.beta", self.beta)
        if not self.gamma >= 0:
            raise InputError("calibrator.gamma", self.gamma, "the sigma multiplier must be >= 0")
        _positive("calibrator.cold_start", self.cold_start)
        _positive("calibrator.min_ratio", self.min_ratio)


@dataclass(frozen=True)
class RouterCalibrator:
    """The public router's mean EMA and asymmetric conservative tracker (module docstring)."""

    decay: float = 0.995
    below: float = 0.90
    above: float = 0.10
    cold_start: float = COLD_START_BYTES_PER_TOKEN
    warmup_samples: int = 10
    max_categories: int = 256
    min_ratio: float = 1.0
    name: str = "router"

    def __post_init__(self) -> None:
        _in_open_unit("calibrator.decay", self.decay)
        _in_open_unit("calibrator.below", self.below, closed_right=True)
        _in_open_unit("calibrator.above", self.above, closed_right=True)
        _positive("calibrator.cold_start", self.cold_start)
        _positive("calibrator.min_ratio", self.min_ratio)
        if self.warmup_samples < 0:
            raise InputError("calibrator.warmup_samples", self.warmup_samples, "must be >= 0")
        if self.max_categories < 1:
            raise InputError("calibrator.max_categories", self.max_categories, "must be >= 1")


@dataclass(frozen=True)
class StaticCalibrator:
    """One global bytes-per-token ratio for every request."""

    ratio: float = COLD_START_BYTES_PER_TOKEN
    name: str = "static"

    def __post_init__(self) -> None:
        _positive("calibrator.static_ratio", self.ratio)


Calibrator = PaperCalibrator | RouterCalibrator | StaticCalibrator


@dataclass(frozen=True)
class Calibration:
    """Per request (arrival order): the ratio it was routed with and the category's mean estimate before it."""

    route_ratio: NDArray[np.float64]
    mean_ratio: NDArray[np.float64]


def _in_open_unit(field: str, value: float, closed_right: bool = False) -> None:
    if not (0.0 < value < 1.0 or (closed_right and value == 1.0)):
        raise InputError(field, value, "must lie in (0, 1)" + ("" if not closed_right else " or be 1"))


def _positive(field: str, value: float) -> None:
    if not value > 0:
        raise InputError(field, value, "must be > 0 bytes per token")


def observed_ratios(bytes_: NDArray[np.int64], prompt_tokens: NDArray[np.int64]) -> NDArray[np.float64]:
    """``c_obs = bytes / usage.prompt_tokens`` (Eq. 4); every request needs bytes > 0 and a prompt token."""
    bytes_ = np.asarray(bytes_)
    prompt_tokens = np.asarray(prompt_tokens)
    if len(bytes_) and bytes_.min() <= 0:
        bad = int(np.flatnonzero(bytes_ <= 0)[0])
        raise InputError("stream.bytes", int(bytes_[bad]), f"request {bad} has no positive byte length")
    if len(prompt_tokens) and prompt_tokens.min() <= 0:
        bad = int(np.flatnonzero(prompt_tokens <= 0)[0])
        raise InputError("stream.input_tokens", int(prompt_tokens[bad]), f"request {bad} has no prompt token")
    return bytes_.astype(np.float64) / prompt_tokens


def calibrate(calibrator: Calibrator, category: NDArray[np.int64], observed: NDArray[np.float64]) -> Calibration:
    """Routing ratio and mean estimate of every request, each before the request's own observation.

    ``category`` holds small non-negative codes; ``observed`` the ratios of :func:`observed_ratios`."""
    n = len(observed)
    if isinstance(calibrator, StaticCalibrator):
        constant = np.full(n, calibrator.ratio)
        return Calibration(constant, constant.copy())
    route, mean = np.empty(n), np.empty(n)
    codes = np.asarray(category, dtype=np.int64)
    if isinstance(calibrator, RouterCalibrator):
        codes = _tracked_codes(codes, calibrator.max_categories)
    order = np.argsort(codes, kind="stable")
    edges = np.flatnonzero(np.diff(codes[order])) + 1
    step = _paper_sequence if isinstance(calibrator, PaperCalibrator) else _router_sequence
    for rows in np.split(order, edges):
        if len(rows):
            route[rows], mean[rows] = step(calibrator, observed[rows])
    return Calibration(route, mean)


def _tracked_codes(codes: NDArray[np.int64], limit: int) -> NDArray[np.int64]:
    """Codes of the first ``limit`` categories seen keep their own tracker; every later one shares code -1."""
    distinct, first = np.unique(codes, return_index=True)
    if len(distinct) <= limit:
        return codes
    kept = distinct[np.sort(np.argsort(first, kind="stable")[:limit])]
    return np.where(np.isin(codes, kept), codes, -1)


def _ema(weight_old: float, values: NDArray[np.float64], start: float) -> NDArray[np.float64]:
    """``y_j = w y_{j-1} + (1 - w) x_j`` from ``y_0 = start``: ``y_1 .. y_m``."""
    from scipy.signal import lfilter

    return lfilter([1.0 - weight_old], [1.0, -weight_old], values, zi=[weight_old * start])[0]


def _before(values: NDArray[np.float64], start: float) -> NDArray[np.float64]:
    """The state each observation meets: ``start`` then every state but the last."""
    shifted = np.empty_like(values)
    shifted[0] = start
    shifted[1:] = values[:-1]
    return shifted


def _paper_sequence(cal: PaperCalibrator, x: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Eq. 4-5 on one category's observations: (routing ratio, c_k) before each observation."""
    c = _ema(cal.beta, x, cal.cold_start)
    sigma = _ema(cal.beta, np.abs(x - c), 0.0)
    c_before, sigma_before = _before(c, cal.cold_start), _before(sigma, 0.0)
    return np.maximum(c_before - cal.gamma * sigma_before, cal.min_ratio), c_before


def _router_sequence(cal: RouterCalibrator, x: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The public router's trackers on one category's observations: (routing ratio, mean) before each."""
    mean = _ema(cal.decay, x[1:], float(x[0])) if len(x) > 1 else np.zeros(0)
    mean_before = np.concatenate(([cal.cold_start], [x[0]], mean[:-1])) if len(x) > 1 else np.array([cal.cold_start])
    tracked = np.empty(len(x))
    below, above = cal.below, cal.above
    q = float(x[0])
    values = x.tolist()
    for j, value in enumerate(values):
        tracked[j] = q
        q += (below if value < q else above) * (value - q)
    tracked[0] = cal.cold_start
    seen = np.arange(len(x))
    route = np.where(seen < cal.warmup_samples, cal.cold_start, np.maximum(tracked, cal.min_ratio))
    return route, mean_before
