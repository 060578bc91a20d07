"""Reservations already held when the plan is made (``reservations:``): the GPUs they give in each period, and the
share of them a schedule can use.

A held reservation ``h`` holds ``gpus_h`` GPUs of type ``g_h`` in periods ``[start_h, end_h)`` (clipped to the
horizon).  Unpinned ones form a pool any model on the type may use; one pinned to model ``m`` serves only ``m``:

    P[g, t]    = sum of gpus_h over unpinned h of type g holding t
    Q[m, g, t] = sum of gpus_h over h pinned to m, of type g, holding t
    held_usable[g, t] = P[g, t] + sum_m min(u[m, g, t], Q[m, g, t])

with ``u[m, g, t]`` model ``m``'s GPUs in use on ``g`` (load charge included, plan.model_gpus_in_use).  A pinned
GPU its model does not use stays idle: no other model may take it.  The sunk cost of ``h`` is ``gpus_h x
price_per_gpu_hour x period_hours`` per period held within the horizon; it is reported, never optimised.

Overlap: two reservations pinned to the same model and the same GPU type whose periods share at least one period
are refused (exit 2, naming the later one): one model's allocation on one type in one period must be stated once
(a renewal entered before the old term is cleared, or the same contract listed twice, would otherwise be counted
twice).  Unpinned reservations of a type may overlap freely: they are separate contracts and add up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.problems.capacity_plan.schema import HeldReservationSpec


@dataclass(frozen=True)
class HeldGpus:
    """``pool[g, t]`` (``P``), ``pinned[m, g, t]`` (``Q``) and ``sunk_cost[g, t]`` ($) of the reservations held."""

    pool: NDArray[np.int64]
    pinned: NDArray[np.int64]
    sunk_cost: NDArray[np.float64]

    def window(self, start: int, stop: int) -> "HeldGpus":
        return HeldGpus(self.pool[:, start:stop], self.pinned[:, :, start:stop], self.sunk_cost[:, start:stop])

    def total(self) -> NDArray[np.int64]:
        """``P[g, t] + sum_m Q[m, g, t]``: every held GPU of each type and period."""
        return self.pool + self.pinned.sum(axis=0)

    def usable(self, use_by_model: NDArray[np.float64]) -> NDArray[np.float64]:
        """``held_usable[g, t]`` for GPUs in use ``u[m, g, t]`` (module docstring)."""
        return self.pool + np.minimum(use_by_model, self.pinned).sum(axis=0)


def held_gpus(reservations: Sequence[HeldReservationSpec], models: Sequence[str], types: Sequence[str], periods: int,
              period_hours: float) -> HeldGpus:
    """The arrays of the reservations held (module docstring); an InputError names the reservation's field."""
    pool = np.zeros((len(types), periods), dtype=np.int64)
    pinned = np.zeros((len(models), len(types), periods), dtype=np.int64)
    sunk = np.zeros((len(types), periods))
    spans: list[tuple[int, int]] = []
    for i, h in enumerate(reservations):
        field = f"reservations[{i}]"
        if h.gpu_type not in types:
            raise InputError(f"{field}.gpu_type", h.gpu_type, f"is not a GPU type of the instance ({', '.join(types)})")
        if h.model is not None and h.model not in models:
            raise InputError(f"{field}.model", h.model, f"is not a model of the instance ({', '.join(models)})")
        if (h.end_period is None) == (h.term_periods is None):
            raise InputError(field, h.end_period if h.term_periods is None else h.term_periods,
                             "give exactly one of end_period and term_periods")
        end = h.end_period if h.end_period is not None else h.start_period + h.term_periods
        if end <= h.start_period:
            raise InputError(f"{field}.end_period", h.end_period, f"is not after start_period {h.start_period}")
        if h.start_period >= periods:
            raise InputError(f"{field}.start_period", h.start_period,
                             f"is outside the horizon (periods 0-{periods - 1}): the reservation holds none of its periods")
        spans.append((h.start_period, end))
        g, held = types.index(h.gpu_type), slice(h.start_period, min(end, periods))
        if h.model is None:
            pool[g, held] += h.gpus
        else:
            pinned[models.index(h.model), g, held] += h.gpus
        sunk[g, held] += h.gpus * h.price_per_gpu_hour * period_hours
    _refuse_overlaps(reservations, spans)
    return HeldGpus(pool, pinned, sunk)


def _refuse_overlaps(reservations: Sequence[HeldReservationSpec], spans: Sequence[tuple[int, int]]) -> None:
    """An InputError naming the later of two reservations pinned to one model and type that share a period."""
    for j, later in enumerate(reservations):
        for i in range(j):
            earlier = reservations[i]
            if later.model is None or (earlier.model, earlier.gpu_type) != (later.model, later.gpu_type):
                continue
            (a, b), (c, d) = spans[i], spans[j]
            if max(a, c) < min(b, d):
                raise InputError(f"reservations[{j}]", f"{later.model} on {later.gpu_type}, periods {c}-{d - 1}",
                                 f"overlaps reservations[{i}] (periods {a}-{b - 1}) of the same model and GPU type in "
                                 f"periods {max(a, c)}-{min(b, d) - 1}: state each model's held GPUs on a type once per "
                                 "period (one entry with the GPUs summed, or adjoining periods)")
