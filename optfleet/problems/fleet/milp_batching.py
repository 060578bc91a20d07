"""The fleet MILP's tables under the continuous-batching service model (``slo.service_model: batching``).

Under the batching model (optfleet/queueing/batching.py) a pool's P99 TTFT depends on its whole traffic mix (the
chunk mix, the prefill work law, the hold law), not on one load number, so no table is exact for every routing.
The MILP is solved twice, in the shape of the fleetsim rule's restriction and relaxation (milp.py):

* **The bound: a relaxation, valid for every plan.**  The load of class k in pool option j is its slot-seconds at
  the occupancy cap with no prefill wait (``cap_seconds_per_request``, batching_pool.py; under the engine model the
  cycle row's where larger, ``cycle_seconds_per_request``: each request's GPU time stalls every slot, with the work
  levels of models/fleet_work_levels.py adding back the prompt's own time in its slot), so the
  utilisation cap (3) ``load_j <= rho_max s_j n_j`` holds for every pool meeting the batching SLO; the floor rows (4) are the join
  levels (:func:`join_levels`): level r allows 1 % of a pool's traffic with ``X + J`` (prefill chunks plus the
  uniform join) above ``z_r``, on a grid of ``1 / JOIN_LEVELS_PER_ITERATION`` iteration, and caps the load per
  GPU so that the no-wait iteration ``W_j / (1 - G)`` times the level's floor ``f_r`` is within the SLO
  (milp_data.py ``floor_caps``).  No wait table: every plan meeting the batching model is feasible, so HiGHS's
  bound is a bound on the batching problem.  The prefill wait and the slot wait are left out (the bound's gap,
  benchmarks/results/batching_milp_gap_parts.md).  The relaxation's routing with every pool at its least count
  under the evaluator is a candidate plan too (milp.py).
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

from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.fleet.batching_pool import batching_workload, cap_seconds_per_request, cycle_seconds_per_request, rates_per_gpu
from optfleet.problems.fleet.milp_data import FleetMilpData, floor_caps, level_caps
from optfleet.problems.fleet.plan import Plan
from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.routing import route
from optfleet.progress import Progress
from optfleet.queueing import RELATIVE_TOLERANCE
from optfleet.queueing.batching import IN_GPU_GRID_ITERATIONS

TABLE_MARGIN = 1e-6  # relative, below every table entry and the per-GPU cap: room for the solver's feasibility tolerance
# An option whose mix allows less than this share of its cap per GPU is closed in the plan's model: its load column
# would be scaled past 1e3 (HiGHS refuses coefficients near 1e15 and branches badly long before)
LEAST_CAPACITY_SHARE = 1e-3
# Under the engine model each table entry solves the prefill queue (batching_engine.py, ~0.1 s a pool on this machine):
# its tables bisect each rate in this many halvings of [0, ceiling] (the feasible end: 2^-13 of the ceiling below at
# most), at about this many instance counts per doubling (the counts between read the rate below them: r(n) rises with n)
ENGINE_RATE_STEPS = 13
ENGINE_COUNTS_PER_OCTAVE = 2
WORK_LEVELS = 20  # the relaxation's work levels per cycle-row option: equal steps of the GPU time per GPU (_cycle_columns)
TABLE_NAMES_SHOWN = 3  # pool options a table-building progress label names (then "and N more")
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


def per_gpu_capacity(data: FleetMilpData, traffic: dict[int, Traffic], progress: Progress | None = None) -> dict[int, NDArray[np.float64]]:
    """For each option j of ``traffic``, ``c[n - 1] = r_j(n) e_j``: the largest load (the model's erlangs) per GPU meeting
    the batching SLO at ``n = 1 .. N_j`` GPUs with the option's traffic in that mix (``c[N_j - 1]`` holds from ``N_j``
    on; ``[0.0]``: no load meets it).  An option without traffic gets its cap ``rho_max s_j`` (no table).
    ``progress`` (if given) follows the searches (:func:`rates_per_gpu`), its label naming the options tabulated."""
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
    coarse = {"steps": ENGINE_RATE_STEPS, "counts_per_octave": ENGINE_COUNTS_PER_OCTAVE} if problem.charges_prefill else {}
    named = [data.pools[j].name for j in rows]
    which = ", ".join(named[:TABLE_NAMES_SHOWN]) + (f" and {len(named) - TABLE_NAMES_SHOWN} more" if len(named) > TABLE_NAMES_SHOWN else "")
    told = None if progress is None else (lambda label, done, total: progress(f"tables of {which}: {label}", done, total))
    rates = rates_per_gpu(unit, chosen, problem.ttft_p99_ms, problem.rho_max, ceiling, problem.tpot_targets, progress=told, **coarse)
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


def relaxation_data(data: FleetMilpData, with_join: bool = True) -> tuple[FleetMilpData, list[NDArray[np.float64]]]:
    """``data`` without wait tables (every option's table size 1) and with the join's floor levels
    (:func:`join_levels`; under the engine model the prefill floor levels and the cycle columns,
    :func:`_prefill_floor_relaxation`): the relaxation whose bound holds for the batching problem (module docstring).
    With ``with_join`` False the integer chunk levels and the occupancy row stay (the looser relaxation before either
    refinement, for comparison)."""
    if not with_join:
        pools = tuple(replace(o, table_instances=1) for o in data.pools)
        return replace(data, pools=pools), [np.zeros((1, o.levels)) for o in pools]
    if data.prefill_floor is not None:
        return _prefill_floor_relaxation(data)
    problem = data.problem
    grid = join_levels(data)
    width = max((len(g.floor_iterations) for g in grid), default=0)
    measure = np.zeros((len(data.mass), width))
    compressed = np.zeros((len(data.mass), len(data.pools), width))
    allowance = np.zeros((len(data.pools), width))
    pools, caps = [], []
    for j, (option, config, levels) in enumerate(zip(data.pools, option_configs(data), grid, strict=True)):
        count = len(levels.floor_iterations)
        if count:
            measure[:, :count] = levels.interpolate(data.floor_measure)  # the same for every pool: one grid per iteration
            compressed[:, j, :count] = levels.interpolate(data.compressed_floor_measure[:, j, :])
            allowance[j, :count] = JOIN_LEVEL_ALLOWANCE
        pools.append(replace(option, table_instances=1, level_floors_ms=tuple(levels.floor_iterations * config.w_ms)))
        caps.append(floor_caps(problem, config, levels.floor_iterations, problem.ttft_p99_ms * (1.0 + RELATIVE_TOLERANCE)))
    relaxed = replace(data, pools=tuple(pools), floor_measure=measure, compressed_floor_measure=compressed, floor_allowance=allowance,
                      level_caps=tuple(caps), **_cycle_columns(data))
    return relaxed, [np.zeros((1, o.levels)) for o in relaxed.pools]


def _prefill_floor_relaxation(data: FleetMilpData) -> tuple[FleetMilpData, list[NDArray[np.float64]]]:
    """:func:`relaxation_data` under the engine model: the prefill floor levels (milp_data.py ``PrefillFloorLevels``) in
    place of the join levels (their floor ``(m + 1) base`` is the prefill floor's without the prompt's compute; the
    join, at most an iteration, is left out), every level at the option's cap (the engine's iteration is not linear
    in the load: ``floor_caps``), and the cycle columns (:func:`_cycle_columns`)."""
    floor = data.prefill_floor
    assert floor is not None
    width = len(floor.thresholds_ms)
    pools = tuple(replace(o, table_instances=1, level_floors_ms=tuple(floor.thresholds_ms[:levels]))
                  for o, levels in zip(data.pools, floor.levels, strict=True))
    allowance = np.where(np.arange(width)[None, :] < floor.levels[:, None], JOIN_LEVEL_ALLOWANCE, 0.0)
    caps = tuple(np.full(o.levels, data.problem.rho_max * o.slots_per_instance) for o in pools)
    relaxed = replace(data, pools=pools, floor_measure=floor.measure, compressed_floor_measure=floor.compressed_measure, floor_allowance=allowance,
                      level_caps=caps, **_cycle_columns(data))
    return relaxed, [np.zeros((1, o.levels)) for o in relaxed.pools]


def _cycle_columns(data: FleetMilpData) -> dict[str, object]:
    """Under the engine model, the relaxation's load columns: per option, the occupancy row's (the hold at the least
    iterations, :func:`cap_seconds_per_request`) or the cycle row's (:func:`cycle_seconds_per_request`: the hold with
    each request's GPU time stalling the GPU's slots, at least the engine's stability ``lambda_g E[P + D] < 1`` scaled
    to the cap), whichever is the larger at the option's whole mix, and for the cycle row's options the work levels
    (``WORK_LEVELS`` equal steps of the GPU time per GPU, models/fleet_work_levels.py), which add back the prefill
    hold the cycle row leaves out.  Each is necessary for every pool meeting the model, so either keeps the bound a
    bound; empty (no change) under the paper's iteration."""
    if data.cycle_load is None:
        return {}
    by_cycle = data.cycle_load.sum(axis=0) > data.load.sum(axis=0)
    grid = np.linspace(0.0, 1.0, WORK_LEVELS + 1)
    return {"load": np.where(by_cycle[None, :], data.cycle_load, data.load),
            "compressed_load": np.where(by_cycle[None, :], data.compressed_cycle_load, data.compressed_load),
            "work_levels": tuple(grid if cycle else None for cycle in by_cycle)}


