"""Numbers for the fleet MILP (models/fleet.py), prepared before the model is built.

* **Pool options** j: every boundary candidate window and the long window on
  the instance's hardware or, with a ``gpu_catalog``, every GPU configuration
  (type x TP) at every offered window where it has a KV slot, sorted by window.
* **Length classes** k: the requests between consecutive cut points of
  ``L_total`` (every candidate boundary B and every ``gamma B`` on the grid,
  so every sweep policy is representable), further split by how many pool
  windows are ``<= L_out`` so that compressibility into any pool is the same
  for every request of a class.
* Per class and pool: the load ``lambda sum_{i in k} w_i S_j(i)`` (erlangs per
  unit of the class routed there), the same for the class compressed into j
  (``L_in = C_j - L_out``), and the mass whose TTFT floor exceeds each floor
  level of the pool.
* **TTFT floor levels**, by the instance's TTFT rule (pool_stats.py):
  - ``paper`` (flat iteration): a pool's floor takes the values ``(m + 1) t_j``,
    m = 0, 1, ... prefill chunks; levels above the SLO are dropped.  "P99 floor
    <= level m" is exactly "mass with more than m chunks <= 1 % of the pool's
    mass", linear in the routing: row (4) with measure ``A[k,m]`` (class k's mass
    above m chunks) and allowance ``0.01`` per unit of the pool's mass;
  - ``fleetsim`` (flat or length-scaled iteration): the floor is the pool's
    *mean* prefill at one active slot, ``s_j sum_k P[k] x[k,j] / sum_k p_k x[k,j]``
    with ``s_j = W_j + H_j`` and ``P[k]`` class k's chunk mass ``sum_i w_i
    ceil(L_in/C)``.  "mean chunks <= c" is ``sum_k (P[k] - c p_k) x[k,j] <= 0``:
    row (4) with measure ``P[k]`` and allowance ``c``, linear in the routing.
    The floor is continuous, so the wait row of a level uses a floor at one end
    of its interval: level m holds the pools with mean chunks in ``(b_m, u_m]``,
    ``r`` levels per chunk (``floor_resolution``, :func:`floor_levels`); the
    **restriction** (``floor_bound="restriction"``) charges the wait budget
    ``SLO - u_m s_j`` (every plan it returns meets the rule), the
    **relaxation** (``"relaxation"``) ``SLO - b_m s_j`` with the top level's
    allowance cut at ``SLO / s_j`` (every plan meeting the rule is feasible in
    it, so its bound is a bound).  The wait rows bind only below the table size
    ``N_j``; from ``N_j`` GPUs on both read "floor <= SLO" and are exact.
* **Service time** per request and pool, ``S_j = (ceil(L_in/C) + L_out)
  t_iter,j(L_total)`` (pool_config.py): flat or length-scaled, the load of a
  class in a pool is a constant per unit routed, so the load stays linear.
* **Erlang-C table size**: ``N_j`` is the smallest instance count at which a pool
  loaded to the cap ``rho_max`` has Erlang C <= 0.01, hence Kimura's
  ``W99 = 0``; Erlang C at a fixed utilisation falls with the number of
  servers, so the cap alone guarantees zero wait for every ``n >= N_j``.
  Below ``N_j``, ``a_max[n, m]`` is the largest load meeting
  ``W99 <= SLO - floor_m`` (optfleet/queueing/load_limits.py), computed when
  the model is built at a given ``R_j = E[S^2]/E[S]`` (the pool's
  ``(1 + Cs^2) E[S]``), which depends on the routing: the solver driver
  re-computes it from each solution and re-solves until it is stable.

* **Mean TPOT** (a ``slo.tpot_mean_ms`` target, pool_stats.py): per pool the
  prefill compute routed there, ``sum_k lambda p_k E[P_kj] x[k,j]`` (+ the
  compressed classes') in instance-seconds per second, is at most ``n_j (1 -
  t_w,j / T)``; a TPOT percentile target closes every pool option whose
  longest-iteration bound is above it.  Under the batching model neither:
  its tables check the engine model's TPOT (batching_pool.py ``meets_slo``).
* **Batching service model** (``slo.service_model: batching``): the load is
  each request's slot-seconds at the occupancy cap with no prefill wait
  (``cap_seconds_per_request``, batching_pool.py; under the engine model the
  relaxation takes the cycle row where it is larger, ``cycle_seconds_per_request``:
  the held iteration grows with the GPU time prompts and decodes take, and
  its work levels, models/fleet_work_levels.py), the floor levels are the
  paper rule's with the idle iteration ``W_j`` as the step, and each level
  has a load cap per GPU (``level_caps``: the no-wait iteration time at that
  level within the SLO).  Every row is necessary for a plan that meets the
  batching model: with no wait table (milp_batching.py ``relaxation_data``,
  which refines the levels to the join levels, ``floor_caps`` their caps)
  the model is a relaxation and its bound a bound; the driver's plans come
  from tables at each pool's traffic mix (milp_batching.py).

Not supported (refused with a clear error): the ``paper`` rule with
length-scaled iteration under the slot model, whose per-request floor
``(m + 1) t_iter(L_total)`` has no common level grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import NotApplicableError
from optfleet.problems.fleet.batching_pool import (cap_seconds_per_request, cycle_seconds_per_request, floor_threshold_ms, prefill_floor_ms,
                                                   prefill_hold_seconds_per_request, work_seconds_per_request)
from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.problem import FleetProblem, PoolFactory
from optfleet.queueing import RELATIVE_TOLERANCE, wait_free_gpus
from optfleet.queueing.load_limits import tail_probability


@dataclass(frozen=True)
class PoolOption:
    """One candidate pool: its window, slots, price, floor levels (the TTFT floor each level's wait row assumes)
    and Erlang table size."""

    name: str
    window_tokens: int
    slots_per_instance: int
    cost_per_instance_hour: float
    level_floors_ms: tuple[float, ...]
    table_instances: int
    gpu: str
    gpu_type: str
    tp: int

    @property
    def levels(self) -> int:
        """Floor levels under the SLO (0: the pool cannot open)."""
        return len(self.level_floors_ms)


@dataclass(frozen=True)
class FleetMilpData:
    """Everything ``models.fleet.build`` needs, as arrays indexed [class, pool(, level)]."""

    problem: FleetProblem
    pools: tuple[PoolOption, ...]
    class_total_above: NDArray[np.float64]
    class_total_to: NDArray[np.float64]
    class_out_from: NDArray[np.int64]
    class_out_below: NDArray[np.int64]
    class_segment: NDArray[np.int64]
    mass: NDArray[np.float64]
    fits: NDArray[np.bool_]
    load: NDArray[np.float64]
    floor_measure: NDArray[np.float64]
    can_compress: NDArray[np.bool_]
    compressed_load: NDArray[np.float64]
    compressed_floor_measure: NDArray[np.float64]
    floor_allowance: NDArray[np.float64]
    service_ratio_ms: NDArray[np.float64]
    least_ratio_ms: NDArray[np.float64]  # per pool, the least E[S^2]/E[S] of any class it can hold (plain or compressed)
    greatest_ratio_ms: NDArray[np.float64]  # per pool, the greatest such ratio: no mix of whole classes exceeds it
    second_load: NDArray[np.float64]  # [k, j] lambda sum_{i in k} w_i S_j(i)^2 (erlang-seconds per unit routed): M2 of row (11)
    compressed_second_load: NDArray[np.float64]  # the same for class k compressed into pool j
    floor_bound: str
    floor_resolution: int
    level_caps: tuple[NDArray[np.float64], ...] | None = None
    prefill_load: NDArray[np.float64] | None = None
    compressed_prefill_load: NDArray[np.float64] | None = None
    prefill_capacity: NDArray[np.float64] | None = None
    cycle_load: NDArray[np.float64] | None = None  # [k, j] engine batching: lambda sum_{i in k} w_i c_ij (batching_pool.cycle_seconds_per_request)
    compressed_cycle_load: NDArray[np.float64] | None = None  # the same for class k compressed into pool j
    prefill_floor: PrefillFloorLevels | None = None  # engine batching: the relaxation's prefill floor rows (milp_batching.py)
    # engine batching, the cycle row's parts (batching_pool.cycle_seconds_per_request), [k, j] as cycle_load: the GPU time
    # lambda sum w_i w_ij and the prefill hold lambda sum w_i a_ij, and the same for class k compressed into pool j
    work_load: NDArray[np.float64] | None = None
    compressed_work_load: NDArray[np.float64] | None = None
    prefill_hold_load: NDArray[np.float64] | None = None
    compressed_prefill_hold_load: NDArray[np.float64] | None = None
    # the relaxation's work levels per option (models/fleet_work_levels.py): a grid 0 = g_0 < ... < g_L = 1 of the GPU
    # time per GPU, or None (the option keeps its single cycle row); None outside the engine relaxation
    work_levels: tuple[NDArray[np.float64] | None, ...] | None = None

    def gpu_caps(self, j: int) -> NDArray[np.float64]:
        """Pool j's load per GPU at each floor level, at every instance count (the wait rows (7) beyond the table and the
        table itself never exceed it): ``rho_max s_j`` at every level, but under the batching model (``level_caps``)."""
        if self.level_caps is None:
            return np.full(self.pools[j].levels, self.problem.rho_max * self.pools[j].slots_per_instance)
        return self.level_caps[j]

    def floor_excess(self, j: int, level: int | slice) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Row (4)'s coefficients of pool j at ``level`` (or at a slice of levels: ``[class, level]``), per class, for
        ``x[:, j]`` and ``z[:, j]``: the class's floor measure less the level's allowance per unit of its mass (the
        row reads ``excess . shares <= 0``)."""
        allowance = np.multiply.outer(self.mass, self.floor_allowance[j, level])
        return self.floor_measure[:, level] - allowance, self.compressed_floor_measure[:, j, level] - allowance

    @property
    def long_index(self) -> int:
        """The long pool of a one-configuration model (the sweep-space mode's long pool)."""
        return len(self.pools) - 1


