"""The one evaluator of capacity plans: every method's schedule is scored here, whoever made it.

Deterministic checks (each violation names the period, the model or type, and the rule):

* **SLO capacity**: model ``m`` in period ``t`` runs at least ``n[m, g, t]`` instances on its type ``g``
  (capacity.py), on a type that can serve it;
* **purchase limits**: reserved GPUs held, on-demand and spot GPUs within their caps; nothing bought of an option
  that is not offered;
* **GPUs**: the GPUs in use (plan.gpus_in_use, load time included) fit the reserved and on-demand GPUs, the GPUs
  of the reservations already held that the models may use (``A[g, t]``, held.py), plus the spot GPUs that
  survive, with probability at least the type's spot confidence:
  ``P(S_gt >= ceil(use[g, t] - R[g, t] - A[g, t] - O[g, t])) >= c_g`` with ``S_gt ~ Binomial(spot[g, t], 1 - p_g)``,
  computed exactly (spot.py);
* **constraints**: the budget on the total cost, and each GPU-mix share of the GPUs held in every period.

Cost (the objective, $ over the horizon): every reservation at its full term ``upfront + price x period_hours x
term``, even past the horizon, plus on-demand and spot GPUs x their price per period.  The reservations already
held are sunk: their cost (``sunk_cost``) is reported beside the plan's and is not in it.  Cost by model: each type's
cost in each period split by the models' shares of its GPUs in use; reservation periods past the horizon and
GPUs nobody uses stay ``unassigned``.

Replay (seeded, ``evaluation.samples`` scenarios): each spot GPU survives each period with probability ``1 - p``.
A model's SLO attainment in a period is the share of scenarios in which its type's surviving GPUs hold the GPUs in
use; with fallback, the shortfall is bought on demand for the period (within the on-demand cap), at the on-demand
price: the expected fallback cost is reported beside the planned cost, not in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.capacity_plan.plan import Schedule, gpus_in_use, model_gpus
from optfleet.problems.capacity_plan.problem import CapacityProblem
from optfleet.problems.capacity_plan.spot import survival_probability

ROUND_OFF = 1e-9
"""GPU counts in use carry fractional load time; a need within this of an integer is that integer."""
UNASSIGNED = "unassigned"
OPTIONS = ("reserved", "on_demand", "spot")


@dataclass(frozen=True)
class Evaluation:
    """A schedule's cost, its violations and its replay (module docstring)."""

    total_cost: float
    cost_by_option: dict[str, float]
    cost_by_model: dict[str, float]
    violations: tuple[str, ...]
    gpus_in_use: NDArray[np.float64]
    attainment: NDArray[np.float64]
    """``[M, T]``: the share of scenarios in which the model's GPUs survive in the period (without fallback)."""
    attainment_with_fallback: NDArray[np.float64]
    expected_fallback_cost: float
    sunk_cost: float = 0.0
    """$ of the reservations already held, over the horizon's periods (not in ``total_cost``)."""
    gpu_periods_by_option: dict[str, int] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return not self.violations

    @property
    def min_attainment(self) -> float:
        return float(self.attainment.min(initial=1.0))


def evaluate(problem: CapacityProblem, schedule: Schedule) -> Evaluation:
    """Score ``schedule`` (module docstring)."""
    use = gpus_in_use(problem, schedule.gpu_type, schedule.instances)
    reserved = schedule.reserved_held(problem)
    covered = reserved + schedule.held_usable(problem)
    option_cost = _option_costs(problem, schedule)
    total = float(sum(c.sum() for c in option_cost.values()))
    violations = [*_slo_capacity(problem, schedule), *_purchase_limits(problem, schedule, reserved),
                  *_chance(problem, schedule, covered, use), *_constraints(problem, schedule, total)]
    attainment, with_fallback, fallback_cost = _replay(problem, schedule, covered, use)
    return Evaluation(
        total_cost=total,
        cost_by_option={k: float(v.sum()) for k, v in option_cost.items()},
        cost_by_model=_cost_by_model(problem, schedule, option_cost),
        violations=tuple(violations),
        gpus_in_use=use,
        attainment=attainment,
        attainment_with_fallback=with_fallback,
        expected_fallback_cost=fallback_cost,
        sunk_cost=float(problem.held.sunk_cost.sum()),
        gpu_periods_by_option={"reserved": int(reserved.sum()), "on_demand": int(schedule.on_demand_gpus.sum()),
                               "spot": int(schedule.spot_gpus.sum())},
    )