JOIN_LEVELS_PER_ITERATION = 4  # the relaxation's floor levels per iteration of the in-GPU time (join_levels)
JOIN_LEVEL_ALLOWANCE = 0.01  # row (4)'s share of a pool's mass allowed above a level: the P99's
# the model's join sits at most one grid step below the uniform one, and its 0.99 point may land one step early
JOIN_MARGIN_ITERATIONS = 2 * IN_GPU_GRID_ITERATIONS


@dataclass(frozen=True)
class JoinLevels:
    """One pool option's relaxation levels: level r reads "``P[X + J > z_r] <= 1 %``" (row 4) and charges the floor
    ``floor_iterations[r]`` iterations (its load cap per GPU, :func:`optfleet.problems.fleet.milp_data.floor_caps`)."""

    z: NDArray[np.float64]  # z_r, iterations
    floor_iterations: NDArray[np.float64]

    def interpolate(self, mass_above: NDArray[np.float64]) -> NDArray[np.float64]:
        """``[..., r]``: ``sum_i w_i P[X_i + J > z_r]`` from ``mass_above[..., m]`` (mass with more than ``m`` chunks,
        ``m = 0 .. k_max``): for ``z`` in ``(m, m + 1]``, ``X + J > z`` when ``X > m`` or ``X = m`` and ``J > z - m``, so
        ``A(z) = A[m] + (A[m - 1] - A[m]) (m + 1 - z)``, the linear interpolation of ``A`` between ``z = m`` and
        ``m + 1`` (``A`` is 0 past its last column)."""
        padded = np.concatenate([mass_above, np.zeros(mass_above.shape[:-1] + (1,))], axis=-1)
        top = padded.shape[-1] - 1
        m = np.minimum(np.ceil(self.z).astype(np.int64) - 1, top)
        upper, lower = padded[..., np.maximum(m - 1, 0)], padded[..., m]
        return lower + (upper - lower) * np.clip(m + 1 - self.z, 0.0, 1.0)


