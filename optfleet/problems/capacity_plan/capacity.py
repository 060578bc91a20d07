"""Per-model capacity tables: the instances each model needs on each GPU type at each period's rate.

Nothing here re-derives queueing: every entry is the fleet kind's own answer.  A model's ``service`` block becomes
a fleet instance (``kind: fleet``, its ``hardware.gpu`` and ``hardware.tp`` set to the GPU type's), which the fleet
kind validates and prepares; the entry at rate ``r`` is the instance count of the fleet's ``homogeneous`` plan (one
pool at the long window, sized to its least instance count meeting the utilisation cap and the TTFT/TPOT SLOs by
optfleet/problems/fleet/plan_sizing.py) with the workload's rate set to ``r``.  A type on which the SLO cannot be
met at any count is marked unusable for the model, with the fleet's reason.  Every period then needs

    n[m, g, t] = max(min_replicas_m, N_mg(rate[m, t]))   instances,  tp[m, g] n[m, g, t] GPUs,

and a period without traffic needs only the replica floor.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InfeasibleError, InputError
from optfleet.instance.loader import LoadedInstance, validate_spec
from optfleet.problems.capacity_plan.schema import GpuTypeSpec, ModelSpec
from optfleet.registry import kind

UNUSABLE = -1
"""The entry of a (model, GPU type) on which the SLO cannot be met at any instance count."""

SERVICE_FIELDS_SET_HERE = ("kind", "name")


@dataclass(frozen=True)
class CapacityTable:
    """``instances[m, g, t]``: the least instances of model ``m`` on type ``g`` in period ``t`` (:data:`UNUSABLE`
    where the SLO cannot be met); ``tp[m, g]`` GPUs per instance; ``reasons[(m, g)]`` why a type is unusable."""

    instances: NDArray[np.int64]
    tp: NDArray[np.int64]
    reasons: Mapping[tuple[int, int], str]
    engine_sources: tuple[str, ...]

    def usable(self) -> NDArray[np.bool_]:
        """``usable[m, g, t]``: the type can serve the model in the period."""
        return self.instances >= 0

    def gpus(self) -> NDArray[np.int64]:
        """``gpus[m, g, t] = tp[m, g] n[m, g, t]`` (:data:`UNUSABLE` kept where unusable)."""
        return np.where(self.usable(), self.instances * self.tp[:, :, None], UNUSABLE)


def service_problem(model: ModelSpec, gpu: GpuTypeSpec, tp: int, base_dir: Path, field: str) -> Any:
    """The fleet problem of ``model``'s service on ``gpu`` at ``tp`` GPUs per instance (rate 1 req/s, replaced per
    period); an InputError names the field under ``field`` (``models[0].service``)."""
    from optfleet.problems.fleet.problem import prepare

    fleet = kind("fleet")
    for name in SERVICE_FIELDS_SET_HERE:
        if name in model.service:
            raise InputError(f"{field}.{name}", model.service[name], "is set by the capacity plan; leave it out of the service")
    document: dict[str, Any] = {"kind": "fleet", "name": f"{model.name} on {gpu.name}", **copy.deepcopy(model.service)}
    workload = document.setdefault("workload", {})
    hardware = document.setdefault("hardware", {})
    if not isinstance(workload, dict) or not isinstance(hardware, dict):
        raise InputError(f"{field}.{'workload' if not isinstance(workload, dict) else 'hardware'}", workload, "must be a mapping")
    workload["rate_rps"] = 1.0
    hardware.update(gpu=gpu.gpu, tp=tp)
    try:
        data = fleet.preprocess(document) if fleet.preprocess is not None else document
        loaded = LoadedInstance(spec=validate_spec(fleet.schema, data), base_dir=base_dir, document=document)
        return prepare(loaded)
    except InputError as exc:
        raise InputError(f"{field}.{exc.field}", exc.value, exc.problem) from None


def default_tp(model: ModelSpec) -> int:
    """The service's ``hardware.tp`` (1 when not given)."""
    hardware = model.service.get("hardware")
    tp = hardware.get("tp", 1) if isinstance(hardware, dict) else 1
    return tp if isinstance(tp, int) and not isinstance(tp, bool) and tp >= 1 else 1