FLOOR_BOUNDS = ("restriction", "relaxation")


def prepare_milp_data(problem: FleetProblem, floor_bound: str = "restriction", floor_resolution: int = 1) -> FleetMilpData:
    """Classes, coefficients and Erlang tables of ``problem`` (see the module docstring); ``floor_bound`` picks the
    end of each ``fleetsim`` floor level the wait rows assume and ``floor_resolution`` its levels per prefill chunk
    (the ``paper`` rule's levels are exact either way)."""
    if floor_bound not in FLOOR_BOUNDS:
        raise ValueError(f"floor_bound must be one of {FLOOR_BOUNDS}")
    batching = problem.service_model == "batching"
    long_cfg = problem.pool(problem.long_window_tokens)
    if long_cfg.length_scale_tokens is not None and problem.ttft_rule == "paper" and not batching:
        raise NotApplicableError(
            "hardware.iteration.scaling", "length_scaled",
            "the fleet MILP supports the paper TTFT rule with flat iteration time, or the fleetsim rule (preset: fleetsim_compatible)",
        )
    factories = problem.options or (problem.hardware,)
    offered = problem.option_windows or (*problem.boundary_candidates, problem.long_window_tokens)
    option_list = [(f, int(c)) for c in sorted(offered) for f in factories if f.slots_per_instance(int(c)) >= 1]
    windows = np.array([c for _, c in option_list], dtype=np.int64)
    configs = [f.pool(c) for f, c in option_list]
    mix = problem.mix
    l_total, l_out, w = mix.l_total, mix.l_out, mix.prob
    chunk = long_cfg.chunk_tokens
    short_windows = np.unique(windows[windows < problem.long_window_tokens])
    cuts = np.unique(np.concatenate([np.outer(short_windows, problem.gammas).ravel(), windows]))
    cuts = cuts[cuts < problem.long_window_tokens]
    segment = np.searchsorted(cuts, l_total, side="left")
    distinct_windows = np.unique(windows)
    out_key = np.searchsorted(distinct_windows, l_out, side="right")
    keys, class_of = np.unique(np.stack([segment, out_key]), axis=1, return_inverse=True)
    class_of = class_of.ravel()
    count = keys.shape[1]
    edges = np.concatenate(([0], cuts, [problem.long_window_tokens]))
    window_edges = np.concatenate(([0], distinct_windows, [np.iinfo(np.int64).max]))
    mass = np.bincount(class_of, weights=w, minlength=count)
    chunks = np.ceil(mix.l_in / chunk).astype(np.int64)
    k_max = int(np.ceil(problem.long_window_tokens / chunk))
    max_class_total = np.zeros(count, dtype=np.int64)
    np.maximum.at(max_class_total, class_of, l_total)
    mean_rule = problem.ttft_rule == "fleetsim"
    # levels per pool at most k_max + 1 (paper) or (k_max - 1) r + 1 (fleetsim)
    width = max(k_max + 1, int(np.ceil((k_max - 1) * floor_resolution)) + 1 if mean_rule else 0)
    # row (4)'s measure per class and level: mass above m chunks (paper), chunk mass at every level (fleetsim)
    floor_measure = _chunk_mass(class_of, chunks, w, count, width) if mean_rule else _mass_above(class_of, chunks, w, count, k_max)
    n_pools = len(windows)
    fits = max_class_total[:, None] <= windows[None, :]
    load = np.zeros((count, n_pools))
    can_compress = np.zeros((count, n_pools), dtype=bool)
    compressed_load = np.zeros((count, n_pools))
    second_load = np.zeros((count, n_pools))
    compressed_second_load = np.zeros((count, n_pools))
    prefill_load = np.zeros((count, n_pools))
    compressed_prefill_load = np.zeros((count, n_pools))
    engine_batching = batching and long_cfg.charges_prefill
    cycle_load, compressed_cycle_load = np.zeros((count, n_pools)), np.zeros((count, n_pools))
    work_load, compressed_work_load = np.zeros((count, n_pools)), np.zeros((count, n_pools))
    prefill_hold_load, compressed_prefill_hold_load = np.zeros((count, n_pools)), np.zeros((count, n_pools))
    plain_floors_ms, compressed_floors_ms = [], []  # engine batching: per option, prefill_floor_ms of its atoms (and its band's)

    compressed_floor_measure = np.zeros((count, n_pools, width))
    gamma_max = max(problem.gammas)
    second = np.zeros(n_pools)
    first = np.zeros(n_pools)
    least_ratio_ms = np.zeros(n_pools)
    greatest_ratio_ms = np.zeros(n_pools)

    def seconds(cfg: PoolConfig, l_in: NDArray[np.int64], l_out_: NDArray[np.int64]) -> NDArray[np.float64]:
        """Per request, the seconds its load counts (the slot model's service time, or the batching model's
        slot-seconds at the occupancy cap)."""
        if batching:
            return cap_seconds_per_request(cfg, l_in, l_out_, problem.rho_max)
        return cfg.service_ms(l_in, l_out_) / 1000.0

    for j, (window, cfg) in enumerate(zip(windows, configs, strict=True)):
        service = seconds(cfg, mix.l_in, l_out)
        load[:, j] = problem.rate_rps * np.bincount(class_of, weights=w * service, minlength=count)
        second_load[:, j] = problem.rate_rps * np.bincount(class_of, weights=w * service**2, minlength=count)
        prefill_load[:, j] = problem.rate_rps * np.bincount(class_of, weights=w * cfg.prefill_compute_ms(mix.l_in) / 1000.0, minlength=count)
        if engine_batching:
            cycle_load[:, j] = problem.rate_rps * np.bincount(class_of, weights=w * cycle_seconds_per_request(cfg, mix.l_in, l_out, problem.rho_max),
                                                              minlength=count)
            work_load[:, j] = problem.rate_rps * np.bincount(class_of, weights=w * work_seconds_per_request(cfg, mix.l_in, l_out, problem.rho_max),
                                                             minlength=count)
            prefill_hold_load[:, j] = problem.rate_rps * np.bincount(class_of, weights=w * prefill_hold_seconds_per_request(cfg, mix.l_in),
                                                                     minlength=count)
            plain_floors_ms.append(prefill_floor_ms(cfg, mix.l_in))
            compressed_floors_ms.append(None)
        fit_atoms = l_total <= window
        first[j] = np.dot(w[fit_atoms], service[fit_atoms])
        second[j] = np.dot(w[fit_atoms], service[fit_atoms] ** 2)
        ratios = [_class_ratios_ms(class_of[fit_atoms], w[fit_atoms], service[fit_atoms], count)]
        if problem.compression_enabled and problem.compressible_fraction > 0 and window < problem.long_window_tokens:
            band = (l_total > window) & (l_total <= gamma_max * window) & (l_out < window)
            band_classes = np.unique(class_of[band])
            can_compress[band_classes, j] = True
            # compressed to the window: L_in = C_j - L_out, L_total = C_j
            k_comp = np.ceil((window - l_out[band]) / chunk).astype(np.int64)
            compressed_s = seconds(cfg, window - l_out[band], l_out[band])
            compressed_load[:, j] = problem.rate_rps * np.bincount(class_of[band], weights=w[band] * compressed_s, minlength=count)
            if engine_batching:
                compressed_cycle_load[:, j] = problem.rate_rps * np.bincount(
                    class_of[band], weights=w[band] * cycle_seconds_per_request(cfg, window - l_out[band], l_out[band], problem.rho_max),
                    minlength=count)
                compressed_work_load[:, j] = problem.rate_rps * np.bincount(
                    class_of[band], weights=w[band] * work_seconds_per_request(cfg, window - l_out[band], l_out[band], problem.rho_max),
                    minlength=count)
                compressed_prefill_hold_load[:, j] = problem.rate_rps * np.bincount(
                    class_of[band], weights=w[band] * prefill_hold_seconds_per_request(cfg, window - l_out[band]), minlength=count)
                compressed_floors_ms[j] = (band, prefill_floor_ms(cfg, window - l_out[band]))
            compressed_second_load[:, j] = problem.rate_rps * np.bincount(class_of[band], weights=w[band] * compressed_s**2, minlength=count)
            compressed_prefill_load[:, j] = problem.rate_rps * np.bincount(
                class_of[band], weights=w[band] * cfg.prefill_compute_ms(window - l_out[band]) / 1000.0, minlength=count)
            compressed_floor_measure[:, j, :] = (_chunk_mass(class_of[band], k_comp, w[band], count, width) if mean_rule
                                                 else _mass_above(class_of[band], k_comp, w[band], count, k_max))
            ratios.append(_class_ratios_ms(class_of[band], w[band], compressed_s, count))
        held = np.concatenate(ratios)
        held = held[np.isfinite(held)]
        least_ratio_ms[j] = held.min() if held.size else 0.0
        greatest_ratio_ms[j] = held.max() if held.size else 0.0
    # Classes are uniform in compressibility (split by L_out) and never straddle a band edge
    # (every gamma multiple of every window is a cut point).
    ratio_ms = np.where(first > 0, 1000.0 * second / np.maximum(first, 1e-300), 0.0)
    levels = [floor_levels(problem, cfg, k_max, floor_bound, floor_resolution) for cfg in configs]
    pools = tuple(
        _pool_option(problem, _option_name(problem, factory, window), factory, window, cfg, floors)
        for (factory, window), cfg, (floors, _) in zip(option_list, configs, levels, strict=True)
    )
    allowance = np.zeros((n_pools, width))
    for j, (floors, share) in enumerate(levels):
        allowance[j, :len(floors)] = share
    seg_of_class = keys[0]
    return FleetMilpData(
        problem=problem,
        pools=pools,
        class_total_above=edges[seg_of_class],
        class_total_to=edges[seg_of_class + 1],
        class_out_from=window_edges[keys[1]],
        class_out_below=window_edges[keys[1] + 1],
        class_segment=seg_of_class,
        mass=mass,
        fits=fits,
        load=load,
        floor_measure=floor_measure,
        can_compress=can_compress,
        compressed_load=compressed_load,
        compressed_floor_measure=compressed_floor_measure,
        floor_allowance=allowance,
        service_ratio_ms=ratio_ms,
        least_ratio_ms=least_ratio_ms,
        greatest_ratio_ms=greatest_ratio_ms,
        second_load=second_load,
        compressed_second_load=compressed_second_load,
        floor_bound=floor_bound,
        floor_resolution=floor_resolution,
        level_caps=tuple(level_caps(problem, cfg, pool.levels) for cfg, pool in zip(configs, pools, strict=True)) if batching else None,
        **({"cycle_load": cycle_load, "compressed_cycle_load": compressed_cycle_load, "work_load": work_load,
            "compressed_work_load": compressed_work_load, "prefill_hold_load": prefill_hold_load,
            "compressed_prefill_hold_load": compressed_prefill_hold_load,
            "prefill_floor": PrefillFloorLevels.build(problem, configs, class_of, count, plain_floors_ms, compressed_floors_ms)}
           if engine_batching else {}),
        **(_mean_tpot_rows(problem, configs, prefill_load, compressed_prefill_load) if problem.tpot_mean_ms is not None and not batching else {}),
    )


