"""An engine's affine reduction over a pool's operating region: the form the queueing models and simulators use.

A pool serves sequences of at most ``window`` tokens, at most ``slots`` at a
time per instance, with prefill chunks of at most ``chunk`` tokens.  Its
iterations are decode steps of ``b`` in ``[1, slots]`` sequences of per-sequence
context ``kappa`` in ``[0, window]``, most of them alone and the rest carrying
a chunk of ``p = chunk`` tokens at an offset ``o`` in ``[0, window - chunk]``
(a prompt's last chunk is shorter).  The reduction is the
:class:`~optfleet.engine.step.AffineStep` that minimises the sum of squared
*relative* errors against ``engine.step_ms`` on a grid over that region

    b in {1, s/4, s/2, 3s/4, s},  kappa in {window/8, window/2, window},
    p in {0, chunk},  o in {0, (window - p)/2, window - p}  (p > 0),

with non-negative coefficients (scipy's ``nnls`` on the rows scaled by
``1 / t``).  An affine engine reduces to itself exactly.  ``max_error`` is the
largest relative error on the grid, stated with the source so an output can
say how far the form the models use is from the engine it came from.

Chunks shorter than the budget (a prompt's last chunk, a question after a
cached prefix) are left out of the fit on purpose: a short chunk is bound by
reading the weights, not by compute, so a line through the full chunks
overstates it, and fitting them too would pull the decode steps and full
chunks off by tens of per cent.  :func:`short_chunk_error` measures how far
the form is from the engine there.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import nnls

from optfleet.engine.step import MIN_BASE_MS, AffineStep, EngineModel, prefill_pairs

BATCH_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
CONTEXT_FRACTIONS = (0.125, 0.5, 1.0)
CHUNK_FRACTIONS = (0.0, 1.0)
SHORT_CHUNK_FRACTIONS = tuple(2.0 ** (-k / 2) for k in range(12, 1, -1))
"""Chunks of 1/64 to 1/2 of the budget in steps of sqrt(2): dense enough to find where a roofline turns from
reading weights to compute (the form's largest error, near 256 tokens on four H100s)."""
OFFSET_FRACTIONS = (0.0, 0.5, 1.0)


def operating_grid(slots: int, window_tokens: int, chunk_tokens: int,
                   chunk_fractions: tuple[float, ...] = CHUNK_FRACTIONS) -> NDArray[np.float64]:
    """Rows ``(p, o, b, k)`` of the grid in the module docstring (``k = b kappa``), chunks of ``chunk_fractions`` of the
    budget."""
    batches = np.unique(np.maximum(1, np.rint(np.array((0.0, *BATCH_FRACTIONS)) * slots))).astype(np.float64)
    rows = []
    for fraction in chunk_fractions:
        p = float(max(1, round(fraction * chunk_tokens))) if fraction > 0 else 0.0
        offsets = [0.0] if p == 0 else sorted({float(round(f * max(window_tokens - p, 0))) for f in OFFSET_FRACTIONS})
        for o in offsets:
            for b in batches:
                for kappa in CONTEXT_FRACTIONS:
                    rows.append((p, o, b, b * kappa * window_tokens))
    return np.array(rows)


def affine_reduction(engine: EngineModel, slots: int, window_tokens: int, chunk_tokens: int) -> AffineStep:
    """The relative-least-squares :class:`AffineStep` of ``engine`` over the pool's region (module docstring)."""
    if isinstance(engine, AffineStep):
        return engine
    grid = operating_grid(slots, window_tokens, chunk_tokens)
    p, o, b, k = grid.T
    observed = engine.step_ms(p, b, k, o)
    design = np.column_stack([np.ones(len(p)), b, k, p, prefill_pairs(p, o)])
    scale = np.max(np.abs(design), axis=0)
    scale[scale == 0] = 1.0
    solution, _ = nnls(design / observed[:, None] / scale, np.ones(len(p)))
    coefficients = solution / scale
    fitted = design @ coefficients
    error = float(np.max(np.abs(fitted / observed - 1.0)))
    base = max(float(coefficients[0]), MIN_BASE_MS)  # an iteration always takes time
    return AffineStep(base, *(float(c) for c in coefficients[1:]), label=engine.source, max_error=error)


def short_chunk_error(engine: EngineModel, step: AffineStep, slots: int, window_tokens: int, chunk_tokens: int) -> tuple[float, float]:
    """The least and the largest relative error ``step / engine - 1`` at chunks of 1/64 to 1/2 of the budget
    (:data:`SHORT_CHUNK_FRACTIONS`; the rest of the grid as :func:`operating_grid`): positive where the form overstates
    the engine."""
    p, o, b, k = operating_grid(slots, window_tokens, chunk_tokens, SHORT_CHUNK_FRACTIONS).T
    error = step.step_ms(p, b, k, o) / engine.step_ms(p, b, k, o) - 1.0
    return float(error.min()), float(error.max())
