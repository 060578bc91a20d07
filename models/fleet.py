"""Fleet provisioning as a Pyomo MILP over length classes and pool options (DESIGN.md section 3).

Sets: classes k (milp_data.py), pool options j (windows), floor levels m of
pool j, small GPU counts q < N_j of pool j (the Erlang-C table).

Variables
    x[k,j] in [0,1]     share of class k served by pool j uncompressed (only if the class fits C_j)
    z[k,j] in [0,p_c]   share of class k compressed to C_j and served by j (band classes, L_out < C_j)
                        (neither exists for a pool with no floor level under the SLO: it cannot open;
                        a class no other pool holds then gets the empty row 0 = 1, reported infeasible)
    n[j] integer in [0, gpu_bound[j]]   GPUs (instances) of pool j;   open[j] binary: pool j is used
    level[j,m] binary   pool j's P99 TTFT floor level: its floor is at most (m+1) t_j
    count[j,q] binary   pool j has exactly q GPUs, 1 <= q < N_j;   big[j] binary: n[j] >= N_j
                        (an open pool has at least one GPU)

Constraints (equation numbers refer to this docstring)
    (1) route[k]        sum_j x[k,j] + sum_j z[k,j] = 1;   compress_share[k]: sum_j z[k,j] <= p_c
    (2) load_definition[j]  a_j = load_erlangs[j] = sum_k L[k,j] x[k,j] + L'[k,j] z[k,j]   (erlangs)
    (3) utilisation_cap[j]  a_j <= rho_max n_max_j n[j]
    (4) floor[j,m]      sum_k (A[k,m] - 0.01 p_k) x + (A'[k,j,m] - 0.01 p_k) z <= M_jm (1 - sum_{m'<=m} level[j,m'])
                        (at most 1 % of the pool's traffic has a floor above the level; exact;
                        the excess falls with m, so a pool at level m' <= m meets row m too;
                        M_jm = the largest excess any routing can reach, rows with M_jm <= 0 dropped;
                        every pool picks a level, open or not, so the top row holds outright)
    (5) one level, one count:  sum_m level[j,m] = 1,  sum_q count[j,q] + big[j] = open[j]
                        (a pool with no level under the SLO cannot open)
    (6) n[j] = sum_q q count[j,q] + nbig, nbig in [N_j big[j], gpu_bound[j] big[j]];  n_open: n[j] <= gpu_bound[j] open[j]
                        (gpu_bound: enough for any routing's load, widened for the user constraints that
                        need more: models/fleet_constraints.py gpu_bounds)
    (7) wait[j,m]       a_j <= sum_q a_max[j,q,m] count[j,q] + r_j nbig[j] + D_jm (1 - level[j,m])
                        (below N_j GPUs the Erlang-C limit of the chosen count; from N_j on the
                        cap r_j n = rho_max n_max n implies W99 = 0; D_jm = max_q (r_j q - a_max[j,q,m])
                        relaxes the row exactly to the cap when another level is chosen)
    (8) max_pools       sum_j open[j] <= K
    objective           cost = sum_j price_j n[j]   ($/hour)

Routing modes: ``split`` (any shares), ``threshold`` (each length segment's
uncompressed share goes to one pool, pools in window order along L, each
pool's compressed classes a prefix of its band at p_c), and ``sweep`` (the
sweep's policy space: threshold, K = 2 with the long pool, every segment to
the smallest open pool that holds it, compression bands ending on the gamma
grid) — restricted that far the model must reproduce the sweep's optimum.
As in the sweep's plans, the long pool may stay empty (then it is closed and
does not count against K: with K = 1 a single short pool holding every
request is allowed).

The Erlang table a_max depends on each pool's ``R_j = E[S^2]/E[S]``; it is
passed in and refreshed by the driver (optfleet/problems/fleet/milp.py) from the evaluator.  (Pyomo reserves the
name ``load`` on blocks, hence ``m.load_erlangs``.)
"""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
from pyomo.core.expr.numeric_expr import LinearExpression, MonomialTermExpression

from optfleet.problems.fleet.milp_data import FleetMilpData, erlang_tables
from optfleet.errors import InfeasibleError, InputError
from optfleet.problems.fleet.plan import Plan, PoolPlan, RouteRule

ROUTING_MODES = ("split", "threshold", "sweep")
SERVED_ZERO = 1e-9  # a served share at or below this (under a budget) is no traffic at all


