"""The prepared capacity-plan problem: every number the methods, the model and the evaluator need.

``prepare(loaded)`` reads the demand (demand.py), builds the capacity table from the fleet kind's sizing
(capacity.py) and turns prices per GPU-hour into prices per GPU-period.  It checks the rules that span fields,
each naming its field: unique model and type names, a purchase option per type, reservation terms within the
horizon, one spot cap per period, known type names in ``tp`` and ``constraints``, reservations already held within
the horizon and not overlapping (held.py), no service field the plan sets itself (the rate, the GPU).  A model that
no GPU type can serve is an InfeasibleError naming the model and each type's reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InfeasibleError, InputError
from optfleet.hardware.catalog import get_gpu
from optfleet.instance.loader import LoadedInstance
from optfleet.problems.capacity_plan.capacity import CapacityTable, capacity_table
from optfleet.problems.capacity_plan.demand import SECONDS_PER_HOUR, generated_rates, grown, read_forecast, trace_rates
from optfleet.problems.capacity_plan.held import HeldGpus, held_gpus
from optfleet.problems.capacity_plan.schema import CapacityPlanInstanceSpec, GpuTypeSpec
from optfleet.problems.capacity_plan.spot import counted_spot



@dataclass(frozen=True)
class TypeOffer:
    """One GPU type's purchase options in numbers ($ per GPU-period; None: the option is not offered).

    ``spot_cap[t]`` is the spot availability of period ``t`` (0 without spot); ``spot_counted[s]`` is ``k(s)``,
    the spot GPUs counted at the confidence when ``s`` are bought (spot.py)."""

    name: str
    gpu: str
    reserved_term_periods: int | None
    reserved_cost_per_gpu: float | None
    """A reservation's whole cost per GPU: ``upfront + price_per_gpu_hour x period_hours x term``."""
    reserved_max_gpus: int | None
    on_demand_per_gpu_period: float | None
    on_demand_max_gpus: int | None
    spot_per_gpu_period: float | None
    spot_cap: NDArray[np.int64]
    spot_preemption_probability: float
    spot_confidence: float
    spot_counted: NDArray[np.int64]


@dataclass(frozen=True)
class CapacityProblem:
    """A validated capacity-plan instance in numbers: ``M`` models, ``G`` GPU types, ``T`` periods."""

    spec: CapacityPlanInstanceSpec
    rates_rps: NDArray[np.float64]
    table: CapacityTable
    offers: tuple[TypeOffer, ...]
    load_fraction: NDArray[np.float64]
    """``lambda_m = load_time_s / period_seconds``: the share of a period a GPU spends loading model ``m`` when it
    starts serving it."""
    held: HeldGpus
    """The reservations already held (held.py): capacity in their periods, sunk cost."""
    base_dir: Path = Path(".")
    """The instance file's folder: service files are read from it when the capacity tables are sized again
    (``optfleet explain``'s rate curve)."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def periods(self) -> int:
        return self.spec.periods

    @property
    def model_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.spec.models)

    @property
    def type_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.spec.gpus)

    def window(self, start: int, stop: int, budget: bool = True) -> "CapacityProblem":
        """Periods ``start..stop-1`` as a problem of their own (demand, capacity table and spot caps sliced);
        ``budget=False`` leaves out the budget constraints, which bound the whole horizon's cost."""
        offers = tuple(replace(o, spot_cap=o.spot_cap[start:stop]) for o in self.offers)
        table = replace(self.table, instances=self.table.instances[:, :, start:stop])
        kept = [c for c in self.spec.constraints if budget or c.kind != "budget"]
        spec = self.spec.model_copy(update={"periods": stop - start, "constraints": kept})
        return replace(self, spec=spec, rates_rps=self.rates_rps[:, start:stop], table=table, offers=offers,
                       held=self.held.window(start, stop))


