"""A capacity plan's schedule (what every method returns) and the GPU counts it implies.

A schedule says, per period ``t``: which GPU type serves each model (``gpu_type[m, t]``, -1 for none) with how many
instances (``instances[m, t]``), and what is bought of each type ``g``: reservations starting (``reserved_starts[g, t]``,
each held ``term_g`` periods), on-demand GPUs and spot GPUs.  Each model runs on one GPU type per period (one pool,
the fleet's homogeneous plan at that period's rate); types change from period to period.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from optfleet.problems.capacity_plan.problem import CapacityProblem

NO_TYPE = -1


@dataclass(frozen=True)
class Schedule:
    """Assignments ``[M, T]`` and purchases ``[G, T]`` (module docstring); ``method`` made it."""

    gpu_type: NDArray[np.int64]
    instances: NDArray[np.int64]
    reserved_starts: NDArray[np.int64]
    on_demand_gpus: NDArray[np.int64]
    spot_gpus: NDArray[np.int64]
    method: str = ""

    def reserved_held(self, problem: "CapacityProblem") -> NDArray[np.int64]:
        """``R[g, t] = sum of reserved_starts[g, s] for t - term_g < s <= t``: reserved GPUs held in period ``t``."""
        held = np.zeros_like(self.reserved_starts)
        for g, offer in enumerate(problem.offers):
            if offer.reserved_term_periods is not None:
                cumulative = np.concatenate([[0], np.cumsum(self.reserved_starts[g])])
                t = np.arange(problem.periods)
                held[g] = cumulative[t + 1] - cumulative[np.maximum(t + 1 - offer.reserved_term_periods, 0)]
        return held

    def held(self, problem: "CapacityProblem") -> NDArray[np.int64]:
        """Every GPU held of each type and period: reserved held (bought by the plan, and already held before it,
        problem.held) + on-demand + spot."""
        return self.reserved_held(problem) + problem.held.total() + self.on_demand_gpus + self.spot_gpus

    def held_usable(self, problem: "CapacityProblem") -> NDArray[np.float64]:
        """The GPUs of the reservations already held that this schedule's models can use (held.HeldGpus.usable)."""
        return problem.held.usable(model_gpus_in_use(problem, self.gpu_type, self.instances))

    def to_dict(self, problem: "CapacityProblem") -> dict:
        """The schedule by name: per model its type and instances per period, per type its purchases per period."""
        types = problem.type_names
        return {
            "models": {name: {"gpu_type": [types[g] if g >= 0 else None for g in self.gpu_type[m]], "instances": self.instances[m].tolist()}
                       for m, name in enumerate(problem.model_names)},
            "gpus": {name: {"reserved_starts": self.reserved_starts[g].tolist(), "reserved_held": self.reserved_held(problem)[g].tolist(),
                            "already_held": problem.held.total()[g].tolist(),
                            "on_demand": self.on_demand_gpus[g].tolist(), "spot": self.spot_gpus[g].tolist()}
                     for g, name in enumerate(types)},
        }


def model_gpus(problem: "CapacityProblem", gpu_type: NDArray[np.int64], instances: NDArray[np.int64]) -> NDArray[np.int64]:
    """``u[m, g, t] = tp[m, g] instances[m, t]`` where model ``m`` runs on type ``g`` in period ``t``, else 0."""
    n_models, periods = gpu_type.shape
    out = np.zeros((n_models, len(problem.offers), periods), dtype=np.int64)
    m, t = np.nonzero(gpu_type >= 0)
    g = gpu_type[m, t]
    out[m, g, t] = problem.table.tp[m, g] * instances[m, t]
    return out


def model_gpus_in_use(problem: "CapacityProblem", gpu_type: NDArray[np.int64], instances: NDArray[np.int64]) -> NDArray[np.float64]:
    """``u[m, g, t] + lambda_m (u[m, g, t] - u[m, g, t-1])^+`` with ``u[m, g, -1] = 0``: each model's GPUs in use on
    each type, its load charge included (:func:`gpus_in_use`)."""
    u = model_gpus(problem, gpu_type, instances).astype(np.float64)
    previous = np.concatenate([np.zeros_like(u[:, :, :1]), u[:, :, :-1]], axis=2)
    return u + np.maximum(u - previous, 0.0) * problem.load_fraction[:, None, None]


def gpus_in_use(problem: "CapacityProblem", gpu_type: NDArray[np.int64], instances: NDArray[np.int64]) -> NDArray[np.float64]:
    """``use[g, t] = sum_m u[m, g, t] + sum_m lambda_m (u[m, g, t] - u[m, g, t-1])^+`` with ``u[m, g, -1] = 0``.

    The second term charges load time as a fluid share of GPU-periods: a GPU that starts serving model ``m`` in a
    period (new, or moved from another model or type) spends ``lambda_m = load_time_s / period`` of it loading.
    It is an average over the period, not a schedule of when each GPU loads."""
    return model_gpus_in_use(problem, gpu_type, instances).sum(axis=0)