@dataclass(frozen=True)
class PrefillFloorLevels:
    """Under the engine model, the relaxation's prefill floor rows (4): a pool meeting the SLO has at most 1 % of its
    mass with :func:`~optfleet.problems.fleet.batching_pool.prefill_floor_ms` above its option's threshold ``Z_j``
    (:func:`~optfleet.problems.fleet.batching_pool.floor_threshold_ms`).  The model's level rows hold a measure per
    class shared by the options (and one per option for compressed classes), so the thresholds are levels: level r
    reads "at most 1 % above ``thresholds_ms[r]``" (falling with r), option j has the levels up to its own ``Z_j``
    (``levels[j]`` of them; a first level at ``inf`` for options without a finite ``Z``) and, its caps being equal,
    keeps the last, whose row holds at ``Z_j`` (its other rows are weaker).  The shared measure counts a request
    above the level when its least floor over the options whose window holds it is (``phi`` of the option that
    serves it is at least that); a compressed one, at the option's own floor."""

    thresholds_ms: NDArray[np.float64]  # [level], falling
    levels: NDArray[np.int64]  # [option]
    measure: NDArray[np.float64]  # [class, level]: mass whose least floor is above the level
    compressed_measure: NDArray[np.float64]  # [class, option, level]

    @classmethod
    def build(cls, problem: FleetProblem, configs: list[PoolConfig], class_of: NDArray[np.int64], count: int,
              plain_floors_ms: list[NDArray[np.float64]], compressed_floors_ms: list) -> PrefillFloorLevels:
        """The levels of ``configs`` from each option's floors of the mix's atoms (and of its compressed band's)."""
        own = np.array([floor_threshold_ms(cfg, problem.ttft_p99_ms) for cfg in configs])
        thresholds = np.unique(own)[::-1]  # falling; inf first when present
        if not np.isinf(thresholds[0]):
            thresholds = np.concatenate(([np.inf], thresholds))
        levels = np.array([int(np.flatnonzero(thresholds == z)[0]) + 1 for z in own])
        w = problem.mix.prob
        holds = problem.mix.l_total[None, :] <= np.array([cfg.window_tokens for cfg in configs])[:, None]
        least = np.min(np.where(holds, np.vstack(plain_floors_ms), np.inf), axis=0)
        above = least[:, None] > thresholds[None, :]
        measure = np.stack([np.bincount(class_of, weights=w * above[:, r], minlength=count) for r in range(len(thresholds))], axis=-1)
        compressed = np.zeros((count, len(configs), len(thresholds)))
        for j, banded in enumerate(compressed_floors_ms):
            if banded is not None:
                band, floors_ms = banded
                for r, z in enumerate(thresholds):
                    compressed[:, j, r] = np.bincount(class_of[band], weights=w[band] * (floors_ms > z), minlength=count)
        return cls(thresholds, levels, measure, compressed)