def prepare(loaded: LoadedInstance) -> CapacityProblem:
    """The instance in numbers (module docstring)."""
    spec: CapacityPlanInstanceSpec = loaded.spec
    _check_names(spec)
    _check_services(spec)
    models = [m.name for m in spec.models]
    held = held_gpus(spec.reservations, models, [g.name for g in spec.gpus], spec.periods, spec.period_hours)
    demand = spec.demand
    given = [k for k in ("forecast_file", "generator", "traces") if getattr(demand, k) is not None]
    if len(given) != 1:
        raise InputError("demand", given or None, "give exactly one of forecast_file, generator, traces")
    if demand.forecast_file is not None:
        rates = read_forecast(loaded.resolve(demand.forecast_file, "demand.forecast_file"), models, spec.periods)
    elif demand.traces is not None:
        rates = trace_rates(demand.traces, models, spec.periods, spec.period_hours, loaded.base_dir)
    else:
        rates = generated_rates(demand.generator, models, spec.periods, spec.period_hours)
    rates = grown(rates, demand.growth_per_day, spec.period_hours)
    offers = tuple(_offer(spec, g, _with_catalog_prices(loaded, g, gpu), _spot_cap(loaded, g, gpu)) for g, gpu in enumerate(spec.gpus))
    table = capacity_table(list(spec.models), list(spec.gpus), rates, loaded.base_dir)
    _check_servable(spec, table)
    load = np.array([m.load_time_s / (spec.period_hours * SECONDS_PER_HOUR) for m in spec.models])
    if np.any(load > 1.0):
        m = int(np.argmax(load > 1.0))
        raise InputError(f"models[{m}].load_time_s", spec.models[m].load_time_s, f"is longer than a period ({spec.period_hours:g} h)")
    return CapacityProblem(spec, rates, table, offers, load, held, loaded.base_dir)


SERVICE_FIELDS_SET_PER_TYPE = (("workload", "rate_rps", "the demand gives each period's rate"),
                               ("hardware", "gpu", "each GPU type's gpus[].gpu is sized"))
"""Fields of a model's ``service`` that the plan sets itself when it sizes the service (capacity.py): given, they
would be replaced without a word, so they are refused (as ``kind`` and ``name`` are, in capacity.py)."""


def _check_services(spec: CapacityPlanInstanceSpec) -> None:
    """An InputError naming a service field of :data:`SERVICE_FIELDS_SET_PER_TYPE` that a model's service gives."""
    for m, model in enumerate(spec.models):
        for block, name, why in SERVICE_FIELDS_SET_PER_TYPE:
            part = model.service.get(block)
            if isinstance(part, dict) and name in part:
                raise InputError(f"models[{m}].service.{block}.{name}", part[name], f"is set by the capacity plan ({why}); leave it out of the service")


def _check_names(spec: CapacityPlanInstanceSpec) -> None:
    for field, names in (("models", [m.name for m in spec.models]), ("gpus", [g.name for g in spec.gpus])):
        seen = set()
        for i, name in enumerate(names):
            if name in seen:
                raise InputError(f"{field}[{i}].name", name, "is the name of an earlier entry; names must be unique")
            seen.add(name)
    for g, gpu in enumerate(spec.gpus):
        get_gpu(gpu.gpu, f"gpus[{g}].gpu")  # an unknown catalog GPU is refused here, naming its type's field
    types = {g.name for g in spec.gpus}
    for m, model in enumerate(spec.models):
        for name in model.tp:
            if name not in types:
                raise InputError(f"models[{m}].tp.{name}", name, f"is not a GPU type of the instance ({', '.join(sorted(types))})")
    for i, constraint in enumerate(spec.constraints):
        if getattr(constraint, "gpu", None) is not None and constraint.gpu not in types:
            raise InputError(f"constraints[{i}].gpu", constraint.gpu, f"is not a GPU type of the instance ({', '.join(sorted(types))})")
        if constraint.kind == "gpu_mix" and constraint.min_share > constraint.max_share:
            raise InputError(f"constraints[{i}].min_share", constraint.min_share, f"is above max_share {constraint.max_share:g}")


def _with_catalog_prices(loaded: LoadedInstance, g: int, gpu: GpuTypeSpec) -> GpuTypeSpec:
    """``gpu`` with the on-demand and spot prices it leaves out read from its ``skypilot_catalog`` (skypilot.py);
    an InputError names a price that is neither given nor in the catalog."""
    field = f"gpus[{g}]"
    catalog = gpu.skypilot_catalog
    prices = None
    if catalog is not None:
        from optfleet.problems.capacity_plan.skypilot import catalog_prices

        where = f"{field}.skypilot_catalog"
        prices = catalog_prices(loaded.resolve(catalog.file, f"{where}.file"), catalog.instance_type, catalog.region, gpu.gpu, where)
    update = {}
    for option, price in (("on_demand", None if prices is None else prices.on_demand_per_gpu_hour),
                          ("spot", None if prices is None else prices.spot_per_gpu_hour)):
        block = getattr(gpu, option)
        if block is None or block.price_per_gpu_hour is not None:
            continue
        if price is None:
            raise InputError(f"{field}.{option}.price_per_gpu_hour", None,
                             "is missing: give it, or a skypilot_catalog whose instance has a " + ("spot " if option == "spot" else "") + "price")
        update[option] = block.model_copy(update={"price_per_gpu_hour": price})
    return gpu.model_copy(update=update) if update else gpu