def instances_needed(problem: Any, rates_rps: NDArray[np.float64], known: dict[float, int] | None = None) -> tuple[NDArray[np.int64], str]:
    """``N(r)`` at every rate (0 at rate 0) and ``""``; or all :data:`UNUSABLE` and the fleet's reason when the SLO
    cannot be met (the reason does not depend on the rate: a floor above the SLO, or a TPOT bound).

    ``N`` is non-decreasing in the rate (more traffic never needs fewer instances: the utilisation and the queueing
    wait grow with it), so over the sorted distinct rates a run whose two ends need the same count needs it
    throughout: the fleet sizes the ends of each run and splits only runs whose ends differ, about
    ``K log(R / K)`` sizings for ``K`` distinct counts over ``R`` rates instead of ``R``.

    ``known`` (rate -> count) holds counts of this fleet problem found by earlier calls (a memo: the counts found
    here are added to it).  Its rates join the run ends, so a rate between two known rates of one count is not
    sized again: what explain's demand curve does at each growth factor (optfleet/problems/capacity_plan/explain.py)."""
    known = {} if known is None else known
    distinct = np.unique(np.concatenate([np.asarray(rates_rps, dtype=np.float64), np.fromiter(known, dtype=np.float64, count=len(known))]))
    counts = np.array([known.get(float(rate), -2) for rate in distinct], dtype=np.int64)
    try:
        _fill_monotone(problem, distinct, counts, 0, len(distinct) - 1)
    except InfeasibleError as exc:
        return np.full(len(rates_rps), UNUSABLE, dtype=np.int64), str(exc).removeprefix("infeasible: ")
    known.update(zip(distinct.tolist(), counts.tolist(), strict=True))
    return counts[np.searchsorted(distinct, rates_rps)], ""


def _size_at(problem: Any, rate_rps: float) -> int:
    """The fleet's homogeneous instance count at ``rate_rps`` (0 without traffic)."""
    from optfleet.problems.fleet.heuristics.baselines import homogeneous

    return 0 if rate_rps <= 0.0 else homogeneous(replace(problem, rate_rps=rate_rps)).pools[0].instances


def _fill_monotone(problem: Any, rates: NDArray[np.float64], counts: NDArray[np.int64], low: int, high: int) -> None:
    """``counts[low..high]`` by sizing the ends and splitting runs whose ends differ (instances_needed)."""
    for i in (low, high):
        if counts[i] == -2:
            counts[i] = _size_at(problem, float(rates[i]))
    if counts[low] == counts[high]:
        counts[low: high + 1] = counts[low]
    elif high - low > 1:
        middle = (low + high) // 2
        _fill_monotone(problem, rates, counts, low, middle)
        _fill_monotone(problem, rates, counts, middle, high)


SizingMemo = dict[tuple[int, str, int], tuple[Any, dict[float, int]]]
"""Per fleet problem of :func:`capacity_table` (GPU type, service, tp): the prepared problem and its counts by rate."""


def capacity_table(models: list[ModelSpec], gpus: list[GpuTypeSpec], rates_rps: NDArray[np.float64], base_dir: Path,
                   memo: SizingMemo | None = None) -> CapacityTable:
    """The table of every model on every GPU type at every period's rate (module docstring).

    ``N_mg`` depends only on the fleet problem and the rate, so models whose ``service`` and ``tp`` on a type are
    the same share one fleet problem there and are sized together: :func:`instances_needed` over the union of their
    rates, whose runs of equal counts span the models (the same counts as sizing each model alone, with fewer
    sizings: on month_ten_models, benchmarks/bench_capacity_plan_sizing.py).  The services are prepared model by
    model first, so a bad service is named as before.  ``memo`` (:data:`SizingMemo`, for tables of the same models
    and GPU types at other rates) keeps the prepared problems and their counts between calls: the same table, fewer
    sizings (:func:`instances_needed`)."""
    n_models, n_types, periods = len(models), len(gpus), rates_rps.shape[1]
    instances = np.zeros((n_models, n_types, periods), dtype=np.int64)
    tp = np.ones((n_models, n_types), dtype=np.int64)
    reasons: dict[tuple[int, int], str] = {}
    sources: list[str] = []
    memo = {} if memo is None else memo
    shared: dict[tuple[int, str, int], list[int]] = {}
    for m, model in enumerate(models):
        for g, gpu in enumerate(gpus):
            tp[m, g] = model.tp.get(gpu.name, default_tp(model))
            key = (g, json.dumps(model.service, sort_keys=True, default=str), int(tp[m, g]))
            if key not in memo:
                memo[key] = (service_problem(model, gpu, int(tp[m, g]), base_dir, f"models[{m}].service"), {})
            shared.setdefault(key, []).append(m)
            problem = memo[key][0]
            sources.append(f"{model.name} on {gpu.name} x{tp[m, g]}: {problem.hardware.label}, preset {problem.preset}")
    for key, members in shared.items():
        g = key[0]
        problem, known = memo[key]
        needed, reason = instances_needed(problem, rates_rps[members].ravel(), known)
        for k, m in enumerate(members):
            if reason:
                reasons[(m, g)] = reason
            own = needed[k * periods:(k + 1) * periods]
            instances[m, g] = np.where(own >= 0, np.maximum(own, models[m].min_replicas), UNUSABLE)
    return CapacityTable(instances, tp, reasons, tuple(sources))
