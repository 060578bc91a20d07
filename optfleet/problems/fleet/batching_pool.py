"""Pools under the continuous-batching service model (``slo.service_model: batching``): the paper's iteration
(optfleet/queueing/batching.py) or, under ``preset: engine``, the engine model (optfleet/queueing/batching_engine.py).

A pool meets the SLO at ``n`` GPUs when the model is stable there, its slot occupancy is at most ``rho_max``,
its P99 TTFT (slot wait + in-GPU time to first token) is at most the SLO and, under the engine model, its P99
TPOT at most the strictest TPOT percentile target (conservative for a P50 or P90 target) and its mean TPOT at most
the mean target.  More GPUs lower the per-GPU
arrival rate, hence the iteration time, the prefill load, the occupancy, both waits and the TPOT, so the feasible
counts are an up-set of ``n`` and the minimum is found by doubling and bisection (queueing/sizing.py),
vectorised over pools.  The evaluator and the sweep size every pool with :func:`min_instances_batching`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.pool_stats import TpotTargets
from optfleet.progress import Progress
from optfleet.queueing import RELATIVE_TOLERANCE
from optfleet.queueing.batching import (JOIN_ITERATIONS, PREFILL_BINS, QUANTILE, BatchingState, BatchingWorkload, batching_state,
                                        take_rows, workload_moments)
from optfleet.queueing.batching_engine import (DECODE_LEVELS, GRID_PER_ITERATION, JOIN_POINTS, OFFSET_CELLS, SERVICE_CELLS, EngineBatchingWorkload,
                                               engine_batching_state, engine_workload_row, met_share, tpot_columns)

Workload = BatchingWorkload | EngineBatchingWorkload
from optfleet.queueing.sizing import MAX_GPUS, smallest_feasible


def chunk_columns(configs: Sequence[PoolConfig]) -> int:
    """Width of the chunk-share rows: one more than the most prefill chunks any window holds."""
    return max(-(-c.window_tokens // c.chunk_tokens) for c in configs) + 1


def batching_workload(configs: Sequence[PoolConfig], traffic: Sequence[tuple[ArrayLike, ArrayLike, ArrayLike]],
                      rate_rps: ArrayLike) -> Workload:
    """The workload of pools ``configs`` serving ``traffic`` (per pool: ``l_in, l_out, weight``) at ``rate_rps``
    requests per second each (a pool with no traffic gets zero moments): a :class:`BatchingWorkload` under the
    paper's iteration, an :class:`EngineBatchingWorkload` under the engine model."""
    if configs[0].charges_prefill:
        return _engine_workload(configs, traffic, rate_rps)
    columns = chunk_columns(configs)
    rows = []
    for config, (l_in, l_out, weight) in zip(configs, traffic, strict=True):
        if float(np.sum(weight)) <= 0:
            rows.append((0.0, 0.0, 1.0, np.eye(1, columns * PREFILL_BINS)[0], np.eye(1, columns)[0]))
        else:
            rows.append(workload_moments(l_in, l_out, weight, config.chunk_tokens, config.length_scale_tokens, columns))
    ex, scv, phi, prefill, shares = zip(*rows, strict=True)
    return BatchingWorkload(np.asarray(rate_rps, dtype=np.float64) * np.ones(len(rows)), np.array(ex), np.array(scv), np.array(phi),
                            np.vstack(prefill), np.vstack(shares))


def _engine_workload(configs: Sequence[PoolConfig], traffic: Sequence[tuple[ArrayLike, ArrayLike, ArrayLike]],
                     rate_rps: ArrayLike) -> EngineBatchingWorkload:
    """:func:`batching_workload` under the engine model: each pool's moments of its requests under its step."""
    prefill_columns = chunk_columns(configs) * PREFILL_BINS
    groups = tpot_columns(max(c.window_tokens for c in configs))
    rows = []
    for config, (l_in, l_out, weight) in zip(configs, traffic, strict=True):
        assert config.step is not None
        if float(np.sum(weight)) <= 0:  # an idle pool: one request of one prompt token and one output token
            l_in, l_out, weight = np.ones(1), np.ones(1), np.ones(1)
        rows.append(engine_workload_row(config.step, config.chunk_tokens, l_in, l_out, weight, prefill_columns, groups))
    stacked = {name: np.array([row[name] for row in rows]) for name in rows[0]}
    return EngineBatchingWorkload(rate_rps=np.asarray(rate_rps, dtype=np.float64) * np.ones(len(rows)), **stacked)


