"""Lower bounds on the fleet MILP's cost when only a given set of pool options may open (models/fleet.py).

With the pool options S open, every solution of the model has, per pool j,
``n_j >= a_j / (rho_max s_j)`` (utilisation cap, row 3), so its cost is at least
``sum_j c_j a_j / (rho_max s_j)``, linear in the shares.  Each open pool also meets its floor
row (4) at its top level, which every level meets: ``sum_k e[k,j] x[k,j] + e'[k,j] z[k,j] <= 0``
with ``e`` the class's floor measure at that level less the level's allowance per unit of its mass
(``FleetMilpData.floor_excess``).  Adding ``mu`` times these
rows (``mu >= 0``, a Lagrangian relaxation) and minimising each class over its shares
(``sum_j x + sum_j z = 1``, ``sum_j z <= p_c``, row 1) gives, for every ``mu``,

    LB_mu(S) = sum_k (1 - p_c) min_{j in S} u_mu[k,j] + p_c min(min_{j in S} u_mu[k,j], min_{j in S} w_mu[k,j])
    u_mu[k,j] = c_j L[k,j] / (rho_max s_j) + mu e[k,j],   w_mu[k,j] = c_j L'[k,j] / (rho_max s_j) + mu e'[k,j]

(+inf for a class no option of S holds).  The bound is the largest over a grid of ``mu``.  It
holds for the model with any extra rows (user constraints restrict it) but only for the
objective ``cost``.  It is cheap (numpy over every set at once) and loose: it prices GPUs at the
cap, ignoring Erlang-C waits and whole GPUs.  On the scale benchmark (47 options, K = 3; 9,075 sets
hold every class) the best-first search gave 341 sets an LP relaxation and 3 a MILP solve.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.fleet.milp_data import FleetMilpData

MULTIPLIERS = (0.0, *np.logspace(-1, 5, 13))  # mu grid ($/h per unit of excess mass)
ROUNDED_WEIGHTS = (1.0, 0.0)  # lambda grid of threshold_set_bounds
# Relative slack of threshold_set_bounds' tests (a load at the cap, a floor row at 0): rows the solver meets only to
# its feasibility tolerance must not make the bound exceed what it calls the optimum.
SLACK = 1e-6


def open_set_bounds(data: FleetMilpData, open_sets: NDArray[np.int64]) -> NDArray[np.float64]:
    """``LB(S)`` (module docstring) for every row ``S`` of ``open_sets`` (sets x options per set)."""
    problem = data.problem
    pc = problem.compressible_fraction
    usable = np.array([o.levels > 0 for o in data.pools])
    rate = _cost_per_erlang(data)
    top_rows = [data.floor_excess(j, max(o.levels - 1, 0)) for j, o in enumerate(data.pools)]
    excess = np.stack([x for x, _ in top_rows], axis=1)
    compressed_excess = np.stack([z for _, z in top_rows], axis=1)
    holds = data.fits & usable
    compresses = data.can_compress & usable
    best = np.full(len(open_sets), -np.inf)
    for mu in MULTIPLIERS:
        u = np.where(holds, data.load * rate + mu * excess, np.inf)[:, open_sets].min(axis=2)
        w = np.where(compresses, data.compressed_load * rate + mu * compressed_excess, np.inf)[:, open_sets].min(axis=2)
        per_class = (pc * np.minimum(u, w) if pc > 0 else 0.0) + ((1 - pc) * u if pc < 1 else 0.0)  # no 0 * inf
        best = np.maximum(best, per_class.sum(axis=0))
    return best


def threshold_set_bounds(data: FleetMilpData, open_sets: NDArray[np.int64], tables: list[NDArray[np.float64]],
                         instance_caps: NDArray[np.float64]) -> NDArray[np.float64]:
    """A lower bound on the cost of each set's case under threshold routing (models/fleet_routing.py rows (9)),
    by dynamic programming over the length segments: stronger than :func:`open_set_bounds`, whose relaxation lets
    a segment split across pools.

    Under threshold routing each segment goes to one pool, pools in index (window) order along ``L_total``: the
    pools of a set ``j_1 < ... < j_K`` take consecutive intervals of the segments, some possibly empty.  A class
    of pool ``j_i``'s interval can be compressed only into a pool of the set with a smaller window, i.e. into
    one of the options ``T_i`` of ``j_1 .. j_(i-1)`` at a window below ``j_i``'s.  For pool j and the interval
    ``[a, b]``, ``A[a, b] = price_j n_j[a, b]`` (:func:`_rounded_costs`) bounds the pool's cost whatever the
    compression does (taking as compressible every class an option up to the largest window of ``T`` can take),
    but leaves out the load compressed into it; ``B[a, b]`` (:func:`_linear_prefix`) is the linear cost
    ``rho_j = price_j / (rho_max s_j)`` per erlang of the interval's load, each class compressible into ``T``
    charged the cheaper of keeping its share ``p_c`` in j or compressing it into the cheapest option of ``T``
    (the load compressed *into* a pool is so charged to the interval it comes from).  A pool costs at
    least ``max(A_j, rho_j (its load)) >= lambda A_j + (1 - lambda) rho_j (its load)`` for every ``lambda`` in
    [0, 1], so with ``c = lambda A + (1 - lambda) B``

        LB(S) = max over lambda in ROUNDED_WEIGHTS of  min over cuts e_0 = 0 <= e_1 <= ... <= e_K = (segments)  of  sum_i c_{j_i, T_i}[e_(i-1), e_i - 1]

    (``f_i(e) = min_{e' <= e} f_(i-1)(e') + c[e', e-1]``, an empty interval costing 0) is at most the cost of
    every plan of the case, with any extra rows.  ``tables[j]`` are the model's Erlang tables ``a_max[n, m]``
    (models/fleet.py rows (7)) and ``instance_caps[j]`` its bounds ``n[j] <= gpu_bound[j]`` (an interval needing more
    instances is infeasible: e.g. an availability constraint).  Objective ``cost`` only.
    """
    positions, segment_count = _segment_positions(data)
    ends = segment_count + 1
    windows = np.array([o.window_tokens for o in data.pools])
    # A: one matrix per (pool option, the smaller windows before it in the set); B: one prefix sum per (pool option,
    # the options before it at smaller windows), both for the sets that need them
    a_keys: dict[tuple[int, int], int] = {}
    b_keys: dict[tuple[int, tuple[int, ...]], int] = {}
    a_of = np.empty(open_sets.shape, dtype=np.int64)
    b_of = np.empty(open_sets.shape, dtype=np.int64)
    for row, chosen in enumerate(open_sets):
        for i, j in enumerate(chosen):
            earlier = tuple(int(t) for t in chosen[:i] if windows[t] < windows[j])
            a_of[row, i] = a_keys.setdefault((int(j), max((int(windows[t]) for t in earlier), default=0)), len(a_keys))
            b_of[row, i] = b_keys.setdefault((int(j), earlier), len(b_keys))
    rounded = np.empty((len(a_keys), ends, ends))
    for (j, largest), index in a_keys.items():
        compressible = _compressible(data, windows, largest)
        level = _interval_levels(data, j, positions, segment_count, compressible)
        rounded[index] = _rounded_costs(data, j, tables[j], positions, segment_count, float(instance_caps[j]), level, compressible)
    linear = np.stack([_linear_prefix(data, j, positions, ends, earlier) for (j, earlier) in b_keys])
    best = np.full(len(open_sets), -np.inf)
    for start in range(0, len(open_sets), 512):  # chunks of sets: [sets, ends, ends] stays small
        a_chunk, b_chunk = a_of[start:start + 512], b_of[start:start + 512]
        pools = []
        for i in range(a_chunk.shape[1]):
            a_costs = rounded[a_chunk[:, i]]
            prefix = linear[b_chunk[:, i]]
            b_costs = np.where(np.isinf(a_costs), np.inf, prefix[:, None, :] - prefix[:, :, None])
            pools.append((a_costs, b_costs))
        for weight in ROUNDED_WEIGHTS:
            reach = np.full((len(a_chunk), ends), np.inf)
            reach[:, 0] = 0.0
            for a_costs, b_costs in pools:
                costs = a_costs if weight == 1.0 else b_costs if weight == 0.0 else weight * a_costs + (1.0 - weight) * b_costs
                reach = np.min(reach[:, :, None] + costs, axis=1)
            best[start:start + 512] = np.maximum(best[start:start + 512], reach[:, -1])
    return best


def _segment_positions(data: FleetMilpData) -> tuple[NDArray[np.int64], int]:
    """Each class's position among the segments with traffic (-1 for a class without traffic), and their count."""
    live = data.mass > 0
    segments = np.unique(data.class_segment[live])
    positions = np.where(live, np.searchsorted(segments, data.class_segment), -1)
    return positions, len(segments)


def _compressible(data: FleetMilpData, windows: NDArray[np.int64], largest: int) -> NDArray[np.bool_]:
    """Per class: some usable option at a window up to ``largest`` can take it compressed (0: none)."""
    problem = data.problem
    if not largest or not problem.compression_enabled or problem.compressible_fraction <= 0:
        return np.zeros(len(data.mass), dtype=bool)
    targets = (windows <= largest) & np.array([o.levels > 0 for o in data.pools])
    return (data.can_compress & targets).any(axis=1)


def _interval_levels(data: FleetMilpData, j: int, positions: NDArray[np.int64], segment_count: int,
                     compressible: NDArray[np.bool_]) -> NDArray[np.int64]:
    """``[e', e]``: the lowest floor level pool option j can be at serving the segments ``e' .. e-1`` (-1: none).

    A class of the interval is served at a share ``1 - y_k`` with ``y_k`` in ``[0, p_c]`` if it is
    ``compressible`` (else 0), and j may take any share ``z <= p_c`` of its band's classes compressed.  The floor
    rows (4) are linear in the shares, so the least excess at level m is ``sum_k min(e, (1 - p_c) e)`` over the
    compressible classes (``e`` itself for the others) plus ``p_c sum min(0, e')`` over the band: the level is at
    least the lowest m where that is ``<= 0``, found by bisection (it falls as m rises).
    """
    pc = data.problem.compressible_fraction if data.problem.compression_enabled else 0.0
    ends = segment_count + 1
    classes = np.flatnonzero((positions >= 0) & data.fits[:, j])
    levels = data.pools[j].levels
    plain, squeezed = data.floor_excess(j, slice(0, levels))  # [class, level]
    keep = np.where(compressible[classes], 1.0 - pc, 1.0)[:, None]
    excess = np.zeros((ends, levels))
    np.add.at(excess, positions[classes] + 1, np.minimum(plain[classes], keep * plain[classes]))
    excess = np.cumsum(excess, axis=0)
    band = np.flatnonzero(data.can_compress[:, j] & (data.mass > 0)) if pc > 0 else np.zeros(0, dtype=np.int64)
    inflow = pc * np.minimum(squeezed[band], 0.0).sum(axis=0)
    # the least excess falls as the level rises (row (4)): binary search per interval [e', e) for the first level <= 0
    tolerance = SLACK * max(1.0, float(data.mass.sum()))
    start, stop = np.meshgrid(np.arange(ends), np.arange(ends), indexing="ij")
    low, high = np.zeros((ends, ends), dtype=np.int64), np.full((ends, ends), levels, dtype=np.int64)
    while np.any(low < high):
        mid = (low + high) // 2
        probe = np.minimum(mid, levels - 1)
        meets = excess[stop, probe] - excess[start, probe] + inflow[probe] <= tolerance
        high = np.where((low < high) & meets, mid, high)
        low = np.where((low < high) & ~meets, mid + 1, low)
    return np.where(low < levels, low, -1)


def _rounded_costs(data: FleetMilpData, j: int, table: NDArray[np.float64], positions: NDArray[np.int64], segment_count: int,
                   instance_cap: float, level: NDArray[np.int64], compressible: NDArray[np.bool_]) -> NDArray[np.float64]:
    """``A[e', e]`` of :func:`threshold_set_bounds`: a lower bound on pool option j's cost serving the segments
    ``e' .. e-1`` when its ``compressible`` classes may go elsewhere compressed (0 when ``e' = e``, inf when
    ``e' > e`` or j cannot serve them), each quantity at its least over the compression choices:

    * load ``>= L = sum_k (1 - p_c [k compressible]) L[k,j]``, so ``n >= ceil(L / (rho_max s_j))``;
    * the level at least ``level[e', e]`` (:func:`_interval_levels`); below ``N_j`` GPUs the wait rows (7) need
      ``L <= a_max[n, level]``, and ``a_max`` falls as the level rises;
    * more than ``instance_cap`` instances: infeasible.
    """
    problem = data.problem
    option = data.pools[j]
    pc = problem.compressible_fraction if problem.compression_enabled else 0.0
    ends = segment_count + 1
    classes = np.flatnonzero((positions >= 0) & data.fits[:, j])
    held = np.zeros(segment_count, dtype=bool)
    held[positions[classes]] = True
    keep = np.where(compressible[classes], 1.0 - pc, 1.0)
    interval_load = _interval_sums(keep * data.load[classes, j], positions[classes], ends)
    cap = problem.rho_max * option.slots_per_gpu
    gpus = np.maximum(np.ceil(interval_load / cap - SLACK), 1.0)
    table_gpus = option.table_gpus
    if table_gpus > 1:
        fitted = np.full(gpus.shape, float(table_gpus))
        for n in range(table_gpus - 1, 0, -1):  # the least n >= the cap's count whose table holds the load
            a_max = table[n][np.maximum(level, 0)]
            fitted = np.where((n >= gpus) & (interval_load <= a_max * (1 + SLACK)), float(n), fitted)
        gpus = np.maximum(gpus, np.where(gpus < table_gpus, fitted, gpus))
    # the interval must be held whole: no segment in [e', e) that j cannot serve
    unheld = np.concatenate(([0], np.cumsum(~held)))
    whole = (unheld[None, :] - unheld[:, None]) == 0
    upper = np.triu(np.ones((ends, ends), dtype=bool), k=1)
    rounded = np.where(upper & whole & (level >= 0) & (gpus <= instance_cap), option.cost_per_gpu_hour * gpus, np.inf)
    np.fill_diagonal(rounded, 0.0)
    return rounded


def _linear_prefix(data: FleetMilpData, j: int, positions: NDArray[np.int64], ends: int, earlier: tuple[int, ...]) -> NDArray[np.float64]:
    """``B`` of :func:`threshold_set_bounds` as a prefix sum over the segments (``B[e', e] = P[e] - P[e']``): pool
    option j's load at ``rho_j``, a class that one of the options ``earlier`` can take compressed charged for its
    share ``p_c`` the cheaper of j and the cheapest of them."""
    problem = data.problem
    pc = problem.compressible_fraction if problem.compression_enabled else 0.0
    classes = np.flatnonzero((positions >= 0) & data.fits[:, j])
    rate = _cost_per_erlang(data)
    own = rate[j] * data.load[classes, j]
    per_class = own
    if earlier and pc > 0:
        targets = list(earlier)
        squeeze = np.where(data.can_compress[np.ix_(classes, targets)], data.compressed_load[np.ix_(classes, targets)] * rate[targets], np.inf).min(axis=1)
        per_class = np.where(np.isfinite(squeeze), (1.0 - pc) * own + pc * np.minimum(own, squeeze), own)
    prefix = np.zeros(ends)
    np.add.at(prefix, positions[classes] + 1, per_class)
    return np.cumsum(prefix)


def _interval_sums(values: NDArray[np.float64], segment: NDArray[np.int64], ends: int) -> NDArray[np.float64]:
    """``[e', e]`` = the sum of ``values`` over the classes of segments ``e' .. e-1`` (0 where ``e' >= e``)."""
    prefix = np.zeros(ends)
    np.add.at(prefix, segment + 1, values)
    prefix = np.cumsum(prefix)
    return np.maximum(prefix[None, :] - prefix[:, None], 0.0)


def _cost_per_erlang(data: FleetMilpData) -> NDArray[np.float64]:
    """``rho_j = price_j / (rho_max s_j)``: the least $/h per erlang of load in pool option j (utilisation cap)."""
    return np.array([o.cost_per_gpu_hour / (data.problem.rho_max * o.slots_per_gpu) for o in data.pools])