def _mean_tpot_rows(problem: FleetProblem, configs: list[PoolConfig], prefill_load: NDArray[np.float64],
                    compressed_prefill_load: NDArray[np.float64]) -> dict[str, NDArray[np.float64]]:
    """The mean-TPOT rows' numbers (pool_stats.py): per class and pool the prefill compute it brings per second
    (instance-seconds per second per unit routed), and per pool the share of an instance's time prefill may take,
    ``1 - t_w / T`` (a pool at or below 0 cannot open: its floor levels are empty)."""
    capacity = problem.tpot_targets.mean_capacity(np.array([cfg.window_step_ms for cfg in configs]))
    return {"prefill_load": prefill_load, "compressed_prefill_load": compressed_prefill_load,
            "prefill_capacity": np.maximum(capacity, 0.0)}


def _class_ratios_ms(class_of: NDArray[np.int64], w: NDArray[np.float64], service_s: NDArray[np.float64], count: int) -> NDArray[np.float64]:
    """Per class, ``E[S^2]/E[S]`` in ms of its atoms (inf for a class with none).  A pool's traffic is a mix of whole
    classes (``x[k, j]`` routes a share of every atom of class k), so its ``E[S^2]/E[S] = sum_k x_k m2_k / sum_k x_k m1_k``
    is never below the least class ratio ``m2_k / m1_k`` (a ratio of two linear forms is extreme at a vertex)."""
    first = np.bincount(class_of, weights=w * service_s, minlength=count)
    second = np.bincount(class_of, weights=w * service_s**2, minlength=count)
    return np.where(first > 0, 1000.0 * second / np.maximum(first, 1e-300), np.inf)