def _spot_cap(loaded: LoadedInstance, g: int, gpu: GpuTypeSpec) -> NDArray[np.int64]:
    """The spot GPUs available per period: ``spot.max_gpus`` (one cap, or one per period) or read from
    ``spot.availability_trace`` (spot_trace.py); zero without spot.  An InputError names the field."""
    spec: CapacityPlanInstanceSpec = loaded.spec
    field, spot = f"gpus[{g}].spot", gpu.spot
    if spot is None:
        return np.zeros(spec.periods, dtype=np.int64)
    if (spot.max_gpus is None) == (spot.availability_trace is None):
        raise InputError(field, "max_gpus and availability_trace" if spot.max_gpus is not None else None,
                         "give exactly one of max_gpus and availability_trace")
    if spot.availability_trace is not None:
        from optfleet.problems.capacity_plan.spot_trace import trace_caps

        where = f"{field}.availability_trace"
        path = loaded.resolve(spot.availability_trace.file, f"{where}.file")
        return trace_caps(path, spot.availability_trace, spec.periods, spec.period_hours, where)
    if isinstance(spot.max_gpus, list):
        if len(spot.max_gpus) != spec.periods:
            raise InputError(f"{field}.max_gpus", f"{len(spot.max_gpus)} caps", f"needs one cap per period ({spec.periods}) or a single cap")
        return np.array(spot.max_gpus, dtype=np.int64)
    return np.full(spec.periods, spot.max_gpus, dtype=np.int64)


def _offer(spec: CapacityPlanInstanceSpec, g: int, gpu: GpuTypeSpec, cap: NDArray[np.int64]) -> TypeOffer:
    field = f"gpus[{g}]"
    if gpu.reserved is None and gpu.on_demand is None and gpu.spot is None:
        raise InputError(field, gpu.name, "offers no purchase option: give reserved, on_demand or spot")
    hours = spec.period_hours
    reserved, on_demand, spot = gpu.reserved, gpu.on_demand, gpu.spot  # cap: _spot_cap's spot GPUs per period
    if reserved is not None and reserved.term_periods > spec.periods:
        raise InputError(f"{field}.reserved.term_periods", reserved.term_periods,
                         f"is longer than the horizon ({spec.periods} periods): a reservation would outlast the whole plan")
    return TypeOffer(
        name=gpu.name, gpu=gpu.gpu,
        reserved_term_periods=None if reserved is None else reserved.term_periods,
        reserved_cost_per_gpu=None if reserved is None else reserved.upfront_per_gpu + reserved.price_per_gpu_hour * hours * reserved.term_periods,
        reserved_max_gpus=None if reserved is None else reserved.max_gpus,
        on_demand_per_gpu_period=None if on_demand is None else on_demand.price_per_gpu_hour * hours,
        on_demand_max_gpus=None if on_demand is None else on_demand.max_gpus,
        spot_per_gpu_period=None if spot is None else spot.price_per_gpu_hour * hours,
        spot_cap=cap,
        spot_preemption_probability=0.0 if spot is None else spot.preemption_probability,
        spot_confidence=1.0 if spot is None else spot.confidence,
        spot_counted=counted_spot(int(cap.max(initial=0)), 0.0 if spot is None else spot.preemption_probability,
                                  1.0 if spot is None else spot.confidence),
    )


def _check_servable(spec: CapacityPlanInstanceSpec, table: CapacityTable) -> None:
    """An InfeasibleError naming a model that no GPU type can serve, with each type's reason."""
    for m, model in enumerate(spec.models):
        if not table.usable()[m].any():
            why = "; ".join(f"{g.name}: {table.reasons.get((m, i), 'unusable')}" for i, g in enumerate(spec.gpus))
            raise InfeasibleError(f"infeasible: model {model.name} meets its SLO on no GPU type ({why})")
