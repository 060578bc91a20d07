"""The practitioners' rules, each labelled with what it assumes; each returns a :class:`Schedule` that the one
evaluator scores (no solver, no Pyomo).

* ``static_peak``: every model on one type for the whole horizon (the cheapest at its peak), at its peak instance
  count in every period; bought as reservations renewed over the horizon when a reserved GPU-period is cheaper
  than an on-demand one, else on demand.  Assumes demand never exceeds its peak and nothing is re-planned.
* ``per_period_on_demand``: every period sized on its own (the "perfect-system" count of llm-d-autoscaling#1499),
  each model on the type cheapest on demand for it, all bought on demand.  Assumes perfect autoscaling, no
  reservations, no spot.
* ``reserve_percentile``: the per-period assignment; each type reserves the ``reserve_percentile`` of its GPUs in
  use over the periods (renewed over the horizon) and buys the rest on demand (slosizer's quantile rule).
* ``spot_fallback``: the per-period assignment; SkyServe-like: ``on_demand_floor_gpus`` on demand, then spot for the
  rest plus ``spot_extra_gpus`` over-provisioned, up to the spot available; on demand for what spot cannot supply.
  Assumes preemptions are absorbed by the extra spot GPUs (the evaluator checks the chance and prices the fallback).
* ``greedy_packing``: period by period, models largest first, each put on the type where its GPUs cost least given
  what is already bought there (spot counted at its confidence, then on demand) and held (the unpinned GPUs held,
  and those pinned to the model); no new reservations.

All rules use the capacity table's least instance counts (capacity.py), and buy only the GPUs in use beyond what
the reservations already held give the models (held.py; a rule's types are picked as below, not to fill them); a type without on-demand is priced by its
spot (then reserved) price when a rule picks the cheapest type.  Only ``greedy_packing`` looks at the purchase caps;
the others pick types as if capacity were unlimited, and the evaluator reports the caps they exceed.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InfeasibleError
from optfleet.problems.capacity_plan.plan import NO_TYPE, Schedule, model_gpus_in_use
from optfleet.problems.capacity_plan.problem import CapacityProblem, TypeOffer

ROUND_OFF = 1e-9


def per_gpu_period_price(offer: TypeOffer) -> float:
    """The type's price of one GPU for one period: on demand, else spot, else a reservation's per-period share."""
    if offer.on_demand_per_gpu_period is not None:
        return offer.on_demand_per_gpu_period
    if offer.spot_per_gpu_period is not None:
        return offer.spot_per_gpu_period
    return offer.reserved_cost_per_gpu / offer.reserved_term_periods


def _cheapest_assignment(problem: CapacityProblem) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per model and period, the type whose GPUs cost least at its per-GPU-period price (and the instances)."""
    gpus = problem.table.gpus().astype(np.float64)
    price = np.array([per_gpu_period_price(o) for o in problem.offers])
    cost = np.where(gpus >= 0, gpus * price[None, :, None], np.inf)
    gpu_type = np.argmin(cost, axis=1)
    instances = np.take_along_axis(problem.table.instances, gpu_type[:, None, :], axis=1)[:, 0, :]
    needs = instances > 0
    return np.where(needs, gpu_type, NO_TYPE), np.where(needs, instances, 0)


def _whole(use: NDArray[np.float64]) -> NDArray[np.int64]:
    return np.ceil(use - ROUND_OFF).astype(np.int64)


def _to_buy(problem: CapacityProblem, gpu_type: NDArray[np.int64], instances: NDArray[np.int64]) -> NDArray[np.int64]:
    """``ceil(use[g, t] - A[g, t])^+``: the GPUs in use beyond the reservations already held that the models use."""
    by_model = model_gpus_in_use(problem, gpu_type, instances)
    return np.maximum(_whole(by_model.sum(axis=0) - problem.held.usable(by_model)), 0)


def _reserve_level(problem: CapacityProblem, level: NDArray[np.int64]) -> NDArray[np.int64]:
    """Starts that hold ``level[g]`` reserved GPUs in every period: a block at 0, renewed every term (the last
    block may run past the horizon)."""
    starts = np.zeros((len(problem.offers), problem.periods), dtype=np.int64)
    for g, offer in enumerate(problem.offers):
        if offer.reserved_term_periods is not None and level[g] > 0:
            cap = offer.reserved_max_gpus
            starts[g, :: offer.reserved_term_periods] = level[g] if cap is None else min(level[g], cap)
    return starts