def service_gpu_bounds(data: FleetMilpData) -> np.ndarray:
    """Instances of each pool option that carry any routing's load: ``ceil(a_max_j / (rho_max n_max_j)) + N_j + 1``.

    ``a_max_j`` is the load of every class pool j can hold (compressed or not).  At that many instances the
    cap (3) holds for every routing and, being at least the table size ``N_j``, so do the wait rows (7).  A
    plan never needs more for its own traffic; user constraints may need more
    (``optfleet.models.fleet_constraints.gpu_bounds``).
    """
    problem = data.problem
    max_load = [max(data.load[:, j][data.fits[:, j]].sum(), 0.0) + data.compressed_load[:, j].sum() for j in range(len(data.pools))]
    return np.array([int(np.ceil(max_load[j] / (problem.rho_max * o.slots_per_gpu))) + o.table_gpus + 1 for j, o in enumerate(data.pools)])


def build(
    data: FleetMilpData, ratio_ms: np.ndarray, routing: str = "split", max_pools: int = 2, gpu_bounds: np.ndarray | None = None,
) -> pyo.ConcreteModel:
    """The MILP of ``data`` with Erlang tables at ``ratio_ms`` (one R_j per pool option).

    ``gpu_bounds[j]`` bounds ``n[j]`` (instances; default :func:`service_gpu_bounds`).  It is the mutable
    Param ``m.gpu_bound``, also the big-M of ``n_open`` and ``nbig_high``: a Python constraint that needs
    more instances in a pool raises it there (``m.gpu_bound[j] = 500``) before the solve.
    """
    if routing not in ROUTING_MODES:
        raise ValueError(f"routing must be one of {ROUTING_MODES}")
    problem = data.problem
    if routing == "sweep" and problem.heterogeneous:
        raise InputError("solve.routing", routing, "the sweep's policy space has one GPU configuration; use threshold or split with a gpu_catalog")
    pc = problem.compressible_fraction
    classes, pools = range(len(data.mass)), range(len(data.pools))
    m = pyo.ConcreteModel(name=f"fleet:{problem.name}")
    m.data = data
    m.routing = routing
    usable = [data.pools[j].levels > 0 for j in pools]  # an option with no floor level under the SLO cannot open: no shares
    fit_pairs = [(k, j) for k in classes for j in pools if data.fits[k, j] and usable[j]]
    comp_pairs = [(k, j) for k in classes for j in pools if data.can_compress[k, j] and usable[j]]
    m.x = pyo.Var(fit_pairs, bounds=(0, 1))
    m.z = pyo.Var(comp_pairs, bounds=(0, pc))
    bounds = service_gpu_bounds(data) if gpu_bounds is None else np.asarray(gpu_bounds)
    m.gpu_bound = pyo.Param(pools, mutable=True, within=pyo.NonNegativeIntegers, initialize=lambda _, j: int(bounds[j]))
    m.n = pyo.Var(pools, domain=pyo.NonNegativeIntegers, bounds=lambda m, j: (0, m.gpu_bound[j]))
    m.open = pyo.Var(pools, domain=pyo.Binary)
    level_pairs = [(j, lv) for j in pools for lv in range(data.pools[j].levels)]
    count_pairs = [(j, q) for j in pools for q in range(1, data.pools[j].table_gpus)]
    m.level = pyo.Var(level_pairs, domain=pyo.Binary)
    m.count = pyo.Var(count_pairs, domain=pyo.Binary)
    m.big = pyo.Var(pools, domain=pyo.Binary)
    m.nbig = pyo.Var(pools, domain=pyo.NonNegativeIntegers, bounds=lambda m, j: (0, m.gpu_bound[j]))

    x_of = {j: [k for k, jj in fit_pairs if jj == j] for j in pools}
    z_of = {j: [k for k, jj in comp_pairs if jj == j] for j in pools}
    fits_into = {k: [j for kk, j in fit_pairs if kk == k] for k in classes}
    compressible_into = {k: [j for kk, j in comp_pairs if kk == k] for k in classes}
    m.route = pyo.Constraint(classes, rule=lambda m, k: _total([m.x[k, j] for j in fits_into[k]] + [m.z[k, j] for j in compressible_into[k]]) == 1)
    # One load variable per pool, so the cap and the wait rows carry one coefficient instead of every class's.
    m.load_erlangs = pyo.Var(pools, domain=pyo.NonNegativeReals)
    m.load_definition = pyo.Constraint(
        pools, rule=lambda m, j: m.load_erlangs[j] == _weighted(m.x, x_of[j], j, data.load[:, j]) + _weighted(m.z, z_of[j], j, data.compressed_load[:, j])
    )
    m.utilisation_cap = pyo.Constraint(pools, rule=lambda m, j: m.load_erlangs[j] <= problem.rho_max * data.pools[j].slots_per_gpu * m.n[j])
    m.compress_share = pyo.Constraint(
        [k for k in classes if len(compressible_into[k]) > 1], rule=lambda m, k: _total([m.z[k, j] for j in compressible_into[k]]) <= pc
    )
    m.x_open = pyo.Constraint(fit_pairs, rule=lambda m, k, j: m.x[k, j] <= m.open[j])
    m.z_open = pyo.Constraint(comp_pairs, rule=lambda m, k, j: m.z[k, j] <= pc * m.open[j])
    m.n_open = pyo.Constraint(pools, rule=lambda m, j: m.n[j] <= m.gpu_bound[j] * m.open[j])

    def floor_rule(m, j, lv):
        excess = np.zeros((2, len(data.mass)))
        excess[0, x_of[j]] = data.above[x_of[j], lv] - 0.01 * data.mass[x_of[j]]
        excess[1, z_of[j]] = data.compressed_above[z_of[j], j, lv] - 0.01 * data.mass[z_of[j]]
        # Tightest big-M: the largest excess any routing can put into pool j (each class at most once).
        big_m = float(np.maximum(excess.max(axis=0), 0.0).sum())
        if big_m <= 0:
            return pyo.Constraint.Skip
        # excess = (mass above the level) - 1 % of the pool's mass; only classes with mass above enter.
        above = _weighted(m.x, x_of[j], j, data.above[:, lv]) + _weighted(m.z, z_of[j], j, data.compressed_above[:, j, lv])
        return above - 0.01 * m.pool_mass[j] <= big_m * (1 - sum(m.level[j, low] for low in range(lv + 1)))

    m.pool_mass = pyo.Var(pools, domain=pyo.NonNegativeReals)
    m.pool_mass_definition = pyo.Constraint(
        pools, rule=lambda m, j: m.pool_mass[j] == _weighted(m.x, x_of[j], j, data.mass) + _weighted(m.z, z_of[j], j, data.mass)
    )
    m.floor = pyo.Constraint(level_pairs, rule=floor_rule)
    m.one_level = pyo.Constraint(
        pools, rule=lambda m, j: sum(m.level[j, lv] for lv in range(data.pools[j].levels)) == 1 if data.pools[j].levels else m.open[j] == 0
    )
    m.one_count = pyo.Constraint(pools, rule=lambda m, j: sum(m.count[j, q] for q in range(1, data.pools[j].table_gpus)) + m.big[j] == m.open[j])
    m.count_link = pyo.Constraint(pools, rule=lambda m, j: m.n[j] == sum(q * m.count[j, q] for q in range(1, data.pools[j].table_gpus)) + m.nbig[j])
    m.nbig_low = pyo.Constraint(pools, rule=lambda m, j: m.nbig[j] >= data.pools[j].table_gpus * m.big[j])
    m.nbig_high = pyo.Constraint(pools, rule=lambda m, j: m.nbig[j] <= m.gpu_bound[j] * m.big[j])
    tables = [table.tolist() for table in erlang_tables(data.pools, ratio_ms, problem.ttft_p99_ms, problem.rho_max)]
    wait_index = [(j, lv) for j in pools for lv in range(data.pools[j].levels)]

    def wait_rule(m, j, lv):
        counts = range(1, data.pools[j].table_gpus)
        per_gpu_cap = problem.rho_max * data.pools[j].slots_per_gpu
        table_load = sum(tables[j][q][lv] * m.count[j, q] for q in counts)
        slack = max((per_gpu_cap * q - tables[j][q][lv] for q in counts), default=0.0)
        return m.load_erlangs[j] <= table_load + per_gpu_cap * m.nbig[j] + slack * (1 - m.level[j, lv])

    m.wait = pyo.Constraint(wait_index, rule=wait_rule)
    m.max_pools = pyo.Constraint(expr=sum(m.open[j] for j in pools) <= max_pools)
    m.cost = pyo.Expression(expr=sum(data.pools[j].cost_per_gpu_hour * m.n[j] for j in pools))
    m.objective = pyo.Objective(expr=m.cost, sense=pyo.minimize)
    if routing != "split":
        _add_threshold_routing(m, data, fit_pairs, comp_pairs, routing == "sweep")
    return m