def join_levels(data: FleetMilpData) -> list[JoinLevels]:
    """The relaxation's floor levels per pool option (none for an option without levels, :func:`join_grid`): the P99 of ``X + J`` (``X`` the prefill chunks, ``J`` the join,
    uniform on ``(0, 1)`` iteration) on a grid of ``1 / JOIN_LEVELS_PER_ITERATION`` iteration from ``z = 1``.

    **Why every plan meeting the batching model is feasible.**  Take a pool of the plan, ``y`` the 0.99 point of
    ``X + J`` in its traffic mix (continuous: ``P[X + J > y] <= 1 %``) and level r the first grid point ``z_r >= y``
    (``z_{r-1} < y``, ``z_{-1} = 0``).  Row (4) holds at r: ``P[X + J > z_r] <= P[X + J > y] <= 1 %``, a linear row
    (:meth:`JoinLevels.interpolate`).  The batching model's P99 TTFT is at least its in-GPU P99 ``t q`` with ``q``
    the 0.99 point of ``X + 1 + J' + Q`` (optfleet/queueing/batching.py), ``Q >= 0`` the prefill wait independent of
    ``X`` and ``J'``, the join on the grid's cell midpoints, ``J' >= J - IN_GPU_GRID_ITERATIONS``; so
    ``q >= 1 + y - JOIN_MARGIN_ITERATIONS`` (one more grid step for a 0.99 point found a step early).  And
    ``P[X >= m] >= P[X + J > m] > 1 %`` for the integer ``m = floor(z_{r-1}) < y``, so ``q >= m + 1`` as well (the
    chunk level of the unrefined relaxation).  Hence ``q >= f_r = 1 + max(floor(z_{r-1}), z_{r-1} - margin)``, and
    with ``t >= t0`` (the no-wait iteration, milp_data.py ``level_caps``) ``t0 f_r <= P99 TTFT <= SLO``: the level's
    load cap per GPU.  Levels with ``W f_r`` above the SLO are dropped (no pool reaches them).  Against the integer
    chunk levels (floor ``P99 chunks + 1``) this adds the join's share of the P99, up to ``1 - margin`` iterations
    when much of the pool's traffic has its most chunks.  The prefill wait ``Q`` is still left out: its law depends on
    the whole prefill mix (benchmarks/results/batching_milp_gap_parts.md measures what it is worth).
    """
    k_max = data.floor_measure.shape[-1] - 1
    slo_ms = data.problem.ttft_p99_ms
    return [join_grid(k_max, config.w_ms, slo_ms) if option.levels else JoinLevels(np.zeros(0), np.zeros(0))
            for option, config in zip(data.pools, option_configs(data), strict=True)]