def pool_arrays(configs: Sequence[PoolConfig]) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """``(slots per GPU, W ms, H ms per slot)`` of each pool."""
    return (np.array([c.slots_per_instance for c in configs]), np.array([c.w_ms for c in configs]), np.array([c.h_ms_per_slot for c in configs]))


def state_at(workload: Workload, configs: Sequence[PoolConfig], gpus: ArrayLike) -> BatchingState:
    """The model of every pool at ``gpus`` GPUs (each at least 1)."""
    slots, w_ms, h_ms = pool_arrays(configs)
    return _state(workload, gpus, slots, w_ms, h_ms)


def _state(workload: Workload, gpus: ArrayLike, slots: ArrayLike, w_ms: ArrayLike, h_ms: ArrayLike, slo_ms: float = np.inf) -> BatchingState:
    """The paper's model or the engine's, whichever ``workload`` is for (the engine's may stop early on a pool whose
    TTFT is above ``slo_ms``)."""
    if isinstance(workload, EngineBatchingWorkload):
        return engine_batching_state(workload, gpus, slots, slo_ms)
    return batching_state(workload, gpus, slots, w_ms, h_ms)


def meets_slo(state: BatchingState, slo_ms: float, rho_max: float, tpot: TpotTargets | None = None) -> NDArray[np.bool_]:
    """Stable, occupancy within ``rho_max``, P99 TTFT within the SLO and, under the engine model, the TPOT targets
    (module docstring; relative tolerance as in sizing.py)."""
    ok = state.stable & (state.utilisation <= rho_max * (1 + RELATIVE_TOLERANCE)) & (state.ttft_p99_ms <= slo_ms * (1 + RELATIVE_TOLERANCE))
    if tpot is not None and hasattr(state, "tpot_p99_ms"):
        if tpot.percentile_ms is not None:
            ok &= state.tpot_p99_ms <= tpot.percentile_ms * (1 + RELATIVE_TOLERANCE)
        if tpot.mean_ms is not None:
            ok &= state.tpot_mean_ms <= tpot.mean_ms * (1 + RELATIVE_TOLERANCE)
    return ok


def min_instances_batching(workload: Workload, configs: Sequence[PoolConfig], slo_ms: float, rho_max: float,
                      tpot: TpotTargets | None = None) -> NDArray[np.int64]:
    """Fewest GPUs per pool meeting the SLO under the batching model; 0 for a pool with no traffic, -1 for none.

    The search starts at a necessary count: a pool needs ``lambda E[X] (W + H phi s) < n s`` to be stable (the
    paper's iteration), ``lambda E[D + P] < n`` (the engine's: its GPUs' time).
    A pool whose in-GPU time to first token alone breaks the SLO at any count is answered -1 at once: as
    ``n`` grows the model tends to the idle pool (iteration ``W``, no prefill wait, no slot wait), which is
    checked first.
    """
    slots, w_ms, h_ms = pool_arrays(configs)
    lam = np.asarray(workload.rate_rps, dtype=np.float64)
    busy = lam > 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if isinstance(workload, EngineBatchingWorkload):
            lo = np.floor(lam * (workload.decode_ms + workload.prefill_ms) / 1000.0) + 1.0
        else:
            lo = np.floor(lam * workload.mean_iterations * (w_ms + h_ms * workload.phi * slots) / 1000.0 / slots) + 1.0
    countable = ~busy | (lo <= MAX_GPUS)
    lo = np.where(busy & countable, lo, 1.0).astype(np.int64)
    idle = _state(replace(workload, rate_rps=np.zeros(len(slots))), np.ones(len(slots)), slots, w_ms, h_ms)
    reachable = meets_slo(idle, slo_ms, rho_max, tpot)

    known: dict[tuple[int, int], bool] = {}  # (pool, count) -> verdict: the search asks settled pools again

    def feasible(n: NDArray[np.int64]) -> NDArray[np.bool_]:
        asked = [(j, int(c)) for j, c in enumerate(n)]
        new = np.array([j for j, key in enumerate(asked) if busy[j] and key not in known], dtype=np.int64)
        if len(new):
            verdict = meets_slo(_state(take_rows(workload, new), n[new], slots[new], w_ms[new], h_ms[new], slo_ms), slo_ms, rho_max, tpot)
            known.update(zip((asked[j] for j in new), verdict.tolist(), strict=True))
        return np.array([not busy[j] or known[key] for j, key in enumerate(asked)], dtype=bool)

    need = smallest_feasible(lo, feasible, countable & (reachable | ~busy))
    return np.where(busy, need, 0)