def _total(variables: list) -> LinearExpression:
    """The sum of ``variables`` as one linear expression."""
    return LinearExpression(variables)


def _weighted(var: pyo.Var, classes: list[int], j: int, coefficients: np.ndarray) -> LinearExpression:
    """``sum_k c_k var[k, j]`` over ``classes`` with a nonzero coefficient, built as one linear expression
    (several times faster than Python's ``sum`` over Pyomo terms)."""
    values = coefficients[classes].tolist()
    return LinearExpression([MonomialTermExpression((c, var[k, j])) for k, c in zip(classes, values, strict=True) if c != 0.0])


def _add_threshold_routing(m: pyo.ConcreteModel, data: FleetMilpData, fit_pairs, comp_pairs, sweep_space: bool) -> None:
    """Contiguous one-pool-per-segment routing; compression as a band prefix at exactly p_c."""
    problem = data.problem
    pc = problem.compressible_fraction
    pools = range(len(data.pools))
    segments = sorted(set(data.class_segment.tolist()))
    seg_fits = {(s, j) for k, j in fit_pairs for s in [int(data.class_segment[k])]}
    m.assign = pyo.Var(sorted(seg_fits), domain=pyo.Binary)
    pools_of = {s: [j for j in pools if (s, j) in seg_fits] for s in segments}
    m.one_pool = pyo.Constraint(segments, rule=lambda m, s: _total([m.assign[s, j] for j in pools_of[s]]) == 1)
    m.x_assign = pyo.Constraint(fit_pairs, rule=lambda m, k, j: m.x[k, j] <= m.assign[int(data.class_segment[k]), j])
    order = {s: LinearExpression([MonomialTermExpression((float(j), m.assign[s, j])) for j in pools_of[s]]) for s in segments}
    m.contiguous = pyo.Constraint(range(len(segments) - 1), rule=lambda m, i: order[segments[i]] <= order[segments[i + 1]])
    comp_segments = sorted({(int(data.class_segment[k]), j) for k, j in comp_pairs})
    m.compress = pyo.Var(comp_segments, domain=pyo.Binary)
    m.z_fixed = pyo.Constraint(comp_pairs, rule=lambda m, k, j: m.z[k, j] == pc * m.compress[int(data.class_segment[k]), j])
    m.compress_open = pyo.Constraint(comp_segments, rule=lambda m, s, j: m.compress[s, j] <= m.open[j])
    prefix = [(s, j) for s, j in comp_segments if (s + 1, j) in m.compress]
    m.band_prefix = pyo.Constraint(prefix, rule=lambda m, s, j: m.compress[s, j] >= m.compress[s + 1, j])
    if not sweep_space:
        return
    long = data.long_index
    m.one_short = pyo.Constraint(expr=sum(m.open[j] for j in pools if j != long) <= 1)
    # A segment goes to the smallest open pool holding it: with at most one short pool open, one row per
    # (segment, pool) covers every smaller pool at once (a clique row, tighter than one row per pair).
    smaller = {(s, j): [jj for jj in pools if jj < j and (s, jj) in seg_fits] for (s, j) in seg_fits}
    m.smallest_open = pyo.Constraint(
        [key for key in sorted(seg_fits) if smaller[key]], rule=lambda m, s, j: m.assign[s, j] + _total([m.open[jj] for jj in smaller[s, j]]) <= 1
    )
    # ... so an open short pool is that pool for every segment it holds and the open binaries decide the
    # assignment (one-off measurement: Azure K = 2 from 3.3 s to 0.7 s with the build; LMSYS unchanged).
    m.short_home = pyo.Constraint([(s, j) for s, j in sorted(seg_fits) if j != long], rule=lambda m, s, j: m.assign[s, j] == m.open[j])
    segment_top = {int(seg): float(top) for seg, top in zip(data.class_segment, data.class_total_to, strict=True)}
    off_grid = [
        (s, j) for s, j in prefix
        if not any(abs(segment_top[s] - g * data.pools[j].window_tokens) < 1e-6 for g in problem.gammas)
    ]
    m.gamma_grid = pyo.Constraint(off_grid, rule=lambda m, s, j: m.compress[s, j] == m.compress[s + 1, j])