def join_grid(k_max: int, w_ms: float, slo_ms: float) -> JoinLevels:
    """:func:`join_levels` of one pool: ``z_r = 1, 1 + 1/R, .. k_max + 1`` (``R = JOIN_LEVELS_PER_ITERATION``), the
    floors ``f_r = 1 + max(floor(z_{r-1}), z_{r-1} - JOIN_MARGIN_ITERATIONS)`` (``z_{-1} = 0``), the levels with
    ``W f_r`` within the SLO (its relative tolerance included)."""
    z = 1.0 + np.arange(k_max * JOIN_LEVELS_PER_ITERATION + 1) / JOIN_LEVELS_PER_ITERATION
    previous = np.concatenate(([0.0], z[:-1]))
    floors = 1.0 + np.maximum(np.floor(previous), previous - JOIN_MARGIN_ITERATIONS)
    keep = w_ms * floors <= slo_ms * (1.0 + RELATIVE_TOLERANCE)
    return JoinLevels(z[keep], floors[keep])


def same_mix(a: Traffic, b: Traffic) -> bool:
    """Whether two traffics are one mix up to scale: the same ``(L_in, L_out)`` atoms with weight, at the same shares
    (relative 1e-12).  A capacity curve depends on the mix alone (:func:`per_gpu_capacity` normalises the weights)."""
    def atoms(traffic: Traffic) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        l_in, l_out, weight = (np.asarray(v) for v in traffic)
        kept = weight > 0
        keys = np.stack([l_in[kept], l_out[kept]])
        order = np.lexsort(keys)
        return keys[:, order], weight[kept][order] / weight[kept].sum()

    (keys_a, share_a), (keys_b, share_b) = atoms(a), atoms(b)
    return keys_a.shape == keys_b.shape and np.array_equal(keys_a, keys_b) and np.allclose(share_a, share_b, rtol=1e-12, atol=0.0)


@dataclass(frozen=True)
class BatchingTables:
    """The tables' state in the driver: each option's capacity curve, whether entries may only fall from now on, and
    per option the last curve computed and the mix it was computed at (a refresh at the same mix reuses it)."""

    capacity: dict[int, NDArray[np.float64]]
    tightening: bool = False
    computed: dict[int, tuple[Traffic, NDArray[np.float64]]] = field(default_factory=dict)

    @classmethod
    def start(cls, data: FleetMilpData, traffic: dict[int, Traffic], progress: Progress | None = None) -> BatchingTables:
        """The first tables: every option's curve at ``traffic`` (:func:`initial_traffic`)."""
        capacity = per_gpu_capacity(data, traffic, progress)
        return cls(capacity, computed={j: (traffic[j], capacity[j]) for j in traffic})

    def refreshed(self, data: FleetMilpData, plan: Plan, failed: bool, progress: Progress | None = None) -> tuple[BatchingTables, bool]:
        """The tables after ``plan`` (each of its pools at its routed mix; no entry rises once a plan has failed the
        evaluator), and whether they changed for the plan's pools (relative 1e-6); ``progress`` as in
        :func:`per_gpu_capacity`.  A pool whose mix is the one its option's last curve was computed at keeps that
        curve (the same engine states would be solved again)."""
        traffic = plan_traffic(data, plan)
        known = {j: self.computed[j][1] for j, t in traffic.items() if j in self.computed and same_mix(self.computed[j][0], t)}
        fresh = {**known, **per_gpu_capacity(data, {j: t for j, t in traffic.items() if j not in known}, progress)}
        computed = {**self.computed, **{j: (traffic[j], fresh[j]) for j in traffic}}
        tightening = self.tightening or failed
        capacity = dict(self.capacity)
        changed = False
        for j, curve in fresh.items():
            new = lower_of(self.capacity[j], curve) if tightening else curve
            old = self.capacity[j]
            changed |= len(new) != len(old) or not np.allclose(new, old, rtol=1e-6, atol=0.0)
            capacity[j] = new
        return BatchingTables(capacity, tightening, computed), changed
