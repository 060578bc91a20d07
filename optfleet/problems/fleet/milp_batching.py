"""The fleet MILP's tables under the continuous-batching service model (``slo.service_model: batching``).

Under the batching model (optfleet/queueing/batching.py) a pool's P99 TTFT depends on its whole traffic mix (the
chunk mix, the prefill work law, the hold law), not on one load number, so no table is exact for every routing.
The MILP is solved twice, in the shape of the fleetsim rule's restriction and relaxation (milp.py):

* **The bound: a relaxation, valid for every plan.**  The load of class k in pool option j is its slot-seconds at
  the occupancy cap with no prefill wait (``cap_seconds_per_request``, batching_pool.py), so the utilisation cap
  (3) ``load_j <= rho_max s_j n_j`` holds for every pool meeting the batching SLO; the floor row (4) has one level,
  the most prefill chunks ``m`` with ``(m + 1) W_j <= SLO`` (no iteration is shorter than ``W_j``, so a pool whose
  P99 TTFT meets the SLO has at most 1 % of its traffic above ``m`` chunks).  No wait table: every plan meeting
  the batching model is feasible, so HiGHS's bound is a bound on the batching problem.
* **The plan: tables at a traffic mix.**  For each pool option a mix is fixed (at first every request its window
  holds; then the mix the last plan routed to it) and :func:`optfleet.problems.fleet.batching_pool.rates_per_gpu`
  gives ``r_j(n)``, the largest per-GPU request rate meeting the SLO at ``n`` GPUs, ``n < N_j``, and from ``N_j``
  on (the rate rises with ``n``).  In the model's load units (erlangs per request ``e_j``, the mix's mean) the
  table is ``a_max[n] = n r_j(n) e_j`` and the per-GPU cap from ``N_j`` on is ``r_j(N_j) e_j``; the option's load
  column is scaled by ``rho_max s_j / (r_j(N_j) e_j)`` so that the model's cap (3) and wait rows (7) read them as
  they read the Erlang tables.  The tables are exact for a routing that keeps each pool's mix; the driver
  re-scores every plan with the evaluator, refreshes the tables of the plan's pools from their routed mix and
  re-solves, and from the first plan that fails the evaluator on, no table entry rises (the elementwise least of
  old and new), so the models only tighten.  Each model's routing with every pool resized to its least GPU
  count under the evaluator is a candidate too, and the sweep's plan the incumbent (milp.py).  Every plan returned
  passes the evaluator; it is **not proven optimal** for the batching problem unless it reaches the relaxation's
  bound, and the report's gap says how far.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.fleet.batching_pool import batching_workload, cap_seconds_per_request, rates_per_gpu
from optfleet.problems.fleet.milp_data import FleetMilpData, level_caps
from optfleet.problems.fleet.plan import Plan
from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.routing import route

TABLE_MARGIN = 1e-6  # relative, below every table entry and the per-GPU cap: room for the solver's feasibility tolerance
# An option whose mix allows less than this share of its cap per GPU is closed in the plan's model: its load column
# would be scaled past 1e3 (HiGHS refuses coefficients near 1e15 and branches badly long before)
LEAST_CAPACITY_SHARE = 1e-3
Traffic = tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]  # l_in, l_out, weight


def option_configs(data: FleetMilpData) -> list[PoolConfig]:
    """The pool config of every pool option of ``data``."""
    problem = data.problem
    return [problem.pool(o.window_tokens, o.gpu if problem.heterogeneous else None) for o in data.pools]


def initial_traffic(data: FleetMilpData, start: Plan | None) -> dict[int, Traffic]:
    """The start of the tables: the mix ``start`` (the sweep's plan) routes to each of its pools, and for every other
    option every request its window holds, uncompressed, at its share of the mix.  The start plan meets its own
    pools' tables, so the first model holds it."""
    mix = data.problem.mix
    traffic = {j: (mix.l_in, mix.l_out, np.where(mix.l_total <= o.window_tokens, mix.prob, 0.0)) for j, o in enumerate(data.pools)}
    if start is not None:
        traffic.update(plan_traffic(data, start))
    return traffic


def plan_traffic(data: FleetMilpData, plan: Plan) -> dict[int, Traffic]:
    """The mix ``plan`` routes to each of its pools with traffic, by pool option (a pool on no option is left out)."""
    hetero = data.problem.heterogeneous
    index = {(o.gpu if hetero else None, o.window_tokens): j for j, o in enumerate(data.pools)}
    served = route(data.problem.mix, plan, data.problem.compressible_fraction)
    keys = [(p.gpu if hetero else None, p.window_tokens) for p in plan.pools]
    return {index[key]: (t.l_in, t.l_out, t.weight) for key, t in zip(keys, served, strict=True) if t.share > 0 and key in index}


def per_gpu_capacity(data: FleetMilpData, traffic: dict[int, Traffic]) -> dict[int, NDArray[np.float64]]:
    """For each option j of ``traffic``, ``c[n - 1] = r_j(n) e_j``: the largest load (the model's erlangs) per GPU meeting
    the batching SLO at ``n = 1 .. N_j`` GPUs with the option's traffic in that mix (``c[N_j - 1]`` holds from ``N_j``
    on; ``[0.0]``: no load meets it).  An option without traffic gets its cap ``rho_max s_j`` (no table)."""
    problem = data.problem
    configs = option_configs(data)
    rows = [j for j in sorted(traffic) if float(np.sum(traffic[j][2])) > 0]
    result = {j: np.array([problem.rho_max * data.pools[j].slots_per_instance]) for j in traffic if j not in rows}
    if not rows:
        return result
    chosen = [configs[j] for j in rows]
    unit = batching_workload(chosen, [traffic[j] for j in rows], 1.0)
    seconds = np.array([float(np.dot(traffic[j][2], cap_seconds_per_request(configs[j], traffic[j][0], traffic[j][1], problem.rho_max)))
                        / float(np.sum(traffic[j][2])) for j in rows])
    ceiling = problem.rho_max * np.array([c.slots_per_instance for c in chosen]) / seconds * (1.0 + 1e-9)
    rates = rates_per_gpu(unit, chosen, problem.ttft_p99_ms, problem.rho_max, ceiling)
    result.update({j: rate * e for j, rate, e in zip(rows, rates, seconds, strict=True)})
    return result


def lower_of(old: NDArray[np.float64], new: NDArray[np.float64]) -> NDArray[np.float64]:
    """The elementwise least of two capacity curves, each extended by its last entry to the longer length."""
    size = max(len(old), len(new))
    return np.minimum(np.pad(old, (0, size - len(old)), mode="edge"), np.pad(new, (0, size - len(new)), mode="edge"))


def tabled_data(data: FleetMilpData, capacity: dict[int, NDArray[np.float64]]) -> tuple[FleetMilpData, list[NDArray[np.float64]]]:
    """``data`` with each option's load scaled and its table size set from ``capacity`` (module docstring), and the
    wait tables ``[n, level]`` for ``n < N_j`` the model reads; an option whose mix allows no load (or less than
    ``LEAST_CAPACITY_SHARE`` of its cap per GPU) cannot open (no level)."""
    problem = data.problem
    pools, tables, caps = [], [], []
    scale = np.ones(len(data.pools))
    for j, (option, config) in enumerate(zip(data.pools, option_configs(data), strict=True)):
        curve = capacity[j] * (1.0 - TABLE_MARGIN)
        cap = problem.rho_max * option.slots_per_instance
        if curve[-1] <= LEAST_CAPACITY_SHARE * cap:
            pools.append(replace(option, level_floors_ms=(), table_instances=1))
            tables.append(np.zeros((1, 0)))
            caps.append(np.zeros(0))
            continue
        scale[j] = cap / curve[-1]
        size = len(curve)
        level_cap = np.minimum(level_caps(problem, config, option.levels, extra_iterations=1.0) * scale[j], cap)
        rows = np.concatenate(([0.0], np.arange(1, size) * curve[:-1] * scale[j]))
        pools.append(replace(option, table_instances=size))
        tables.append(np.minimum(rows[:, None], np.multiply.outer(np.arange(size), level_cap)))
        caps.append(level_cap)
    return replace(data, pools=tuple(pools), load=data.load * scale, compressed_load=data.compressed_load * scale[None, :],
                   level_caps=tuple(caps)), tables


def relaxation_data(data: FleetMilpData) -> tuple[FleetMilpData, list[NDArray[np.float64]]]:
    """``data`` without wait tables (every option's table size 1): the relaxation whose bound holds for the batching
    problem (module docstring)."""
    pools = tuple(replace(o, table_instances=1) for o in data.pools)
    return replace(data, pools=pools), [np.zeros((1, o.levels)) for o in pools]


@dataclass(frozen=True)
class BatchingTables:
    """The tables' state in the driver: each option's capacity curve, and whether entries may only fall from now on."""

    capacity: dict[int, NDArray[np.float64]]
    tightening: bool = False

    def refreshed(self, data: FleetMilpData, plan: Plan, failed: bool) -> tuple[BatchingTables, bool]:
        """The tables after ``plan`` (each of its pools at its routed mix; no entry rises once a plan has failed the
        evaluator), and whether they changed for the plan's pools (relative 1e-6)."""
        fresh = per_gpu_capacity(data, plan_traffic(data, plan))
        tightening = self.tightening or failed
        capacity = dict(self.capacity)
        changed = False
        for j, curve in fresh.items():
            new = lower_of(self.capacity[j], curve) if tightening else curve
            old = self.capacity[j]
            changed |= len(new) != len(old) or not np.allclose(new, old, rtol=1e-6, atol=0.0)
            capacity[j] = new
        return BatchingTables(capacity, tightening), changed