def cap_seconds_per_request(config: PoolConfig, l_in: ArrayLike, l_out: ArrayLike, rho_max: float) -> NDArray[np.float64]:
    """Slot-seconds a request holds at the occupancy cap with no prefill wait: the per-request term of the
    necessary condition every pool meeting the batching SLO satisfies (the fleet MILP's load, milp_data.py).

    With ``Q >= 0`` the hold is at least ``h0 = X + 1/2`` iterations and the iteration time at least the fixed
    point ``t0 = W / (1 - H phi lambda_g E[h0])``, so occupancy ``lambda_g E[h] t / s <= rho_max`` implies

        lambda_g E[(X + 1/2) W + rho_max s H (X + delta/2) phi_i] <= rho_max s,

    ``phi_i = (L_in + L_out) / L_scale`` (length-scaled iteration; the join's half iteration dropped, ``delta = 0``,
    since ``phi`` is a ratio there) or ``phi_i = 1`` and ``delta = 1`` (flat): linear in the routed rates.

    Under the engine model (batching_engine.py) the hold is ``h_i = J + Q + m_i t_d + P_i + L_out t`` with
    ``t_d >= base`` and ``t >= base + E[D] / E[L_out]``, so ``E[h] >= E[(m_i + 1/2 + L_out) base + P_i + D_i]``:
    the slot-milliseconds of request i are ``(m_i + 1/2 + L_out) base + P_i + D_i`` (``rho_max`` does not enter).
    """
    l_in, l_out = np.asarray(l_in, dtype=np.int64), np.asarray(l_out, dtype=np.int64)
    held = (config.prefill_chunks(l_in) + np.maximum(l_out, 1)).astype(np.float64)
    if config.step is not None:
        work = config.step.prefill_compute_ms(l_in) + config.step.decode_work_ms(l_in, np.maximum(l_out, 1))
        return ((held + JOIN_ITERATIONS) * config.step.base_ms + work) / 1000.0
    if config.length_scale_tokens is None:
        scaled = held + JOIN_ITERATIONS
    else:
        scaled = held * (l_in + l_out) / config.length_scale_tokens
    return ((held + JOIN_ITERATIONS) * config.w_ms + rho_max * config.slots_per_instance * config.h_ms_per_slot * scaled) / 1000.0


MET_ROUNDING = 1e-9  # relative: below met_share at the cap, for its bisection and rounding (its docstring)


def met_floor(config: PoolConfig, rho_max: float) -> float:
    """``mu``: the least share of the others' decode work a held request meets in a pool of ``config`` within its
    occupancy cap, ``met_share(rho_max s (1 + eps))`` less ``MET_ROUNDING`` (``eps`` the occupancy check's tolerance).

    The engine model's operating point takes ``met`` at least ``met_share`` of the held slots without the prefill
    wait (optfleet/queueing/batching_engine.py, its even update), those are at most the held slots ``y E[h]``, at
    most ``rho_max s (1 + eps)`` in a pool within its cap, and ``met_share`` falls as the count rises (its docstring).
    At least ``(s - 1) / s``, its value at a full GPU."""
    s = float(config.slots_per_instance)
    return float(met_share(np.array([rho_max * s * (1.0 + RELATIVE_TOLERANCE)]), np.array([s]))[0]) * (1.0 - MET_ROUNDING)


def work_seconds_per_request(config: PoolConfig, l_in: ArrayLike, l_out: ArrayLike, rho_max: float) -> NDArray[np.float64]:
    """Under the engine model, per request the seconds ``w_i = (mu D_i + P_i) / 1000`` of GPU time whose rate per GPU,
    ``q = y E[w]``, is at most the stall ``lambda E[D] met + lambda E[P]`` of the held iteration
    ``t = (base + o) / (1 - q)`` in a pool within its occupancy cap (``mu`` :func:`met_floor`; ``L_out >= 1``)."""
    l_in, l_out = np.asarray(l_in, dtype=np.int64), np.maximum(np.asarray(l_out, dtype=np.int64), 1)
    step = config.step
    assert step is not None, "the cycle row is the engine model's"
    return (met_floor(config, rho_max) * step.decode_work_ms(l_in, l_out) + step.prefill_compute_ms(l_in)) / 1000.0


