"""The affine engine fitted to the user's measurements: relative, non-negative least squares.

Observation ``i`` (benchmark_files.py) measured ``y_i > 0`` ms where the engine predicts ``a_i . c``, with ``c`` the
five :class:`~optfleet.engine.step.AffineStep` coefficients.  The fit is

    c* = argmin_{c >= 0} sum_i ((a_i . c - y_i) / y_i)^2,

the sum of squared relative errors, so a 5 % miss weighs the same on a 10 ms decode step as on a 2 s prefill.
Coefficients the caller pins (``fixed``) move to the right-hand side: ``y_i - a_i,F . c_F``.  The scaled rows
``a_i / y_i`` have their columns normalised to unit length before ``scipy.optimize.nnls`` (the multipliers span
1 for ``base`` to ~1e7 for prefill pairs) and the solution is scaled back.

The data must identify every free coefficient: at least as many points as free coefficients, no free column
that is zero (nothing excites it, e.g. no point has prefill tokens) and no set of free columns that is linearly
dependent (e.g. every point has the same decode batch: ``base`` and ``per_seq`` cannot be told apart).  Such data
are refused naming the coefficients and the data that would identify them, or the ``fixed`` entry that pins one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from optfleet.engine.benchmark_files import Observation, read_performance_files
from optfleet.engine.step import AFFINE_FIELDS, MIN_BASE_MS, AffineStep
from optfleet.errors import InputError

# What excites each coefficient: said when the data leave it unidentified.
EXCITED_BY = {
    "base_ms": "iterations of different sizes",
    "per_seq_ms": "points at different decode batch sizes (decode_seqs; the concurrency of a serving benchmark)",
    "per_kv_token_ms": "points at different decode contexts (KV tokens per sequence; the prompt and output "
                       "lengths of a serving benchmark)",
    "per_prefill_token_ms": "points with prefill tokens (prefill_tokens > 0; a serving benchmark at concurrency 1, "
                            "whose TTFT is a prefill)",
    "per_prefill_pair_ms": "prefills of different lengths or offsets (prompts of different lengths in a serving "
                           "benchmark)",
}
# A free coefficient is unidentified when the smallest singular value of the column-normalised design is below this
# share of the largest.
RANK_TOLERANCE = 1e-9


@dataclass(frozen=True)
class FitResult:
    """The fitted engine and how well it reproduces each point.

    ``relative_errors[i] = (predicted_ms[i] - y_i) / y_i``; ``rms_error`` and ``max_error`` are their root mean
    square and largest absolute value (``step.max_error`` is the latter).
    """

    step: AffineStep
    observations: tuple[Observation, ...]
    predicted_ms: NDArray[np.float64]
    relative_errors: NDArray[np.float64]
    rms_error: float
    max_error: float
    fixed: Mapping[str, float]

    @property
    def residuals_ms(self) -> NDArray[np.float64]:
        """``predicted - observed`` per point, in ms."""
        return self.predicted_ms - np.array([obs.time_ms for obs in self.observations])


def fit_performance_files(paths: Sequence[str | Path], fixed: Mapping[str, float] | None = None,
                          field: str = "hardware.performance.file") -> FitResult:
    """Read the measurement files (benchmark_files.py) and fit the affine engine to them all together."""
    return fit_affine_step(read_performance_files(paths, field), fixed=fixed, field=field)


def fit_affine_step(observations: Sequence[Observation], label: str | None = None,
                    fixed: Mapping[str, float] | None = None, field: str = "hardware.performance.file") -> FitResult:
    """Fit ``AffineStep`` to ``observations`` by relative non-negative least squares (module docstring).

    ``label`` names the data in the step's label (default: the files, ``bench.json + 3 more``); ``fixed`` pins
    coefficients by name (``{"per_prefill_pair_ms": 0.0}``); refusals name ``field`` (or the point's own field).
    """
    pinned = _check_fixed(fixed or {}, field)
    a, y = _design(observations, field)
    sources = label or _sources(observations)
    free = [j for j, name in enumerate(AFFINE_FIELDS) if name not in pinned]
    pinned_column = np.array([pinned.get(name, 0.0) for name in AFFINE_FIELDS])
    scaled = a[:, free] / y[:, None]
    _refuse_unidentified(scaled, [AFFINE_FIELDS[j] for j in free], field, sources)
    coefficients = pinned_column.copy()
    coefficients[free] = _nnls_columns(scaled, (y - a @ pinned_column) / y)
    if coefficients[0] < MIN_BASE_MS:
        raise InputError(field, sources, f"the best non-negative fit puts base_ms at {coefficients[0]:.3g} ms, below {MIN_BASE_MS:g} ms (an iteration with nothing in it "
                         "would take no time): check that the times are in ms, add small iterations, or pin base_ms "
                         "with fixed={'base_ms': value}")
    predicted = a @ coefficients
    relative = (predicted - y) / y
    rms, worst = float(np.sqrt(np.mean(relative**2))), float(np.max(np.abs(relative)))
    step = AffineStep(*map(float, coefficients), label=_label(sources, len(y), rms, worst, pinned), max_error=worst)
    return FitResult(step, tuple(observations), predicted, relative, rms, worst, pinned)


def _check_fixed(fixed: Mapping[str, Any], field: str) -> dict[str, float]:
    """Pinned coefficients: known names, finite values >= 0 (``base_ms`` > 0)."""
    for name, value in fixed.items():
        if name not in AFFINE_FIELDS:
            raise InputError(f"{field}.fixed", name, f"unknown coefficient; one of {', '.join(AFFINE_FIELDS)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 \
                or (name == "base_ms" and value == 0):
            bound = "> 0" if name == "base_ms" else ">= 0"
            raise InputError(f"{field}.fixed.{name}", value, f"must be a finite number {bound}")
    return {name: float(value) for name, value in fixed.items()}


def _design(observations: Sequence[Observation], field: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The multipliers (one row per point) and the measured times; a bad point is refused by its own field."""
    if not observations:
        raise InputError(field, [], "no measurements: give at least one iteration table or benchmark results file")
    for obs in observations:
        if not (math.isfinite(obs.time_ms) and obs.time_ms > 0):
            raise InputError(obs.field, obs.source, f"{obs.what}: time {obs.time_ms!r} ms must be finite and > 0")
        if len(obs.multipliers) != len(AFFINE_FIELDS) or not all(math.isfinite(x) and x >= 0 for x in obs.multipliers):
            raise InputError(obs.field, obs.source, f"{obs.what}: multipliers {obs.multipliers!r} must be "
                             f"{len(AFFINE_FIELDS)} finite numbers >= 0")
    return (np.array([obs.multipliers for obs in observations], dtype=np.float64),
            np.array([obs.time_ms for obs in observations], dtype=np.float64))


def _refuse_unidentified(scaled: NDArray[np.float64], names: list[str], field: str, sources: str) -> None:
    """Refuse a design that leaves a free coefficient unidentified, naming it and what would identify it."""
    points, unknowns = scaled.shape
    if unknowns == 0:
        return
    if points < unknowns:
        raise InputError(field, sources, f"{points} point(s) cannot identify {unknowns} coefficients "
                         f"({', '.join(names)}): give at least {unknowns}, or pin some with fixed={{...}}")
    norms = np.linalg.norm(scaled, axis=0)
    for name, norm in zip(names, norms):
        if norm == 0:
            raise InputError(field, sources, f"no point excites {name} (its multiplier is 0 in all {points}): "
                             f"add {EXCITED_BY[name]}, or pin it with fixed={{'{name}': value}}")
    _, singular, vt = np.linalg.svd(scaled / norms, full_matrices=False)
    if singular[-1] <= RANK_TOLERANCE * singular[0]:
        weight = np.abs(vt[-1])
        tied = [name for name, w in zip(names, weight) if w >= 0.05 * weight.max()]
        raise InputError(field, sources, f"{' and '.join(tied)} cannot be told apart: their multipliers are linearly "
                         f"dependent across the {points} points; add {EXCITED_BY[tied[-1]]}, or pin one with "
                         f"fixed={{'{tied[-1]}': value}}")


def _nnls_columns(scaled: NDArray[np.float64], target: NDArray[np.float64]) -> NDArray[np.float64]:
    """``argmin_{x >= 0} |scaled x - target|``, solved on unit-length columns and scaled back."""
    from scipy.optimize import nnls  # imported here: scipy costs start-up time the CLI's other commands avoid

    if scaled.shape[1] == 0:
        return np.zeros(0)
    norms = np.linalg.norm(scaled, axis=0)
    solution, _ = nnls(scaled / norms, target)
    return solution / norms


def _sources(observations: Sequence[Observation]) -> str:
    """``first.json`` or ``first.json + 3 more``: the distinct files, in order."""
    files = list(dict.fromkeys(obs.source for obs in observations))
    return files[0] if len(files) == 1 else f"{files[0]} + {len(files) - 1} more"


def _label(sources: str, points: int, rms: float, worst: float, pinned: Mapping[str, float]) -> str:
    """``fit: bench.json + 3 more (14 points, RMS error 2.3 %, max 5.1 %; per_prefill_pair_ms pinned at 0)``."""
    pins = "".join(f"; {name} pinned at {value:g}" for name, value in pinned.items())
    return f"fit: {sources} ({points} points, RMS error {100 * rms:.1f} %, max {100 * worst:.1f} %{pins})"