def _chunk_mass(class_of: NDArray[np.int64], chunks: NDArray[np.int64], w: NDArray[np.float64], count: int, width: int) -> NDArray[np.float64]:
    """``[k, m]`` = class k's chunk mass ``sum_i w_i chunks_i``, the same at every level m (a read-only broadcast)."""
    return np.broadcast_to(np.bincount(class_of, weights=w * chunks, minlength=count)[:, None], (count, width))


def _mass_above(class_of: NDArray[np.int64], chunks: NDArray[np.int64], w: NDArray[np.float64], count: int, k_max: int) -> NDArray[np.float64]:
    """``[k, m]`` = mass of class k's atoms with more than m prefill chunks."""
    width = k_max + 1
    hist = np.bincount(class_of * width + np.minimum(chunks, k_max), weights=w, minlength=count * width).reshape(count, width)
    at_most = np.cumsum(hist, axis=1)
    return np.maximum(hist.sum(axis=1, keepdims=True) - at_most, 0.0)


def _option_name(problem: FleetProblem, factory: PoolFactory, window: int) -> str:
    """``w<window>`` / ``long`` on one GPU configuration; ``<gpu label> w<window>`` over a catalog."""
    if problem.heterogeneous:
        return f"{factory.label} w{window}"
    return "long" if window == problem.long_window_tokens else f"w{window}"