def prefill_hold_seconds_per_request(config: PoolConfig, l_in: ArrayLike) -> NDArray[np.float64]:
    """Under the engine model, per request ``a_i = (m_i base + P_i) / (1 + eps) / 1000`` seconds: the part of its hold
    the cycle row (:func:`cycle_seconds_per_request`) leaves out, its prefill chunks at ``t_d >= base`` each and its
    prompt's compute (the relaxation's work levels add it back, models/fleet_work_levels.py)."""
    step = config.step
    assert step is not None, "the cycle row is the engine model's"
    l_in = np.asarray(l_in, dtype=np.int64)
    return (config.prefill_chunks(l_in) * step.base_ms + step.prefill_compute_ms(l_in)) / (1.0 + RELATIVE_TOLERANCE) / 1000.0


def cycle_seconds_per_request(config: PoolConfig, l_in: ArrayLike, l_out: ArrayLike, rho_max: float) -> NDArray[np.float64]:
    """Under the engine model, per request ``i`` the slot-seconds ``c_i`` of a necessary condition every pool within its
    occupancy cap satisfies, ``y E[c] <= R = rho_max s`` per GPU (the fleet MILP's relaxation load, milp_data.py):

        c_i = ((L_out + 1/2) base + D_i) / (1 + eps) / 1000 + R w_i,

    ``eps`` the occupancy check's relative tolerance (``meets_slo``), ``L_out >= 1``, ``w_i`` the GPU time of
    :func:`work_seconds_per_request`.  With ``a_i`` (:func:`prefill_hold_seconds_per_request`) and ``q = y E[w]``
    (``y`` requests per second per GPU), the sharper condition

        y E[c] + (1 - g) y E[a] <= R    for every g >= q                              (the work levels)

    holds too; ``g = 1`` is the row above.

    **Proof** (optfleet/queueing/batching_engine.py, per GPU).  The held slots are ``y E[h]``,
    ``h = J + Q + m t_d + P + L_out t`` with the join ``J`` of mean ``t / 2``, ``Q >= 0`` and ``t_d >= base``, so
    ``E[h] >= A + (L + 1/2) t``, ``A = E[m base + P]``, ``L = E[L_out]``.  The iteration is
    ``t = (base + o) / (1 - q_t)``, ``o = E[D] / L``, ``q_t = y (E[D] met + E[P]) < 1`` (where ``y E[D + P] < 1``, else
    no pool is stable), ``met`` the share of the others' decode work a held request meets, at least ``mu``
    (:func:`met_floor`) in a pool within its cap, so ``q_t >= q`` and ``t >= (base + o) / (1 - q)``.  So occupancy within
    the cap, ``y E[h] <= R (1 + eps)``, gives ``y A + y (L + 1/2)(base + o) / (1 - q) <= R (1 + eps)``; with
    ``(L + 1/2) o >= L o = E[D]`` and times ``1 - q > 0``: ``y A (1 - q) + y E[(L_out + 1/2) base + D] + R (1 + eps) q
    <= R (1 + eps)``.  Dividing by ``1 + eps`` and using ``1 - q >= 1 - g`` gives the levels (times 1000: ms).

    Against :func:`cap_seconds_per_request` (the held slots at the idle iteration) this charges each request's GPU
    time ``P + D`` to all the GPU's ``R`` slots it stalls: the held iteration ``t`` grows as ``1 / (1 - q)``.
    """
    l_in, l_out = np.asarray(l_in, dtype=np.int64), np.maximum(np.asarray(l_out, dtype=np.int64), 1)
    step = config.step
    assert step is not None, "the cycle row is the engine model's"
    held_ms = ((l_out + JOIN_ITERATIONS) * step.base_ms + step.decode_work_ms(l_in, l_out)) / (1.0 + RELATIVE_TOLERANCE)
    return held_ms / 1000.0 + rho_max * config.slots_per_instance * work_seconds_per_request(config, l_in, l_out, rho_max)


