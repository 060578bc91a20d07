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
    but leaves out the load compressed into it; ``B[a, b]`` (:func:`_linear_prefixes`) is the linear cost
    ``rho_j = price_j / (rho_max s_j)`` per erlang of the interval's load, each class compressible into ``T``
    charged the cheaper of keeping its share ``p_c`` in j or compressing it into the cheapest option of ``T``
    (the load compressed *into* a pool is so charged to the interval it comes from).  A pool costs at
    least ``max(A_j, rho_j (its load)) >= lambda A_j + (1 - lambda) rho_j (its load)`` for every ``lambda`` in
    [0, 1], so with ``c = lambda A + (1 - lambda) B``

        LB(S) = max over lambda in ROUNDED_WEIGHTS of  min over cuts e_0 = 0 <= e_1 <= ... <= e_K = (segments)  of  sum_i c_{j_i, T_i}[e_(i-1), e_i - 1]

    (``f_i(e) = min_{e' <= e} f_(i-1)(e') + c[e', e-1]``, an empty interval costing 0) is at most the cost of
    every plan of the case, with any extra rows.  ``tables[j]`` are the model's Erlang tables ``a_max[n, m]``
    (models/fleet.py rows (7)) and ``instance_caps[j]`` its bounds ``n[j] <= gpu_bound[j]`` (an interval needing more
    instances is infeasible: e.g. an availability constraint).  Objective ``cost`` only.  None of this holds at
    ``p_c = 1`` (-inf for every set): a segment compressed whole has no uncompressed share, and its ``assign`` may
    sit with a closed pool that fits it (models/fleet_routing.py closes ``assign`` only for ``p_c < 1``), so the
    open pools' intervals need not cover every segment.
    """
    if data.problem.compression_enabled and data.problem.compressible_fraction >= 1:
        return np.full(len(open_sets), -np.inf)
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
    linear = _linear_prefixes(data, positions, ends, list(b_keys))
    best = np.full(len(open_sets), -np.inf)
    for weight in ROUNDED_WEIGHTS:
        # The DP once per distinct prefix of the sets' pools: reach[r, e] for the prefix group r (the sets sharing the
        # costs of their first i pools share it), parent[s] = the group of set s; the last pool only needs e = end.
        reach, parent = np.where(np.arange(ends) == 0, 0.0, np.inf)[None, :], np.zeros(len(open_sets), dtype=np.int64)
        for i in range(open_sets.shape[1]):
            groups, parent = np.unique(np.stack([parent, a_of[:, i], b_of[:, i]], axis=1), axis=0, return_inverse=True)
            columns = np.arange(ends - 1, ends) if i == open_sets.shape[1] - 1 else np.arange(ends)
            extended = np.empty((len(groups), len(columns)))
            for start in range(0, len(groups), 512):  # chunks of groups: [groups, ends, ends] stays small
                chunk = groups[start:start + 512]
                a_costs = rounded[chunk[:, 1]][:, :, columns]
                prefix = linear[chunk[:, 2]]
                b_costs = np.where(np.isinf(a_costs), np.inf, prefix[:, None, columns] - prefix[:, :, None])
                costs = a_costs if weight == 1.0 else b_costs if weight == 0.0 else weight * a_costs + (1.0 - weight) * b_costs
                extended[start:start + 512] = np.min(reach[chunk[:, 0]][:, :, None] + costs, axis=1)
            reach, parent = extended, parent.ravel()
        best = np.maximum(best, reach[parent, -1])
    return best


class ThresholdCaseBound:
    """A stronger, costlier lower bound on one set's case under threshold routing than :func:`threshold_set_bounds`:
    it prices the pools that take compressed requests with that inflow rounded to whole instances.

    :func:`threshold_set_bounds` leaves the load compressed *into* a pool out of its rounded cost ``A`` and charges
    it linearly to the interval it comes from (``B``), so a pool fed only by compressed inflow (an empty interval)
    costs 0 in ``A``.  On the scale benchmark the optimum is such a pool (2 H100 at window 4,096, 441 compressed
    erlangs) beside one MI300X pool: ``A`` prices 2,264.40, ``B`` 2,287.67, the case costs 2,307.44.

    Under threshold routing (models/fleet_routing.py rows (9c)) the segments compressed into pool ``j_i`` are a
    prefix of its band (``band_prefix``, when the band's segments are consecutive) and each takes exactly ``p_c``
    of every class of the segment that j_i can take compressed (``z_fixed``).  So with ``t_i`` segments of the
    band compressed into ``j_i`` the inflow is ``I_i[t_i] = p_c sum L'[k,j_i]`` over those classes, whatever the
    cuts.  For every vector ``t`` and cuts ``e_0 = 0 <= e_1 <= ... <= e_K`` (pools ``j_1 < ... < j_K`` in window
    order, as in :func:`threshold_set_bounds`), the case's plans with those prefixes and cuts cost at least

    * first pool: ``price n(L[0, e_1] + I_1[t_1])``, its own classes whole (no smaller pool takes them);
    * middle pools: ``price n(A-load[e_(i-1), e_i] + I_i[t_i])``, their own classes at their least load (every
      class an earlier pool can take compressed at ``1 - p_c``, as ``A``);
    * last pool: ``price n(sum over its classes of (1 - p_c [compressed under t]) L[k,j_K])``, exact given ``t``,

    with ``n(load)`` the least instances of :func:`_least_gpus` (cap, Erlang table, ``gpu_bound``) and an idle pool
    (empty interval, no inflow) at 0.  The floor level is the least that :func:`_interval_levels` allows with the
    inflow's own floor excess ``p_c sum e'[k,j_i,m]`` over the t_i segments (exact: ``z = p_c``) in place of the
    band's most favourable one; compressed requests whose prefill exceeds a level must be diluted by the pool's
    own short requests, which the favourable term let a pool fed only by inflow skip (on the scale benchmark the
    bound then priced MI300X x4 at 4,096 for the inflow, 2 instances at $7.40, where no such plan meets the TTFT
    floor).  A pool's cost rises with its load and its level, so each term is at most that pool's cost in the
    plan.  The bound is the
    least over ``t`` and the cuts, by dynamic programming over the pools with the prefixes of the pools so far in
    its state (``prod (T_i + 1) (segments + 1)^2`` sums: beyond ``STATE_LIMIT`` it returns -inf, no bound).
    Prefix vectors that overlap (a segment compressed twice, which ``compress_share`` forbids) are kept: extra
    candidates only lower the least.  Only for ``p_c < 1`` (as :func:`threshold_set_bounds`) and objective ``cost``.
    """

    STATE_LIMIT = 4_000_000

    def __init__(self, data: FleetMilpData, tables: list[NDArray[np.float64]], instance_caps: NDArray[np.float64]) -> None:
        self.data, self.tables, self.caps = data, tables, instance_caps
        self.positions, self.segment_count = _segment_positions(data)
        self.windows = np.array([o.window_tokens for o in data.pools])
        problem = data.problem
        self.pc = problem.compressible_fraction if problem.compression_enabled else 0.0
        self._levels: dict[tuple[int, int, bool], NDArray[np.int64]] = {}
        self._inflows: dict[int, tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64]] | None] = {}
        self._pool_costs: dict[tuple[int, int, bool], NDArray[np.float64]] = {}

    def __call__(self, chosen: NDArray[np.int64]) -> float:
        """The bound for the set of pool options ``chosen`` (ascending), -inf where it does not apply."""
        chosen = [int(j) for j in chosen]
        if self.pc >= 1.0 or len(chosen) < 2:
            return -np.inf
        inflows = [self._inflow(j) for j in chosen[:-1]]  # the last pool takes none: no pool after it holds its band
        if any(inflow is None for inflow in inflows):
            return -np.inf
        states = np.prod([len(inflow) for inflow, _, _ in inflows]) * (self.segment_count + 1) ** 2
        if states > self.STATE_LIMIT:
            return -np.inf
        ends = self.segment_count + 1
        first, rest = chosen[0], chosen[1:]
        # reach[t_1, ..., t_i, e]: the least cost of the first i pools serving segments 0 .. e-1 with those prefixes
        reach = self._costs(first, 0, full=False)[:, 0, :]
        for i, j in enumerate(rest[:-1], start=1):
            costs = self._costs(j, self._largest_before(chosen, i), full=True)  # [t_i, e', e]
            reachable = np.flatnonzero(np.isfinite(reach).any(axis=tuple(range(reach.ndim - 1))))  # the ends e' worth extending
            costs = costs[:, reachable].reshape((1,) * (reach.ndim - 1) + (costs.shape[0], len(reachable), ends))
            reach = np.min(reach[..., None, reachable, None] + costs, axis=-2)
        last = chosen[-1]
        largest = self._largest_before(chosen, len(chosen) - 1)
        compressed = np.zeros(len(self.data.mass), dtype=bool)
        for i, (_, prefix, _) in enumerate(inflows):  # [t_i, class]: class compressed into j_i under t_i
            shape = [1] * (len(chosen) - 1) + [len(self.data.mass)]
            shape[i] = prefix.shape[0]
            compressed = compressed | prefix.reshape(shape)
        own = _kept_load(self.data, last, self.positions, np.zeros(len(self.data.mass), dtype=bool))
        load = np.where(compressed, 1.0 - self.pc, 1.0) * own  # [t_1, ..., t_(K-1), class]
        after = (np.maximum(self.positions, 0)[:, None] >= np.arange(ends)[None, :]) & (self.positions >= 0)[:, None]
        tail_load = load @ after  # [t..., e']: the last pool's load serving segments e' .. end
        level = self._level(last, largest, None)[0, :, -1]
        gpus = _least_gpus(self.data, last, self.tables[last], tail_load, level, float(self.caps[last]))
        whole = _whole_intervals(self.data, last, self.positions, self.segment_count)[:, -1]
        tail = np.where(whole, self.data.pools[last].cost_per_instance_hour * gpus, np.inf)
        tail[..., -1] = 0.0  # an empty last pool (nothing compressed into the last pool: no pool after it)
        return float(np.min(reach + tail))

    def _costs(self, j: int, largest: int, full: bool) -> NDArray[np.float64]:
        """``[t, e', e]``: pool option j's least cost serving segments ``e' .. e-1`` with the inflow of the first t
        segments of its band (:meth:`_inflow`), its classes that an option up to the window ``largest`` can take
        compressed at ``1 - p_c`` (all rows when ``full``, else only ``e' = 0``); computed once per argument."""
        key = (j, largest, full)
        if key not in self._pool_costs:
            self._pool_costs[key] = self._priced(j, largest, full)
        return self._pool_costs[key]

    def _priced(self, j: int, largest: int, full: bool) -> NDArray[np.float64]:
        """:meth:`_costs`, computed."""
        band = self._inflow(j)
        inflow = band[0]
        ends = self.segment_count + 1
        compressible = _compressible(self.data, self.windows, largest)
        own = _interval_sums(_kept_load(self.data, j, self.positions, compressible), self.positions, ends)
        level = self._level(j, largest, band)  # [t, e', e]
        if not full:
            own, level = own[:1], level[:, :1]
        load = own[None] + inflow[:, None, None]
        gpus = _least_gpus(self.data, j, self.tables[j], load, level, float(self.caps[j]))
        start = np.arange(own.shape[0])[:, None]
        stop = np.arange(ends)[None, :]
        whole = _whole_intervals(self.data, j, self.positions, self.segment_count)[:own.shape[0]]
        priced = self.data.pools[j].cost_per_instance_hour * gpus
        busy = np.where(start < stop, np.where(whole, priced, np.inf), np.where(inflow[:, None, None] > 0, priced, 0.0))
        return np.where(start <= stop, busy, np.inf)

    def _level(self, j: int, largest: int, band: tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64]] | None
               ) -> NDArray[np.int64]:
        """``[t, e', e]``: :func:`_interval_levels` of pool option j with the floor excess of the inflow of the first t
        segments of its band (``band``; none when None)."""
        key = (j, largest, band is None)
        if key not in self._levels:
            compressible = _compressible(self.data, self.windows, largest)
            excess = np.zeros((1, self.data.pools[j].levels)) if band is None else band[2]
            self._levels[key] = _interval_levels(self.data, j, self.positions, self.segment_count, compressible, excess)
        return self._levels[key]

    def _largest_before(self, chosen: list[int], i: int) -> int:
        """The largest window of the pools before ``chosen[i]`` in the set at a window below its own (0: none)."""
        return max((int(self.windows[t]) for t in chosen[:i] if self.windows[t] < self.windows[chosen[i]]), default=0)

    def _inflow(self, j: int) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.float64]] | None:
        """``(I[t], prefix[t, class], excess[t, level])``: the load compressed into pool option j when the first t
        segments with traffic of its band are, which classes that compresses, and its floor rows' excess (row 4,
        ``p_c sum e'[k, j, m]``); ``t = 0`` alone without compression; None when the band's segments are not
        consecutive (then ``band_prefix`` does not chain them)."""
        if j not in self._inflows:
            takes = self.data.can_compress[:, j] & (self.pc > 0)
            segments = np.unique(self.data.class_segment[takes])
            if len(segments) and not np.array_equal(segments, np.arange(segments[0], segments[0] + len(segments))):
                self._inflows[j] = None
            else:
                live = takes & (self.positions >= 0)
                band = np.unique(self.positions[live])
                inflow = np.concatenate(([0.0], np.cumsum([self.pc * self.data.compressed_load[live & (self.positions == p), j].sum()
                                                           for p in band])))
                prefix = np.vstack([np.zeros((1, len(live)), dtype=bool), live[None, :] & (self.positions[None, :] <= band[:, None])])
                _, squeezed = self.data.floor_excess(j, slice(0, self.data.pools[j].levels))
                self._inflows[j] = (inflow, prefix, self.pc * prefix.astype(np.float64) @ squeezed)
        return self._inflows[j]


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
                     compressible: NDArray[np.bool_], inflow: NDArray[np.float64] | None = None) -> NDArray[np.int64]:
    """``[e', e]``: the lowest floor level pool option j can be at serving the segments ``e' .. e-1`` (-1: none).

    A class of the interval is served at a share ``1 - y_k`` with ``y_k`` in ``[0, p_c]`` if it is
    ``compressible`` (else 0), and j may take any share ``z <= p_c`` of its band's classes compressed.  The floor
    rows (4) are linear in the shares, so the least excess at level m is ``sum_k min(e, (1 - p_c) e)`` over the
    compressible classes (``e`` itself for the others) plus ``p_c sum min(0, e')`` over the band: the level is at
    least the lowest m where that is ``<= 0``, found by bisection (it falls as m rises).  With ``inflow`` (``[t,
    level]``: the excess of a known compressed inflow, each of its ``t`` alternatives) that replaces the band's
    term, and the result is ``[t, e', e]``.
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
    alternatives = (pc * np.minimum(squeezed[band], 0.0).sum(axis=0))[None, :] if inflow is None else inflow
    # the least excess falls as the level rises (row (4)): binary search per interval [e', e) for the first level <= 0
    tolerance = SLACK * max(1.0, float(data.mass.sum()))
    choice, start, stop = np.meshgrid(np.arange(len(alternatives)), np.arange(ends), np.arange(ends), indexing="ij")
    low, high = np.zeros(start.shape, dtype=np.int64), np.full(start.shape, levels, dtype=np.int64)
    while np.any(low < high):
        mid = (low + high) // 2
        probe = np.minimum(mid, levels - 1)
        meets = excess[stop, probe] - excess[start, probe] + alternatives[choice, probe] <= tolerance
        high = np.where((low < high) & meets, mid, high)
        low = np.where((low < high) & ~meets, mid + 1, low)
    found = np.where(low < levels, low, -1)
    return found[0] if inflow is None else found


def _rounded_costs(data: FleetMilpData, j: int, table: NDArray[np.float64], positions: NDArray[np.int64], segment_count: int,
                   instance_cap: float, level: NDArray[np.int64], compressible: NDArray[np.bool_]) -> NDArray[np.float64]:
    """``A[e', e]`` of :func:`threshold_set_bounds`: a lower bound on pool option j's cost serving the segments
    ``e' .. e-1`` when its ``compressible`` classes may go elsewhere compressed (0 when ``e' = e``, inf when
    ``e' > e`` or j cannot serve them), each quantity at its least over the compression choices: the load
    ``L = sum_k (1 - p_c [k compressible]) L[k,j]`` priced by :func:`_least_gpus` at the level ``level[e', e]``
    (:func:`_interval_levels`)."""
    ends = segment_count + 1
    interval_load = _interval_sums(_kept_load(data, j, positions, compressible), positions, ends)
    gpus = _least_gpus(data, j, table, interval_load, level, instance_cap)
    upper = np.triu(np.ones((ends, ends), dtype=bool), k=1)
    rounded = np.where(upper & _whole_intervals(data, j, positions, segment_count), data.pools[j].cost_per_instance_hour * gpus, np.inf)
    np.fill_diagonal(rounded, 0.0)
    return rounded


def _kept_load(data: FleetMilpData, j: int, positions: NDArray[np.int64], compressible: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Per class (0 for a class without traffic or that j does not hold): the least load it puts on pool option j
    uncompressed, ``(1 - p_c [k compressible]) L[k,j]``."""
    pc = data.problem.compressible_fraction if data.problem.compression_enabled else 0.0
    held = (positions >= 0) & data.fits[:, j]
    return np.where(held, np.where(compressible, 1.0 - pc, 1.0) * data.load[:, j], 0.0)


def _whole_intervals(data: FleetMilpData, j: int, positions: NDArray[np.int64], segment_count: int) -> NDArray[np.bool_]:
    """``[e', e]``: pool option j holds every segment ``e' .. e-1`` (a segment's uncompressed share goes to one pool)."""
    held = np.zeros(segment_count, dtype=bool)
    held[positions[(positions >= 0) & data.fits[:, j]]] = True
    unheld = np.concatenate(([0], np.cumsum(~held)))
    return (unheld[None, :] - unheld[:, None]) == 0


def _least_gpus(data: FleetMilpData, j: int, table: NDArray[np.float64], load: NDArray[np.float64], level: NDArray[np.int64],
                instance_cap: float) -> NDArray[np.float64]:
    """The least instances of pool option j carrying ``load`` erlangs at a floor level at least ``level`` (arrays that
    broadcast; inf where ``level < 0``, no level, or above ``instance_cap``):

    * ``n >= max(1, ceil(load / (rho_max s_j)))`` (utilisation cap, row 3; an open pool has an instance);
    * below ``N_j`` instances the wait rows (7) need ``load <= a_max[n, m]`` at the pool's level m, and
      ``a_max`` falls as the level rises, so the least n whose table at ``level`` holds the load;
    * ``n <= instance_cap`` (the model's ``gpu_bound``).
    """
    option = data.pools[j]
    gpus = np.maximum(np.ceil(load / (data.problem.rho_max * option.slots_per_instance) - SLACK), 1.0)
    table_instances = option.table_instances
    if table_instances > 1:
        fitted = np.full(gpus.shape, float(table_instances))
        for n in range(table_instances - 1, 0, -1):  # the least n >= the cap's count whose table holds the load
            a_max = table[n][np.maximum(level, 0)]
            fitted = np.where((n >= gpus) & (load <= a_max * (1 + SLACK)), float(n), fitted)
        gpus = np.maximum(gpus, np.where(gpus < table_instances, fitted, gpus))
    return np.where((level >= 0) & (gpus <= instance_cap), gpus, np.inf)


def _linear_prefixes(data: FleetMilpData, positions: NDArray[np.int64], ends: int,
                     keys: list[tuple[int, tuple[int, ...]]]) -> NDArray[np.float64]:
    """``B`` of :func:`threshold_set_bounds` as prefix sums over the segments (``B[e', e] = P[e] - P[e']``), one row per
    ``(j, earlier)`` of ``keys``: pool option j's load at ``rho_j``, a class that one of the options ``earlier`` can
    take compressed charged for its share ``p_c`` the cheaper of j and the cheapest of them."""
    problem = data.problem
    pc = problem.compressible_fraction if problem.compression_enabled else 0.0
    rate = _cost_per_erlang(data)
    pools = np.array([j for j, _ in keys], dtype=np.int64)
    held = ((positions >= 0)[:, None] & data.fits)[:, pools]  # [class, key]
    own = np.where(held, data.load[:, pools] * rate[pools], 0.0)
    per_class = own
    width = max((len(earlier) for _, earlier in keys), default=0)
    if width and pc > 0:
        # squeeze[k, t]: class k compressed into option t at rho_t (inf where t cannot take it; column -1: no option)
        squeeze = np.where(data.can_compress, data.compressed_load * rate, np.inf)
        squeeze = np.concatenate([squeeze, np.full((len(squeeze), 1), np.inf)], axis=1)
        earlier = np.array([list(e) + [-1] * (width - len(e)) for _, e in keys], dtype=np.int64)  # [key, width]
        cheapest = squeeze[:, earlier].min(axis=2)  # [class, key]
        per_class = np.where(np.isfinite(cheapest) & held, (1.0 - pc) * own + pc * np.minimum(own, cheapest), own)
    before = (positions[:, None] < np.arange(ends)[None, :]) & (positions >= 0)[:, None]  # class k in segments 0 .. e-1
    return per_class.T @ before


def _interval_sums(values: NDArray[np.float64], segment: NDArray[np.int64], ends: int) -> NDArray[np.float64]:
    """``[e', e]`` = the sum of ``values`` over the classes of segments ``e' .. e-1`` (0 where ``e' >= e``)."""
    prefix = np.zeros(ends)
    np.add.at(prefix, segment + 1, values)
    prefix = np.cumsum(prefix)
    return np.maximum(prefix[None, :] - prefix[:, None], 0.0)


def _cost_per_erlang(data: FleetMilpData) -> NDArray[np.float64]:
    """``rho_j = price_j / (rho_max s_j)``: the least $/h per erlang of load in pool option j (utilisation cap)."""
    return np.array([o.cost_per_instance_hour / (data.problem.rho_max * o.slots_per_instance) for o in data.pools])