def _floor_step_ms(problem: FleetProblem, cfg: PoolConfig) -> float:
    """The floor per prefill chunk: the flat iteration ``t_j`` (paper), one active slot's ``W_j + H_j`` (fleetsim), the
    idle iteration ``W_j`` (batching: no iteration is shorter)."""
    if problem.service_model == "batching":
        return cfg.w_ms
    return cfg.w_ms + cfg.h_ms_per_slot if problem.ttft_rule == "fleetsim" else float(cfg.iteration_ms(0))


def level_caps(problem: FleetProblem, cfg: PoolConfig, levels: int, extra_iterations: float = 0.0) -> NDArray[np.float64]:
    """Under the batching model, the most load (slot-seconds at the cap, :func:`cap_seconds_per_request`) per GPU a pool
    at floor level m can carry at any instance count, ``m = 0 .. levels - 1``.

    A pool at level m has its P99 prefill at ``m`` chunks or more, so its P99 TTFT is at least ``t (m + 1 + e)``
    (``e = extra_iterations``: 0 in the relaxation; the restriction adds the join's iteration) with ``t`` at least the
    no-wait fixed point ``t0 = W / (1 - G)``, ``G = H lambda_g E[X + 1/2] / 1000`` per GPU.  With flat iteration the
    load per GPU is ``G (W + rho_max s H) / H``, so ``t0 (m + 1 + e) <= SLO`` reads

        load per GPU <= (1 - W (m + 1 + e) / SLO) (W + rho_max s H) / H,

    capped at ``rho_max s`` (row 3).  Length-scaled iteration (``G`` not a multiple of the load) and ``H = 0`` (a
    constant iteration) get the cap alone.
    """
    return floor_caps(problem, cfg, np.arange(levels) + 1.0 + extra_iterations)