def prefill_floor_ms(config: PoolConfig, l_in: ArrayLike) -> NDArray[np.float64]:
    """Under the engine model, per request the floor ``phi_i = (m_i + 1) base + P(L_lo)`` of its in-GPU time to first
    token on the model's grid (:func:`floor_threshold_ms`): ``m_i = ceil(L_in / C)`` chunks and the first decode
    iteration each at least ``base``, and the prefill compute of the shortest prompt of its eighth-of-a-chunk bin
    ``b = ceil(8 L_in / C)``, ``L_lo = floor((b - 1) C / 8) + 1`` (the model charges a bin its mix's mean compute,
    at least that: ``P`` rises with ``L_in``)."""
    step = config.step
    assert step is not None, "the prefill floor is the engine model's"
    l_in = np.asarray(l_in, dtype=np.int64)
    bins = -(-l_in * PREFILL_BINS // config.chunk_tokens)
    shortest = (bins - 1) * config.chunk_tokens // PREFILL_BINS + 1
    return (config.prefill_chunks(l_in) + 1.0) * step.base_ms + step.prefill_compute_ms(shortest)


FLOOR_CELL_PASSES = 200  # passes of floor_threshold_ms's fixed point


def floor_threshold_ms(config: PoolConfig, slo_ms: float) -> float:
    """Under the engine model, ``Z``: a pool of ``config`` meeting the P99 TTFT ``slo_ms`` has at most 1 % of its
    requests with :func:`prefill_floor_ms` above ``Z`` (``inf`` where no finite ``Z`` is proven).

    **Proof** (optfleet/queueing/batching_engine.py ``_ttft_quantiles_ms``).  The in-GPU law sums, on a grid of
    ``cell`` ms, each request's offset (rounded to the nearest point) and shifts that are never negative (join, prompts
    behind, prefill wait), and the TTFT adds the slot wait; its P99 is the first point where the law's sum reaches
    0.99.  Request i's offset, ``m_i step + Pbar_b + first + step - t_d`` with ``step = max(t_d + z sd, base)`` at
    every decode level ``z`` and ``first = t_d + own``, is at least ``phi_i``.  So if more than 1 % of the mass has
    ``phi > Z``, the sum stays below 0.99 before ``Z / cell - 1/2`` and the P99 TTFT is at least ``Z - cell / 2``.
    With ``Z = T + c / 2`` (``T`` the SLO with the check's tolerance, ``c`` at least the grid's ``cell``) that is
    above ``T``: such a pool fails.  The bound ``c`` on ``cell = max(t / 32, S_max / 512, longest / 2^16)`` for a
    pool meeting ``T``: the join's top point ``(31/32) t`` carries 1/16 of the mass, so ``T >= (31/32) t - cell / 2``;
    the decode levels at or above ``z* > 0`` carry more than 1 % (``step >= z* sd``), so ``T >= z* sd - cell / 2``;
    ``S_max <= k t + P_w`` and ``longest <= (k + 2)(t + z_top sd) + P_w (1 + 2 C / window)`` (``k = ceil(window /
    C)``, ``P_w`` the window's prefill compute, at most two budgets' compute behind the prompt, ``t_d <= t``).  The
    least ``c`` meeting ``c >= max(...)`` with ``t``, ``sd`` at their largest is the fixed point of that monotone map,
    found from ``c = 0`` (``inf`` when it does not settle).
    """
    step = config.step
    assert step is not None, "the prefill floor is the engine model's"
    target_ms = slo_ms * (1.0 + RELATIVE_TOLERANCE)
    chunks = -(-config.window_tokens // config.chunk_tokens)
    window_ms = float(step.prefill_compute_ms(np.array([config.window_tokens]))[0])
    behind_ms = window_ms * (1.0 + 2.0 * config.chunk_tokens / config.window_tokens)
    nodes, weights = np.polynomial.hermite_e.hermegauss(DECODE_LEVELS)
    order = np.argsort(nodes)[::-1]
    above = np.cumsum(weights[order] / weights.sum())
    z_star = float(nodes[order][np.argmax(above > 1.0 - QUANTILE)])
    if z_star <= 0:
        return np.inf
    top_join = (JOIN_POINTS - 0.5) / JOIN_POINTS
    cell_ms = 0.0
    for _ in range(FLOOR_CELL_PASSES):
        t_ms = (target_ms + cell_ms / 2.0) / top_join
        sd_ms = (target_ms + cell_ms / 2.0) / z_star
        new = max(t_ms / GRID_PER_ITERATION, (chunks * t_ms + window_ms) / SERVICE_CELLS,
                  ((chunks + 2) * (t_ms + nodes.max() * sd_ms) + behind_ms) / OFFSET_CELLS)
        if new <= cell_ms * (1.0 + 1e-12):
            return (target_ms + new / 2.0) * (1.0 + RELATIVE_TOLERANCE)
        cell_ms = new
    return np.inf


TABLE_GPU_LIMIT = 256  # largest table a pool gets; past it the per-GPU rate at the limit is used (conservative)
UNBOUNDED_GPUS = 1e6  # a pool this large has no slot wait worth counting: its per-GPU rate is the limit's
RATE_BISECTION_STEPS = 40
# rounds of the search for N_p: doubling from 1 to TABLE_GPU_LIMIT, then bisection between the last two counts
TABLE_SEARCH_ROUNDS = 2 * int(np.log2(TABLE_GPU_LIMIT)) + 1


def _count_grid(counts_per_octave: int) -> NDArray[np.float64]:
    """The counts :func:`rates_per_gpu` bisects at ``counts_per_octave`` k: ``floor(2^(i / k))`` up to ``TABLE_GPU_LIMIT``."""
    return np.unique(np.floor(2.0 ** (np.arange(int(np.log2(TABLE_GPU_LIMIT)) * counts_per_octave + 1) / counts_per_octave)))


def rates_per_gpu(unit: Workload, configs: Sequence[PoolConfig], slo_ms: float, rho_max: float,
                  ceiling_rps: NDArray[np.float64], tpot: TpotTargets | None = None, steps: int = RATE_BISECTION_STEPS,
                  counts_per_octave: int | None = None, progress: Progress | None = None) -> list[NDArray[np.float64]]:
    """Per pool p, ``r[n - 1]``: the largest per-GPU request rate meeting the SLO at ``n`` GPUs, ``n = 1 .. N_p``;
    ``r[N_p - 1]`` also holds for every ``n >= N_p``.  ``unit`` is each pool's traffic (its rate is ignored) and
    ``ceiling_rps`` a per-GPU rate no feasible pool reaches (:func:`cap_seconds_per_request`'s condition).

    At a fixed per-GPU rate only the slot wait depends on ``n`` (the operating point, the prefill wait, the
    in-GPU time to first token are per GPU), and it falls as ``n`` grows (more slots, a faster drain), so the
    rate ``r(n)`` rises with ``n`` towards ``r_inf``, the rate of a pool without slot wait.  ``N_p`` is the least
    ``n`` that meets the SLO at ``r_inf`` (then ``r(n) = r_inf`` from there on), capped at ``TABLE_GPU_LIMIT``
    (then ``r(N_p)``, a floor for larger pools).  A pool that cannot meet the SLO even idle gets ``[0]``.
    Each rate is the feasible end of a bisection of ``steps`` halvings of ``[0, ceiling]`` (relative width ``2^-steps``).
    With ``counts_per_octave`` k, ``r`` is bisected only at ``n = floor(2^(i / k))`` and ``N_p`` and each other count
    reads the rate of the largest such count below it (a floor, since ``r`` rises with ``n``): about ``k log2 N_p``
    entries per pool instead of ``N_p``.

    ``progress(label, done, total)`` (if given) is told each round of the three searches (every pool's is one
    vectorised model evaluation): ``steps`` halvings of ``r_inf``, at most ``TABLE_SEARCH_ROUNDS`` rounds for
    ``N_p``, ``steps`` halvings of the table's counts; the label says which search and over how many entries.
    ``done`` and ``total`` count entries (a round's cost grows with them): one per pool for each of the first two
    searches, one per count bisected for the third, whose number is known once ``N_p`` is (before, ``total``
    counts every grid count up to ``TABLE_GPU_LIMIT``: ``done / total`` never falls).
    """
    count = len(configs)
    slots, w_ms, h_ms = pool_arrays(configs)

    def feasible(rows: NDArray[np.int64], gpus: NDArray[np.float64], rate_per_gpu: NDArray[np.float64]) -> NDArray[np.bool_]:
        workload = replace(take_rows(unit, rows), rate_rps=rate_per_gpu * gpus)
        return meets_slo(_state(workload, gpus, slots[rows], w_ms[rows], h_ms[rows], slo_ms), slo_ms, rho_max, tpot)

    grid_counts = TABLE_GPU_LIMIT if counts_per_octave is None else len(_count_grid(counts_per_octave))
    total = [2.0 * count + count * grid_counts]  # entries; the third search's are known after the second

    def tell(label: str, done: float) -> None:
        if progress is not None:
            progress(label, done, total[0])

    def largest(rows: NDArray[np.int64], gpus: NDArray[np.float64], what: str, first: float) -> NDArray[np.float64]:
        lo, hi = np.zeros(len(rows)), np.asarray(ceiling_rps, dtype=np.float64)[rows].copy()
        for step in range(steps):
            tell(f"{what}, halving {step + 1}/{steps}", first + len(rows) * step / steps)
            mid = 0.5 * (lo + hi)
            ok = feasible(rows, gpus, mid)
            lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
        return lo

    pools = np.arange(count)
    limit = largest(pools, np.full(count, UNBOUNDED_GPUS), f"rate without slot wait of {count} pools", 0)
    # N_p: the least n feasible at r_inf, by doubling then bisection (feasibility rises with n).
    known_bad = np.zeros(count)
    first_good = np.full(count, float(TABLE_GPU_LIMIT))
    n = np.ones(count)
    searching = limit > 0
    rounds = 0
    while searching.any():
        rows = np.flatnonzero(searching)
        tell(f"least GPU count at that rate, doubling: {len(rows)} of {count} pools searching", count * (1.0 + min(rounds / TABLE_SEARCH_ROUNDS, 1.0)))
        rounds += 1
        ok = feasible(rows, n[rows], limit[rows])
        first_good[rows[ok]] = n[rows[ok]]
        known_bad[rows[~ok]] = n[rows[~ok]]
        searching[rows[ok]] = False
        grow = rows[~ok]
        searching[grow[n[grow] >= TABLE_GPU_LIMIT]] = False
        n[grow] = np.minimum(2 * n[grow], TABLE_GPU_LIMIT)
    while True:
        open_ = np.flatnonzero((limit > 0) & (first_good - known_bad > 1))
        if not len(open_):
            break
        tell(f"least GPU count at that rate, bisection: {len(open_)} of {count} pools searching", count * (1.0 + min(rounds / TABLE_SEARCH_ROUNDS, 1.0)))
        rounds += 1
        mid = np.floor(0.5 * (first_good[open_] + known_bad[open_]))
        ok = feasible(open_, mid, limit[open_])
        first_good[open_[ok]] = mid[ok]
        known_bad[open_[~ok]] = mid[~ok]
    sizes = np.where(limit > 0, first_good, 1).astype(np.int64)
    rows = np.concatenate([np.full(size, p) for p, size in enumerate(sizes)])
    gpus = np.concatenate([np.arange(1, size + 1, dtype=np.float64) for size in sizes])
    at_limit = (gpus == sizes[rows]) & (limit[rows] > 0) & (known_bad[rows] < TABLE_GPU_LIMIT)
    rates = np.where(at_limit, limit[rows], 0.0)
    grid = np.ones(len(gpus), dtype=bool) if counts_per_octave is None else np.isin(gpus, _count_grid(counts_per_octave))
    search = np.flatnonzero(~at_limit & (limit[rows] > 0) & grid)
    total[0] = 2.0 * count + len(search)
    if len(search):
        rates[search] = largest(rows[search], gpus[search], f"rates at {len(search)} GPU counts up to {int(gpus[search].max())}", 2.0 * count)
    # a count off the grid reads the last grid count's rate before it (np.maximum.accumulate of the grid's positions)
    rates = rates[np.maximum.accumulate(np.where(grid | at_limit, np.arange(len(gpus)), 0))]
    # r(n) rises with n; each count reads at most the rate of every larger one (a table that never claims more
    # than a larger pool's bisection found, whatever the noise)
    ends = np.cumsum(sizes)[:-1]
    return [np.minimum.accumulate(part[::-1])[::-1] for part in np.split(rates, ends)]