def extract(m: pyo.ConcreteModel) -> Plan:
    """The plan of a solved model: open pools with their GPUs, and one routing rule per class."""
    data: FleetMilpData = m.data
    # A pool opened with 0 GPUs carries no load (utilisation cap): it is not part of the plan.
    opened = [j for j in range(len(data.pools)) if pyo.value(m.open[j]) > 0.5 and round(pyo.value(m.n[j])) > 0]
    served = float(pyo.value(m.served)) if hasattr(m, "served") else 1.0
    if not opened or served <= SERVED_ZERO:
        raise InfeasibleError("the MILP's best plan serves no traffic: no plan within the budget cap and the other constraints "
                              "serves every length class a positive share; raise the cap, relax the constraints or the time limit")
    gpu_of = (lambda j: data.pools[j].gpu) if data.problem.heterogeneous else (lambda j: None)
    pools = tuple(PoolPlan(data.pools[j].name, data.pools[j].window_tokens, int(round(pyo.value(m.n[j]))), gpu_of(j)) for j in opened)
    rules = []
    for k in range(len(data.mass)):
        shares = tuple((data.pools[j].name, float(pyo.value(m.x[k, j]))) for j in opened if (k, j) in m.x and pyo.value(m.x[k, j]) > 1e-9)
        compressed = tuple((data.pools[j].name, float(pyo.value(m.z[k, j]))) for j in opened if (k, j) in m.z and pyo.value(m.z[k, j]) > 1e-9)
        total = sum(v for _, v in shares) + sum(v for _, v in compressed)  # = served (row 1), > SERVED_ZERO
        shares = tuple((n, v / total) for n, v in shares)
        compressed = tuple((n, v / total) for n, v in compressed)
        out_below = int(data.class_out_below[k])
        rules.append(RouteRule(
            total_above=int(data.class_total_above[k]), total_to=int(data.class_total_to[k]),
            shares=shares, compressed=compressed, out_from=int(data.class_out_from[k]),
            out_below=None if out_below == np.iinfo(np.int64).max else out_below,
        ))
    return Plan(pools=pools, method=f"milp-{m.routing}", rules=tuple(rules), served_share=min(max(served, 0.0), 1.0))