def floor_caps(problem: FleetProblem, cfg: PoolConfig, floor_iterations: NDArray[np.float64], slo_ms: float | None = None) -> NDArray[np.float64]:
    """:func:`level_caps` for any floors: the most load per GPU of a pool whose P99 TTFT is at least ``t f`` for each
    ``f`` of ``floor_iterations``, ``(1 - W f / SLO) (W + rho_max s H) / H`` capped at ``rho_max s`` (``slo_ms``
    in place of the instance's SLO when given).  The engine model's iteration is not ``W + H`` times the load, so it
    gets the cap alone (its floors still hold: every iteration takes at least its base step ``W``)."""
    cap = problem.rho_max * cfg.slots_per_instance
    floors = np.asarray(floor_iterations, dtype=np.float64)
    if cfg.length_scale_tokens is not None or cfg.h_ms_per_slot <= 0 or cfg.charges_prefill:
        return np.full(floors.shape, cap)
    pressure = 1.0 - cfg.w_ms * floors / (problem.ttft_p99_ms if slo_ms is None else slo_ms)
    return np.clip(pressure * (cfg.w_ms + cap * cfg.h_ms_per_slot) / cfg.h_ms_per_slot, 0.0, cap)


def floor_levels(problem: FleetProblem, cfg: PoolConfig, k_max: int, floor_bound: str = "restriction",
                 resolution: int = 1) -> tuple[tuple[float, ...], NDArray[np.float64]]:
    """The pool's floor levels: the TTFT floor each level's wait row assumes and row (4)'s allowance.

    * paper: floors ``(m+1) t_j`` for ``m <= k_max`` under the SLO, allowance 1 % (batching: ``t_j = W_j``);
    * fleetsim: level m holds mean chunks in ``(b_m, u_m]`` with ``u_m = min(1 + m/r, k_max)``,
      ``b_m = u_{m-1}`` and ``b_0 = u_0 = 1`` (every request has a chunk; ``r = resolution``
      levels per chunk); allowance ``u_m``.  Restriction: floor ``u_m s_j``, levels with
      ``u_m s_j <= SLO``.  Relaxation: floor ``b_m s_j``, levels with an interval that starts
      under the SLO, the allowance cut at ``SLO / s_j``.
    """
    step = _floor_step_ms(problem, cfg)
    slo = problem.ttft_p99_ms
    if problem.service_model != "batching" and not problem.tpot_targets.reachable(cfg.tpot_bound_ms, cfg.window_step_ms):
        return (), np.zeros(0)  # the batching model checks its own TPOT in its tables (batching_pool.meets_slo)
    if problem.ttft_rule != "fleetsim":
        if problem.service_model == "batching":
            levels = int(min(k_max + 1, np.floor(slo / step)))
            return tuple((m + 1) * step for m in range(levels)), np.full(levels, 0.01)
        floors = cfg.chunk_floor_ms(np.arange(k_max + 1))
        kept = floors[floors <= slo * (1 + RELATIVE_TOLERANCE)]
        return tuple(float(f) for f in kept), np.full(len(kept), tail_probability(problem.ttft_quantile))
    tops = np.minimum(1.0 + np.arange(int(np.ceil((k_max - 1) * resolution)) + 1) / resolution, k_max)
    bottoms = np.concatenate(([1.0], tops[:-1]))
    if floor_bound == "relaxation":
        keep = (bottoms * step < slo) | ((bottoms == tops) & (step <= slo))
        return tuple(bottoms[keep] * step), np.minimum(tops[keep], slo / step)
    keep = tops * step <= slo
    return tuple(tops[keep] * step), tops[keep]


def _pool_option(problem: FleetProblem, name: str, factory: PoolFactory, window: int, cfg: PoolConfig,
                 floors_ms: tuple[float, ...]) -> PoolOption:
    slots = cfg.slots_per_instance
    return PoolOption(name, window, slots, cfg.cost_per_instance_hour, floors_ms, wait_free_gpus(slots, problem.rho_max, problem.ttft_quantile),
                      factory.label, factory.gpu_name, factory.tp)