def _buy(problem: CapacityProblem, gpu_type, instances, level: NDArray[np.int64], method: str) -> Schedule:
    """Reserve ``level`` per type and buy the rest of the GPUs in use on demand (spot where there is no on-demand)."""
    need = _to_buy(problem, gpu_type, instances)
    starts = _reserve_level(problem, level)
    empty = Schedule(gpu_type, instances, starts, np.zeros_like(starts), np.zeros_like(starts))
    rest = np.maximum(need - empty.reserved_held(problem), 0)
    on_demand, spot = np.zeros_like(rest), np.zeros_like(rest)
    for g, offer in enumerate(problem.offers):
        if offer.on_demand_per_gpu_period is not None:
            on_demand[g] = rest[g]
        else:
            spot[g] = _spot_for(offer, rest[g])
    return Schedule(gpu_type, instances, starts, on_demand, spot, method)


def _spot_for(offer: TypeOffer, needed: NDArray[np.int64]) -> NDArray[np.int64]:
    """The fewest spot GPUs whose counted survivors ``k(s)`` reach ``needed`` in each period (the cap if none do)."""
    k = offer.spot_counted
    return np.array([min(int(np.searchsorted(k, n)), int(cap)) for n, cap in zip(needed, offer.spot_cap, strict=True)], dtype=np.int64)


def _reserve_cheaper(offer: TypeOffer) -> bool:
    """Whether a reserved GPU-period (its reservation's cost over its term) costs less than an on-demand one."""
    if offer.reserved_term_periods is None:
        return False
    per_period = offer.reserved_cost_per_gpu / offer.reserved_term_periods
    return offer.on_demand_per_gpu_period is None or per_period < offer.on_demand_per_gpu_period


def static_peak(problem: CapacityProblem) -> Schedule:
    """Each model on its cheapest type at its peak, the peak count in every period (module docstring)."""
    gpu_type = np.full((len(problem.model_names), problem.periods), NO_TYPE, dtype=np.int64)
    instances = np.zeros_like(gpu_type)
    prices = np.array([min(per_gpu_period_price(o), o.reserved_cost_per_gpu / o.reserved_term_periods
                           if o.reserved_term_periods is not None else math.inf) for o in problem.offers])
    for m in range(len(problem.model_names)):
        peak = problem.table.instances[m].max(axis=1)
        usable = problem.table.usable()[m].all(axis=1)
        cost = np.where(usable, peak * problem.table.tp[m] * prices, np.inf)
        g = int(np.argmin(cost))
        if peak[g] > 0:
            gpu_type[m], instances[m] = g, peak[g]
    use = _to_buy(problem, gpu_type, instances)
    level = np.array([use[g].max() if _reserve_cheaper(o) else 0 for g, o in enumerate(problem.offers)], dtype=np.int64)
    return _buy(problem, gpu_type, instances, level, "static_peak")


def per_period_on_demand(problem: CapacityProblem) -> Schedule:
    """Every period sized on its own, all on demand (module docstring)."""
    gpu_type, instances = _cheapest_assignment(problem)
    return _buy(problem, gpu_type, instances, np.zeros(len(problem.offers), dtype=np.int64), "per_period_on_demand")


def reserve_percentile(problem: CapacityProblem) -> Schedule:
    """Reserve each type's ``reserve_percentile`` of GPUs in use, the rest on demand (module docstring)."""
    gpu_type, instances = _cheapest_assignment(problem)
    use = _to_buy(problem, gpu_type, instances)
    q = problem.spec.baselines.reserve_percentile
    level = np.array([int(np.ceil(np.quantile(use[g], q, method="inverted_cdf"))) if o.reserved_term_periods is not None else 0
                      for g, o in enumerate(problem.offers)], dtype=np.int64)
    return _buy(problem, gpu_type, instances, level, "reserve_percentile")