def closed_pool_variables(m: pyo.ConcreteModel, j: int) -> list[pyo.Var]:
    """The variables of pool option j that are 0 in every solution with ``open[j] = 0``.

    ``open``, ``n``, ``count``, ``big``, ``nbig`` (rows 5, 6 and ``n_open``), the shares ``x``, ``z`` and so
    ``load_erlangs``, ``pool_mass`` (rows 1, 2); under threshold routing ``compress`` (``compress_open``) and,
    when ``p_c < 1``, ``assign``: every class then needs an uncompressed share, ``x[k, j] <= assign[s, j]``
    and ``x[k, j] <= open[j]``, so a segment's pool is open.  The floor levels are not among them (a closed
    pool meets every level).
    """
    variables = [m.open[j], m.n[j], m.big[j], m.nbig[j], m.load_erlangs[j], m.pool_mass[j]]
    variables += [m.count[j, q] for q in range(1, m.data.pools[j].table_gpus)]
    variables += [var for (_, jj), var in m.x.items() if jj == j] + [var for (_, jj), var in m.z.items() if jj == j]
    if hasattr(m, "compress"):
        variables += [var for (_, jj), var in m.compress.items() if jj == j]
        if m.data.problem.compressible_fraction < 1:
            variables += [var for (_, jj), var in m.assign.items() if jj == j]
    return variables


def closing_rows(m: pyo.ConcreteModel) -> list[pyo.Constraint]:
    """The rows by which ``open[j] = 0`` puts :func:`closed_pool_variables` at 0 (a customisation that
    deactivates any of them voids that list)."""
    rows = [m.x_open, m.z_open, m.n_open, m.one_count, m.nbig_high, m.load_definition, m.pool_mass_definition]
    if hasattr(m, "compress"):
        rows += [m.compress_open, m.x_assign, m.one_pool, m.route, m.compress_share]
    return rows


def _option_index(data: FleetMilpData) -> dict[tuple[str, int], int]:
    return {(o.gpu, o.window_tokens): j for j, o in enumerate(data.pools)}


def _option_key(data: FleetMilpData, pool: PoolPlan) -> tuple[str, int]:
    return (pool.gpu or data.problem.hardware.label, pool.window_tokens)