def _option_costs(problem: CapacityProblem, schedule: Schedule) -> dict[str, NDArray[np.float64]]:
    """``[G, T]`` cost per option: reservations charged in full in their start period."""
    out = {k: np.zeros(schedule.spot_gpus.shape) for k in OPTIONS}
    for g, offer in enumerate(problem.offers):
        out["reserved"][g] = schedule.reserved_starts[g] * (offer.reserved_cost_per_gpu or 0.0)
        out["on_demand"][g] = schedule.on_demand_gpus[g] * (offer.on_demand_per_gpu_period or 0.0)
        out["spot"][g] = schedule.spot_gpus[g] * (offer.spot_per_gpu_period or 0.0)
    return out


def _slo_capacity(problem: CapacityProblem, schedule: Schedule) -> list[str]:
    out = []
    needed, names, types = problem.table.instances, problem.model_names, problem.type_names
    for m in range(len(names)):
        for t in range(problem.periods):
            g = int(schedule.gpu_type[m, t])
            usable = needed[m, :, t] >= 0
            if g < 0:
                if (needed[m, usable, t] > 0).all():
                    out.append(f"period {t}, model {names[m]}: no GPU type serves it (it needs at least "
                               f"{int(needed[m, usable, t].min())} instances)")
            elif needed[m, g, t] < 0:
                out.append(f"period {t}, model {names[m]}: {types[g]} cannot meet its SLO ({problem.table.reasons.get((m, g), '')})")
            elif schedule.instances[m, t] < needed[m, g, t]:
                out.append(f"period {t}, model {names[m]}: {schedule.instances[m, t]} instances on {types[g]}, "
                           f"below the {needed[m, g, t]} its SLO needs at {problem.rates_rps[m, t]:.4g} req/s")
    return out


def _purchase_limits(problem: CapacityProblem, schedule: Schedule, reserved: NDArray[np.int64]) -> list[str]:
    out = []
    for g, offer in enumerate(problem.offers):
        limits = (("reserved GPUs held", reserved[g], offer.reserved_term_periods is not None, offer.reserved_max_gpus),
                  ("on-demand GPUs", schedule.on_demand_gpus[g], offer.on_demand_per_gpu_period is not None, offer.on_demand_max_gpus),
                  ("spot GPUs", schedule.spot_gpus[g], offer.spot_per_gpu_period is not None, None))
        for what, counts, offered, cap in limits:
            if (counts < 0).any():
                out.append(f"{offer.name}: negative {what}")
            elif not offered and counts.any():
                out.append(f"period {int(np.argmax(counts > 0))}, {offer.name}: {what} bought but not offered")
            elif cap is not None and (counts > cap).any():
                t = int(np.argmax(counts > cap))
                out.append(f"period {t}, {offer.name}: {counts[t]} {what}, above the cap {cap}")
        over = schedule.spot_gpus[g] > offer.spot_cap
        if over.any():
            t = int(np.argmax(over))
            out.append(f"period {t}, {offer.name}: {schedule.spot_gpus[g, t]} spot GPUs, above the {offer.spot_cap[t]} available")
    return out


def spot_relied_on(schedule: Schedule, covered: NDArray[np.float64], use: NDArray[np.float64]) -> NDArray[np.int64]:
    """``ceil(use - R - A - O)^+``: the spot GPUs each type and period relies on (``covered = R + A``)."""
    return np.maximum(np.ceil(use - covered - schedule.on_demand_gpus - ROUND_OFF), 0).astype(np.int64)


def _chance(problem: CapacityProblem, schedule: Schedule, covered: NDArray[np.float64], use: NDArray[np.float64]) -> list[str]:
    out = []
    relied = spot_relied_on(schedule, covered, use)
    for g, offer in enumerate(problem.offers):
        for t in np.nonzero(relied[g] > 0)[0]:
            chance = survival_probability(int(schedule.spot_gpus[g, t]), int(relied[g, t]), offer.spot_preemption_probability)
            if chance < offer.spot_confidence - ROUND_OFF:
                out.append(f"period {t}, {offer.name}: {use[g, t]:.4g} GPUs in use, {covered[g, t]:.4g} reserved + "
                           f"{schedule.on_demand_gpus[g, t]} on-demand + {schedule.spot_gpus[g, t]} spot hold them with probability "
                           f"{chance:.4g} < the spot confidence {offer.spot_confidence:g}")
    return out