def spot_fallback(problem: CapacityProblem) -> Schedule:
    """SkyServe-like spot with an on-demand floor and fallback (module docstring)."""
    gpu_type, instances = _cheapest_assignment(problem)
    need = _to_buy(problem, gpu_type, instances)
    rules = problem.spec.baselines
    on_demand, spot = np.zeros_like(need), np.zeros_like(need)
    for g, offer in enumerate(problem.offers):
        used = need[g] > 0
        floor = np.where(used, min(rules.on_demand_floor_gpus, offer.on_demand_max_gpus or rules.on_demand_floor_gpus), 0)
        if offer.on_demand_per_gpu_period is None:
            floor[:] = 0
        if offer.spot_per_gpu_period is not None:
            spot[g] = np.where(used, np.minimum(np.maximum(need[g] - floor, 0) + rules.spot_extra_gpus, offer.spot_cap), 0)
        uncovered = np.maximum(need[g] - floor - spot[g], 0)
        on_demand[g] = floor + (uncovered if offer.on_demand_per_gpu_period is not None else 0)
    starts = np.zeros_like(need)
    return Schedule(gpu_type, instances, starts, on_demand, spot, "spot_fallback")


def greedy_packing(problem: CapacityProblem) -> Schedule:
    """Period by period, largest model first, each on the type where its extra GPUs cost least (module docstring).
    A model's GPUs on a type include its load charge against what it ran there in the period before."""
    n_models, n_types, periods = len(problem.model_names), len(problem.offers), problem.periods
    gpus = problem.table.gpus()
    gpu_type = np.full((n_models, periods), NO_TYPE, dtype=np.int64)
    instances = np.zeros_like(gpu_type)
    spot, on_demand = np.zeros((n_types, periods), np.int64), np.zeros((n_types, periods), np.int64)
    pool, pinned = problem.held.pool, problem.held.pinned
    for t in range(periods):
        used = -pool[:, t].astype(np.float64)  # GPUs in use beyond those held, which are free to use
        for m in sorted(range(n_models), key=lambda m: -gpus[m, :, t].max()):
            previous = np.zeros(n_types)
            if t > 0 and gpu_type[m, t - 1] >= 0:
                previous[gpu_type[m, t - 1]] = gpus[m, gpu_type[m, t - 1], t - 1]
            with_load = gpus[m, :, t] + problem.load_fraction[m] * np.maximum(gpus[m, :, t] - previous, 0)
            beyond_pinned = with_load - np.minimum(with_load, pinned[m, :, t])
            options = [(g, _extra_cost(problem.offers[g], t, used[g] + beyond_pinned[g], spot[g, t], on_demand[g, t]))
                       for g in range(n_types) if gpus[m, g, t] > 0]
            options = [(g, c) for g, c in options if c is not None]
            if not options:
                if (gpus[m, :, t] > 0).any():
                    raise InfeasibleError(f"period {t}, model {problem.model_names[m]}: no GPU type has GPUs left to buy")
                continue
            g, (_, spot[g, t], on_demand[g, t]) = min(options, key=lambda option: option[1][0])
            used[g] += beyond_pinned[g]
            gpu_type[m, t], instances[m, t] = g, problem.table.instances[m, g, t]
    return Schedule(gpu_type, instances, np.zeros_like(spot), on_demand, spot, "greedy_packing")


def _extra_cost(offer: TypeOffer, t: int, total_gpus: float, spot: int, on_demand: int) -> tuple[float, int, int] | None:
    """The cheapest way to hold ``total_gpus`` on ``offer`` in period ``t`` from ``spot`` and ``on_demand`` already
    bought: its extra cost, and the new spot and on-demand counts (None when the caps cannot hold them)."""
    best = None
    k = offer.spot_counted
    spot_options = range(spot, int(offer.spot_cap[t]) + 1) if offer.spot_per_gpu_period is not None else [spot]
    for s in spot_options:
        counted = int(k[s]) if s < len(k) else 0
        rest = max(int(math.ceil(total_gpus - counted - ROUND_OFF)), on_demand)
        if rest > on_demand and offer.on_demand_per_gpu_period is None:
            continue
        if offer.on_demand_max_gpus is not None and rest > offer.on_demand_max_gpus:
            continue
        cost = (s - spot) * (offer.spot_per_gpu_period or 0.0) + (rest - on_demand) * (offer.on_demand_per_gpu_period or 0.0)
        if best is None or cost < best[0]:
            best = (cost, s, rest)
    return best