def can_warm_start(m: pyo.ConcreteModel, plan: Plan) -> bool:
    """Whether :func:`warm_start` can load ``plan``: threshold routing, at most K pools, every pool with GPUs an
    option the model keeps (one with a floor level under the SLO) and within its ``gpu_bound``."""
    index = _option_index(m.data)

    def loadable(pool: PoolPlan) -> bool:
        j = index.get(_option_key(m.data, pool))
        return j is not None and (pool.gpus == 0 or (m.data.pools[j].levels > 0 and pool.gpus <= pyo.value(m.gpu_bound[j])))

    return plan.rules is None and len(plan.pools) <= pyo.value(m.max_pools.upper) and all(loadable(p) for p in plan.pools)


def warm_start(m: pyo.ConcreteModel, plan: Plan) -> None:
    """Load a threshold plan (e.g. the sweep's) as the MIP start; every variable gets a value.

    Each class follows the plan's rule (smallest pool window holding it, the
    gamma band compressed at p_c); the floor level is the lowest the routing
    meets and the count binaries follow the plan's GPU counts.  Plans with
    split rules, or with pools the model has no option for, are not loaded:
    check :func:`can_warm_start` first (the caller then solves cold).
    """
    data: FleetMilpData = m.data
    problem = data.problem
    pc = problem.compressible_fraction
    for var in m.component_data_objects(pyo.Var):
        var.set_value(0)
    if hasattr(m, "served"):
        m.served.set_value(1)
    index = _option_index(data)
    windows = [p.window_tokens for p in plan.pools]
    chosen = [index[_option_key(data, p)] for p in plan.pools]
    for pool, j in zip(plan.pools, chosen, strict=True):
        if pool.gpus == 0:
            continue  # a 0-GPU pool carries nothing: closed in the model, which opens pools with >= 1 GPU
        m.open[j].set_value(1)
        m.n[j].set_value(pool.gpus)
        table = data.pools[j].table_gpus
        if pool.gpus < table:
            m.count[j, pool.gpus].set_value(1)
        else:
            m.big[j].set_value(1)
            m.nbig[j].set_value(pool.gpus)
    for k in range(len(data.mass)):
        top = int(data.class_total_to[k])
        home = next(j for w, j in zip(windows, chosen, strict=True) if w >= top)
        below = [(w, j) for w, j in zip(windows, chosen, strict=True) if w < top]
        if below and (k, below[-1][1]) in m.z and top <= plan.gamma * below[-1][0] + 1e-9:
            j_short = below[-1][1]
            m.z[k, j_short].set_value(pc)
            m.x[k, home].set_value(1 - pc)
            if hasattr(m, "compress"):
                m.compress[int(data.class_segment[k]), j_short].set_value(1)
        else:
            m.x[k, home].set_value(1)
        if hasattr(m, "assign"):
            m.assign[int(data.class_segment[k]), home].set_value(1)
    for j in range(len(data.pools)):
        if j not in chosen:
            if data.pools[j].levels:
                m.level[j, 0].set_value(1)  # a closed pool carries nothing: every level holds
            continue
        x, z = pool_shares(m, j)
        m.load_erlangs[j].set_value(float(np.dot(data.load[:, j], x) + np.dot(data.compressed_load[:, j], z)))
        m.pool_mass[j].set_value(float(np.dot(data.mass, x + z)))
        level = lowest_floor_level(data, j, x, z)
        if level is not None:
            m.level[j, level].set_value(1)


def pool_shares(m: pyo.ConcreteModel, j: int) -> tuple[np.ndarray, np.ndarray]:
    """The current values of pool j's uncompressed and compressed shares, ``x[:, j]`` and ``z[:, j]``, 0 where absent."""
    classes = range(len(m.data.mass))
    x = np.array([pyo.value(m.x[k, j]) if (k, j) in m.x else 0.0 for k in classes])
    z = np.array([pyo.value(m.z[k, j]) if (k, j) in m.z else 0.0 for k in classes])
    return x, z


def lowest_floor_level(data: FleetMilpData, j: int, x: np.ndarray, z: np.ndarray) -> int | None:
    """The lowest floor level m whose row (4) the shares meet (at most 1 % of pool j's mass above it); None if none."""
    served = float(np.dot(data.mass, x + z))
    for lv in range(data.pools[j].levels):
        if float(np.dot(data.above[:, lv], x) + np.dot(data.compressed_above[:, j, lv], z)) <= 0.01 * served + 1e-12:
            return lv
    return None
