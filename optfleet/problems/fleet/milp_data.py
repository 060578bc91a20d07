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
* **TTFT floor levels** (paper rule, flat iteration): a pool's floor takes
  the values ``(m + 1) t_j``, m = 0, 1, ... prefill chunks; levels above the
  SLO are dropped.  "P99 floor <= level m" is exactly "mass with more than m
  chunks <= 1 % of the pool's mass", linear in the routing.
* **Erlang-C table size**: ``N_j`` is the smallest GPU count at which a pool
  loaded to the cap ``rho_max`` has Erlang C <= 0.01, hence Kimura's
  ``W99 = 0``; Erlang C at a fixed utilisation falls with the number of
  servers, so the cap alone guarantees zero wait for every ``n >= N_j``.
  Below ``N_j``, ``a_max[n, m]`` is the largest load meeting
  ``W99 <= SLO - level_m`` (optfleet/queueing/load_limits.py), computed when
  the model is built at a given ``R_j = E[S^2]/E[S]`` (the pool's
  ``(1 + Cs^2) E[S]``), which depends on the routing: the solver driver
  re-computes it from each solution and re-solves until it is stable.

Supported: the ``paper`` TTFT rule with flat iteration time (the default
preset).  The ``fleetsim`` rule's mean floor and length-scaled iteration need
other level encodings and are refused with a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import NotApplicableError
from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.problem import FleetProblem, PoolFactory
from optfleet.queueing import wait_free_gpus


@dataclass(frozen=True)
class PoolOption:
    """One candidate pool: its window, slots, price, iteration time, floor levels and Erlang table."""

    name: str
    window_tokens: int
    slots_per_gpu: int
    cost_per_gpu_hour: float
    iteration_ms: float
    levels: int
    table_gpus: int
    gpu: str
    gpu_type: str
    tp: int


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
    above: NDArray[np.float64]
    can_compress: NDArray[np.bool_]
    compressed_load: NDArray[np.float64]
    compressed_above: NDArray[np.float64]
    service_ratio_ms: NDArray[np.float64]

    @property
    def long_index(self) -> int:
        """The long pool of a one-configuration model (the sweep-space mode's long pool)."""
        return len(self.pools) - 1


def prepare_milp_data(problem: FleetProblem) -> FleetMilpData:
    """Classes, coefficients and Erlang tables of ``problem`` (see the module docstring)."""
    long_cfg = problem.pool(problem.long_window_tokens)
    if long_cfg.length_scale_tokens is not None or problem.ttft_rule != "paper":
        raise NotApplicableError(
            "preset", "fleetsim_compatible" if problem.ttft_rule == "fleetsim" else "length_scaled",
            "the fleet MILP supports the paper TTFT rule with flat iteration time (preset: paper) only, so far",
        )
    factories = problem.options or (problem.hardware,)
    offered = problem.option_windows or (*problem.boundary_candidates, problem.long_window_tokens)
    option_list = [(f, int(c)) for c in sorted(offered) for f in factories if f.slots_per_gpu(int(c)) >= 1]
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
    # mass with more than m prefill chunks, per class: (classes, k_max + 1)
    above = _mass_above(class_of, chunks, w, count, k_max)
    n_pools = len(windows)
    fits = max_class_total[:, None] <= windows[None, :]
    load = np.zeros((count, n_pools))
    can_compress = np.zeros((count, n_pools), dtype=bool)
    compressed_load = np.zeros((count, n_pools))
    compressed_above = np.zeros((count, n_pools, k_max + 1))
    gamma_max = max(problem.gammas)
    second = np.zeros(n_pools)
    first = np.zeros(n_pools)
    for j, (window, cfg) in enumerate(zip(windows, configs, strict=True)):
        t_s = float(cfg.iteration_ms(0)) / 1000.0
        service = (chunks + l_out) * t_s
        load[:, j] = problem.rate_rps * np.bincount(class_of, weights=w * service, minlength=count)
        fit_atoms = l_total <= window
        first[j] = np.dot(w[fit_atoms], service[fit_atoms])
        second[j] = np.dot(w[fit_atoms], service[fit_atoms] ** 2)
        if problem.compression_enabled and problem.compressible_fraction > 0 and window < problem.long_window_tokens:
            band = (l_total > window) & (l_total <= gamma_max * window) & (l_out < window)
            band_classes = np.unique(class_of[band])
            can_compress[band_classes, j] = True
            k_comp = np.ceil((window - l_out[band]) / chunk).astype(np.int64)
            compressed_load[:, j] = problem.rate_rps * np.bincount(class_of[band], weights=w[band] * (k_comp + l_out[band]) * t_s, minlength=count)
            compressed_above[:, j, :] = _mass_above(class_of[band], k_comp, w[band], count, k_max)
    # Classes are uniform in compressibility (split by L_out) and never straddle a band edge
    # (every gamma multiple of every window is a cut point).
    ratio_ms = np.where(first > 0, 1000.0 * second / np.maximum(first, 1e-300), 0.0)
    pools = tuple(
        _pool_option(problem, _option_name(problem, factory, window), factory, window, cfg, k_max)
        for (factory, window), cfg in zip(option_list, configs, strict=True)
    )
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
        above=above,
        can_compress=can_compress,
        compressed_load=compressed_load,
        compressed_above=compressed_above,
        service_ratio_ms=ratio_ms,
    )


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


def _pool_option(problem: FleetProblem, name: str, factory: PoolFactory, window: int, cfg: PoolConfig, k_max: int) -> PoolOption:
    iteration = float(cfg.iteration_ms(0))
    levels = int(min(k_max + 1, np.floor(problem.ttft_p99_ms / iteration)))
    slots = cfg.slots_per_gpu
    return PoolOption(name, window, slots, cfg.cost_per_gpu_hour, iteration, levels, wait_free_gpus(slots, problem.rho_max),
                      factory.label, factory.gpu_name, factory.tp)