def _constraints(problem: CapacityProblem, schedule: Schedule, total: float) -> list[str]:
    out = []
    held = schedule.held(problem)
    index = {name: g for g, name in enumerate(problem.type_names)}
    for i, c in enumerate(problem.spec.constraints):
        if c.kind == "budget" and total > c.max_cost * (1 + ROUND_OFF):
            out.append(f"constraints[{i}] budget: costs ${total:,.2f} > ${c.max_cost:,.2f}")
        if c.kind == "gpu_mix":
            share_held, all_held = held[index[c.gpu]], held.sum(axis=0)
            bad = (share_held < c.min_share * all_held - ROUND_OFF) | (share_held > c.max_share * all_held + ROUND_OFF)
            if bad.any():
                t = int(np.argmax(bad))
                out.append(f"period {t}, constraints[{i}] gpu_mix: {c.gpu} holds {share_held[t]} of {all_held[t]} GPUs, outside "
                           f"[{c.min_share:g}, {c.max_share:g}]")
    return out


def _replay(problem: CapacityProblem, schedule: Schedule, covered: NDArray[np.float64],
            use: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    """Attainment ``[M, T]`` without and with on-demand fallback, and the expected fallback cost (module docstring)."""
    samples = problem.spec.evaluation.samples
    rng = np.random.default_rng(problem.spec.evaluation.seed)
    p = np.array([o.spot_preemption_probability for o in problem.offers])[:, None]
    survivors = rng.binomial(schedule.spot_gpus[None, :, :], 1.0 - p[None, :, :], size=(samples, *schedule.spot_gpus.shape))
    available = covered + schedule.on_demand_gpus + survivors
    deficit = np.maximum(np.ceil(use - available - ROUND_OFF), 0)
    od_left = np.array([np.inf if o.on_demand_per_gpu_period is None or o.on_demand_max_gpus is None else o.on_demand_max_gpus
                        for o in problem.offers])[:, None] - schedule.on_demand_gpus
    od_left[[o.on_demand_per_gpu_period is None for o in problem.offers]] = 0
    fallback = np.minimum(deficit, np.maximum(od_left, 0))
    price = np.array([o.on_demand_per_gpu_period or 0.0 for o in problem.offers])[:, None]
    short, short_after = deficit > 0, deficit > fallback
    return (_per_model(schedule, short), _per_model(schedule, short_after), float((fallback * price).sum(axis=(1, 2)).mean()))


def _per_model(schedule: Schedule, short: NDArray[np.bool_]) -> NDArray[np.float64]:
    """``[M, T]``: the share of scenarios in which the model's type is not short in the period (1 without a type)."""
    met = 1.0 - short.mean(axis=0)
    g = schedule.gpu_type
    return np.where(g >= 0, met[np.maximum(g, 0), np.arange(g.shape[1])[None, :]], 1.0)


def _cost_by_model(problem: CapacityProblem, schedule: Schedule, option_cost: dict[str, NDArray[np.float64]]) -> dict[str, float]:
    """Each type-period's cost split by the models' GPU shares there (module docstring)."""
    per_period = option_cost["on_demand"] + option_cost["spot"]
    reserved_past = 0.0
    for g, offer in enumerate(problem.offers):
        if offer.reserved_term_periods is None:
            continue
        per_held = (offer.reserved_cost_per_gpu or 0.0) / offer.reserved_term_periods
        per_period[g] += schedule.reserved_held(problem)[g] * per_held
        reserved_past += float(option_cost["reserved"][g].sum()) - float(schedule.reserved_held(problem)[g].sum()) * per_held
    u = model_gpus(problem, schedule.gpu_type, schedule.instances).astype(np.float64)
    total_u = u.sum(axis=0)
    share = np.divide(u, total_u[None], out=np.zeros_like(u), where=total_u[None] > 0)
    by_model = {name: float((share[m] * per_period).sum()) for m, name in enumerate(problem.model_names)}
    by_model[UNASSIGNED] = float(per_period.sum() - sum(by_model.values()) + reserved_past)
    return by_model
